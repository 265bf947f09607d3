//! Every task of a registered tokio runtime, spawned through the agent or not. `plain_tasks` calls
//! `init()` inside its runtime and spawns everything with plain tokio: the dump lists each task from the
//! runtime's own lists and decodes its chain from DWARF.

use serde_json::Value;

use crate::support::{Fixture, asyncdump_ok, at_line, dump_json, dump_until, has_root, line_of};

const TOKIO_ONLY: u64 = 1 << 62;

/// The task sections of a text dump: from each `task …`/`tokio task …` line to the blank line.
fn sections(text: &str) -> Vec<Vec<String>> {
    text.split("\n\n")
        .filter(|s| s.starts_with("task ") || s.starts_with("tokio task "))
        .map(|s| {
            (s.lines().filter(|l| !crate::support::is_verdict(l)))
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// The sections whose root is `plain_tasks::NAME`.
fn rooted<'a>(all: &'a [Vec<String>], name: &str) -> Vec<&'a Vec<String>> {
    let root = format!("plain_tasks::{name}");
    (all.iter())
        .filter(|s| s.get(1).is_some_and(|l| has_root(l, &root)))
        .collect()
}

/// The chain lines of a section: after the root line, without the edge and delegate lines.
fn chain(section: &[String]) -> Vec<String> {
    section
        .iter()
        .skip(2)
        .filter(|l| !l.starts_with("  awaited by ") && !l.starts_with("  delegate"))
        .filter(|l| !l.trim_start().starts_with("↳ "))
        .cloned()
        .collect()
}

/// `tokio task N`, from a section's first line.
fn label(section: &[String]) -> String {
    // Up to the name derived from its chain, as edges name it.
    let first = &section[0];
    let label = &first[..first.find(" · ").unwrap()];
    label.split(" (").next().unwrap().to_owned()
}

/// A decoded frame of `plain_tasks` at `depth`, at the first source line containing `needle`.
fn frame(depth: usize, name: &str, needle: &str) -> String {
    let at = at_line("plain_tasks", needle);
    format!(
        "{}plain_tasks::{name} at {at} [decoded]",
        "  ".repeat(depth)
    )
}

fn all_suspended(text: &str) -> bool {
    !text.contains("(not started;") && text.contains("runtime current_thread: 1 alive, 1 listed")
}

#[test]
fn every_plain_task_is_listed_with_its_chain_and_init_alone() {
    let fx = Fixture::start("plain_tasks", &[]);
    let text = dump_until(fx.pid, &[], all_suspended);
    assert!(
        text.contains("\nruntime multi_thread: 11 alive, 11 listed\n"),
        "{text}"
    );
    assert!(text.contains("\nruntime current_thread: 1 alive, 1 listed\n"));
    assert!(text.contains("\nLocalSet: 2 listed\n"), "{text}");
    let all = sections(&text);
    let signal = rooted(&all, "wait_signal");
    assert_eq!(signal.len(), 2, "{text}");
    for s in &signal {
        assert!(
            s[0].contains(" (plain_tasks::wait_signal) · idle"),
            "{}",
            s[0]
        );
        assert_eq!(
            chain(s),
            [
                frame(1, "wait_signal", "let _ = rx.await;"),
                "    awaiting tokio::sync::oneshot::Receiver<()>".into()
            ]
        );
        assert!(
            s.contains(
                &"  delegate (decoded): tokio::sync::oneshot::Receiver<()> holds this task's waker"
                    .into()
            ),
            "tokio's own waker names the task: {s:?}"
        );
        assert!(
            !s.iter()
                .any(|l| l.contains("polls") || l.contains("delegate: none"))
        );
    }
    let lock = rooted(&all, "hold_lock");
    let lock_chain = chain(lock[0]);
    assert_eq!(lock_chain[0], frame(1, "hold_lock", "lock.lock().await"));
    assert!(
        lock_chain
            .last()
            .unwrap()
            .ends_with("awaiting tokio::sync::batch_semaphore::Acquire"),
        "{lock_chain:?}"
    );
    let members = rooted(&all, "join_set_member");
    assert_eq!(members.len(), 3, "every JoinSet task");
    // Each member's join waker is its set entry's; the set's own waker names the task draining it.
    let drain = rooted(&all, "drain");
    let drain_task = label(drain[0]);
    let mut member_labels = Vec::new();
    for s in members {
        assert_eq!(
            s[2],
            format!(
                "  awaited by {drain_task} at plain_tasks::drain → tokio::task::join_set::JoinSet::join_next<()>"
            )
        );
        assert_eq!(
            chain(s),
            [
                frame(1, "join_set_member", "sleep(Duration::from_secs(3600 + n))"),
                "    awaiting tokio::time::sleep::Sleep".into()
            ]
        );
        member_labels.push(label(s));
    }
    // ... and the draining task's `join_next` frame points at each member.
    let drain_chain = chain(drain[0]);
    assert_eq!(drain_chain[0], frame(1, "drain", "set.join_next().await"));
    assert!(
        drain_chain[1].starts_with("    tokio::task::join_set::JoinSet::join_next<()> at "),
        "{drain_chain:?}"
    );
    let awaits: Vec<String> = member_labels
        .iter()
        .map(|m| format!("      → awaits {m}"))
        .collect();
    assert_eq!(drain_chain[2..5], awaits[..], "{drain_chain:?}");
    // A registered LocalSet's `spawn_local` tasks, with the edge through a plain JoinHandle.
    let waiter = rooted(&all, "local_waiter");
    let joiner = rooted(&all, "local_joiner");
    assert_eq!(
        waiter[0][2],
        format!(
            "  awaited by {} at plain_tasks::local_joiner",
            label(joiner[0])
        )
    );
    assert_eq!(
        chain(waiter[0]),
        [
            frame(1, "local_waiter", "rx.await.map(|()| shared)"),
            "    awaiting tokio::sync::oneshot::Receiver<()>".into()
        ]
    );
    assert_eq!(
        chain(joiner[0])[1..],
        [
            "    awaiting tokio::task::JoinHandle<()>".to_owned(),
            format!("      → awaits {}", label(waiter[0])),
        ]
    );
    let second = rooted(&all, "on_second_runtime");
    let await_line = line_of("plain_tasks", "async fn on_second_runtime") + 1;
    assert_eq!(
        chain(second[0]),
        [
            format!(
                "  plain_tasks::on_second_runtime at fixtures/src/bin/plain_tasks.rs:{await_line} [decoded]"
            ),
            "    awaiting tokio::sync::oneshot::Receiver<()>".into()
        ]
    );
}

#[test]
fn plain_join_handles_are_edges_and_their_cycle_a_deadlock() {
    let fx = Fixture::start("plain_tasks", &[]);
    let text = dump_until(fx.pid, &[], all_suspended);
    let all = sections(&text);
    let supervisor = rooted(&all, "supervise")[0];
    let worker = rooted(&all, "wait_signal")
        .into_iter()
        .find(|s| s[2].starts_with("  awaited by "))
        .expect("the supervised worker");
    assert_eq!(
        worker[2],
        format!(
            "  awaited by {} at plain_tasks::supervise",
            label(supervisor)
        )
    );
    assert_eq!(
        chain(supervisor),
        [
            frame(1, "supervise", "worker.await"),
            "    awaiting tokio::task::JoinHandle<()>".into(),
            format!("      → awaits {}", label(worker)),
        ]
    );
    let peers = rooted(&all, "wait_for_peer");
    assert_eq!(peers.len(), 2);
    let (a, b) = (label(peers[0]), label(peers[1]));
    assert!(
        text.contains(&format!("DEADLOCK cycle: {a} → {b} → {a}\n")),
        "{text}"
    );
    for (me, other) in [(peers[0], &b), (peers[1], &a)] {
        assert_eq!(
            me[2],
            format!("  awaited by {other} at plain_tasks::wait_for_peer → plain_tasks::join_peer")
        );
        assert_eq!(
            chain(me),
            [
                frame(1, "wait_for_peer", "join_peer(peer).await"),
                frame(2, "join_peer", "let _ = peer.await"),
                "      awaiting tokio::task::JoinHandle<()>".into(),
                format!("        → awaits {other}"),
            ]
        );
    }
}

#[test]
fn a_task_busy_in_its_poll_shows_as_running() {
    let fx = Fixture::start("plain_tasks", &[]);
    let text = dump_until(fx.pid, &["--all"], all_suspended);
    let all = sections(&text);
    let busy = rooted(&all, "busy");
    assert_eq!(busy.len(), 1, "{text}");
    // Its worker, read in the system call the busy poll makes, names the thread it runs on.
    let state = busy[0][0].split(" · ").nth(1).unwrap_or("");
    assert!(
        state == "running" || state.starts_with("running on thread "),
        "{}",
        busy[0][0]
    );
    assert_eq!(
        busy[0][2],
        "  frames unavailable: the task was running throughout this snapshot"
    );
    let default = dump_until(fx.pid, &[], all_suspended);
    assert!(
        rooted(&sections(&default), "busy").is_empty(),
        "suspended tasks only by default"
    );
}

#[test]
fn the_json_document_says_what_only_the_agent_knows_is_unknown() {
    let fx = Fixture::start("plain_tasks", &[]);
    dump_until(fx.pid, &[], all_suspended);
    let doc = dump_json(fx.pid, &["--all"]);
    let runtimes = doc["runtimes"].as_array().unwrap();
    let flavors: Vec<&str> = runtimes
        .iter()
        .map(|r| r["flavor"].as_str().unwrap())
        .collect();
    assert_eq!(flavors, ["multi_thread", "current_thread", "local_set"]);
    assert_eq!(runtimes[0]["listed"], 11);
    assert_eq!(runtimes[0]["skipped"], 0);
    let tasks = crate::support::tasks_of(&doc);
    assert_eq!(tasks.len(), 14);
    let mut tokio_ids: Vec<u64> = tasks
        .iter()
        .map(|t| t["tokio_id"].as_u64().unwrap())
        .collect();
    tokio_ids.sort_unstable();
    tokio_ids.dedup();
    assert_eq!(tokio_ids.len(), 14, "one task each");
    for t in &tasks {
        assert_eq!(
            t["id"].as_u64(),
            t["tokio_id"].as_u64().map(|id| id | TOKIO_ONLY)
        );
        for unknown in [
            "agent_id",
            "name",
            "polls",
            "busy_ns",
            "wakes",
            "spawned_at",
            "state_age_ns",
        ] {
            assert_eq!(t[unknown], Value::Null, "{unknown} of {t}");
        }
        assert!(
            t["root_type"]
                .as_str()
                .unwrap()
                .starts_with("plain_tasks::")
        );
    }
    let cycle: Vec<u64> = doc["deadlocks"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let peers: Vec<u64> = tasks
        .iter()
        .filter(|t| t["root_type"] == "plain_tasks::wait_for_peer::{async_fn_env#0}")
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert_eq!(cycle.len(), 2);
    assert!(
        cycle.iter().all(|id| peers.contains(id)),
        "{cycle:?} {peers:?}"
    );
}

#[test]
fn dumps_under_a_churn_of_a_thousand_tasks_a_second_list_only_real_tasks() {
    let mut fx = Fixture::start("plain_tasks", &["--churn", "1000"]);
    let mut skipped = 0;
    let mut listed = 0;
    for _ in 0..15 {
        let doc = dump_json(fx.pid, &["--all"]);
        for t in crate::support::tasks_of(&doc) {
            let root = t["root_type"].as_str().unwrap();
            assert!(root.starts_with("plain_tasks::"), "a garbage task: {t}");
            assert!(t["tokio_id"].as_u64().is_some_and(|id| id > 0));
        }
        for r in doc["runtimes"].as_array().unwrap() {
            skipped += r["skipped"].as_u64().expect("skipped is counted");
            listed += r["listed"].as_u64().unwrap();
        }
    }
    assert!(
        listed > 15 * 11,
        "short-lived tasks are listed too ({listed})"
    );
    eprintln!("under churn: {listed} tasks listed, {skipped} skipped in 15 dumps");
    assert!(fx.is_alive(), "the host survived");
}

#[test]
fn the_demo_shows_a_library_spawned_task() {
    let out = asyncdump_ok(&["demo"]);
    let all = sections(&out);
    let flush = all
        .iter()
        .find(|s| has_root(&s[1], "demo_service::flush_metrics"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(flush[0].starts_with("tokio task "), "{}", flush[0]);
    let at = at_line("demo_service", "tick.tick().await");
    assert_eq!(
        flush[2],
        format!("  demo_service::flush_metrics at {at} [decoded]")
    );
    // The agent's own tasks are listed by the runtime too, and shown once each, with tokio's id.
    let agent: Vec<_> = all.iter().filter(|s| s[0].starts_with("task ")).collect();
    assert_eq!(agent.len(), 7, "{out}");
    assert!(agent.iter().all(|s| s[1].contains(" · tokio task ")));
}

/// A tokio built without `rt-multi-thread`, as actix-rt builds it: its runtime handle is an enum of
/// one variant, which keeps no discriminant. Before, the runtime was "not listed: tokio's runtime
/// Handle has an unknown layout" and the dump showed 0 tasks; now every task is listed and decoded,
/// as many as tokio counts.
#[test]
fn a_tokio_without_the_multi_thread_scheduler_is_listed_and_decoded() {
    let bin = crate::support::current_thread_only_bin();
    let fx = Fixture::start_path(&bin, &[], &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert!(
        text.contains("runtime current_thread: 2 alive, 2 listed"),
        "{text}"
    );
    assert!(text.contains("2 tasks: 2 idle"), "{text}");
    let krate = "asyncdump_fixture_current_thread_only";
    for (root, leaf) in [
        (
            "wait_for_reply",
            "awaiting tokio::sync::oneshot::Receiver<u32>",
        ),
        ("poll_queue", "awaiting tokio::time::sleep::Sleep"),
    ] {
        let section = text
            .split("\n\n")
            .find(|s| has_root(s, &format!("{krate}::{root}")))
            .unwrap_or_else(|| panic!("a task rooted at {root}:\n{text}"));
        assert!(
            section.contains(&format!("  {krate}::{root} at src/main.rs:")),
            "{section}"
        );
        assert!(section.contains(leaf), "{section}");
    }
}

/// `init()` runs first, outside any runtime, and every runtime comes after it on threads of its own,
/// as a library makes them: nothing is registered. The census finds each runtime and the `LocalSet`
/// from their tasks, each listed with as many tasks as tokio counts, and each chain is decoded to its
/// await line. Before, the dump had no runtime and no task.
#[test]
fn runtimes_and_a_local_set_nobody_registered_are_found_by_the_census() {
    let fx = Fixture::start("unregistered", &[]);
    let text = dump_until(fx.pid, &[], |t| t.contains("4 tasks: 4 idle"));
    // tokio's own counts, as the fixture read them: one live task per runtime.
    let alive: Vec<&str> = fx.said.iter().map(String::as_str).collect();
    assert_eq!(
        alive,
        ["alive first 1", "alive second 1", "alive current 1"]
    );
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(found by census)"))
        .collect();
    assert_eq!(
        found,
        [
            "runtime multi_thread (found by census): 1 alive, 1 listed",
            "runtime multi_thread (found by census): 1 alive, 1 listed",
            "runtime current_thread (found by census): 1 alive, 1 listed",
            "LocalSet (found by census): 1 listed",
        ],
        "{text}"
    );
    assert!(text.contains(", 4 unregistered task lists found"), "{text}");
    for name in [
        "on_first_runtime",
        "on_second_runtime",
        "on_current_thread",
        "on_local_set",
    ] {
        let section = text
            .split("\n\n")
            .find(|s| has_root(s, &format!("unregistered::{name}")))
            .unwrap_or_else(|| panic!("a task rooted at {name}:\n{text}"));
        let line = line_of("unregistered", &format!("async fn {name}")) + 1;
        let line = match name {
            "on_local_set" => line + 1,
            _ => line,
        };
        let at =
            format!("  unregistered::{name} at fixtures/src/bin/unregistered.rs:{line} [decoded]");
        assert!(section.contains(&at), "{at}\n{section}");
        assert!(
            section.contains("    awaiting tokio::sync::oneshot::Receiver<()>"),
            "{section}"
        );
    }
    // The JSON document says how each runtime was found, and what the census covered.
    let doc = dump_json(fx.pid, &[]);
    let runtimes = doc["runtimes"].as_array().expect("runtimes");
    assert_eq!(runtimes.len(), 4);
    assert!(runtimes.iter().all(|r| r["found_by"] == "census"), "{doc}");
    let census = &doc["census"];
    assert_eq!(census["found"], 4, "{census}");
    assert_eq!(census["cut"], false);
    assert!(census["scanned_bytes"].as_u64() > Some(0));
    // A scan serves the requests that follow it for 10 s: of two dumps in a row, one at least lists
    // what an earlier scan found, and says how old it is.
    let again = dump_json(fx.pid, &[]);
    let ages = [&doc, &again].map(|d| d["census"]["age_ns"].as_u64().expect("an age"));
    assert!(ages.iter().any(|&a| a > 0), "{ages:?}");
}

/// An actix-web 4 service as its users write one, `init()` alone at the start of `main`: actix runs
/// each worker on a current-thread runtime inside a `LocalSet` of its own, made later on threads of
/// its own, with a tokio built without the multi-thread scheduler. Four requests hang in their
/// handlers; each handler is reached from its connection's task through actix's service layers and
/// boxed futures, down to what it awaits. Before: "runtime tokio: 0 alive, not listed", 0 tasks.
#[test]
fn an_actix_web_service_shows_every_hanging_handler_with_init_alone() {
    use std::io::Write;
    let fx = Fixture::start_path(&crate::support::actix_service_bin(), &[], &[]);
    let port: u16 = fx.said[0]
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .expect("the fixture says its port");
    let paths = ["sleep", "lock", "reply", "upstream"];
    let _requests: Vec<std::net::TcpStream> = paths
        .iter()
        .map(|path| {
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            write!(conn, "GET /{path} HTTP/1.1\r\nhost: fixture\r\n\r\n").expect("send");
            conn
        })
        .collect();
    let krate = "asyncdump_fixture_actix_service";
    // Each handler, the await it hangs at, and what that awaits.
    let handlers = [
        ("sleepy", "sleep(", "awaiting tokio::time::sleep::Sleep"),
        (
            "locked",
            "lock.lock()",
            "awaiting tokio::sync::batch_semaphore::Acquire",
        ),
        (
            "waiting_for_reply",
            "rx.await",
            "awaiting tokio::sync::oneshot::Receiver<u32>",
        ),
        (
            "fetch",
            "conn.read(",
            "awaiting tokio::io::util::read::Read<tokio::net::tcp::stream::TcpStream>",
        ),
    ];
    let text = dump_until(fx.pid, &[], |t| {
        handlers
            .iter()
            .all(|(name, _, _)| t.contains(&format!("{krate}::{name} at ")))
    });
    assert!(
        text.lines()
            .any(|l| l.starts_with("LocalSet (found by census): ")),
        "{text}"
    );
    let source = include_str!("../../fixtures/actix_service/src/main.rs");
    for (name, awaits, leaf) in handlers {
        let section = text
            .split("\n\n")
            .find(|s| s.contains(&format!("{krate}::{name} at ")))
            .unwrap_or_else(|| panic!("a chain through {name}:\n{text}"));
        assert!(
            section.contains("root actix_server::service::<StreamService as Service>::call"),
            "reached from the connection's task: {section}"
        );
        let line = 1 + source
            .lines()
            .position(|l| l.contains(awaits))
            .expect("the await is in the source");
        let at = format!("{krate}::{name} at src/main.rs:{line} [decoded]");
        let frame = section.lines().position(|l| l.trim_start() == at);
        let frame = frame.unwrap_or_else(|| panic!("{at}\n{section}"));
        let lines: Vec<&str> = section.lines().collect();
        let leaf_line = lines[frame + 1..]
            .iter()
            .find(|l| l.trim_start().starts_with("awaiting "))
            .expect("a leaf below the handler");
        assert_eq!(leaf_line.trim_start(), leaf, "{section}");
    }
}

/// A runtime the census found is shut down and dropped: the next dump, which serves the census's
/// lists again, neither shows it nor trips on its freed memory, and the others are as they were.
#[test]
fn a_runtime_dropped_after_the_census_found_it_is_gone_from_the_next_dump() {
    let fx = Fixture::start("unregistered", &["--drop-after", "8000"]);
    // From `ready` (the fixture builds first, the first time): the drop comes 8.2 s after it at most.
    let start = std::time::Instant::now();
    let found = |t: &str| {
        t.lines()
            .filter(|l| l.contains("(found by census)"))
            .count()
    };
    let before = dump_until(fx.pid, &[], |t| t.contains("5 tasks: 5 idle"));
    assert!(
        before.contains("root unregistered::on_doomed_runtime"),
        "{before}"
    );
    assert_eq!(found(&before), 5, "{before}");
    // A second more for the shutdown.
    std::thread::sleep(std::time::Duration::from_millis(9500).saturating_sub(start.elapsed()));
    let after = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert!(!after.contains("on_doomed_runtime"), "{after}");
    assert!(after.contains("4 tasks: 4 idle"), "{after}");
    assert_eq!(found(&after), 4, "{after}");
    assert!(
        after.contains(" ago)"),
        "the census's lists, served again: {after}"
    );
}

/// `spawn_blocking` closures run on the blocking pool, which no task list holds: the census finds
/// them, the one running and the one queued behind it (the pool has one thread), each once, each
/// named by where its closure was written, each awaited by the task holding its `JoinHandle`, the
/// running one with how long it has run at least. Before: the awaiting tasks ended at `JoinHandle<()>`
/// with no edge, and no blocking task was listed, even with `--all`.
#[test]
fn the_blocking_pools_tasks_are_found_running_and_queued_with_who_awaits_them() {
    let fx = Fixture::start("blocking", &[]);
    let text = dump_until(fx.pid, &["--all"], |t| {
        t.contains("blocking pool (found by census): 2 listed")
    });
    // Named by where the closure was written, running (no frames) or queued (walked) alike.
    let closure = "  root blocking_task in blocking::await_blocking";
    let pool: Vec<&str> = text
        .split("\n\n")
        .filter(|s| s.contains(&format!("{closure}\n")))
        .collect();
    assert_eq!(pool.len(), 2, "each closure once:\n{text}");
    let states: Vec<&str> = pool
        .iter()
        .map(|s| s.lines().next().unwrap().split(" · ").nth(1).unwrap_or(""))
        // The running one names the pool's thread it runs on (see `threads`).
        .map(|state| state.split(" on thread ").next().unwrap_or(state))
        .collect();
    assert!(
        states.contains(&"running") && states.contains(&"scheduled"),
        "one runs, one waits for the pool's thread: {states:?}"
    );
    for section in pool {
        let label = section
            .split(" · ")
            .next()
            .unwrap()
            .split(" (")
            .next()
            .unwrap();
        let awaiter = section
            .lines()
            .find_map(|l| l.strip_prefix("  awaited by "))
            .unwrap_or_else(|| panic!("awaited: {section}"));
        let awaiter = awaiter.split(" at ").next().unwrap();
        let awaiting = text
            .split("\n\n")
            .find(|s| s.starts_with(&format!("{awaiter} ")))
            .expect("the awaiting task is shown");
        assert!(
            has_root(awaiting, "blocking::await_blocking")
                && awaiting.contains(&format!("      → awaits {label}")),
            "{awaiting}"
        );
    }
    // How long the closure has run, at least: every listing remembers when it first saw each task
    // as it is, so a dump 1.5 s after one that saw it running says it has run for 1.5 s or more.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let doc = dump_json(fx.pid, &["--all"]);
    let running: Vec<&Value> = (doc["tasks"].as_array().unwrap().iter())
        .filter(|t| {
            t["state"] == "running" && t["root_type"] == closure.trim_start_matches("  root ")
        })
        .collect();
    let [running] = running[..] else {
        panic!("one closure runs: {doc}")
    };
    let ran = running["unchanged_ns"]
        .as_u64()
        .expect("seen running before");
    assert!(ran >= 1_500_000_000, "ran {ran} ns: {running}");
}
