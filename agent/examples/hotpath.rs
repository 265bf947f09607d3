//! A fixed workload for profiling the poll path (`valgrind --tool=callgrind`): `N` AwaitPendingTask
//! operations at depth 10 with a frame on every fn, polled by hand inside one instrumented task.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};

use tokio::sync::oneshot::Receiver;

/// Ten async fns over a oneshot receive, `l10` awaiting `l9` ... awaiting the receive, with `$attr` on each.
macro_rules! chain {
    ($m:ident $(, #[$attr:meta])?) => {
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            $(#[$attr])? pub async fn l1(rx: Receiver<u32>) -> u32 { rx.await.unwrap_or(0) }
            $(#[$attr])? pub async fn l2(rx: Receiver<u32>) -> u32 { l1(rx).await }
            $(#[$attr])? pub async fn l3(rx: Receiver<u32>) -> u32 { l2(rx).await }
            $(#[$attr])? pub async fn l4(rx: Receiver<u32>) -> u32 { l3(rx).await }
            $(#[$attr])? pub async fn l5(rx: Receiver<u32>) -> u32 { l4(rx).await }
            $(#[$attr])? pub async fn l6(rx: Receiver<u32>) -> u32 { l5(rx).await }
            $(#[$attr])? pub async fn l7(rx: Receiver<u32>) -> u32 { l6(rx).await }
            $(#[$attr])? pub async fn l8(rx: Receiver<u32>) -> u32 { l7(rx).await }
            $(#[$attr])? pub async fn l9(rx: Receiver<u32>) -> u32 { l8(rx).await }
            $(#[$attr])? pub async fn l10(rx: Receiver<u32>) -> u32 { l9(rx).await }
        }
    };
}

chain!(plain);
chain!(framed, #[asyncdump_agent::frame]);

/// `hotpath N [frames|task|plain]`: plain is no agent at all; task is the root task only.
fn main() {
    let variant = std::env::args().nth(2).unwrap_or_else(|| "frames".into());
    match variant.as_str() {
        "plain" => drive(run(plain_op)),
        "task" => drive(asyncdump_agent::instrument(run(plain_op))),
        _ => drive(asyncdump_agent::instrument(run(frames_op))),
    }
}

async fn plain_op(rx: tokio::sync::oneshot::Receiver<u32>) -> u32 {
    plain::l10(rx).await
}

async fn frames_op(rx: tokio::sync::oneshot::Receiver<u32>) -> u32 {
    framed::l10(rx).await
}

async fn run<F: Future<Output = u32>>(op: fn(tokio::sync::oneshot::Receiver<u32>) -> F) -> u64 {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let mut sum = 0u64;
    for _ in 0..n {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (v, ()) = tokio::join!(op(rx), async move {
            let _ = tx.send(1);
        });
        sum += v as u64;
    }
    assert_eq!(sum, n);
    sum
}

fn drive<F: Future>(root: F) {
    let mut root = pin!(root);
    let mut cx = Context::from_waker(Waker::noop());
    while root.as_mut().poll(&mut cx).is_pending() {}
}
