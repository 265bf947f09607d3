//! Overhead of asyncdump on the poll path, side by side with plain tokio and with the peers, in one run.
//!
//! Variants: `plain` (no instrumentation), `asyncdump-frames` (task root + `#[frame]` on every fn),
//! `asyncdump-task` (task root only), `async-backtrace` (`#[framed]` on every fn, root framed), `await-tree`
//! (root registered, `instrument_await` at every level). Scenarios (after the .NET runtime-async benchmarks):
//! AwaitPendingTask, AwaitPendingChannel, FanOut16, Yield (depth 1 and 10; driven by hand and on a
//! current-thread tokio runtime) and Spawn. One *operation* is one chain suspending and resuming inside a
//! long-lived task, so per-task costs (registration) are paid once, as in a real service.
//!
//! Time comes from criterion; heap bytes and allocations per operation from a counting global allocator, in a
//! separate untimed pass, written to `target/criterion/allocs.json`. `bench/report.py` makes the table.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use tokio::sync::{mpsc, oneshot};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(new_size as u64, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Generates a chain of ten async fns for one variant: `l1` awaits the leaf, `lN` awaits `l(N-1)`.
macro_rules! chain {
    ($m:ident, [$(#[$a:meta])*], $wrap:path) => {
        mod $m {
            #[allow(unused_imports)]
            use super::*;
            $(#[$a])* pub async fn l1<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(leaf).await }
            $(#[$a])* pub async fn l2<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l1(leaf)).await }
            $(#[$a])* pub async fn l3<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l2(leaf)).await }
            $(#[$a])* pub async fn l4<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l3(leaf)).await }
            $(#[$a])* pub async fn l5<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l4(leaf)).await }
            $(#[$a])* pub async fn l6<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l5(leaf)).await }
            $(#[$a])* pub async fn l7<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l6(leaf)).await }
            $(#[$a])* pub async fn l8<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l7(leaf)).await }
            $(#[$a])* pub async fn l9<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l8(leaf)).await }
            $(#[$a])* pub async fn l10<L: Future<Output = u32>>(leaf: L) -> u32 { $wrap(l9(leaf)).await }
            /// A chain of `depth` (1 or 10) fns over `leaf`.
            pub async fn chain<L: Future<Output = u32>>(depth: usize, leaf: L) -> u32 {
                if depth == 1 { l1(leaf).await } else { l10(leaf).await }
            }
        }
    };
}

fn same<F>(f: F) -> F {
    f
}

fn awt<F: Future>(f: F) -> await_tree::Instrumented<F> {
    await_tree::InstrumentAwait::instrument_await(f, "level")
}

chain!(plain, [], same);
chain!(frames, [#[asyncdump_agent::frame]], same);
chain!(backtrace, [#[async_backtrace::framed]], same);
chain!(awaittree, [], awt);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(asyncdump_bench_console, allow(dead_code))]
enum Variant {
    Plain,
    AsyncdumpFrames,
    AsyncdumpTask,
    AsyncBacktrace,
    AwaitTree,
    /// The root spawned as a tokio task (console-subscriber's baseline: it instruments spawned tasks).
    #[cfg_attr(not(asyncdump_bench_console), allow(dead_code))]
    PlainSpawned,
    /// `PlainSpawned` with console-subscriber installed (`bench/console`, built with `tokio_unstable`).
    #[cfg_attr(not(asyncdump_bench_console), allow(dead_code))]
    ConsoleSubscriber,
}

#[cfg(not(asyncdump_bench_console))]
const VARIANTS: &[Variant] = &[
    Variant::Plain,
    Variant::AsyncdumpFrames,
    Variant::AsyncdumpTask,
    Variant::AsyncBacktrace,
    Variant::AwaitTree,
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::AsyncdumpFrames => "asyncdump-frames",
            Variant::AsyncdumpTask => "asyncdump-task",
            Variant::AsyncBacktrace => "async-backtrace",
            Variant::AwaitTree => "await-tree",
            Variant::PlainSpawned => "plain-spawned",
            Variant::ConsoleSubscriber => "console-subscriber",
        }
    }

    async fn chain<L: Future<Output = u32>>(self, depth: usize, leaf: L) -> u32 {
        match self {
            Variant::Plain
            | Variant::AsyncdumpTask
            | Variant::PlainSpawned
            | Variant::ConsoleSubscriber => plain::chain(depth, leaf).await,
            Variant::AsyncdumpFrames => frames::chain(depth, leaf).await,
            Variant::AsyncBacktrace => backtrace::chain(depth, leaf).await,
            Variant::AwaitTree => awaittree::chain(depth, leaf).await,
        }
    }
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs `body` as the variant's long-lived task root, driven by `drive`.
fn in_root<T: Send + 'static>(
    v: Variant,
    drive: &dyn Fn(BoxFuture<'_, T>) -> T,
    body: impl Future<Output = T> + Send + 'static,
) -> T {
    match v {
        Variant::Plain => drive(Box::pin(body)),
        Variant::PlainSpawned | Variant::ConsoleSubscriber => drive(Box::pin(async {
            tokio::spawn(body).await.expect("bench task")
        })),
        Variant::AsyncdumpFrames | Variant::AsyncdumpTask => {
            drive(Box::pin(asyncdump_agent::instrument(body)))
        }
        Variant::AsyncBacktrace => drive(Box::pin(async_backtrace::frame!(body))),
        Variant::AwaitTree => {
            let registry = await_tree::Registry::new(await_tree::Config::default());
            drive(Box::pin(registry.register((), "root").instrument(body)))
        }
    }
}

/// Polls by hand with a no-op waker until ready: no runtime in the way.
fn by_hand<T>(fut: BoxFuture<'_, T>) -> T {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    AwaitPendingTask,
    AwaitPendingChannel,
    FanOut16,
    Yield,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::AwaitPendingTask => "AwaitPendingTask",
            Scenario::AwaitPendingChannel => "AwaitPendingChannel",
            Scenario::FanOut16 => "FanOut16",
            Scenario::Yield => "Yield",
        }
    }
}

/// Runs `iters` operations of `s` inside one root; returns the time they took and the heap they used.
async fn ops(v: Variant, s: Scenario, depth: usize, iters: u64) -> (Duration, u64, u64) {
    let (tx, mut rx) = mpsc::channel::<u32>(1);
    let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
    let start = Instant::now();
    for _ in 0..iters {
        let out = match s {
            Scenario::AwaitPendingTask => {
                let (otx, orx) = oneshot::channel::<u32>();
                let (r, ()) = tokio::join!(
                    v.chain(depth, async move { orx.await.unwrap_or(0) }),
                    async move {
                        let _ = otx.send(1);
                    }
                );
                r
            }
            Scenario::AwaitPendingChannel => {
                let (r, ()) = tokio::join!(
                    v.chain(depth, async { rx.recv().await.unwrap_or(0) }),
                    async {
                        let _ = tx.try_send(1);
                    }
                );
                r
            }
            Scenario::FanOut16 => {
                let mut senders: [Option<oneshot::Sender<u32>>; 16] = Default::default();
                let receivers: [oneshot::Receiver<u32>; 16] = std::array::from_fn(|i| {
                    let (t, r) = oneshot::channel();
                    senders[i] = Some(t);
                    r
                });
                let chains = futures::future::join_all(
                    receivers.map(|r| v.chain(depth, async move { r.await.unwrap_or(0) })),
                );
                let (r, ()) = tokio::join!(chains, async move {
                    for t in senders.into_iter().flatten() {
                        let _ = t.send(1);
                    }
                });
                r.into_iter().sum()
            }
            Scenario::Yield => {
                v.chain(depth, async {
                    tokio::task::yield_now().await;
                    1
                })
                .await
            }
        };
        black_box(out);
    }
    let elapsed = start.elapsed();
    (elapsed, ALLOCS.load(Relaxed) - a0, BYTES.load(Relaxed) - b0)
}

async fn spawn_ops(v: Variant, iters: u64) -> (Duration, u64, u64) {
    let registry = await_tree::Registry::new(await_tree::Config::default());
    let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
    let start = Instant::now();
    for i in 0..iters {
        let leaf = async {
            tokio::task::yield_now().await;
            1
        };
        let out = match v {
            Variant::Plain => tokio::spawn(plain::l1(leaf)).await.unwrap(),
            Variant::AsyncdumpTask => asyncdump_agent::spawn(plain::l1(leaf)).await.unwrap(),
            Variant::AsyncdumpFrames => asyncdump_agent::spawn(frames::l1(leaf)).await.unwrap(),
            Variant::AsyncBacktrace => tokio::spawn(backtrace::l1(leaf)).await.unwrap(),
            Variant::AwaitTree => {
                tokio::spawn(registry.register(i, "task").instrument(awaittree::l1(leaf)))
                    .await
                    .unwrap()
            }
            Variant::PlainSpawned | Variant::ConsoleSubscriber => {
                tokio::spawn(plain::l1(leaf)).await.unwrap()
            }
        };
        black_box(out);
    }
    let elapsed = start.elapsed();
    (elapsed, ALLOCS.load(Relaxed) - a0, BYTES.load(Relaxed) - b0)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Drive {
    Hand,
    Tokio,
}

struct Bench {
    rt: tokio::runtime::Runtime,
    allocs: Mutex<Vec<serde_json::Value>>,
}

impl Bench {
    fn run(
        &self,
        v: Variant,
        s: Option<Scenario>,
        drive: Drive,
        depth: usize,
        iters: u64,
    ) -> (Duration, u64, u64) {
        let tokio_drive = |f: BoxFuture<'_, (Duration, u64, u64)>| self.rt.block_on(f);
        match (s, drive) {
            (Some(s), Drive::Hand) => in_root(v, &by_hand, ops(v, s, depth, iters)),
            (Some(s), Drive::Tokio) => in_root(v, &tokio_drive, ops(v, s, depth, iters)),
            (None, _) => in_root(v, &tokio_drive, spawn_ops(v, iters)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        c: &mut Criterion,
        variants: &[Variant],
        group: &str,
        s: Option<Scenario>,
        drive: Drive,
        depth: usize,
    ) {
        let mut g = c.benchmark_group(group);
        for &v in variants {
            // Untimed pass for the heap: warm up (channel buffers, thread-locals), then count.
            self.run(v, s, drive, depth, 200);
            const N: u64 = 5_000;
            let (_, allocs, bytes) = self.run(v, s, drive, depth, N);
            self.allocs.lock().unwrap().push(serde_json::json!({
                "group": group, "variant": v.name(), "depth": depth,
                "allocs_per_op": allocs as f64 / N as f64, "bytes_per_op": bytes as f64 / N as f64,
            }));
            g.bench_with_input(BenchmarkId::new(v.name(), depth), &depth, |b, &depth| {
                b.iter_custom(|iters| self.run(v, s, drive, depth, iters).0)
            });
        }
        g.finish();
    }
}

/// This package's target directory, relative to its manifest.
#[cfg(not(asyncdump_bench_console))]
const TARGET_DIR: &str = "../target";
#[cfg(asyncdump_bench_console)]
const TARGET_DIR: &str = "target";

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
        .configure_from_args();
    let bench = Bench {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        allocs: Mutex::new(Vec::new()),
    };
    let scenarios = [
        Scenario::AwaitPendingTask,
        Scenario::AwaitPendingChannel,
        Scenario::FanOut16,
        Scenario::Yield,
    ];
    let run_all = |c: &mut Criterion, variants: &[Variant], drives: &[Drive]| {
        for s in scenarios {
            for &drive in drives {
                let how = if drive == Drive::Hand {
                    "hand"
                } else {
                    "tokio"
                };
                let group = format!("{}/{how}", s.name());
                for depth in [1, 10] {
                    bench.measure(c, variants, &group, Some(s), drive, depth);
                }
            }
        }
        bench.measure(c, variants, "Spawn/tokio", None, Drive::Tokio, 1);
    };
    #[cfg(not(asyncdump_bench_console))]
    run_all(&mut c, VARIANTS, &[Drive::Hand, Drive::Tokio]);
    #[cfg(asyncdump_bench_console)]
    {
        // The subscriber is global and traces every tokio task once installed: baselines first.
        run_all(
            &mut c,
            &[Variant::Plain, Variant::PlainSpawned],
            &[Drive::Tokio],
        );
        console_subscriber::init();
        run_all(&mut c, &[Variant::ConsoleSubscriber], &[Drive::Tokio]);
    }
    c.final_summary();
    // Criterion writes under this package's target directory; the allocation table goes beside it.
    let out = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TARGET_DIR))
        .join("criterion");
    std::fs::create_dir_all(&out).unwrap();
    let rows = serde_json::Value::Array(bench.allocs.into_inner().unwrap());
    std::fs::write(
        out.join("allocs.json"),
        serde_json::to_string_pretty(&rows).unwrap(),
    )
    .unwrap();
}
