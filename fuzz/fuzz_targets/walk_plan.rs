//! Any bytes as a walk plan, run by the agent over real tasks: its roots are pointed at the live
//! tasks' anchors, so the plan is followed through real memory. The agent must neither crash nor
//! hang, whatever the plan says.
#![no_main]

use std::sync::OnceLock;

use asyncdump_agent::protocol::{SnapshotRequest, WalkPlan, decode};
use libfuzzer_sys::fuzz_target;

/// A runtime with a few suspended tasks, kept for the whole run (reachable, so not a leak).
struct Host {
    _rt: tokio::runtime::Runtime,
    _senders: Vec<tokio::sync::oneshot::Sender<u32>>,
    _handles: Vec<asyncdump_agent::JoinHandle<u32>>,
    anchors: Vec<u64>,
}

fn anchors() -> &'static [u64] {
    static HOST: OnceLock<Host> = OnceLock::new();
    &HOST
        .get_or_init(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let (mut senders, mut handles) = (Vec::new(), Vec::new());
            for depth in 1..4 {
                let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
                senders.push(tx);
                let h = rt.block_on(async {
                    let h = asyncdump_agent::spawn(nest(depth, rx));
                    tokio::task::yield_now().await;
                    h
                });
                handles.push(h);
            }
            let snap = asyncdump_agent::snapshot(&SnapshotRequest::default());
            let anchors = snap.tasks.iter().map(|t| t.root_anchor).collect();
            Host {
                _rt: rt,
                _senders: senders,
                _handles: handles,
                anchors,
            }
        })
        .anchors
}

async fn nest(depth: u32, rx: tokio::sync::oneshot::Receiver<u32>) -> u32 {
    if depth == 0 {
        rx.await.unwrap_or(0)
    } else {
        Box::pin(nest(depth - 1, rx)).await
    }
}

fuzz_target!(|data: &[u8]| {
    let anchors = anchors();
    let Ok(mut plan) = decode::<WalkPlan>(data) else {
        return;
    };
    if anchors.is_empty() {
        return;
    }
    for (i, root) in plan.roots.iter_mut().enumerate() {
        root.0 = anchors[i % anchors.len()];
    }
    let _ = asyncdump_agent::snapshot(&SnapshotRequest {
        walk: Some(plan),
        ..SnapshotRequest::default()
    });
});
