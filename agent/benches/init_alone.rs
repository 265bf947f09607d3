//! What `init()` alone costs a service that spawns nothing through the agent: plain tokio tasks on a
//! runtime before the agent exists, then on a runtime `init()` registered, in one process and one run.
//!
//! Listing a registered runtime's tasks happens only when a snapshot is taken, on the agent's thread;
//! nothing is added to spawn or poll. This bench checks that claim on two workloads:
//! - **SpawnYield**: spawn a task that yields once, and await its `JoinHandle`;
//! - **PingPong**: one round trip between two long-lived tasks over a pair of bounded channels.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use tokio::sync::mpsc;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn spawn_yield(iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        tokio::spawn(async { tokio::task::yield_now().await })
            .await
            .unwrap();
    }
    start.elapsed()
}

async fn ping_pong(iters: u64) -> Duration {
    let (to_echo, mut echo_rx) = mpsc::channel::<u64>(1);
    let (to_main, mut main_rx) = mpsc::channel::<u64>(1);
    let echo = tokio::spawn(async move {
        while let Some(v) = echo_rx.recv().await {
            if to_main.send(v).await.is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        to_echo.send(i).await.unwrap();
        main_rx.recv().await.unwrap();
    }
    let elapsed = start.elapsed();
    drop(to_echo);
    echo.await.unwrap();
    elapsed
}

fn measure(c: &mut Criterion, rt: &tokio::runtime::Runtime, which: &str) {
    let mut g = c.benchmark_group("SpawnYield");
    g.bench_function(BenchmarkId::new(which, 1), |b| {
        b.iter_custom(|iters| rt.block_on(spawn_yield(iters)))
    });
    g.finish();
    let mut g = c.benchmark_group("PingPong");
    g.bench_function(BenchmarkId::new(which, 1), |b| {
        b.iter_custom(|iters| rt.block_on(ping_pong(iters)))
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
        .configure_from_args();
    // First with no agent in the process at all.
    let plain = runtime();
    measure(&mut c, &plain, "no-agent");
    // Then `init()` inside a runtime, as in `#[tokio::main]`: the agent thread runs and the runtime is
    // registered, so a dump would list its tasks.
    let registered = runtime();
    registered.block_on(async { asyncdump_agent::init().expect("agent started") });
    measure(&mut c, &registered, "init-registered");
    c.final_summary();
}
