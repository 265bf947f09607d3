//! Verdicts: why each waiting task waits, from the evidence the dump read, and the root causes
//! ranked atop. One fixture has a task per verdict the wait graph and the leaves give (`verdicts`);
//! `lock_cycle` and `blocked_workers` have the deadlocked and the woken-but-not-polled ones. Each
//! without the agent and through it, held stopped and from a core.

use serde_json::Value;

use crate::cores::gcore;
use crate::support::{Fixture, asyncdump_ok, dump_json, line_of, tasks_of, tempdir};

/// The verdicts fixture's tasks by the name their chain gives them, each with its verdict, once
/// every one has the verdict it settles at (its tasks may still be on their way when it is ready).
fn settled(fx: &Fixture, extra: &[&str]) -> Value {
    let mut doc = Value::Null;
    for _ in 0..100 {
        doc = dump_json(fx.pid, extra);
        let is = |name: &str| verdicts_of(&doc, name);
        let deaf = is("verdicts::deaf");
        let ready = is("verdicts::place_order") == ["blocked_behind"; 3]
            && (deaf == ["lost_wake_up"] || deaf == ["unknown"])
            && is("verdicts::read_reply") == ["outside"];
        if ready {
            return doc;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the verdicts never settled: {doc:#}");
}

fn named<'a>(doc: &'a Value, name: &str) -> Vec<&'a Value> {
    (tasks_of(doc).into_iter())
        .filter(|t| t["derived_name"] == name)
        .collect()
}

fn verdicts_of(doc: &Value, name: &str) -> Vec<String> {
    (named(doc, name).iter())
        .map(|t| t["verdict"]["is"].as_str().unwrap_or("none").to_owned())
        .collect()
}

fn id_of(doc: &Value, name: &str) -> u64 {
    named(doc, name)[0]["id"].as_u64().unwrap()
}

/// Every verdict the fixture has, with what it rests on; the root causes, the chain of holders
/// ended by the sleeping task first. Its notification lost is a lost wake-up where the dump read
/// it at `one_moment` with the task's state (held stopped, a core, every sample); else it may have
/// come after the state was read, and the dump says so.
fn assert_verdicts(doc: &Value, peer: bool, one_moment: bool) {
    let one = |name: &str| named(doc, name)[0]["verdict"].clone();
    assert_eq!(
        one("verdicts::forgetful"),
        serde_json::json!({"is": "nothing_can_wake", "by": {"kind": "tokio_refs"}})
    );
    let deaf = one("verdicts::deaf");
    if one_moment {
        let lost = serde_json::json!({"is": "lost_wake_up", "ready": {"kind": "notified"}});
        assert_eq!(deaf, lost);
    } else {
        assert_eq!(
            (&deaf["is"], &deaf["why"], &deaf["ready"]["kind"]),
            (
                &"unknown".into(),
                &"ready_unconfirmed".into(),
                &"notified".into()
            ),
            "{deaf}"
        );
    }
    let sleeping = one("verdicts::reserve_stock");
    assert_eq!(
        (&sleeping["is"], &sleeping["on"]["kind"]),
        (&"outside".into(), &"sleep".into()),
        "{sleeping}"
    );
    // A core's clock does not place the deadline.
    if peer {
        let left = sleeping["on"]["left_ns"].as_u64().unwrap();
        assert!(
            (3_000..=3_600).contains(&(left / 1_000_000_000)),
            "{sleeping}"
        );
    }
    let (stock, cart) = (
        id_of(doc, "verdicts::reserve_stock"),
        id_of(doc, "verdicts::checkout"),
    );
    let checkout = one("verdicts::checkout");
    assert_eq!(
        (&checkout["is"], &checkout["hops"]),
        (&"blocked_behind".into(), &1.into())
    );
    assert_eq!(checkout["end"]["task"], stock);
    assert_eq!(
        checkout["end"]["doing"], sleeping,
        "the end does what its own verdict says"
    );
    for order in named(doc, "verdicts::place_order") {
        let v = &order["verdict"];
        assert_eq!(
            (&v["hops"], &v["through"]),
            (&2.into(), &serde_json::json!([cart])),
            "{v}"
        );
        assert_eq!(v["end"]["task"], stock, "{v}");
    }
    let reading = one("verdicts::read_reply");
    assert_eq!(reading["on"]["kind"], "socket", "{reading}");
    if peer {
        // Live, the socket's far end is the fixture's own silent listener.
        let local = reading["on"]["local"].as_str().unwrap();
        assert!(local.starts_with("127.0.0.1:"), "{reading}");
        assert!(
            reading["on"]["peer"]
                .as_str()
                .unwrap()
                .starts_with("127.0.0.1:")
        );
    }
    let first = &doc["causes"][0];
    assert_eq!(
        (&first["kind"], &first["end"]),
        (&"blocked_behind".into(), &stock.into())
    );
    assert_eq!(first["tasks"].as_array().unwrap().len(), 5, "{first}");
    let sleep_line = line_of("verdicts", "tokio::time::sleep(Duration::from_secs(3600))");
    assert_eq!(first["look_at"][0]["line"], sleep_line, "{first}");
    let kinds: Vec<&str> = (doc["causes"].as_array().unwrap().iter())
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    for kind in ["nothing_can_wake", "outside"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    assert_eq!(kinds.contains(&"lost_wake_up"), one_moment, "{kinds:?}");
}

#[test]
fn each_waiting_task_gets_the_verdict_its_evidence_supports_without_the_agent_and_through_it() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("verdicts", args);
        let doc = settled(&fx, &[]);
        let read_from = doc["process"]["read_from"].as_str().unwrap();
        assert_eq!(read_from == "agent", !args.is_empty(), "{args:?}");
        assert_verdicts(&doc, true, false);
        // Stuck in every sample, the notification lost is a lost wake-up.
        let sampled = dump_json(fx.pid, &["--samples", "2", "--interval", "200ms"]);
        assert_verdicts(&sampled, true, true);
    }
}

#[test]
fn held_stopped_and_from_a_core_the_verdicts_are_the_same() {
    let fx = Fixture::start("verdicts", &[]);
    let live = settled(&fx, &[]);
    let stopped = dump_json(fx.pid, &["--stop"]);
    assert_verdicts(&stopped, true, true);
    let dir = tempdir();
    let core = gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap(), "--json"]);
    let from_core: Value = serde_json::from_str(&text).unwrap();
    // A core has no `/proc` to say what its descriptors are: the socket is a descriptor only.
    assert_verdicts(&from_core, false, true);
    for name in ["verdicts::forgetful", "verdicts::place_order"] {
        assert_eq!(
            verdicts_of(&live, name),
            verdicts_of(&from_core, name),
            "{name}"
        );
    }
}

#[test]
fn the_text_says_each_verdict_under_its_title_and_the_root_causes_first() {
    let fx = Fixture::start("verdicts", &[]);
    let doc = settled(&fx, &[]);
    let stock = id_of(&doc, "verdicts::reserve_stock") & !(1 << 62);
    // Held stopped: the notification lost is told as the lost wake-up it is.
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stop"]);
    let causes: Vec<&str> = (text.lines())
        .skip_while(|l| !l.starts_with("ROOT CAUSES, worst first"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let sleep_line = line_of("verdicts", "tokio::time::sleep(Duration::from_secs(3600))");
    assert!(
        causes[0].starts_with(&format!(
            "  1. 4 tasks blocked behind tokio task {stock} (verdicts::reserve_stock), which sleeps "
        )) && causes[0].ends_with(&format!(" more · look at fixtures/src/bin/verdicts.rs:{sleep_line}")),
        "{text}"
    );
    let deaf_line = line_of("verdicts", "notify.notified().await");
    assert!(
        causes
            .iter()
            .any(|c| c.contains("1 task lost a wake-up: it was notified")
                && c.ends_with(&format!("look at fixtures/src/bin/verdicts.rs:{deaf_line}"))),
        "{causes:#?}"
    );
    // Under each waiting task's title, its verdict.
    let sections: Vec<&str> = text
        .split("\n\n")
        .filter(|s| s.starts_with("tokio task "))
        .collect();
    assert_eq!(sections.len(), 8, "{text}");
    for s in sections {
        let second = s.lines().nth(1).unwrap();
        assert!(second.starts_with("  verdict: "), "{s}");
        if s.contains("(verdicts::place_order)") {
            assert!(
                second.contains(&format!(
                    "blocked behind tokio task {stock} (verdicts::reserve_stock) (through tokio task "
                )),
                "{s}"
            );
        }
        if s.contains("(verdicts::forgetful)") {
            assert!(
                second.contains(
                    "nothing can wake it: tokio counts no reference to it but its list's and its JoinHandle's"
                ),
                "{s}"
            );
        }
        if s.contains("(verdicts::read_reply)") {
            assert!(
                second.contains("waiting on outside: reading from 127.0.0.1:"),
                "{s}"
            );
        }
    }
    // `--stats` lists the causes too, every one, and its JSON has them.
    let stats = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stats"]);
    let (first, _) = causes[0].split_once(", which sleeps ").unwrap();
    assert!(stats.contains(first), "{stats}");
    let doc = dump_json(fx.pid, &["--stats"]);
    assert_eq!(doc["causes"][0]["kind"], "blocked_behind", "{doc:#}");
}

#[test]
fn tasks_in_a_wait_cycle_are_deadlocked_and_the_cycle_is_the_first_cause() {
    // Without the agent, a cycle of locks; through it, of JoinHandles.
    for fixture in ["lock_cycle", "deadlock"] {
        let fx = Fixture::start(fixture, &[]);
        assert_deadlocked(&fx);
    }
}

fn assert_deadlocked(fx: &Fixture) {
    let mut doc = Value::Null;
    for _ in 0..50 {
        doc = dump_json(fx.pid, &[]);
        if !doc["deadlocks"].as_array().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cycle = doc["deadlocks"][0].clone();
    for id in cycle.as_array().unwrap() {
        let t = (tasks_of(&doc).into_iter())
            .find(|t| &t["id"] == id)
            .unwrap();
        assert_eq!(
            t["verdict"],
            serde_json::json!({"is": "deadlocked", "cycle": cycle})
        );
    }
    assert_eq!(doc["causes"][0]["kind"], "deadlocked", "{doc:#}");
    assert_eq!(doc["causes"][0]["tasks"], cycle);
}

#[test]
fn tasks_ready_in_a_runtime_whose_workers_are_all_blocked_are_woken_not_polled() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("blocked_workers", args);
        assert_woken_not_polled(&fx, !args.is_empty());
    }
}

fn assert_woken_not_polled(fx: &Fixture, agent: bool) {
    let text = crate::support::dump_until(fx.pid, &[], |t| t.contains("STARVED"));
    let by_agent = text.lines().next().unwrap().contains(" · agent ");
    assert_eq!(by_agent, agent, "{text}");
    assert!(text.contains("ROOT CAUSES"), "{text}");
    let doc = dump_json(fx.pid, &[]);
    let scheduled: Vec<&Value> = (tasks_of(&doc).into_iter())
        .filter(|t| t["state"] == "scheduled")
        .collect();
    assert!(scheduled.len() >= 5, "{doc:#}");
    for t in scheduled {
        let v = &t["verdict"];
        assert_eq!(
            (&v["is"], &v["starved"]),
            (&"woken_not_polled".into(), &true.into()),
            "{t:#}"
        );
    }
    // Two starved runtimes, a cause each, ranked first, naming where their workers are held.
    let causes = doc["causes"].as_array().unwrap();
    let starved: Vec<&Value> = causes.iter().filter(|c| c["starved"].is_u64()).collect();
    assert_eq!(starved.len(), 2, "{causes:#?}");
    assert_eq!(causes[0]["kind"], "woken_not_polled");
    // Each worker is named where it is held: the multi-thread runtime's four at four places, the
    // current-thread one's at one.
    let src = std::fs::read_to_string(
        crate::support::workspace().join("fixtures/src/bin/blocked_workers.rs"),
    )
    .unwrap();
    let held = [
        "std::thread::sleep(std::time::Duration::from_secs(3600));",
        "ORDERS.lock().unwrap().push(user);",
        "USERS.lock().unwrap().retain(",
        "*LEDGER.lock().unwrap() += 1;",
    ];
    let places: Vec<u64> = (src.lines().zip(1..))
        .filter(|(l, _)| held.iter().any(|h| l.contains(h)))
        .map(|(_, n)| n)
        .collect();
    assert_eq!(places.len(), 5, "{places:?}");
    let at: Vec<u64> = (starved.iter())
        .flat_map(|c| c["look_at"].as_array().unwrap())
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    let (mut at, mut places) = (at, places);
    at.sort_unstable();
    places.sort_unstable();
    assert_eq!(at, places, "{causes:#?}");
}

#[test]
fn group_waker_lists_the_tasks_by_who_keeps_their_waker_nobody_first() {
    let fx = Fixture::start("verdicts", &[]);
    let doc = settled(&fx, &[]);
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--group", "waker"]);
    let groups: Vec<&str> = (text.split("\n\n"))
        .filter(|g| g.starts_with("kept by "))
        .collect();
    let nobody = groups[0];
    assert!(
        nobody.starts_with("kept by nobody, nothing can wake them: 2 tasks\n"),
        "{text}"
    );
    assert!(
        nobody.contains("(verdicts::forgetful) · awaiting verdicts::Forgets"),
        "{nobody}"
    );
    // Its notification went to another waker: in the Notify's list, and still nobody's.
    assert!(
        nobody.contains("(verdicts::deaf) · awaiting tokio::sync::notify::Notified"),
        "{nobody}"
    );
    let cart = (groups.iter())
        .find(|g| g.lines().count() == 4 && g.contains("(verdicts::place_order)"))
        .unwrap_or_else(|| panic!("the three orders in one group:\n{text}"));
    assert!(cart.starts_with("kept by Mutex @ 0x"), "{cart}");
    assert!(
        groups
            .iter()
            .any(|g| g.starts_with("kept by tokio's timer: 1 task\n"))
    );
    assert!(
        groups
            .iter()
            .any(|g| g.starts_with("kept by tokio's I/O driver, fd "))
    );
    // JSON has the groups with the dump.
    let doc2 = dump_json(fx.pid, &["--group", "waker"]);
    let first = &doc2["waker_groups"][0];
    assert_eq!(first["kept_by"]["kind"], "nobody", "{first}");
    let mut ids: Vec<u64> = (first["tasks"].as_array().unwrap().iter())
        .map(|t| t.as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    let mut expect = vec![
        id_of(&doc, "verdicts::forgetful"),
        id_of(&doc, "verdicts::deaf"),
    ];
    expect.sort_unstable();
    assert_eq!(ids, expect);
    // Without `--group`, no groups.
    assert!(doc.get("waker_groups").is_none());
}
