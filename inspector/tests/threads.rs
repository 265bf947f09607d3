//! What the threads do: a worker blocked in synchronous code inside a task is named with the task,
//! the blocking call and the program's line that made it; std mutexes by their statics, their
//! holders by the guards' locals, and wait cycles through tasks and threads as deadlocks; a runtime
//! whose every worker is blocked is said once; `--threads` lists every thread. Live, held stopped,
//! and from a core, on a program that links nothing of ours.

use crate::support::{Fixture, asyncdump_ok, dump_until, line_of, tempdir};

const SRC: &str = "fixtures/src/bin/blocked_workers.rs";

/// The dump of the `blocked_workers` fixture once its workers are all seen blocked.
fn starved_dump(fx: &Fixture, args: &[&str]) -> String {
    dump_until(fx.pid, args, |text| text.contains("STARVED"))
}

fn at(needle: &str) -> String {
    format!("{SRC}:{}", line_of("blocked_workers", needle))
}

/// What every spec here expects of the dump's text: each running task's thread and what it is
/// blocked in, and the starved runtime.
fn assert_workers_blocked(text: &str) {
    let clock = !text.contains("read from core file");
    assert_starved(
        text,
        "STARVED runtime multi_thread: 4 of 4 workers blocked or busy inside a poll",
        "; 5 tasks ready and not polled",
        clock,
    );
    let section = |root: &str| {
        let start = text
            .find(&format!("({root}) · running on thread"))
            .unwrap_or_else(|| panic!("{root} is not running on a thread:\n{text}"));
        let rest = &text[start..];
        rest[..rest.find("\n\n").unwrap_or(rest.len())].to_owned()
    };
    let report = section("blocked_workers::reports::render_pdf");
    // An hour asked for; after a stop (`--stop`), what was left of it; restarted after one (the
    // core's), the kernel's to know.
    assert!(
        report.contains("blocked in std::thread::sleep (asked for 1h00m) ←")
            || report.contains("blocked in std::thread::sleep (asked for 59m59s) ←")
            || report
                .contains("blocked in std::thread::sleep (what is left of it is the kernel's) ←"),
        "{report}"
    );
    let sleep = format!(
        "← blocked_workers::reports::render_pdf::{{{{closure}}}} at {}",
        at("std::thread::sleep(std::time::Duration::from_secs(3600))")
    );
    assert!(report.contains(&sleep), "{report}\nwanted: {sleep}");
    let refresh = section("blocked_workers::cache::refresh");
    let want = "blocked in std::sync::Mutex blocked_workers::ORDERS @ 0x";
    assert!(refresh.contains(want), "{refresh}");
    assert!(
        refresh.contains(&format!(
            "← blocked_workers::cache::refresh::{{{{closure}}}} at {}",
            at("ORDERS.lock().unwrap().push(user)")
        )),
        "{refresh}"
    );
    let evict = section("blocked_workers::cache::evict");
    assert!(
        evict.contains("blocked in std::sync::Mutex blocked_workers::USERS @ 0x"),
        "{evict}"
    );
    assert_deadlocks(text);
    // The `current_thread` runtime on a thread of its own, blocked by its one task.
    let current = (text.lines())
        .position(|l| l.starts_with("STARVED runtime current_thread: "))
        .unwrap_or_else(|| panic!("no starved current_thread runtime:\n{text}"));
    let lines: Vec<&str> = text.lines().collect();
    assert_starved(
        lines[current],
        "STARVED runtime current_thread: its one thread blocked or busy inside a poll",
        "; 2 tasks ready and not polled",
        clock,
    );
    assert!(
        lines[current + 1].contains("blocked in std::thread::sleep (")
            && lines[current + 1].contains("← blocked_workers::feeds::poll_feed::{{closure}} at "),
        "{}",
        lines[current + 1]
    );
}

/// The starved line `says … ends`, timed by its heartbeat's timer, overdue since before `ready`,
/// where the dump has a clock (live, not from a core).
fn assert_starved(text: &str, says: &str, ends: &str, clock: bool) {
    let line = (text.lines())
        .find(|l| l.starts_with(says))
        .unwrap_or_else(|| panic!("no {says}:\n{text}"));
    let timed = &line[says.len()..line.len() - ends.len()];
    assert!(line.ends_with(ends), "{line}");
    if !clock {
        assert_eq!(timed, "", "a core keeps no clock");
        return;
    }
    let overdue = (timed.strip_prefix(" for ≥ "))
        .and_then(|t| t.strip_suffix(" (a timer that long overdue)"))
        .unwrap_or_else(|| panic!("not timed by the heartbeat's timer: {line}"));
    // As the dump writes durations: `51.20ms`, `3.48s`, `1m02s`, `1h00m`.
    let at_least_50ms = match overdue.strip_suffix("ms") {
        Some(ms) => ms.parse::<f64>().is_ok_and(|ms| ms >= 50.0),
        None => !overdue.ends_with("µs") && !overdue.ends_with("ns"),
    };
    assert!(at_least_50ms, "{line}");
}

/// The two wait cycles, first in the dump: two tasks on two std mutexes, and a task with a thread
/// of the program's own; each lock's holder named by the guard's local.
fn assert_deadlocks(text: &str) {
    let cycles: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("DEADLOCK cycle: "))
        .collect();
    assert_eq!(cycles.len(), 2, "{text}");
    let tasks = cycles
        .iter()
        .find(|c| !c.contains("thread"))
        .expect("a cycle of tasks");
    assert!(tasks.matches("tokio task ").count() == 3, "{tasks}");
    let mixed = cycles
        .iter()
        .find(|c| c.contains("thread "))
        .expect("a cycle with a thread");
    assert!(mixed.contains("tokio task "), "{mixed}");
    for held in [
        "held by tokio task",
        "(`orders` in blocked_workers::cache::evict",
        "(`users` in blocked_workers::cache::refresh",
        "(`journal` in blocked_workers::journal::append",
        "(`ledger` in blocked_workers::journal::audit)",
    ] {
        assert!(text.contains(held), "no {held}:\n{text}");
    }
    assert!(
        text.contains(&format!(
            " waits in blocked_workers::journal::audit at {} for std::sync::Mutex @ 0x",
            at("let n = JOURNAL.lock().unwrap().len() as u64;")
        )),
        "{text}"
    );
}

#[test]
fn workers_blocked_in_synchronous_code_inside_tasks_are_named_with_the_call_and_the_line() {
    let fx = Fixture::start("blocked_workers", &[]);
    let text = starved_dump(&fx, &["--all"]);
    assert!(text.contains("read from live memory, no agent"), "{text}");
    assert_workers_blocked(&text);
    // Each worker once, with the task it polls.
    let starved: Vec<&str> = (text.lines())
        .skip_while(|l| !l.starts_with("STARVED"))
        .skip(1)
        .take_while(|l| l.starts_with("  thread "))
        .collect();
    assert_eq!(starved.len(), 4, "{text}");
    assert!(
        starved.iter().all(|l| l.contains(" polls tokio task ")),
        "{text}"
    );
    let stats = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stats"]);
    assert!(
        stats
            .contains("STARVED runtime multi_thread: 4 of 4 workers blocked or busy inside a poll"),
        "{stats}"
    );
    // `main`'s future (`#[tokio::main]`) awaits the report's task; the `feeds` thread's, whose
    // thread is inside the poll of one of its tasks, is between its own polls, awaiting that task.
    for (thread, awaits) in [
        (
            format!("thread {} \"blocked_workers\"", fx.pid),
            "JoinHandle<usize>",
        ),
        ("\"feeds\"".to_owned(), "JoinHandle<()>"),
    ] {
        let title = format!("{thread} · block_on · idle");
        let at = text
            .find(&title)
            .unwrap_or_else(|| panic!("{title}:\n{text}"));
        let future = &text[at..text[at..].find("\n\n").map_or(text.len(), |e| at + e)];
        assert!(
            future.contains(&format!(
                "awaiting tokio::task::{awaits}\n      → awaits tokio task "
            )),
            "{future}"
        );
    }
}

#[test]
fn every_thread_is_listed_with_its_role_and_its_own_frames() {
    let fx = Fixture::start("blocked_workers", &[]);
    let text = starved_dump(&fx, &["--threads"]);
    let threads = &text[text.find("\nthreads: ").expect("a threads section")..];
    let workers = threads
        .lines()
        .filter(|l| l.contains(" · runtime worker · blocked in "));
    assert_eq!(workers.count(), 4, "{threads}");
    // `main`'s `block_on` waits for the report: parked, its own frame named.
    assert!(
        threads.contains(&format!(
            "\"blocked_workers\" · block_on · parked, waiting for work ← blocked_workers::main at {SRC}:"
        )),
        "{threads}"
    );
    // A thread the program started, asleep outside any task.
    let sleeper = (threads.lines())
        .find(|l| l.contains("← blocked_workers::exit_after_timeout::{{closure}} at"))
        .unwrap_or_else(|| panic!("{threads}"));
    assert!(
        sleeper.contains(" · blocked in std::thread::sleep (asked for "),
        "{sleeper}"
    );
    assert!(
        sleeper.ends_with(&at("std::thread::sleep(Duration::from_secs(secs))")),
        "{sleeper}"
    );
    assert!(
        threads.contains(
            "    std::sync::poison::mutex::Mutex<T>::lock at std/src/sync/poison/mutex.rs:"
        )
    );
}

#[test]
fn the_json_document_has_every_thread_what_it_is_blocked_in_and_the_task_it_polls() {
    let fx = Fixture::start("blocked_workers", &[]);
    starved_dump(&fx, &[]);
    let doc: serde_json::Value = serde_json::from_str(&asyncdump_ok(&[
        "dump",
        &fx.pid.to_string(),
        "--json",
        "--all",
    ]))
    .unwrap();
    let threads = doc["threads"].as_array().expect("threads");
    let mut locks: Vec<&str> = (threads.iter())
        .filter(|t| t["doing"]["on"]["what"] == "lock")
        .filter_map(|t| t["doing"]["on"]["static_name"].as_str())
        .collect();
    locks.sort_unstable();
    let statics = ["JOURNAL", "LEDGER", "ORDERS", "USERS"].map(|s| format!("blocked_workers::{s}"));
    assert_eq!(locks, statics, "the statics the threads wait for");
    let polling: Vec<u64> = threads
        .iter()
        .filter_map(|t| t["polling"].as_u64())
        .collect();
    assert_eq!(polling.len(), 5, "the tasks the threads poll");
    let running: Vec<u64> = (doc["tasks"].as_array().unwrap().iter())
        .filter(|t| t["state"] == "running")
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    for id in &polling {
        assert!(
            running.contains(id),
            "thread polls {id}, not a running task"
        );
    }
    let sleeper = (threads.iter())
        .find(|t| t["doing"]["on"]["what"] == "sleep" && t["polling"].is_u64())
        .expect("the report's worker");
    let frames = sleeper["frames"].as_array().unwrap();
    assert!(frames.iter().any(|f| {
        f["own"] == true
            && f["function"]
                .as_str()
                .unwrap()
                .starts_with("blocked_workers::reports::render_pdf")
    }));
    assert_eq!(doc["starved"][0]["ready"], 5);
    assert_eq!(doc["starved"][1]["flavor"], "current_thread");
    assert_eq!(doc["starved"][1]["ready"], 2);
}

#[test]
fn held_stopped_and_from_a_core_the_same_workers_are_blocked_in_the_same_calls() {
    let fx = Fixture::start("blocked_workers", &[]);
    let stopped = starved_dump(&fx, &["--stop", "--all"]);
    assert!(stopped.contains("threads stopped for"), "{stopped}");
    assert_workers_blocked(&stopped);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap(), "--all"]);
    assert!(text.contains("read from core file"), "{text}");
    assert_workers_blocked(&text);
}

#[test]
fn a_worker_spinning_in_a_task_is_read_held_stopped_down_to_the_loop() {
    let fx = Fixture::start("blocked_workers", &["--spin"]);
    let text = starved_dump(&fx, &["--stop", "--all"]);
    let start = text
        .find("(blocked_workers::reports::render_pdf) · running on thread")
        .unwrap_or_else(|| panic!("{text}"));
    let end = text[start..].find("\n\n").map_or(text.len(), |e| start + e);
    let report = &text[start..end];
    assert!(
        report.contains(
            "  running its own code (held stopped outside any system call) ← blocked_workers::reports::spin at "
        ),
        "{report}"
    );
    // Without --stop its stack moves: the thread is running, unread.
    let live = crate::support::asyncdump_ok(&["dump", &fx.pid.to_string(), "--threads"]);
    assert!(
        live.contains(" · running (its stack was not read: run with --stop)"),
        "{live}"
    );
}
