#!/usr/bin/env python3
"""Two builds of asyncdump side by side, in one run, on the same machine: the dump and plan rows.

Each of OLD and NEW is a target directory holding release builds of `asyncdump`, `many_tasks` and
`axum_service` (`cargo build --release -p asyncdump -p asyncdump-fixtures --target-dir DIR`).
hyperfine times the two inspectors alternately (warm-up 2, 10 runs each) on:
  - 100,000 annotated tasks (`many_tasks --tasks 100000`): `dump --no-decode` as text, `--coalesce`
    and `--json`, both inspectors on NEW's fixture, or each on its own build's when the two speak
    different protocol versions (`--own-fixtures`);
  - 100,000 unannotated tasks, every chain decoded (`many_tasks --plain --tasks 100000`): each build's
    inspector on its own build's fixture (the agent's walk changed too), each with its own warm plan
    cache;
  - the plan of a release axum service (`axum_service`, NEW's build, or each build's own with
    `--own-fixtures`): from its DWARF (`--no-cache`), and from each build's warm plan cache.
Prints the means and NEW/OLD ratios. Needs hyperfine (Debian: `apt-get install hyperfine`).
Usage: python3 bench/side_by_side.py OLD_TARGET_DIR NEW_TARGET_DIR [--own-fixtures]
"""
import atexit
import json
import shutil
import os
import subprocess
import sys
import tempfile
import time


def start(exe, args):
    fx = subprocess.Popen([exe] + args, stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, ASYNCDUMP_FIXTURE_TIMEOUT="600"))
    # The axum fixture says which port it bound before it is ready.
    for line in fx.stdout:
        if line.strip() == "ready":
            break
    else:
        raise AssertionError(f"{exe} did not get ready")
    time.sleep(1)
    return fx


def compare(name, old_cmd, new_cmd, old_env=None, new_env=None):
    """Times both commands alternately; returns (old ms, new ms)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        def env_prefix(env):
            return " ".join(f"{k}={v}" for k, v in (env or {}).items())
        cmds = [f"env {env_prefix(old_env)} {old_cmd}", f"env {env_prefix(new_env)} {new_cmd}"]
        subprocess.run(["hyperfine", "-N", "--warmup", "2", "--runs", "10", "--style", "none",
                        "--export-json", out.name] + cmds, check=True, stdout=subprocess.DEVNULL)
        results = json.load(open(out.name))["results"]
    old, new = (r["mean"] * 1e3 for r in results)
    sd_old, sd_new = (r["stddev"] * 1e3 for r in results)
    print(f"| {name} | {old:.1f} ± {sd_old:.1f} | {new:.1f} ± {sd_new:.1f} | {new / old:.2f} |")
    return old, new


def main():
    old_dir, new_dir = (os.path.abspath(os.path.join(d, "release")) for d in sys.argv[1:3])
    old, new = f"{old_dir}/asyncdump", f"{new_dir}/asyncdump"
    caches = {d: tempfile.mkdtemp(prefix="asyncdump-bench-") for d in ("old", "new")}
    # Gone with the run, however it ends.
    for c in caches.values():
        atexit.register(shutil.rmtree, c, True)
    own = "--own-fixtures" in sys.argv[3:]
    print("| what (ms, mean ± sd of 10) | old | new | new/old |\n|---|---|---|---|")
    fn = start(f"{new_dir}/many_tasks", ["--tasks", "100000"])
    fo = start(f"{old_dir}/many_tasks", ["--tasks", "100000"]) if own else fn
    for label, extra in (("text", ""), ("--coalesce", " --coalesce"), ("--json", " --json")):
        compare(f"100,000 annotated tasks, {label}", f"{old} dump {fo.pid} --no-decode{extra}",
                f"{new} dump {fn.pid} --no-decode{extra}")
    for f in {fo.pid: fo, fn.pid: fn}.values():
        f.kill()
        f.wait()
    fo = start(f"{old_dir}/many_tasks", ["--plain", "--tasks", "100000"])
    fn = start(f"{new_dir}/many_tasks", ["--plain", "--tasks", "100000"])
    compare("100,000 decoded tasks, text", f"{old} dump {fo.pid}", f"{new} dump {fn.pid}",
            {"XDG_CACHE_HOME": caches["old"]}, {"XDG_CACHE_HOME": caches["new"]})
    for f in (fo, fn):
        f.kill()
        f.wait()
    an = start(f"{new_dir}/axum_service", ["--port", "0"])
    ao = start(f"{old_dir}/axum_service", ["--port", "0"]) if own else an
    compare("axum_service release: plan from DWARF", f"{old} dump {ao.pid} --no-cache",
            f"{new} dump {an.pid} --no-cache")
    compare("axum_service release: plan from the cache", f"{old} dump {ao.pid}",
            f"{new} dump {an.pid}",
            {"XDG_CACHE_HOME": caches["old"]}, {"XDG_CACHE_HOME": caches["new"]})
    for a in {ao.pid: ao, an.pid: an}.values():
        a.kill()
        a.wait()


if __name__ == "__main__":
    main()
