//! `asyncdump dump` text output on each fixture.

use crate::support::{Fixture, asyncdump, asyncdump_ok, at_line, section, site};

/// Frame lines (`name at file:line:col`), with the indentation that shows depth.
fn frame_lines(section: &[String]) -> Vec<String> {
    section
        .iter()
        .filter(|l| l.contains(" at ") && !l.starts_with("  spawned ") && !l.contains("awaited by"))
        .cloned()
        .collect()
}

/// The frame lines a chain must print, root first, each indented one level deeper: per step, the frame name,
/// a snippet of the fixture's source that locates it, and the part of the snippet the location points at.
fn expect_chain(fixture: &str, steps: &[(&str, &str, &str)]) -> Vec<String> {
    steps
        .iter()
        .enumerate()
        .map(|(depth, (name, needle, at))| {
            format!(
                "{}{name} at {}",
                "  ".repeat(depth + 1),
                site(fixture, needle, at)
            )
        })
        .collect()
}

#[test]
fn depth_chain_10_prints_ten_annotated_frames_root_first_then_the_leaf() {
    let fx = Fixture::start("depth_chain", &["--depth", "10"]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode"]);
    assert!(
        text.starts_with(&format!("pid {} (depth_chain)", fx.pid)),
        "{text}"
    );
    assert!(
        text.contains("1 task: 1 idle, 0 running, 0 completed"),
        "{text}"
    );
    let s = section(&text, "task 1 \"depth-chain\"");
    assert!(
        s[0].starts_with("task 1 \"depth-chain\" · idle · suspended "),
        "{}",
        s[0]
    );
    assert!(s[0].contains("· polls 1 ·"), "{}", s[0]);
    let spawn = site(
        "depth_chain",
        "asyncdump_agent::spawn_named(\"depth-chain\"",
        "asyncdump_agent",
    );
    assert!(s[1].starts_with("  spawned "), "{}", s[1]);
    assert!(
        s[1].contains("depth_chain::descend"),
        "the root future type: {}",
        s[1]
    );
    assert!(
        s[1].contains(&format!(" ago at {spawn} · root ")),
        "{}",
        s[1]
    );
    let descend = site("depth_chain", "async fn descend", "descend");
    let mut expected: Vec<String> = (1..=10)
        .map(|depth| format!("{}depth_chain::descend at {descend}", "  ".repeat(depth)))
        .collect();
    let leaf = site("depth_chain", "rx.frame(\"oneshot::Receiver\")", "frame");
    expected.push(format!("{}oneshot::Receiver at {leaf}", "  ".repeat(11)));
    assert_eq!(frame_lines(&s), expected);
    // tokio's oneshot keeps the waker it is given: that clone is the delegate.
    assert!(
        s.last()
            .unwrap()
            .starts_with("  delegate: waker kept by a leaf (1 clone) for "),
        "{s:?}"
    );
}

#[test]
fn depth_is_what_was_asked_for() {
    let fx = Fixture::start("depth_chain", &["--depth", "3"]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert_eq!(frame_lines(&section(&text, "task 1")).len(), 4);
}

#[test]
fn fan_out_coalesces_into_one_group_of_16() {
    let fx = Fixture::start("fan_out", &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode", "--coalesce"]);
    let groups: Vec<&str> = text.lines().filter(|l| l.starts_with('×')).collect();
    assert_eq!(groups.len(), 1, "{text}");
    assert!(
        groups[0].starts_with("×16 tasks 1–16 · idle · suspended "),
        "{}",
        groups[0]
    );
    let s = section(&text, "×16");
    assert_eq!(
        frame_lines(&s),
        expect_chain(
            "fan_out",
            &[
                (
                    "fan_out::handle_request",
                    "async fn handle_request",
                    "handle_request"
                ),
                ("fan_out::fetch_row", "async fn fetch_row", "fetch_row"),
                ("oneshot::Receiver", "rx.frame(", "frame"),
            ]
        )
    );
    // Without --coalesce every task prints.
    let full = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode"]);
    assert_eq!(full.lines().filter(|l| l.starts_with("task ")).count(), 16);
}

#[test]
fn channel_wait_ends_in_the_mpsc_receive() {
    let fx = Fixture::start("channel_wait", &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode"]);
    let s = section(&text, "task 1 \"consumer\"");
    assert_eq!(
        frame_lines(&s),
        expect_chain(
            "channel_wait",
            &[
                ("channel_wait::consume", "async fn consume", "consume"),
                (
                    "channel_wait::next_message",
                    "async fn next_message",
                    "next_message"
                ),
                ("mpsc::Receiver::recv", "rx.recv().frame(", "frame"),
            ]
        )
    );
}

#[test]
fn join_wait_shows_the_edge_from_the_awaiting_frame_to_the_awaited_task() {
    let fx = Fixture::start("join_wait", &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode"]);
    let worker = section(&text, "task 1 \"worker\"");
    assert_eq!(
        worker[2],
        "  awaited by task 2 \"supervisor\" at join_wait::supervise → join_wait::wait_for_worker"
    );
    assert_eq!(frame_lines(&worker).len(), 2);
    let sup = section(&text, "task 2 \"supervisor\"");
    let wait = site("join_wait", "async fn wait_for_worker", "wait_for_worker");
    let i = sup
        .iter()
        .position(|l| l == &format!("    join_wait::wait_for_worker at {wait}"))
        .expect("frame");
    assert_eq!(sup[i + 1], "      → awaits task 1 \"worker\"");
    assert!(!text.contains("DEADLOCK"));
}

#[test]
fn deadlock_reports_the_cycle_and_still_prints_every_chain() {
    let fx = Fixture::start("deadlock", &[]);
    let out = asyncdump(&["dump", &fx.pid.to_string(), "--no-decode"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("DEADLOCK cycle: task 1 → task 2 → task 1\n"),
        "{text}"
    );
    assert!(
        text.contains("  task 1 \"left\" awaits task 2 \"right\" awaits task 1 \"left\"\n"),
        "{text}"
    );
    let join = site("deadlock", "async fn join_peer", "join_peer");
    for (me, peer) in [("1 \"left\"", "2 \"right\""), ("2 \"right\"", "1 \"left\"")] {
        let s = section(&text, &format!("task {me}"));
        assert!(
            s.contains(&format!("    deadlock::join_peer at {join}")),
            "{s:?}"
        );
        assert!(s.contains(&format!("      → awaits task {peer}")), "{s:?}");
        assert!(s.iter().any(|l| l.starts_with(&format!(
            "  awaited by task {peer} at deadlock::wait_for_peer"
        ))));
    }
}

#[test]
fn custom_notifier_has_a_delegate_and_a_silent_leaf_has_none_yet_a_complete_chain() {
    let fx = Fixture::start("custom_notifier", &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-decode"]);
    let notified = section(&text, "task 1 \"notified\"");
    assert!(
        notified
            .last()
            .unwrap()
            .starts_with("  delegate: waker kept by a leaf (1 clone) for ")
    );
    let silent = section(&text, "task 2 \"silent\"");
    assert_eq!(silent.last().unwrap(), "  delegate: none");
    assert_eq!(
        frame_lines(&silent),
        expect_chain(
            "custom_notifier",
            &[
                (
                    "custom_notifier::wait_silently",
                    "async fn wait_silently",
                    "wait_silently"
                ),
                ("Silent", "Silent.frame(", "frame"),
            ]
        )
    );
}

#[test]
fn filters_by_frame_name_age_and_state() {
    let fx = Fixture::start("yield_loop", &[]);
    let pid = fx.pid.to_string();
    let default = asyncdump_ok(&["dump", &pid]);
    assert!(
        !default.contains("\"spinner\" · running"),
        "running tasks are hidden by default"
    );
    let typed = asyncdump_ok(&["dump", &pid, "--type", "idle_worker"]);
    assert_eq!(
        typed.lines().filter(|l| l.starts_with("task ")).count(),
        2,
        "{typed}"
    );
    let none = asyncdump_ok(&["dump", &pid, "--type", "no_such_frame"]);
    assert!(none.contains("showing 0 of"), "{none}");
    let aged = asyncdump_ok(&["dump", &pid, "--min-age", "1h"]);
    assert!(aged.contains("showing 0 of"), "{aged}");
    let all = asyncdump_ok(&["dump", &pid, "--all", "--type", "spin"]);
    assert!(
        all.contains("task 1 \"spinner\""),
        "--all shows the busy task: {all}"
    );
}

#[test]
fn demo_starts_a_fixture_and_dumps_it() {
    let text = asyncdump_ok(&["demo"]);
    assert!(
        text.starts_with("asyncdump demo: started the bundled fixture `demo_service`"),
        "{text}"
    );
    assert!(
        text.contains("DEADLOCK cycle: task 6 → task 7 → task 6"),
        "{text}"
    );
    assert!(
        text.contains("        oneshot::Receiver<String> at fixtures/src/bin/demo_service.rs:"),
        "{text}"
    );
}

#[test]
fn a_process_whose_every_worker_is_blocked_still_answers() {
    let fx = Fixture::start("wedged", &[]);
    let start = std::time::Instant::now();
    asyncdump_ok(&["dump", &fx.pid.to_string(), "--all", "--no-decode"]);
    let answered = start.elapsed();
    assert!(answered < std::time::Duration::from_secs(1), "{answered:?}");
    // Decoded too: tokio's task list is read with every worker inside a poll.
    let doc = crate::support::dump_json(fx.pid, &["--all"]);
    let rtt = doc["snapshot"]["round_trip_ns"].as_u64().unwrap();
    assert!(rtt < 1_000_000_000, "the agent answered in {rtt} ns");
    assert_eq!(doc["runtimes"][0]["listed"], 3, "{}", doc["runtimes"]);
    let tasks = crate::support::tasks_of(&doc);
    assert_eq!(
        tasks.len(),
        3,
        "each blocked task once, known by the waker it was polled with, not again as tokio's"
    );
    let blocked: Vec<_> = tasks.iter().filter(|t| t["name"] == "blocked").collect();
    assert_eq!(blocked.len(), 2);
    for t in &blocked {
        assert_eq!(t["state"], "running", "{t}");
        assert!(
            t["thread"]["name"].as_str().unwrap().starts_with("tokio-"),
            "a runtime worker: {t}"
        );
        assert!(t["thread"]["tid"].as_u64().unwrap() > 0);
        assert_eq!(t["capture"]["kind"], "unavailable", "never seen idle: {t}");
    }
    let waiting = tasks.iter().find(|t| t["name"] == "waiting").unwrap();
    assert_eq!(waiting["state"], "idle");
    assert_eq!(waiting["frames"][0]["name"], "wedged::waiting_handler");
    assert_eq!(
        waiting["frames"][0]["children"][0]["name"],
        "oneshot::Receiver"
    );
    // The text view says the same in words.
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--all"]);
    assert!(
        text.contains("\"blocked\" · running on thread tokio-"),
        "{text}"
    );
    assert!(
        text.contains("frames unavailable: the task was running throughout this snapshot"),
        "{text}"
    );
}

#[test]
fn a_reader_that_leaves_early_ends_the_dump_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    // 5,000 tasks print far more than a pipe holds, so the dump is still writing when the reader goes.
    let fx = Fixture::start("many_tasks", &["--tasks", "5000"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_asyncdump"))
        .args(["dump", &fx.pid.to_string(), "--no-decode"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(
        first.starts_with(&format!("pid {} (many_tasks)", fx.pid)),
        "{first}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "like `| head`: {:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `--stats`: the overview before the detail. The no-agent fixture's five suspended tasks, counted
/// by what they wait on, by root, by the await in its own code, and by age; the JSON document has
/// the same counts and no tasks, and a file of it is not taken for a dump.
#[test]
fn stats_count_the_suspended_tasks_by_leaf_root_await_and_age() {
    let fx = Fixture::start("no_agent", &[]);
    let pid = fx.pid.to_string();
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&["dump", &pid, "--stats"]);
        if text.contains("5 suspended tasks") {
            break;
        }
    }
    let leaves = text
        .split("by what each waits on (the leaf that matters):\n")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .unwrap_or_else(|| panic!("{text}"));
    let leaves: Vec<(usize, &str)> = leaves
        .lines()
        .map(|l| {
            let (n, what) = l.trim_start().split_once("  ").unwrap();
            (n.parse().unwrap(), what)
        })
        .collect();
    assert_eq!(
        leaves,
        [
            (2, "tokio::sync::oneshot::Receiver"),
            (1, "tokio::sync::batch_semaphore::Acquire (Mutex)"),
            (1, "tokio::sync::notify::Notified (Notify)"),
            (1, "tokio::time::sleep::Sleep"),
        ]
    );
    // Without the wait targets, by the leaf's type alone.
    let bare = asyncdump_ok(&["dump", &pid, "--stats", "--no-targets"]);
    assert!(
        bare.contains("        1  tokio::sync::batch_semaphore::Acquire\n"),
        "{bare}"
    );
    let query = at_line("no_agent", "reply.await");
    assert!(
        text.contains(&format!("      1  {query}\n")),
        "{query}: {text}"
    );
    assert!(!text.contains("tokio task 3"), "no task detail: {text}");
    // Its lock is held by a task that sleeps, which is no cycle.
    assert!(
        text.contains("\nno deadlock or futurelock found\n\n5 suspended tasks"),
        "{text}"
    );
    let doc = crate::support::dump_json(fx.pid, &["--stats"]);
    assert!(doc.get("tasks").is_none());
    assert_eq!(doc["stats"]["suspended"], 5);
    assert_eq!(doc["stats"]["stuck"]["deadlocks"], 0);
    assert_eq!(doc["stats"]["by_root"].as_array().unwrap().len(), 5);
    // Read from outside once, nothing is known of how long they waited: said so, not zero.
    assert_eq!(doc["stats"]["ages"][0]["tasks"], 5);
    assert!(doc["stats"]["ages"][0]["to_ns"].is_null());
    let dir = crate::support::tempdir();
    let saved = dir.join("stats.json");
    asyncdump_ok(&["dump", &pid, "--stats", "-o", saved.to_str().unwrap()]);
    let out = asyncdump(&["dump", "--from", saved.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("was written with --stats"));
}
