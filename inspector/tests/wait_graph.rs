//! Who holds the lock a task waits for, and the cycles that makes: a two-mutex deadlock across two
//! tasks with both acquisition sites, and a futurelock (a `select!` branch kept unpolled while it
//! holds the lock its task then waits for); through the agent, without it, and from a core.

use crate::cores::gcore;
use crate::support::{Fixture, asyncdump_ok, at_line, dump_json, dump_until, tempdir};

/// The dump's report lines (`DEADLOCK`, `FUTURELOCK` and the lines under them), up to the first task.
fn report(text: &str) -> Vec<String> {
    (text.lines())
        .skip_while(|l| !l.starts_with("DEADLOCK") && !l.starts_with("FUTURELOCK"))
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What the lock cycle's report must say, whoever reads it: each task waits at the second lock for
/// the mutex the other took at the first.
fn assert_lock_cycle(text: &str) {
    let report = report(text);
    assert_eq!(report.len(), 3, "{text}");
    assert!(
        report[0].starts_with("DEADLOCK cycle: ") && report[0].matches(" → ").count() == 2,
        "{}",
        report[0]
    );
    let waits_at = at_line("lock_cycle", "let target = to.lock().await;");
    let taken_at = at_line("lock_cycle", "let mut source = from.lock().await;");
    for edge in &report[1..] {
        assert!(
            edge.contains(&format!(
                " waits in lock_cycle::transfer at {waits_at} for Mutex @ 0x"
            )),
            "{edge}"
        );
        assert!(
            edge.contains(&format!(
                "(`source` in lock_cycle::transfer, acquired at {taken_at})"
            )),
            "{edge}"
        );
    }
    // Two different mutexes, each held by the task the other waits on.
    let lock = |l: &str| l.split("Mutex @ ").nth(1).unwrap()[..14].to_owned();
    assert_ne!(lock(&report[1]), lock(&report[2]));
    let held = text
        .lines()
        .filter(|l| l.trim_start().starts_with("↳ holds Mutex @ "));
    assert_eq!(held.count(), 2, "{text}");
}

#[test]
fn two_tasks_taking_two_mutexes_in_opposite_orders_are_a_deadlock_with_both_sites() {
    let fx = Fixture::start("lock_cycle", &[]);
    let text = dump_until(fx.pid, &[], |t| t.contains("DEADLOCK"));
    assert_lock_cycle(&text);
    // The waiting leaf names its holder too.
    let leaf = (text.lines())
        .filter(|l| l.contains("↳ Mutex @ ") && l.contains(": locked, held by "))
        .count();
    assert_eq!(leaf, 2, "{text}");
}

#[test]
fn the_lock_cycle_reads_the_same_through_the_agent_and_from_a_core() {
    let fx = Fixture::start("lock_cycle", &["--agent"]);
    let live = dump_until(fx.pid, &[], |t| t.contains("DEADLOCK"));
    assert!(live.lines().next().unwrap().contains("· agent "), "{live}");
    assert_lock_cycle(&live);
    let dir = tempdir();
    let core = gcore(fx.pid, dir.as_path());
    let exe = crate::support::bin("lock_cycle");
    let from_core = asyncdump_ok(&[
        "dump",
        "--core",
        core.to_str().unwrap(),
        "--exe",
        exe.to_str().unwrap(),
    ]);
    assert!(from_core.contains("read from core file"), "{from_core}");
    assert_lock_cycle(&from_core);
}

#[test]
fn deadlocks_alike_are_told_once_in_full_then_named_a_line_each() {
    let fx = Fixture::start("lock_cycle", &["--pairs", "3"]);
    let text = dump_until(fx.pid, &[], |t| t.matches(" → ").count() >= 6);
    let report = report(&text);
    assert_eq!(report.len(), 6, "{text}");
    assert!(report[0].starts_with("DEADLOCK cycle: "), "{text}");
    assert!(
        report[1].contains(" waits in lock_cycle::transfer at "),
        "{text}"
    );
    assert!(
        report[2].contains(" waits in lock_cycle::transfer at "),
        "{text}"
    );
    assert_eq!(
        report[3],
        "  2 more cycles alike: the same waits for what is held, at the same places"
    );
    // Each cycle alike is a pair of tasks the dump shows, each holding what the other waits for.
    let mut cycles = vec![report[0].trim_start_matches("DEADLOCK cycle: ").to_owned()];
    cycles.extend(report[4..].iter().map(|l| l.trim_start().to_owned()));
    let mut tasks = Vec::new();
    for c in &cycles {
        let ids: Vec<&str> = c.split(" → ").collect();
        assert_eq!((ids.len(), ids[0]), (3, ids[2]), "{c}");
        for (me, other) in [(ids[0], ids[1]), (ids[1], ids[0])] {
            let section = text
                .split("\n\n")
                .find(|s| s.starts_with(&format!("{me} (")))
                .unwrap_or_else(|| panic!("{me}'s section: {text}"));
            assert!(
                section.contains(&format!("held by {other} (`source`")),
                "{section}"
            );
        }
        tasks.extend(ids[..2].iter().map(|s| s.to_string()));
    }
    tasks.sort();
    tasks.dedup();
    assert_eq!(tasks.len(), 6, "three pairs, each task in one: {cycles:?}");
    let doc = dump_json(fx.pid, &["--stats"]);
    let stuck = &doc["stats"]["stuck"];
    assert_eq!(
        (&stuck["deadlocks"], &stuck["deadlock_kinds"]),
        (&3.into(), &1.into()),
        "{stuck}"
    );
    assert_eq!(stuck["tasks_in_deadlocks"], 6, "{stuck}");
    assert_eq!(stuck["futurelocks"], 0, "{stuck}");
}

#[test]
fn without_wait_targets_no_lock_is_followed() {
    let fx = Fixture::start("lock_cycle", &[]);
    dump_until(fx.pid, &[], |t| t.contains("DEADLOCK"));
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--no-targets"]);
    assert!(!text.contains("DEADLOCK") && !text.contains("↳"), "{text}");
}

#[test]
fn a_select_branch_kept_unpolled_while_holding_the_lock_its_task_waits_for_is_a_futurelock() {
    let fx = Fixture::start("futurelock", &[]);
    let text = dump_until(fx.pid, &[], |t| t.contains("FUTURELOCK"));
    let report = report(&text);
    let waits_at = at_line("futurelock", "let entry = cache.lock().await;");
    let taken_at = at_line("futurelock", "let mut entry = cache.lock().await;");
    let stopped_at = at_line(
        "futurelock",
        "tokio::time::sleep(Duration::from_secs(3600))",
    );
    let holder = format!(
        "(`update` in futurelock::refresh, a future not polled (stopped at {stopped_at}), \
         acquired at {taken_at})"
    );
    // The refreshing task waits for itself: a cycle of one, named a futurelock.
    assert_eq!(report.len(), 3, "{text}");
    let me = report[0]
        .strip_prefix("DEADLOCK cycle: ")
        .and_then(|r| r.strip_suffix(" (a futurelock)"))
        .and_then(|r| r.split_once(" → "))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .unwrap_or_else(|| panic!("{}", report[0]));
    assert_eq!(me.0, me.1);
    assert!(
        report[1].starts_with(&format!(
            "  {} waits in futurelock::refresh at {waits_at} for Mutex @ 0x",
            me.0
        )),
        "{}",
        report[1]
    );
    assert!(
        report[1].ends_with(&format!("held by {} {holder}", me.0)),
        "{}",
        report[1]
    );
    // The reader queued behind it waits on the same unpolled future.
    let read_at = at_line("futurelock", "*cache.lock().await");
    assert!(
        report[2].starts_with("FUTURELOCK: ")
            && report[2].contains(&format!(
                " waits in futurelock::read at {read_at} for Mutex @"
            ))
            && report[2].ends_with(&format!("held by {} {holder}", me.0)),
        "{}",
        report[2]
    );
    // The overview counts both waits on the unpolled future, the one in the cycle too.
    let stats = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stats"]);
    let stuck = "DEADLOCK: 1 wait cycle of 1 kind, 1 task in them\n\
                 FUTURELOCK: 2 waits for a lock held in a future nobody polls\n\n";
    assert!(stats.contains(stuck), "{stats}");
}

#[test]
fn tasks_queued_alike_behind_an_unpolled_future_are_one_futurelock_and_their_tasks() {
    let fx = Fixture::start("futurelock", &["--readers", "3"]);
    let text = dump_until(fx.pid, &[], |t| t.contains("wait alike"));
    let report = report(&text);
    assert_eq!(report.len(), 4, "{text}");
    let read_at = at_line("futurelock", "*cache.lock().await");
    assert!(
        report[2].starts_with("FUTURELOCK: ")
            && report[2].contains(&format!(
                " waits in futurelock::read at {read_at} for Mutex @"
            )),
        "{text}"
    );
    // The other two readers, by their tokio ids, which follow the first's.
    let first: u64 = report[2]
        .strip_prefix("FUTURELOCK: tokio task ")
        .and_then(|r| r.split(' ').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("{}", report[2]));
    let others = format!(
        "  2 more tasks wait alike: tokio {}–{}",
        first + 1,
        first + 2
    );
    assert_eq!(report[3], others, "{text}");
    let stats = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stats"]);
    assert!(
        stats.contains("FUTURELOCK: 4 waits for a lock held in a future nobody polls\n"),
        "{stats}"
    );
}

#[test]
fn json_carries_the_wait_graph_and_what_each_frame_holds() {
    let fx = Fixture::start("futurelock", &["--agent"]);
    dump_until(fx.pid, &[], |t| t.contains("FUTURELOCK"));
    let doc = dump_json(fx.pid, &[]);
    let waits = doc["waits"].as_array().expect("waits");
    assert_eq!(waits.len(), 2, "{waits:#?}");
    for w in waits {
        assert_eq!(w["on"], "lock");
        let holder = &w["holder"];
        assert_eq!(holder["local"], "update");
        assert_eq!(holder["polled"], false);
        assert_eq!(holder["lock"], "Mutex");
        assert_eq!(holder["frame"], "futurelock::refresh");
        assert!(holder["stopped_at"]["line"].as_u64().unwrap() > 0);
    }
    let cycles = doc["deadlocks"].as_array().unwrap();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].as_array().unwrap().len(), 1);
    let refresh = &doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == cycles[0][0]);
    let frame = &refresh.expect("the refreshing task")["frames"][0];
    assert_eq!(frame["holds"][0]["local"], "update", "{frame:#}");
    // Locals read only to find guards are not shown without `-v`.
    assert!(frame.get("locals").is_none(), "{frame:#}");
}

/// The `channels` fixture's task of each root, by the root's name (`fill`, `stall`, ...): its label
/// as the dump prints it (`tokio task 3`).
fn tasks_by_root(text: &str) -> std::collections::HashMap<String, String> {
    (text.lines())
        .filter(|l| l.starts_with("tokio task ") || l.starts_with("task "))
        .filter_map(|l| {
            let (label, rest) = l.split_once(" (channels::")?;
            let root = rest.split(')').next()?;
            Some((root.to_owned(), label.to_owned()))
        })
        .collect()
}

/// The wait line under the leaf of task `label`'s section.
fn wait_line(text: &str, label: &str) -> String {
    let s = crate::support::section(text, &format!("{label} (channels::"));
    let line = s.iter().find(|l| l.trim_start().starts_with("↳ "));
    line.map_or_else(
        || panic!("no wait line in {s:#?}"),
        |l| l.trim_start()[4..].to_owned(),
    )
}

fn assert_channel_waits(text: &str) {
    let task = tasks_by_root(text);
    // A full channel whose receiver is held by a task that never reads it.
    let fill = wait_line(text, &task["fill"]);
    let held = format!(
        "receiver alive: {} (`rx` in channels::stall)",
        task["stall"]
    );
    assert!(fill.starts_with("channel @ 0x"), "{fill}");
    assert!(
        fill.ends_with(&format!(
            ": full, 1 of 1 queued, {held}, this task 1st of 1 waiting"
        )),
        "{fill}"
    );
    // A receive whose one sender sleeps in another task.
    let drain = wait_line(text, &task["drain"]);
    let sender = format!("1 sender alive: {} (`tx` in channels::idle)", task["idle"]);
    assert!(drain.starts_with("receiving from channel @ 0x"), "{drain}");
    assert!(drain.ends_with(&format!(": empty, {sender}")), "{drain}");
    // A send the receiver's drop woke, never polled since: its channel is closed.
    let late = wait_line(text, &task["late"]);
    assert!(late.ends_with(": closed, its receiver is gone"), "{late}");
    // The client waits for the server's reply; the server for room the client would make.
    let report = report(text);
    let (client, server) = (&task["client"], &task["server"]);
    // Two cycles of two edges each: this one, and the two `ask`s' below.
    assert_eq!(report.len(), 6, "{text}");
    let (a, b) = if client < server {
        (client, server)
    } else {
        (server, client)
    };
    assert!(
        report.contains(&format!("DEADLOCK cycle: {a} → {b} → {a}")),
        "{report:#?}"
    );
    let asks = at_line("channels", "let reply = replies.recv().await");
    let sends = at_line("channels", "if requests.send(2).await.is_ok()");
    let client_edge =
        format!("  {client} waits in channels::client at {asks} for a message on channel @ 0x");
    let server_edge =
        format!("  {server} waits in channels::server at {sends} for room in channel @ 0x");
    assert!(
        report[1..].iter().any(|l| l.starts_with(&client_edge)
            && l.ends_with(&format!(
                "a sender of it held by {server} (`replies` in channels::server)"
            ))),
        "{report:#?}"
    );
    assert!(
        report[1..].iter().any(|l| l.starts_with(&server_edge)
            && l.ends_with(&format!(
                "its receiver held by {client} (`requests` in channels::client)"
            ))),
        "{report:#?}"
    );
}

/// The two `ask` tasks each wait on a `oneshot` whose sender the other holds.
fn assert_oneshot_cycle(text: &str) {
    let asks: Vec<String> = (text.lines())
        .filter_map(|l| l.strip_suffix(" (channels::ask) · idle"))
        .map(str::to_owned)
        .collect();
    assert_eq!(asks.len(), 2, "{text}");
    let waits_at = at_line("channels", "let got = answer.await");
    for (me, other) in [(&asks[0], &asks[1]), (&asks[1], &asks[0])] {
        let edge = format!(
            "  {me} waits in channels::ask at {waits_at} for a value on a oneshot whose sender {other} holds"
        );
        assert!(report(text).contains(&edge), "{edge}\n{text}");
    }
}

#[test]
fn a_channel_wait_says_who_holds_its_other_end_and_channels_can_deadlock() {
    let fx = Fixture::start("channels", &[]);
    let text = dump_until(fx.pid, &[], |t| t.matches("DEADLOCK").count() == 2);
    assert_channel_waits(&text);
    assert_oneshot_cycle(&text);
}

#[test]
fn channel_waits_read_the_same_through_the_agent() {
    let fx = Fixture::start("channels", &["--agent"]);
    let text = dump_until(fx.pid, &[], |t| t.matches("DEADLOCK").count() == 2);
    assert!(text.lines().next().unwrap().contains("· agent "), "{text}");
    assert_channel_waits(&text);
    assert_oneshot_cycle(&text);
}

/// The `statics` fixture's two wait lines (addresses as `0x…`), in task order.
fn static_wait_lines(text: &str) -> Vec<String> {
    (text.lines())
        .filter_map(|l| l.trim_start().strip_prefix("↳ "))
        .map(|l| {
            let (head, rest) = l.split_once(" @ 0x").expect(l);
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_hexdigit());
            format!("{head} @ 0x…{rest}")
        })
        .collect()
}

const HELD_BY_STATICS: [&str; 6] = [
    "Mutex @ 0x…: locked, held by static statics::PARKED, this task 1st of 1 waiting",
    "receiving from channel @ 0x…: empty, 1 sender alive: static statics::FEED",
    "receiving from channel @ 0x…: empty, 1 sender alive: static statics::ONCE_FEED",
    "receiving from channel @ 0x…: empty, 1 sender alive: static statics::LAZY_FEED",
    "receiving from channel @ 0x…: empty, 1 sender alive: static statics::CELL_FEED",
    "Semaphore @ 0x…: 0 permits free, wants 1, held by static statics::LAZY_PERMIT, this task 1st of 1 waiting",
];

/// Behind a `std` `Mutex`, a `OnceLock` once set, a `lazy_static!` (named as declared), a
/// `once_cell` `OnceCell` once set and a `LazyLock` once forced; a `OnceLock` never set (`UNSET`)
/// holds nothing.
#[test]
fn a_lock_or_a_channel_end_parked_in_a_static_is_held_by_that_static() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("statics", args);
        let text = dump_until(fx.pid, &[], |t| t.matches("↳ ").count() == 6);
        assert_eq!(
            static_wait_lines(&text),
            HELD_BY_STATICS,
            "{args:?}\n{text}"
        );
        // No task holds them: no edge, no deadlock.
        assert!(!text.contains("DEADLOCK"), "{text}");
        assert!(
            !text.contains("UNSET"),
            "a OnceLock never set holds nothing\n{text}"
        );
        if args.is_empty() {
            let dir = tempdir();
            let core = gcore(fx.pid, dir.as_path());
            let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
            assert_eq!(static_wait_lines(&text), HELD_BY_STATICS, "core\n{text}");
        }
    }
    // JSON names the static and what it holds.
    let fx = Fixture::start("statics", &[]);
    dump_until(fx.pid, &[], |t| t.matches("↳ ").count() == 6);
    let doc = dump_json(fx.pid, &[]);
    let mut found = Vec::new();
    fn walk(frames: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for f in frames.as_array().unwrap() {
            for s in f["waits_on"]["statics"].as_array().into_iter().flatten() {
                let text = |k: &str| s[k].as_str().unwrap_or("").to_owned();
                out.push((text("static"), text("lock")));
            }
            walk(&f["children"], out);
        }
    }
    for t in doc["tasks"].as_array().unwrap() {
        walk(&t["frames"], &mut found);
    }
    let want = [
        ("statics::PARKED".to_owned(), "Mutex".to_owned()),
        ("statics::FEED".to_owned(), "channel sender".to_owned()),
        ("statics::ONCE_FEED".to_owned(), "channel sender".to_owned()),
        ("statics::LAZY_FEED".to_owned(), "channel sender".to_owned()),
        ("statics::CELL_FEED".to_owned(), "channel sender".to_owned()),
        ("statics::LAZY_PERMIT".to_owned(), "Semaphore".to_owned()),
    ];
    assert_eq!(found, want, "{doc}");
    assert!(
        doc["waits"].as_array().is_none_or(|w| w.is_empty()),
        "{doc}"
    );
}

/// As optimised code keeps them: a guard in a register (`rbx` on x86_64), a permit in pieces (its
/// semaphore in a register, its count a constant), a sender on the stack; the registers of the
/// frames that called found where their callees saved them. Live without stopping anything, with
/// every thread stopped, and from a core. A sender moved into the feeder's closure may still be
/// found where it was before: then the line says more were found than there can be.
#[test]
fn a_lock_a_permit_or_a_sender_kept_by_optimised_code_is_held_by_that_thread() {
    let exe = crate::support::optimised_bin("thread_holders");
    let fx = Fixture::start_path(&exe, &[], &[]);
    let check = |how: &str, text: &str| {
        let lines: Vec<String> = static_wait_lines(text)
            .iter()
            .map(|l| every_thread_as_n(l))
            .collect();
        assert_eq!(lines.len(), 3, "{how}\n{text}");
        assert_eq!(lines[..2], HELD_BY_THREADS[..2], "{how}\n{text}");
        let feeder = "thread N (`sender` in thread_holders::main::{async block#0}::{closure#2}, declared at fixtures/src/bin/thread_holders.rs:63)";
        let channel = &lines[2];
        assert!(
            channel.starts_with("receiving from channel @ 0x…: empty, 1 sender alive: ")
                && channel.contains(feeder),
            "{how}\n{text}"
        );
        if channel.matches("thread N").count() > 1 {
            assert!(
                channel.contains(" found for 1 alive: a local moved out of"),
                "{how}\n{text}"
            );
        }
    };
    let text = dump_until(fx.pid, &["--no-agent"], |t| {
        t.matches("held by thread").count() == 2
    });
    check("live", &text);
    let pid = fx.pid.to_string();
    check("stopped", &asyncdump_ok(&["dump", "--stop", &pid]));
    let dir = tempdir();
    let core = gcore(fx.pid, dir.as_path());
    check(
        "core",
        &asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]),
    );
}

/// A guard that optimised code keeps in a register across a bare system call, or while its thread
/// spins (`--spin`, never entering the kernel): no frame on the thread's stack saved that register,
/// and `/proc` gives the stack and instruction pointers only (of a running thread, nothing). With
/// every thread stopped, each one's registers are read, all of them, as a core keeps them: both
/// name the thread that holds the lock; a plain live read may not know it.
#[test]
fn a_lock_held_in_a_register_nothing_saved_is_found_where_the_threads_registers_are_read() {
    let exe = crate::support::optimised_bin("parked_holder");
    let held = "Mutex @ 0x…: locked, held by thread N (`guard` in parked_holder::main::{async block#0}::{closure#1}, declared at fixtures/src/bin/parked_holder.rs:58), this task 1st of 1 waiting";
    let outside = "Mutex @ 0x…: locked, held outside the tasks, this task 1st of 1 waiting";
    let lines = |text: &str| -> Vec<String> {
        (static_wait_lines(text).iter())
            .map(|l| every_thread_as_n(l))
            .collect()
    };
    for args in [&[][..], &["--spin"][..]] {
        let fx = Fixture::start_path(&exe, args, &[]);
        let pid = fx.pid.to_string();
        let live = dump_until(fx.pid, &["--no-agent"], |t| t.contains("↳ Mutex"));
        assert!(
            lines(&live) == [held] || lines(&live) == [outside],
            "{args:?} live\n{live}"
        );
        let stopped = asyncdump_ok(&["dump", "--stop", "--no-agent", &pid]);
        assert_eq!(lines(&stopped), [held], "{args:?} stopped\n{stopped}");
        assert!(stopped.contains(" \"parked\" ("), "{stopped}");
        let dir = tempdir();
        let core = gcore(fx.pid, dir.as_path());
        let from_core = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
        assert_eq!(lines(&from_core), [held], "{args:?} core\n{from_core}");
        // Let go: the process runs on, and its threads are traced by no one.
        let status = std::fs::read_to_string(format!("/proc/{}/status", fx.pid)).unwrap();
        assert!(status.contains("TracerPid:\t0\n"), "{status}");
    }
}

/// `line` with every thread named in it as `thread N`.
fn every_thread_as_n(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some((head, after)) = rest.split_once("thread ") {
        out.push_str(head);
        out.push_str("thread ");
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        rest = &after[digits..];
        if digits == 0 {
            continue;
        }
        out.push('N');
        if let Some(named) = rest.strip_prefix(" \"") {
            rest = &named[named.find('"').map_or(0, |i| i + 1)..];
        }
    }
    out.push_str(rest);
    out
}

/// The `thread_holders` fixture's wait lines, addresses as `0x…` and each thread as `thread N`;
/// and the thread ids named.
fn thread_wait_lines(text: &str) -> (Vec<String>, Vec<u32>) {
    let mut tids = Vec::new();
    let lines = static_wait_lines(text)
        .into_iter()
        .map(|l| {
            let Some((head, rest)) = l.split_once("thread ") else {
                return l;
            };
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            tids.push(rest[..digits].parse().expect(&l));
            let mut rest = &rest[digits..];
            // A live process's threads are named; a core keeps no names.
            if let Some(named) = rest.strip_prefix(" \"") {
                rest = &named[named.find('"').expect(&l) + 1..];
            }
            format!("{head}thread N{rest}")
        })
        .collect();
    (lines, tids)
}

const HELD_BY_THREADS: [&str; 3] = [
    "Mutex @ 0x…: locked, held by thread N (`guard` in thread_holders::main::{async block#0}::{closure#0}, declared at fixtures/src/bin/thread_holders.rs:43), this task 1st of 1 waiting",
    "Semaphore @ 0x…: 0 permits free, wants 1, held by thread N (`permit` in thread_holders::main::{async block#0}::{closure#1}, declared at fixtures/src/bin/thread_holders.rs:52), this task 1st of 1 waiting",
    "receiving from channel @ 0x…: empty, 1 sender alive: thread N (`sender` in thread_holders::main::{async block#0}::{closure#2}, declared at fixtures/src/bin/thread_holders.rs:63)",
];

#[test]
fn a_lock_a_permit_or_a_sender_kept_on_a_threads_stack_is_held_by_that_thread() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("thread_holders", args);
        let text = dump_until(fx.pid, &[], |t| t.matches("held by thread").count() == 2);
        let (lines, tids) = thread_wait_lines(&text);
        assert_eq!(lines, HELD_BY_THREADS, "{args:?}\n{text}");
        // Three threads of the fixture's own, two of them the blocking pool's.
        let task =
            |tid: u32| std::path::Path::new(&format!("/proc/{}/task/{tid}", fx.pid)).exists();
        assert!(
            tids.iter().all(|&t| task(t) && t != fx.pid),
            "{tids:?}\n{text}"
        );
        assert_eq!(
            tids.iter().collect::<std::collections::BTreeSet<_>>().len(),
            3
        );
        assert!(
            text.contains("thread") && text.contains(" \"feeder\" ("),
            "{text}"
        );
        // No task holds them: no edge, no deadlock.
        assert!(!text.contains("DEADLOCK"), "{text}");
        if args.is_empty() {
            let dir = tempdir();
            let core = gcore(fx.pid, dir.as_path());
            let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
            let (from_core, core_tids) = thread_wait_lines(&text);
            assert_eq!(from_core, HELD_BY_THREADS, "core\n{text}");
            assert_eq!(core_tids, tids, "core\n{text}");
        }
    }
    // JSON names the thread, its function and what it holds; without targets, no thread is read.
    let fx = Fixture::start("thread_holders", &[]);
    dump_until(fx.pid, &[], |t| t.matches("held by thread").count() == 2);
    let doc = dump_json(fx.pid, &[]);
    let mut found = Vec::new();
    fn walk(frames: &serde_json::Value, out: &mut Vec<(String, String, String)>) {
        for f in frames.as_array().unwrap() {
            for s in f["waits_on"]["threads"].as_array().into_iter().flatten() {
                assert!(s["tid"].as_u64().is_some_and(|t| t > 0), "{s}");
                let text = |k: &str| s[k].as_str().unwrap_or("").to_owned();
                out.push((text("thread"), text("local"), text("lock")));
            }
            walk(&f["children"], out);
        }
    }
    for t in doc["tasks"].as_array().unwrap() {
        walk(&t["frames"], &mut found);
    }
    let worker = "tokio-rt-worker".to_owned();
    let want = [
        (worker.clone(), "guard".to_owned(), "Mutex".to_owned()),
        (worker, "permit".to_owned(), "Semaphore".to_owned()),
        (
            "feeder".to_owned(),
            "sender".to_owned(),
            "channel sender".to_owned(),
        ),
    ];
    assert_eq!(found, want, "{doc}");
    let plain = asyncdump_ok(&["dump", "--no-targets", &fx.pid.to_string()]);
    assert!(
        !plain.contains("by thread") && !plain.contains(": thread"),
        "{plain}"
    );
    assert!(!plain.contains('↳'), "{plain}");
}
