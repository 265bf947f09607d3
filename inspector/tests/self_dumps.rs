//! Dumps a process asks for itself: on `kill -QUIT` (and `USR1`/`USR2`) it prints every chain and
//! keeps serving; a signal storm makes one dump at a time; an unwritable dump file or a missing
//! inspector is one line; a watchdog fires once on a wedged runtime and never on an idle one; and a
//! process that did not ask keeps the signal's default behaviour.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Fixture, tempdir};

/// The header line each dump starts with.
const HEADER: &str = "every task's chain, as `asyncdump dump --all ";

fn inspector() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_asyncdump"))
}

/// The `reports` fixture with `env` (and the inspector named), its stderr into `log`.
fn reports(args: &[&str], env: &[(&str, &Path)], log: &Path) -> Fixture {
    let inspector = inspector();
    let mut all: Vec<(&str, &Path)> = vec![("ASYNCDUMP_INSPECTOR", inspector.as_path())];
    all.extend_from_slice(env);
    Fixture::start_logging("reports", args, &all, log)
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a live child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// The file's text once `done` holds for it (at most 30 s).
fn until(path: &Path, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "never {what}:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A dump finished: its last task's section is printed (both handlers, in `lookup`).
fn dumped(text: &str, dumps: usize) -> bool {
    text.matches(HEADER).count() >= dumps
        && text
            .matches("reports::lookup at fixtures/src/bin/reports.rs")
            .count()
            >= 2 * dumps
}

/// Whether the fixture still answers on its port.
fn answers(fx: &Fixture) -> bool {
    let port = fx
        .said
        .iter()
        .find_map(|l| l.strip_prefix("port "))
        .expect("its port");
    let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap()))
    else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = String::new();
    let _ = c.read_to_string(&mut reply);
    reply == "pong\n"
}

#[test]
fn kill_quit_prints_every_chain_decoded_and_the_service_keeps_serving() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let quit = Path::new("QUIT");
    let mut fx = reports(&[], &[("ASYNCDUMP_ON_SIGNAL", quit)], &log);
    signal(fx.pid, libc::SIGQUIT);
    let text = until(&log, "dumped once", |t| dumped(t, 1));
    let header = format!("asyncdump agent: SIGQUIT: {HEADER}{}` prints it", fx.pid);
    assert!(text.starts_with(&header), "{text}");
    // The handlers' chains, decoded from DWARF: where each waits.
    assert!(
        text.contains("  reports::handle_order at fixtures/src/bin/reports.rs:"),
        "{text}"
    );
    assert!(
        text.contains("      awaiting tokio::sync::oneshot::Receiver<u64>"),
        "{text}"
    );
    assert!(fx.is_alive() && answers(&fx), "it goes on serving");
    // And again.
    signal(fx.pid, libc::SIGQUIT);
    until(&log, "dumped twice", |t| dumped(t, 2));
    assert!(fx.is_alive() && answers(&fx));
}

#[test]
fn a_signal_storm_makes_one_dump_at_a_time_and_counts_what_it_dropped() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let usr1 = Path::new("USR1");
    let mut fx = reports(&[], &[("ASYNCDUMP_ON_SIGNAL", usr1)], &log);
    // 400 signals a second for a second and a half: many come while a dump is in flight. (The
    // kernel merges those that come while one is pending: fewer than sent are delivered.)
    let sent = 600;
    for _ in 0..sent {
        signal(fx.pid, libc::SIGUSR1);
        std::thread::sleep(Duration::from_micros(2500));
    }
    until(&log, "a dump and the count of those dropped", |t| {
        dumped(t, 1) && t.contains("dropped while a dump was in flight")
    });
    // Let the last one finish, then count.
    std::thread::sleep(Duration::from_secs(2));
    let text = std::fs::read_to_string(&log).unwrap();
    let dumps: Vec<&str> = text.split(HEADER).skip(1).collect();
    // One at a time: each dump's text is whole, none inside another.
    for d in &dumps {
        assert_eq!(d.matches(" tasks: ").count(), 1, "{d}");
    }
    let dropped: usize = (text.lines())
        .filter_map(|l| l.strip_prefix("asyncdump agent: "))
        .filter_map(|l| l.strip_suffix(" more SIGUSR1 dropped while a dump was in flight"))
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert!(dropped >= 1, "{text}");
    assert!(dumps.len() + dropped <= sent, "{} + {dropped}", dumps.len());
    assert!(fx.is_alive() && answers(&fx));
}

#[test]
fn dumps_go_to_the_file_asked_for_and_an_unwritable_one_is_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let (log, file) = (
        dir.as_path().join("stderr"),
        dir.as_path().join("dumps.txt"),
    );
    let quit = Path::new("QUIT");
    let fx = reports(
        &[],
        &[
            ("ASYNCDUMP_ON_SIGNAL", quit),
            ("ASYNCDUMP_DUMP_FILE", &file),
        ],
        &log,
    );
    signal(fx.pid, libc::SIGQUIT);
    until(&file, "dumped into the file", |t| dumped(t, 1));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a dump shows what the program holds");
    assert!(!std::fs::read_to_string(&log).unwrap().contains(HEADER));
    drop(fx);
    // A file in a directory that is not there.
    let nowhere = dir.as_path().join("missing").join("dumps.txt");
    let mut fx = reports(
        &[],
        &[
            ("ASYNCDUMP_ON_SIGNAL", quit),
            ("ASYNCDUMP_DUMP_FILE", &nowhere),
        ],
        &log,
    );
    signal(fx.pid, libc::SIGQUIT);
    let text = until(&log, "said why", |t| {
        t.contains("no dump: cannot write the dump to")
    });
    let said: Vec<&str> = text.lines().filter(|l| l.contains("SIGQUIT")).collect();
    assert_eq!(said.len(), 1, "{text}");
    assert!(said[0].ends_with("; the program goes on"), "{}", said[0]);
    assert!(fx.is_alive() && answers(&fx));
}

#[test]
fn without_an_inspector_a_dump_is_one_line_saying_what_is_missing() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let quit = Path::new("QUIT");
    let empty = Path::new("");
    let bare = Path::new("/nonexistent-bin-dir");
    let mut fx = reports(
        &[],
        &[
            ("ASYNCDUMP_ON_SIGNAL", quit),
            ("ASYNCDUMP_INSPECTOR", empty),
            ("PATH", bare),
        ],
        &log,
    );
    signal(fx.pid, libc::SIGQUIT);
    let text = until(&log, "said what is missing", |t| t.contains("SIGQUIT"));
    assert_eq!(
        text.trim_end(),
        "asyncdump agent: SIGQUIT: no dump: the `asyncdump` inspector is not on PATH; install it \
         (`cargo install --locked --path inspector` in asyncdump's source) or set \
         ASYNCDUMP_INSPECTOR to its path"
    );
    assert!(fx.is_alive() && answers(&fx));
}

#[test]
fn a_process_that_did_not_ask_keeps_the_signals_default() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let mut fx = reports(&[], &[], &log);
    signal(fx.pid, libc::SIGUSR2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fx.is_alive() {
        assert!(
            Instant::now() < deadline,
            "SIGUSR2's default ends the process"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap()
            .contains("asyncdump agent")
    );
}

#[test]
fn the_watchdog_fires_once_on_a_wedged_runtime_naming_the_stuck_task() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let period = Path::new("1s");
    let _fx = reports(
        &["--wedge-after", "200"],
        &[("ASYNCDUMP_WATCHDOG", period)],
        &log,
    );
    let text = until(&log, "the watchdog's dump", |t| dumped(t, 1));
    assert!(
        text.contains("asyncdump agent: watchdog: runtime 0 ran no new work for "),
        "{text}"
    );
    // The task inside its poll, and the probe it never got to.
    assert!(text.contains("(reports::wedge) · running"), "{text}");
    assert!(
        text.contains("(asyncdump_agent::self_dump::watchdog::probe) · scheduled"),
        "{text}"
    );
    // Once: it stays wedged, and the watchdog waits for progress before it fires again.
    std::thread::sleep(Duration::from_secs(3));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches(HEADER).count(), 1, "{text}");
}

#[test]
fn the_watchdog_never_fires_on_a_process_idle_by_design() {
    let dir = tempdir();
    let log = dir.as_path().join("stderr");
    let period = Path::new("300ms");
    let mut fx = reports(&["--idle"], &[("ASYNCDUMP_WATCHDOG", period)], &log);
    // Ten periods of waiting on accept and a timer.
    std::thread::sleep(Duration::from_secs(3));
    assert!(fx.is_alive() && answers(&fx));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
}

/// The agent's `timeouts` test binary, whose ignored tests time out on purpose.
fn timeouts_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "test",
                "-q",
                "--no-run",
                "-p",
                "asyncdump-agent",
                "--test",
                "timeouts",
            ])
            .arg("--message-format=json")
            .current_dir(crate::support::workspace())
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (String::from_utf8_lossy(&out.stdout).lines())
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "timeouts")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("the test binary")
    })
    .clone()
}

/// Runs ignored test `name` of the `timeouts` binary: its exit status and all it printed.
fn run_timeout_test(name: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(timeouts_binary())
        .args(["--ignored", "--exact", name])
        .env("ASYNCDUMP_INSPECTOR", inspector())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the test binary");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn a_test_past_its_timeout_prints_where_it_waits_and_fails_naming_itself() {
    let (code, text) = run_timeout_test("waits_for_a_reply_nobody_sends");
    assert_eq!(code, Some(101), "{text}");
    let test = "timeouts::waits_for_a_reply_nobody_sends";
    assert!(
        text.contains(&format!(
            "asyncdump agent: test `{test}` timed out after 1s: {HEADER}"
        )),
        "{text}"
    );
    // The test's own chain, down to the await that never ends, decoded.
    let chain = [
        "timeouts::ask_for_quote at agent/tests/timeouts.rs:",
        "timeouts::await_reply at agent/tests/timeouts.rs:",
        "awaiting tokio::sync::oneshot::Receiver<u32>",
    ];
    let lines: Vec<&str> = (text.lines())
        .skip_while(|l| !l.trim_start().starts_with(chain[0]))
        .take(3)
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, want) in lines.iter().zip(chain) {
        assert!(
            line.trim_start().starts_with(want),
            "{line:?} ≠ {want:?}\n{text}"
        );
    }
    // Each one level under the one before.
    let indent = |l: &str| l.len() - l.trim_start().len();
    assert_eq!(indent(lines[1]), indent(lines[0]) + 2, "{text}");
    assert_eq!(indent(lines[2]), indent(lines[1]) + 2, "{text}");
    // It holds the sender of what it waits for: a deadlock, said first.
    assert!(text.contains("DEADLOCK cycle: task 1 → task 1"), "{text}");
    assert!(
        text.contains("panicked at agent/src/testing.rs")
            && text.contains(&format!(
                "test `{test}` timed out after 1s: every task's chain is printed above"
            )),
        "{text}"
    );
    assert!(
        text.contains("test waits_for_a_reply_nobody_sends ... FAILED"),
        "{text}"
    );
}

#[test]
fn a_test_whose_thread_blocks_is_dumped_and_the_process_exits() {
    let (code, text) = run_timeout_test("blocks_its_thread_inside_a_poll");
    assert_eq!(code, Some(101), "{text}");
    let why = "test `timeouts::blocks_its_thread_inside_a_poll` timed out after 1s, its thread \
               blocked inside a poll for 5s more";
    assert!(
        text.contains(&format!("asyncdump agent: {why}: {HEADER}")),
        "{text}"
    );
    assert!(
        text.contains("\"test timeouts::blocks_its_thread_inside_a_poll\" · running"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "asyncdump agent: {why}: it cannot be failed from another thread; the process exits"
        )),
        "{text}"
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
    })
}

fn wait_for(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// The dump file was appended to through a symlink (to a root-only file, for a host running as root),
// into another user's file, and blocked the dump thread on a FIFO nobody reads: each is refused
// in one line, the target of the link untouched, and the next dump still goes.
#[test]
fn a_dump_file_that_is_a_symlink_a_fifo_or_another_users_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempdir();
    let quit = Path::new("QUIT");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let theirs = dir.join("theirs");
    std::fs::write(&theirs, "").unwrap();
    let root = nix::unistd::geteuid().is_root();
    if root {
        nix::unistd::chown(&theirs, Some(65534.into()), Some(65534.into())).unwrap();
    }
    let mut cases = vec![(link, "a symlink"), (fifo, "a FIFO nobody reads")];
    if root {
        cases.push((theirs.clone(), "belongs to uid 65534"));
    }
    for (file, why) in cases {
        let log = dir.join("stderr");
        let mut fx = reports(
            &[],
            &[
                ("ASYNCDUMP_ON_SIGNAL", quit),
                ("ASYNCDUMP_DUMP_FILE", &file),
            ],
            &log,
        );
        for n in 1..=2 {
            signal(fx.pid, libc::SIGQUIT);
            let text = until(&log, "said why", |t| t.matches("no dump").count() >= n);
            assert!(text.contains(why), "{text}");
        }
        assert!(fx.is_alive() && answers(&fx));
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    if root {
        assert_eq!(std::fs::metadata(&theirs).unwrap().len(), 0);
        assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 65534);
    }
}

/// An inspector (a shell script) that starts a child and then hangs, writing their pids to `pids`.
fn hanging_inspector(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let pids = dir.join("pids");
    let script = dir.join("hangs");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nsleep 1000 &\necho $$ $! > {}.tmp\nmv {0}.tmp {0}\nwait\n",
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script, pids)
}

fn pids_in(file: &Path) -> Vec<u32> {
    let text = until(file, "the inspector started", |t| {
        t.split_whitespace().count() == 2
    });
    text.split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

// An inspector that hung left its child running after it was stopped, and one outlived a host
// killed with SIGKILL.
#[test]
fn a_hanging_inspector_is_stopped_with_its_children_and_dies_with_its_host() {
    let dir = tempdir();
    let (script, pids) = hanging_inspector(dir.as_path());
    let log = dir.join("stderr");
    let quit = Path::new("QUIT");
    let fx = Fixture::start_logging(
        "reports",
        &[],
        &[
            ("ASYNCDUMP_INSPECTOR", &script),
            ("ASYNCDUMP_ON_SIGNAL", quit),
            ("ASYNCDUMP_DUMP_TIMEOUT", Path::new("1s")),
        ],
        &log,
    );
    signal(fx.pid, libc::SIGQUIT);
    let started = pids_in(&pids);
    let text = until(&log, "stopped it", |t| t.contains("and was stopped"));
    assert!(text.contains("took over 1.0s"), "{text}");
    wait_for(
        "the inspector and its child gone",
        Duration::from_secs(10),
        || started.iter().all(|&p| gone(p)),
    );
    std::fs::remove_file(&pids).unwrap();
    // Killed outright, the host leaves no inspector behind.
    signal(fx.pid, libc::SIGQUIT);
    let started = pids_in(&pids);
    signal(fx.pid, libc::SIGKILL);
    wait_for(
        "the inspector gone with its host",
        Duration::from_secs(10),
        || gone(started[0]),
    );
    // Its own child is the inspector's to end; the whole group is killed only on a timeout.
    // SAFETY: kill takes integers only.
    unsafe { libc::kill(started[1] as i32, libc::SIGKILL) };
}

// An inspector that flooded its output was copied without end (~730 MB/s for 120 s).
#[test]
fn a_flooding_inspector_is_cut_at_256_mb() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let script = dir.join("floods");
    std::fs::write(&script, "#!/bin/sh\nexec yes flood\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (log, file) = (dir.join("stderr"), dir.join("dumps"));
    let quit = Path::new("QUIT");
    let mut fx = Fixture::start_logging(
        "reports",
        &[],
        &[
            ("ASYNCDUMP_INSPECTOR", &script),
            ("ASYNCDUMP_ON_SIGNAL", quit),
            ("ASYNCDUMP_DUMP_FILE", &file),
        ],
        &log,
    );
    signal(fx.pid, libc::SIGQUIT);
    let text = until(&log, "cut it", |t| t.contains("and was stopped"));
    assert!(text.contains("wrote over 256 MB"), "{text}");
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(len <= (256 << 20) + 4096, "{len} bytes written");
    assert!(fx.is_alive() && answers(&fx));
}
