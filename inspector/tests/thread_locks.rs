//! The holders of blocking locks other than std's `Mutex`: std's `RwLock` (a reader and a writer
//! waiting), parking_lot's `Mutex` and `RwLock`, and tokio's `Mutex` waited for in `blocking_lock`,
//! each held by a thread's local or a task's, named on the line of the thread blocked on it. Live,
//! held stopped and from a core, on a program that links nothing of ours.

use crate::support::{Fixture, asyncdump_ok, line_of, tempdir};

const SRC: &str = "fixtures/src/bin/thread_locks.rs";

fn at(needle: &str) -> String {
    format!("{SRC}:{}", line_of("thread_locks", needle))
}

/// The `--threads` line of the worker polling the task whose root is `function`, or else of the
/// thread blocked in `function` (by its code: a core keeps no thread names).
fn thread_line<'t>(text: &'t str, function: &str) -> &'t str {
    let threads = &text[text.find("\nthreads: ").expect("a threads section")..];
    let root = text
        .lines()
        .find(|l| l.starts_with("tokio task ") && l.contains(&format!("({function})")))
        .and_then(|l| l.split(" (").next());
    (threads.lines())
        .filter(|l| l.starts_with("thread "))
        .find(|l| match root {
            Some(task) => l.contains(&format!(" · polls {task}")),
            None => l.contains(&format!("← {function} at ")),
        })
        .unwrap_or_else(|| panic!("no thread of {function}:\n{threads}"))
}

/// What every spec here expects: each waiter blocked on its lock, named by its static, with the
/// local that holds it and where.
fn assert_holders(text: &str) {
    let cases = [
        (
            "thread_locks::config::read",
            "std::sync::RwLock (read) thread_locks::CONFIG @ 0x",
            "(`config` in thread_locks::config::write)",
        ),
        (
            "thread_locks::stats::write",
            "std::sync::RwLock (write) thread_locks::STATS @ 0x",
            "(`stats` in thread_locks::stats::read)",
        ),
        (
            "thread_locks::index::search",
            "std::sync::RwLock (read) thread_locks::INDEX @ 0x",
            "(`index` in thread_locks::index::rebuild)",
        ),
        (
            "thread_locks::sessions::collect",
            "parking_lot::Mutex thread_locks::SESSIONS @ 0x",
            "(`sessions` in thread_locks::sessions::expire)",
        ),
        (
            "thread_locks::routes::lookup",
            "parking_lot::RwLock (read) thread_locks::ROUTES @ 0x",
            "(`routes` in thread_locks::routes::reload)",
        ),
    ];
    for (who, blocked, held) in cases {
        let line = thread_line(text, who);
        assert!(line.contains(&format!("blocked in {blocked}")), "{line}");
        let holder = line
            .split(" · held by ")
            .nth(1)
            .unwrap_or_else(|| panic!("no holder: {line}"));
        let kind = if holder.starts_with("tokio task ") {
            "a task"
        } else {
            "a thread"
        };
        assert!(holder.contains(held), "{line}\nwanted {held} ({kind})");
    }
    // The task holding tokio's mutex across an await, and the thread waiting in `blocking_lock`,
    // whose future is its thread's.
    let reconcile = thread_line(text, "thread_locks::ledger::reconcile");
    assert!(
        reconcile.contains(
            "· block_on · blocked in tokio::sync::Mutex::blocking_lock, waiting for its future (shown as its thread's) ← thread_locks::ledger::reconcile at "
        ),
        "{reconcile}"
    );
    let settle = format!(
        "held by tokio task 12 (`entries` in thread_locks::ledger::settle, acquired at {})",
        at("let mut entries = ledger.lock().await;")
    );
    assert!(reconcile.contains(&settle), "{reconcile}\nwanted {settle}");
    assert!(
        crate::support::without_verdicts(text).contains(
            " · idle\n  run by tokio::sync::Mutex::blocking_lock · root tokio::sync::mutex::Mutex::lock<u64>"
        ),
        "{text}"
    );
}

#[test]
fn the_holders_of_rwlocks_and_parking_lots_locks_are_named_across_threads_and_tasks() {
    let fx = Fixture::start("thread_locks", &[]);
    let pid = fx.pid.to_string();
    let text = asyncdump_ok(&["dump", &pid, "--threads", "--all"]);
    assert!(text.contains("read from live memory, no agent"), "{text}");
    assert_holders(&text);
    let stopped = asyncdump_ok(&["dump", &pid, "--threads", "--all", "--stop"]);
    assert!(stopped.contains("threads stopped for"), "{stopped}");
    assert_holders(&stopped);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&[
        "dump",
        "--core",
        core.to_str().unwrap(),
        "--threads",
        "--all",
    ]);
    assert!(text.contains("read from core file"), "{text}");
    assert_holders(&text);
}
