//! Files a user, a core or a debug link names are never trusted: a FIFO where a core, an executable
//! or a debug file should be is refused at once (opening one waits for a writer), and nothing a file
//! holds makes the inspector hang or run out of memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Fixture, bin, plan_cache_of_this_run, run_tool, tempdir};

/// Runs asyncdump with `args`, failing the spec if it takes longer than `within`.
pub fn asyncdump_within(args: &[&str], within: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_asyncdump"))
        .args(args)
        .env("XDG_CACHE_HOME", plan_cache_of_this_run())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "asyncdump {args:?} hung; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// `--core` of a FIFO waited for a writer forever: it was opened before it was checked.
#[test]
fn a_fifo_given_as_a_core_or_a_snapshot_is_refused_at_once() {
    let dir = tempdir();
    let fifo = dir.join("core");
    mkfifo(&fifo);
    let out = asyncdump_within(
        &["dump", "--core", fifo.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a FIFO, not a regular file"),
        "{}",
        stderr(&out)
    );
    let out = asyncdump_within(
        &["watch", "--from", fifo.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

/// Replaces every `from` in `bytes` with `to`, of the same length; how many there were.
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + i..at + i + from.len()].copy_from_slice(to);
        at += i + from.len();
        n += 1;
    }
    n
}

/// A path in `dir`, as long as `like`, for a file named from `stem` padded out.
fn path_as_long_as(dir: &Path, stem: &str, like: &Path) -> PathBuf {
    let room = like.as_os_str().len() - dir.as_os_str().len() - 1;
    assert!(
        room >= stem.len(),
        "the scratch directory's path is too long"
    );
    dir.join(format!("{stem}{}", "f".repeat(room - stem.len())))
}

// A core whose notes name a FIFO as the executable hung the dump.
#[test]
fn a_core_naming_a_fifo_as_its_executable_is_not_waited_for() {
    let fx = Fixture::start("no_agent", &[]);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let exe = std::fs::canonicalize(bin("no_agent")).unwrap();
    let fifo = path_as_long_as(dir.as_path(), "x", &exe);
    mkfifo(&fifo);
    let mut bytes = std::fs::read(&core).unwrap();
    let named = replace_all(
        &mut bytes,
        exe.as_os_str().as_encoded_bytes(),
        fifo.as_os_str().as_encoded_bytes(),
    );
    assert!(named > 0, "the core names its executable");
    std::fs::write(&core, bytes).unwrap();
    let out = asyncdump_within(
        &["dump", "--core", core.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
}

// A `.gnu_debuglink` naming a FIFO (in another user's program, say) hung the dump of it.
#[test]
fn a_debug_link_naming_a_fifo_is_passed_over() {
    let dir = tempdir();
    let exe = dir.join("plain_chain");
    std::fs::copy(bin("plain_chain"), &exe).unwrap();
    let debug = dir.join("plain_chain.debug");
    let (exe_s, debug_s) = (exe.to_str().unwrap(), debug.to_str().unwrap());
    run_tool("objcopy", &["--only-keep-debug", exe_s, debug_s]);
    run_tool("strip", &["--strip-debug", exe_s]);
    run_tool(
        "objcopy",
        &[&format!("--add-gnu-debuglink={debug_s}"), exe_s],
    );
    std::fs::remove_file(&debug).unwrap();
    mkfifo(&debug);
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    let out = asyncdump_within(
        &["dump", &fx.pid.to_string(), "--no-cache"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("[decoded]"), "{text}");
}
