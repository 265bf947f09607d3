//! `#[asyncdump_agent::test]` on this crate's own async tests: they pass as `#[tokio::test]`s do,
//! and two time out on purpose (ignored here; the inspector's specs run them and read what they
//! print): one waiting for a reply nobody sends, one whose thread blocks inside a poll.

#![cfg(feature = "tokio")]

use std::time::Duration;

use asyncdump_agent::FrameExt;
use asyncdump_agent::protocol::{Snapshot, SnapshotRequest, Task};

#[asyncdump_agent::test(timeout = "30s")]
async fn tokio_join_handle_records_the_cross_task_edge() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let b = asyncdump_agent::spawn_named("b", async move { rx.frame("oneshot").await.ok() });
    let b_id = b.task_id();
    let a = asyncdump_agent::spawn_named("a", async move { b.frame("join b").await.ok() });
    let a_id = a.task_id();
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
    let s = snap();
    let edge = task(&s, b_id).awaited_by.expect("b is awaited");
    assert_eq!(edge.task, a_id);
    let join_frame = task(&s, a_id)
        .frames
        .iter()
        .find(|f| Some(f.id) == edge.frame);
    assert_eq!(
        join_frame.map(|f| s.frame_metas[f.meta as usize].name.as_str()),
        Some("join b")
    );
    tx.send(()).unwrap();
    a.await.unwrap();
    assert_eq!(task(&snap(), b_id).awaited_by, None);
}

fn snap() -> Snapshot {
    asyncdump_agent::snapshot(&SnapshotRequest {
        include_completed: true,
        ..Default::default()
    })
}

fn task(s: &Snapshot, id: u64) -> &Task {
    s.tasks.iter().find(|t| t.id == id).expect("the task")
}

#[asyncdump_agent::test(timeout = "30s", flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_ends_in_time_returns_its_value() -> Result<(), String> {
    let sum = tokio::spawn(async { 2 + 2 })
        .await
        .map_err(|e| e.to_string())?;
    (sum == 4).then_some(()).ok_or_else(|| format!("{sum}"))
}

async fn await_reply(reply: tokio::sync::oneshot::Receiver<u32>) -> u32 {
    reply.await.unwrap_or(0)
}

async fn ask_for_quote(reply: tokio::sync::oneshot::Receiver<u32>) -> u32 {
    await_reply(reply).await + 1
}

#[asyncdump_agent::test(timeout = "1s")]
#[ignore = "times out on purpose: the inspector's specs run it and read its dump"]
async fn waits_for_a_reply_nobody_sends() {
    let (_keep, reply) = tokio::sync::oneshot::channel::<u32>();
    assert_eq!(ask_for_quote(reply).await, 8);
}

#[asyncdump_agent::test(timeout = "1s")]
#[ignore = "times out on purpose: the inspector's specs run it and read its dump"]
async fn blocks_its_thread_inside_a_poll() {
    tokio::time::sleep(Duration::from_millis(10)).await;
    std::thread::sleep(Duration::from_secs(3600));
}
