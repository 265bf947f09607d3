//! `--stop` never harms the target: not one that replaces its program, makes and ends threads or
//! forks without pause, has a thread in an uninterruptible wait, is sent real-time signals, or whose
//! main thread has ended; and a debugger holding one worker is named, not the inspector itself.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::agentless::dump_settled;
use crate::support::{
    Fixture, asyncdump_command, output_within, plan_cache_of_this_run, succeeded, tempdir,
};

/// Each thread of `pid`: its id, its state letter and its tracer (a thread id, 0 for none).
fn threads_of(pid: u32) -> Vec<(u32, char, u32)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let tracer = status.lines().find_map(|l| l.strip_prefix("TracerPid:"))?;
            Some((tid, state, tracer.trim().parse().ok()?))
        })
        .collect()
}

/// No thread of `pid` traced or stopped by a tracer, within a few seconds (a thread let go a moment
/// ago may still show its stop).
fn assert_let_go(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let threads = threads_of(pid);
        if threads.iter().all(|&(_, s, t)| s != 't' && t == 0) {
            return;
        }
        assert!(Instant::now() < deadline, "threads left held: {threads:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `asyncdump dump PID --stop` (and `extra`), giving it `within` before calling it hung.
fn dump_stop_within(pid: u32, extra: &[&str], within: Duration) -> std::process::Output {
    dump_stop_paced(pid, extra, within, 0)
}

/// As [`dump_stop_within`], the inspector pausing `pause_us` before each attach.
fn dump_stop_paced(
    pid: u32,
    extra: &[&str],
    within: Duration,
    pause_us: u32,
) -> std::process::Output {
    let (target, pid) = (pid, pid.to_string());
    let pause = std::path::PathBuf::from(pause_us.to_string());
    let mut args = vec!["dump", pid.as_str(), "--stop"];
    args.extend_from_slice(extra);
    let mut command = asyncdump_command(&args, &[("ASYNCDUMP_ATTACH_PAUSE_US", &pause)]);
    command.stdout(Stdio::null());
    output_within(command, within, || {
        format!("the target's threads: {:?}", threads_of(target))
    })
}

// An attach blocked behind the target's `execve` (which waits for threads the inspector holds)
// deadlocked both: the inspector reaps the held threads that the `execve` ended while it waits.
#[test]
fn stop_racing_a_programs_execve_neither_hangs_nor_harms_it() {
    let fx = Fixture::start("churn", &["--exec-every", "5"]);
    let mut outcomes = std::collections::BTreeMap::<i32, usize>::new();
    for _ in 0..100 {
        // A pause before each attach: an `execve` falls between two in most tries.
        let out = dump_stop_paced(fx.pid, &[], Duration::from_secs(8), 2000);
        let code = out.status.code().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Shown, or said to have changed under the dump: never refused as if not allowed, nor
        // given up on while the target waited.
        let changed = stderr.contains("replaced its program") || stderr.contains("changed under");
        assert!(
            code == 0 || (code == 1 && changed) || code == 6,
            "exit {code}: {stderr}"
        );
        *outcomes.entry(code).or_default() += 1;
        assert_let_go(fx.pid);
    }
    assert!(outcomes.get(&0).copied().unwrap_or(0) > 0, "{outcomes:?}");
    // The program still replaces itself: it was never left stuck in an `execve`.
    let before = std::fs::read(format!("/proc/{}/auxv", fx.pid)).ok();
    let moved = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        std::fs::read(format!("/proc/{}/auxv", fx.pid)).ok() != before
    });
    assert!(moved, "the program stopped replacing itself");
}

// A thread in an uninterruptible wait (a vfork parent) stops only when the wait ends, after the
// snapshot: it was left stopped under the inspector for as long as the inspector lived.
#[test]
fn a_thread_that_stops_after_the_snapshot_is_let_go_while_the_inspector_lives() {
    let fx = Fixture::start("churn", &["--vfork-ms", "1500"]);
    std::thread::sleep(Duration::from_millis(100));
    let (read, write) = full_pipe();
    let mut inspector = Command::new(env!("CARGO_BIN_EXE_asyncdump"))
        .args(["dump", &fx.pid.to_string(), "--stop"])
        .env("XDG_CACHE_HOME", plan_cache_of_this_run())
        .stdout(write)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The inspector now waits to write its dump (its standard output is full) long after the
    // snapshot, and the vfork parent's wait ends meanwhile.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut saw_late = false;
    loop {
        let threads = threads_of(fx.pid);
        saw_late |= threads.iter().any(|&(_, s, t)| s == 'D' && t != 0);
        if saw_late && threads.iter().all(|&(_, s, t)| s != 't' && t == 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "held while the inspector lives: {threads:?} (a late thread seen: {saw_late})"
        );
        assert!(
            inspector.try_wait().unwrap().is_none(),
            "the inspector ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(read);
    let status = inspector.wait().unwrap();
    // Its output was cut when the reader went: only a broken pipe is allowed to end it otherwise.
    assert!(status.code().is_some(), "{status:?}");
}

/// A pipe whose buffer is full: a writer to it blocks until the reader reads or goes.
fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let (read, mut write) = std::io::pipe().unwrap();
    let fd = write.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor this test owns, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    while write.write(&[0u8; 4096]).is_ok() {}
    // SAFETY: as above; the inspector must block on the full pipe, not fail.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    (read, write)
}

// Real-time signals that stopped a thread before the inspector's interrupt could were taken as the
// thread's exit (nix's signal type has none), never handed back, and lost.
#[test]
fn every_real_time_signal_sent_during_stop_dumps_arrives() {
    let dir = tempdir();
    let count = dir.join("count");
    let fx = Fixture::start("churn", &["--count-signals", count.to_str().unwrap()]);
    let (sent, done) = (AtomicU64::new(0), AtomicBool::new(false));
    let pid = fx.pid as libc::pid_t;
    std::thread::scope(|s| {
        s.spawn(|| {
            let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
            let mut sig = min;
            while !done.load(Ordering::Relaxed) {
                // SAFETY: kill takes integers only.
                if unsafe { libc::kill(pid, sig) } == 0 {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                sig = if sig == max { min } else { sig + 1 };
                // A few thousand a second: the queue stays short, and every dump meets some.
                std::thread::sleep(Duration::from_micros(50));
            }
        });
        for _ in 0..60 {
            succeeded(
                dump_stop_within(fx.pid, &[], Duration::from_secs(30)),
                &["--stop"],
            );
        }
        done.store(true, Ordering::Relaxed);
    });
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 500, "only {sent} sent");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got: u64 = std::fs::read_to_string(&count)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if got == sent {
            break;
        }
        assert!(Instant::now() < deadline, "{got} of {sent} signals arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_let_go(fx.pid);
}

// A process whose main thread has ended (a zombie leader, other threads alive) was said to have
// exited during the dump, with or without --stop, and `--stop TID` was refused (EPERM).
#[test]
fn a_process_whose_main_thread_ended_is_read_held_and_let_go() {
    let fx = Fixture::start("churn", &["--end-main"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !threads_of(fx.pid)
        .iter()
        .any(|&(t, s, _)| t == fx.pid && s == 'Z')
    {
        assert!(Instant::now() < deadline, "the main thread never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    let chain = |text: &str| text.contains("churn::serve") && text.contains("churn::answer");
    let running = dump_settled(fx.pid, &[], 1);
    assert!(chain(&running), "{running}");
    let stopped = dump_settled(fx.pid, &["--stop"], 1);
    assert!(chain(&stopped), "{stopped}");
    assert!(stopped.contains(" threads stopped for "), "{stopped}");
    assert_let_go(fx.pid);
    // A thread's id names its process too.
    let worker = (threads_of(fx.pid).into_iter())
        .find(|&(t, s, _)| t != fx.pid && s != 'Z')
        .unwrap()
        .0;
    succeeded(
        dump_stop_within(worker, &[], Duration::from_secs(30)),
        &["--stop"],
    );
    assert_let_go(fx.pid);
}

// With a debugger on one worker only, the refusal named the inspector itself (which by then held
// the main thread) as the tracer.
#[test]
fn a_debugger_on_one_worker_is_named_and_nothing_is_left_held() {
    let fx = Fixture::start("churn", &[]);
    let worker = (threads_of(fx.pid).into_iter())
        .map(|(t, _, _)| t)
        .max()
        .unwrap();
    // This test's thread attaches to one worker as a debugger would (PTRACE_SEIZE stops nothing).
    let debugger = Debugger::seize(worker);
    let out = dump_stop_within(fx.pid, &[], Duration::from_secs(30));
    let others_held = threads_of(fx.pid)
        .into_iter()
        .filter(|&(t, s, tracer)| t != worker && (s == 't' || tracer != 0))
        .count();
    drop(debugger);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let me = std::process::id();
    assert!(
        stderr.contains(&format!("is traced by process {me}")),
        "{stderr}"
    );
    assert_eq!(others_held, 0);
    assert_let_go(fx.pid);
}

/// This thread as a debugger of one thread, detached when dropped (also on a failed assertion: the
/// fixture could not be reaped while one of its threads is traced).
struct Debugger(libc::pid_t);

impl Debugger {
    fn seize(tid: u32) -> Debugger {
        // SAFETY: PTRACE_SEIZE of a fixture's thread with no options passes no memory.
        let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid as libc::pid_t, 0, 0) };
        assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
        Debugger(tid as libc::pid_t)
    }
}

impl Drop for Debugger {
    fn drop(&mut self) {
        // Only a stopped tracee can be detached: stopped, waited for, then let go.
        // SAFETY: ptrace and waitpid on the thread this thread seized; waitpid writes only
        // `status`, which we own.
        unsafe {
            libc::ptrace(libc::PTRACE_INTERRUPT, self.0, 0, 0);
            let mut status = 0;
            libc::waitpid(self.0, &mut status, libc::__WALL);
            libc::ptrace(libc::PTRACE_DETACH, self.0, 0, 0);
        }
    }
}

// Threads exiting while they were attached made the attach fail with EPERM (exit 5), even as root.
#[test]
fn stop_holds_a_program_that_makes_threads_and_forks_without_pause() {
    let fx = Fixture::start("churn", &["--threads", "--forks"]);
    for _ in 0..30 {
        succeeded(
            dump_stop_within(fx.pid, &[], Duration::from_secs(30)),
            &["--stop"],
        );
        assert_let_go(fx.pid);
    }
}

/// `--stop` and `watch --stop` against a program that replaces itself, makes and ends threads and
/// forks, for `ASYNCDUMP_STRESS_SECONDS` (20 by default; `checks/long.sh` runs minutes): no dump
/// hangs or is refused, and nothing is left held.
#[test]
fn stop_and_watch_stop_outlast_a_program_that_churns() {
    let seconds: u64 = std::env::var("ASYNCDUMP_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let args = ["--exec-every", "40", "--threads", "--forks"];
    let fx = Fixture::start("churn", &args);
    let watch = crate::watch::Tmux::sized(
        &format!(
            "{} watch {} --stop; echo watch-exited-$?; sleep 600",
            env!("CARGO_BIN_EXE_asyncdump"),
            fx.pid
        ),
        160,
        40,
    );
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut outcomes = std::collections::BTreeMap::<i32, usize>::new();
    while Instant::now() < until {
        let out = dump_stop_within(fx.pid, &[], Duration::from_secs(30));
        let code = out.status.code().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(code, 0 | 1 | 6), "exit {code}: {stderr}");
        *outcomes.entry(code).or_default() += 1;
    }
    eprintln!("dump --stop for {seconds}s beside watch --stop, by exit status: {outcomes:?}");
    assert!(outcomes.get(&0).is_some_and(|&n| n > 0), "{outcomes:?}");
    let screen = watch.screen();
    assert!(!screen.contains("watch-exited"), "{screen}");
    watch.keys("q");
    watch.until("watch quits", |s| s.contains("watch-exited-"));
    assert_let_go(fx.pid);
}
