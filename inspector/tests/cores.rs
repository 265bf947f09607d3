//! Core files: a process's memory after the fact, from gdb's `gcore` or a real crash, dumped with
//! the same chains as the live process, in every output; a core of another build, a truncated one
//! and a damaged one each get one line.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::agentless::{chain, dump_settled, tasks_by_tokio_id};
use crate::support::run_tool as run;
use crate::support::{Fixture, Scratch, asyncdump, asyncdump_ok, bin, tempdir};

/// A core of the live process `pid`, written by gdb's `gcore` into `dir`; the process runs on.
pub fn gcore(pid: u32, dir: &Path) -> PathBuf {
    let prefix = dir.join("core");
    let out = Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(pid.to_string())
        .output()
        .expect("gcore (gdb) is installed");
    assert!(out.status.success(), "gcore: {out:?}");
    let core = dir.join(format!("core.{pid}"));
    assert!(core.exists(), "gcore wrote no {}", core.display());
    core
}

/// The no-agent fixture, settled, and a core of it.
fn fixture_and_core() -> (Fixture, String, Scratch, PathBuf) {
    let fx = Fixture::start("no_agent", &[]);
    let live = dump_settled(fx.pid, &[], 5);
    let dir = tempdir();
    let core = gcore(fx.pid, dir.as_path());
    (fx, live, dir, core)
}

#[test]
fn a_core_shows_the_chains_the_live_process_showed() {
    let (fx, live, _dir, core) = fixture_and_core();
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
    let header = text.lines().next().unwrap();
    assert_eq!(
        header,
        format!("pid {} (no_agent) · read from core file, no agent", fx.pid)
    );
    let (l, c) = (tasks_by_tokio_id(&live), tasks_by_tokio_id(&text));
    assert_eq!(l.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>());
    for (id, section) in &l {
        assert_eq!(chain(section), chain(&c[id]), "tokio task {id}");
    }
    assert!(
        fx.pid > 0 && asyncdump_ok(&["dump", &fx.pid.to_string()]).contains("query_database"),
        "the process ran on after gcore"
    );
}

#[test]
fn every_output_works_on_a_core() {
    let (_fx, _live, dir, core) = fixture_and_core();
    let core = core.to_str().unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&asyncdump_ok(&["dump", "--core", core, "--json"])).unwrap();
    assert_eq!(doc["process"]["read_from"], "core");
    assert_eq!(crate::support::tasks_of(&doc).len(), 5);
    let stats = asyncdump_ok(&["dump", "--core", core, "--stats"]);
    assert!(stats.contains("5 suspended tasks"), "{stats}");
    assert!(
        stats.contains("(age unknown)"),
        "a core keeps no ages: {stats}"
    );
    let coalesced = asyncdump_ok(&["dump", "--core", core, "--coalesce"]);
    assert!(
        coalesced.contains("no_agent::query_database"),
        "{coalesced}"
    );
    let folded = asyncdump_ok(&["dump", "--core", core, "--format", "folded"]);
    assert!(
        folded
            .lines()
            .any(|l| l.contains("no_agent::load_user") && l.ends_with(" 1")),
        "{folded}"
    );
    let svg = dir.join("chains.svg");
    asyncdump_ok(&["dump", "--core", core, "--svg", svg.to_str().unwrap()]);
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("no_agent::query_database")
    );
    // Saved as a snapshot, it reads back as the core did.
    let saved = dir.join("saved.json");
    asyncdump_ok(&["dump", "--core", core, "-o", saved.to_str().unwrap()]);
    let again = asyncdump_ok(&["dump", "--from", saved.to_str().unwrap()]);
    assert!(
        again.starts_with(
            &asyncdump_ok(&["dump", "--core", core])
                .lines()
                .next()
                .unwrap()
                .to_owned()
        )
    );
    // And the live view opens it like a snapshot file.
    let tmux = crate::watch::Tmux::sized(
        &format!(
            "{} watch --from {core}; sleep 60",
            env!("CARGO_BIN_EXE_asyncdump")
        ),
        200,
        30,
    );
    tmux.until("the core's tasks", |s| {
        s.contains("(no_agent::query_database)") && s.contains("file core.")
    });
    tmux.keys("q");
}

#[test]
fn a_core_of_another_build_a_truncated_and_a_damaged_one_each_get_one_line() {
    let (_fx, _live, dir, core) = fixture_and_core();
    let core_arg = core.to_str().unwrap();
    let other = bin("plain_tasks");
    let out = asyncdump(&["dump", "--core", core_arg, "--exe", other.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("is not the binary the core's process ran"),
        "{stderr}"
    );
    assert!(
        stderr.contains("pass the matching build with --exe"),
        "{stderr}"
    );
    // gcore writes its notes last: cut in half, the core no longer says what it ran.
    let half = dir.join("half");
    let len = std::fs::metadata(&core).unwrap().len();
    std::fs::copy(&core, &half).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&half)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let out = asyncdump(&["dump", "--core", half.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("cut off before its notes"), "{stderr}");
    let damaged = dir.join("damaged");
    std::fs::write(&damaged, &std::fs::read(&core).unwrap()[..100]).unwrap();
    let out = asyncdump(&["dump", "--core", damaged.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("is not a core file this asyncdump reads"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

/// A real crash: the kernel writes the core (notes first, then memory) where `core_pattern` says,
/// here the crashed process's directory. A core cut off in its memory still shows what it holds,
/// and says how much it lacks.
#[test]
fn a_crashed_process_core_is_dumped_whole_and_cut_off() {
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if pattern.starts_with('|') || pattern.trim().contains('/') {
        eprintln!(
            "SKIPPED a_crashed_process_core_is_dumped_whole_and_cut_off: core_pattern {pattern:?} sends cores elsewhere"
        );
        return;
    }
    let dir = tempdir();
    let script = format!("ulimit -c unlimited; exec {}", bin("no_agent").display());
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir.as_path())
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", "120")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    // Settled: every task suspended where it waits for good.
    dump_settled(child.id(), &[], 5);
    assert!(
        Command::new("kill")
            .args(["-ABRT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    child.wait().unwrap();
    let core = std::fs::read_dir(dir.as_path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("core"))
        .expect("the kernel wrote a core");
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
    assert_eq!(tasks_by_tokio_id(&text).len(), 5, "{text}");
    let cut = dir.join("cut");
    std::fs::copy(&core, &cut).unwrap();
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let text = asyncdump_ok(&["dump", "--core", cut.to_str().unwrap()]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("census:") && l.ends_with("MB unreadable")),
        "{text}"
    );
}

/// A stripped executable with its DWARF kept apart, as distributions ship them: found by build-id
/// under a debug directory, or given with --debug-file, for a live process and for its core alike.
#[test]
fn debug_info_is_read_where_users_keep_it() {
    let dir = tempdir();
    // A name longer than the kernel keeps (`comm`: 15 bytes), which the headers name whole.
    let exe = dir.join("no_agent-stripped-of-debug");
    std::fs::copy(bin("no_agent"), &exe).unwrap();
    let debug = dir.join("no_agent.debug");
    let (exe_s, debug_s) = (exe.to_str().unwrap(), debug.to_str().unwrap());
    run("objcopy", &["--only-keep-debug", exe_s, debug_s]);
    run("strip", &["--strip-debug", exe_s]);
    let fx = Fixture::start_path(&exe, &[], &[]);
    let pid = fx.pid.to_string();
    let out = asyncdump(&["dump", &pid, "--no-cache"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("no separate debug file was found")
            && stderr.contains("--debug-file")
            && stderr.contains("line-tables-only"),
        "{stderr}"
    );
    let given = dump_settled(fx.pid, &["--no-cache", "--debug-file", debug_s], 5);
    assert!(
        given.contains(&format!("chains decoded from DWARF in {debug_s}")),
        "{given}"
    );
    assert!(
        given.starts_with(&format!("pid {pid} (no_agent-stripped-of-debug) · ")),
        "{given}"
    );
    // Under a debug directory by build-id, as /usr/lib/debug/.build-id/xx/rest.debug.
    let id = asyncdump_ok(&["dump", &pid, "--json", "--debug-file", debug_s]);
    let id: serde_json::Value = serde_json::from_str(&id).unwrap();
    let id = id["decoding"]["build_id"].as_str().unwrap().to_owned();
    let by_id = dir.join(format!("debug/.build-id/{}", &id[..2]));
    std::fs::create_dir_all(&by_id).unwrap();
    std::fs::copy(&debug, by_id.join(format!("{}.debug", &id[2..]))).unwrap();
    let out = crate::support::asyncdump_with(
        &["dump", &pid, "--no-cache"],
        &[("ASYNCDUMP_DEBUG_DIR", &dir.join("debug"))],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no_agent::query_database"));
    // The core of the stripped build, with the same debug file.
    let core = gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&[
        "dump",
        "--core",
        core.to_str().unwrap(),
        "--debug-file",
        debug_s,
    ]);
    assert_eq!(tasks_by_tokio_id(&text).len(), 5, "{text}");
    assert!(
        text.starts_with(&format!(
            "pid {pid} (no_agent-stripped-of-debug) · read from core file"
        )),
        "{text}"
    );
    // Another build's debug file is named as such.
    let other = dir.join("other.debug");
    run(
        "objcopy",
        &[
            "--only-keep-debug",
            bin("plain_tasks").to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    let out = asyncdump(&[
        "dump",
        &pid,
        "--no-cache",
        "--debug-file",
        other.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("is not the debug file of"), "{stderr}");
}
