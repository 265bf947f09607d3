//! `asyncdump dump --json`: the documented, versioned shape, on real fixtures.

use serde_json::Value;

use crate::support::{Fixture, dump_json, line_of, site};

/// Frame names from the root down, following the first child.
fn chain(task: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut level = &task["frames"];
    while let Some(f) = level.as_array().and_then(|a| a.first()) {
        out.push(f["name"].as_str().unwrap().to_owned());
        level = &f["children"];
    }
    out
}

fn task(doc: &Value, id: u64) -> &Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .expect("task in dump")
}

#[test]
fn the_document_has_the_documented_shape() {
    let fx = Fixture::start("depth_chain", &["--depth", "10"]);
    let doc = dump_json(fx.pid, &[]);
    assert_eq!(doc["format"], "asyncdump-dump");
    assert_eq!(doc["version"], 4);
    assert_eq!(doc["process"]["read_from"], "agent");
    assert_eq!(doc["process"]["pid"], fx.pid);
    assert_eq!(doc["process"]["program"], "depth_chain");
    assert_eq!(
        doc["process"]["protocol_version"],
        asyncdump_protocol::PROTOCOL_VERSION
    );
    assert_eq!(doc["decoding"]["enabled"], true);
    assert!(doc["decoding"]["debug_info_bytes"].as_u64().unwrap() > 100_000);
    assert!(doc["process"]["start_time_unix_ms"].as_u64().unwrap() > 1_600_000_000_000);
    for key in [
        "capture_ns",
        "round_trip_ns",
        "tasks_total",
        "idle",
        "scheduled",
        "running",
        "completed",
        "tasks_spawned",
    ] {
        assert!(doc["snapshot"][key].is_u64(), "snapshot.{key}");
    }
    assert_eq!(doc["deadlocks"], serde_json::json!([]));
    // `init()` inside the runtime registers it; its one task is the agent's, listed once.
    let runtimes = doc["runtimes"].as_array().unwrap();
    assert_eq!(runtimes.len(), 1);
    assert_eq!(runtimes[0]["flavor"], "multi_thread");
    assert_eq!(
        (
            runtimes[0]["alive"].as_u64(),
            runtimes[0]["listed"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(crate::support::tasks_of(&doc).len(), 1);
    let t = task(&doc, 1);
    assert_eq!(t["agent_id"], 1);
    assert!(t["tokio_id"].as_u64().is_some(), "{t}");
    assert_eq!(t["name"], "depth-chain");
    assert_eq!(t["state"], "idle");
    assert_eq!(t["thread"], Value::Null);
    assert_eq!(t["polls"], 1);
    assert_eq!(t["capture"]["kind"], "fresh");
    assert_eq!(t["awaited_by"], Value::Null);
    assert_eq!(t["delegate"]["clones"], 1);
    assert!(t["state_age_ns"].as_u64().unwrap() > 0);
    assert!(
        t["root_type"]
            .as_str()
            .unwrap()
            .contains("depth_chain::descend")
    );
    let c = chain(t);
    assert_eq!(c.len(), 11);
    assert!(c[..10].iter().all(|n| n == "depth_chain::descend"));
    assert_eq!(c[10], "oneshot::Receiver");
    let top = &t["frames"][0];
    assert_eq!(top["source"], "annotated_fn");
    let at = site("depth_chain", "async fn descend", "descend");
    assert_eq!(
        format!(
            "{}:{}:{}",
            top["location"]["file"].as_str().unwrap(),
            top["location"]["line"],
            top["location"]["column"]
        ),
        at
    );
    // Also decoded: the annotated frame is shown once, with the await it is suspended at.
    assert_eq!(
        top["suspended_at"]["line"],
        line_of("depth_chain", "Box::pin(descend(")
    );
    let leaf = &t["frames"][0]["children"][0]["children"][0]["children"][0]["children"][0]["children"]
        [0]["children"][0]["children"][0]["children"][0]["children"][0]["children"][0];
    assert_eq!(leaf["name"], "oneshot::Receiver");
    assert_eq!(leaf["source"], "labelled");
    assert_eq!(leaf["awaits_type"], "tokio::sync::oneshot::Receiver<u32>");
    assert_eq!(leaf["children"], serde_json::json!([]));
}

#[test]
fn edges_and_cycles_are_in_the_json_too() {
    let fx = Fixture::start("deadlock", &[]);
    let doc = dump_json(fx.pid, &[]);
    assert_eq!(doc["deadlocks"], serde_json::json!([[1, 2]]));
    let left = task(&doc, 1);
    assert_eq!(left["awaited_by"]["task"], 2);
    assert_eq!(
        left["awaited_by"]["path"],
        serde_json::json!(["deadlock::wait_for_peer", "deadlock::join_peer"])
    );
    let join_peer = &left["frames"][0]["children"][0];
    assert_eq!(join_peer["name"], "deadlock::join_peer");
    // Decoded, the edge hangs at the JoinHandle the frame awaits, and only there.
    assert_eq!(join_peer["awaits_tasks"], serde_json::json!([]));
    let handle = &join_peer["children"][0];
    assert_eq!(handle["name"], "asyncdump_agent::JoinHandle<()>");
    assert_eq!(handle["source"], "awaitee");
    assert_eq!(handle["awaits_tasks"], serde_json::json!([2]));
    // Annotated frames alone attribute it to the innermost frame.
    let doc = dump_json(fx.pid, &["--no-decode"]);
    let join_peer = &task(&doc, 1)["frames"][0]["children"][0];
    assert_eq!(join_peer["awaits_tasks"], serde_json::json!([2]));
    assert_eq!(join_peer["children"], serde_json::json!([]));
}

#[test]
fn coalesced_json_has_groups_instead_of_tasks() {
    let fx = Fixture::start("fan_out", &[]);
    let doc = dump_json(fx.pid, &["--coalesce"]);
    assert!(doc.get("tasks").is_none());
    // The handlers' chains, and `main`'s future (the fixture's `block_on`'s), alone in its group.
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[1]["count"], 1);
    assert_eq!(groups[0]["count"], 16);
    assert_eq!(groups[0]["task_ids"].as_array().unwrap().len(), 16);
    assert_eq!(
        chain(&groups[0]),
        [
            "fan_out::handle_request",
            "fan_out::fetch_row",
            "oneshot::Receiver"
        ]
    );
}

/// The spinner task is polled on a multi-thread runtime while we dump: whatever each dump shows of it must
/// be the whole chain or nothing, never a part, for annotated frames and for the decoded walk alike.
#[test]
fn ten_dumps_of_a_busy_multithreaded_task_never_show_a_torn_chain() {
    let fx = Fixture::start("yield_loop", &[]);
    let annotated = ["yield_loop::spin", "yield_loop::step", "yield_now"];
    // Decoding sees one level further: the poll_fn inside tokio's `yield_now`.
    let leaf = "poll_fn in tokio::task::yield_now::yield_now";
    let decoded: Vec<&str> = annotated.iter().copied().chain([leaf]).collect();
    let mut seen_full = 0;
    for _ in 0..10 {
        let doc = dump_json(fx.pid, &["--all"]);
        let spinner = task(&doc, 1);
        let c = chain(spinner);
        match spinner["capture"]["kind"].as_str().unwrap() {
            // Read while idle: annotated frames and the walk, both whole.
            "fresh" => {
                assert_eq!(c, decoded, "torn chain: {spinner}");
                seen_full += 1;
            }
            // Running throughout: the frames, and the walk if that snapshot walked, of the last
            // snapshot that caught it idle.
            "stale" => {
                assert!(c == annotated || c == decoded, "torn chain: {spinner}");
                seen_full += 1;
            }
            "unavailable" => assert!(c.is_empty() && spinner["state"] == "running"),
            other => panic!("unknown capture kind {other}"),
        }
        for idle in [2, 3] {
            assert_eq!(
                chain(task(&doc, idle)),
                ["yield_loop::idle_worker", "oneshot::Receiver"]
            );
        }
    }
    assert!(seen_full > 0, "no dump caught the spinner's chain");
}

#[test]
fn the_host_sets_how_many_ended_tasks_are_kept_and_no_more_are() {
    let fx = Fixture::start_with(
        "mass",
        &["--tasks", "5", "--changing", "0", "--churn", "200"],
        &[("ASYNCDUMP_COMPLETED_KEPT", std::path::Path::new("10"))],
    );
    let patience = asyncdump::attach::client::Patience::each(std::time::Duration::from_secs(10));
    let mut agent =
        asyncdump::attach::client::Client::connect(&fx.socket(), patience).expect("connected");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // The ring of ended tasks, as the agent counts it: a task that has just returned Ready but
        // is not dropped yet is still a live task, and a dump shows it as completed too.
        let stats = agent.stats().expect("stats");
        let kept = stats.tasks_completed_retained;
        assert!(kept <= 10, "{kept} ended tasks kept");
        if stats.tasks_spawned > 100 {
            assert_eq!(
                kept, 10,
                "the last ten ended tasks, of {}",
                stats.tasks_spawned
            );
            let doc = dump_json(fx.pid, &["--all", "--no-decode"]);
            let listed = doc["snapshot"]["completed"].as_u64().unwrap();
            assert!(listed >= 10, "`--all` lists the ten kept: {listed}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} spawned",
            stats.tasks_spawned
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}
