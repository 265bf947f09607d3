//! Specs for the agent, observed in-process through `asyncdump_agent::snapshot`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use asyncdump_agent::protocol::{Capture, Snapshot, SnapshotRequest, Task, TaskState};
use asyncdump_agent::{FrameExt, frame, instrument, instrument_named};

fn snap() -> Snapshot {
    asyncdump_agent::snapshot(&SnapshotRequest {
        include_completed: true,
        walk: None,
    })
}

fn task(s: &Snapshot, id: u64) -> &Task {
    s.tasks
        .iter()
        .find(|t| t.id == id)
        .expect("task in snapshot")
}

/// Frame names of a task from the root down, following the first child at each level.
fn chain(s: &Snapshot, id: u64) -> Vec<String> {
    let t = task(s, id);
    let mut out = Vec::new();
    let mut parent = None;
    while let Some(f) = t.frames.iter().find(|f| f.parent == parent) {
        out.push(s.frame_metas[f.meta as usize].name.clone());
        parent = Some(f.id);
    }
    out
}

fn children(s: &Snapshot, id: u64, parent_name: &str) -> Vec<String> {
    let t = task(s, id);
    let p = t
        .frames
        .iter()
        .find(|f| s.frame_metas[f.meta as usize].name == parent_name)
        .unwrap();
    t.frames
        .iter()
        .filter(|f| f.parent == Some(p.id))
        .map(|f| s.frame_metas[f.meta as usize].name.clone())
        .collect()
}

/// Polls a future once by hand with a no-op waker.
fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[frame]
async fn outer(rx: futures::channel::oneshot::Receiver<u32>) -> u32 {
    middle(rx).await + 1
}

#[frame]
async fn middle(rx: futures::channel::oneshot::Receiver<u32>) -> u32 {
    rx.frame("oneshot::Receiver").await.unwrap_or(0)
}

#[test]
fn a_suspended_chain_reads_root_first_down_to_the_leaf() {
    let (tx, rx) = futures::channel::oneshot::channel();
    let mut fut = Box::pin(instrument_named("chain", outer(rx)));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    let s = snap();
    assert_eq!(
        chain(&s, id),
        ["main::outer", "main::middle", "oneshot::Receiver"]
    );
    let t = task(&s, id);
    assert_eq!(t.state, TaskState::Idle);
    assert_eq!(t.capture, Capture::Fresh);
    assert_eq!(t.polls, 1);
    assert_eq!(t.name.as_deref(), Some("chain"));
    assert_eq!(
        s.spawn_sites[t.spawn_site as usize].location.file,
        "agent/tests/main.rs"
    );
    // Annotated frames record the fn's own line.
    let outer_meta = &s.frame_metas[t.frames[0].meta as usize];
    assert_eq!(outer_meta.location.line, line_of("async fn outer"));

    tx.send(41).unwrap();
    assert_eq!(poll_once(fut.as_mut()), Poll::Ready(42));
    assert!(
        task(&snap(), id).frames.is_empty(),
        "completed frames unlink"
    );
}

fn line_of(needle: &str) -> u32 {
    let src = include_str!("main.rs");
    src.lines()
        .position(|l| l.contains(needle) && !l.contains("line_of"))
        .unwrap() as u32
        + 1
}

#[frame]
async fn left(rx: futures::channel::oneshot::Receiver<()>) {
    let _ = rx.frame("left leaf").await;
}

#[frame]
async fn right(rx: futures::channel::oneshot::Receiver<()>) {
    let _ = rx.frame("right leaf").await;
}

#[frame]
async fn both(
    a: futures::channel::oneshot::Receiver<()>,
    b: futures::channel::oneshot::Receiver<()>,
) {
    futures::join!(left(a), right(b));
}

#[test]
fn join_keeps_every_pending_branch_as_a_tree() {
    let (ta, a) = futures::channel::oneshot::channel();
    let (tb, b) = futures::channel::oneshot::channel();
    let mut fut = Box::pin(instrument(both(a, b)));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    let s = snap();
    assert_eq!(
        children(&s, id, "main::both"),
        ["main::left", "main::right"]
    );
    assert_eq!(children(&s, id, "main::left"), ["left leaf"]);
    assert_eq!(children(&s, id, "main::right"), ["right leaf"]);

    ta.send(()).unwrap();
    assert!(poll_once(fut.as_mut()).is_pending());
    let s = snap();
    assert_eq!(
        children(&s, id, "main::both"),
        ["main::right"],
        "the finished branch is gone"
    );
    tb.send(()).unwrap();
    assert!(poll_once(fut.as_mut()).is_ready());
}

#[test]
fn siblings_read_in_first_poll_order_as_branches_come_and_go() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..4)
        .map(|_| futures::channel::oneshot::channel::<()>())
        .unzip();
    let [a, b, c, d] = <[_; 4]>::try_from(rxs).unwrap();
    let mut fut = Box::pin(instrument(
        async move {
            let (first, second, third) = (a.frame("first"), b.frame("second"), c.frame("third"));
            let _ = futures::join!(first, second, async {
                let _ = third.await;
                // Polled for the first time only after `second` is gone.
                let _ = d.frame("fourth").await;
            });
        }
        .frame("all"),
    ));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    assert_eq!(children(&snap(), id, "all"), ["first", "second", "third"]);

    let mut txs = txs.into_iter().map(Some).collect::<Vec<_>>();
    txs[1].take().unwrap().send(()).unwrap();
    assert!(poll_once(fut.as_mut()).is_pending());
    assert_eq!(children(&snap(), id, "all"), ["first", "third"]);

    txs[2].take().unwrap().send(()).unwrap();
    assert!(poll_once(fut.as_mut()).is_pending());
    assert_eq!(
        children(&snap(), id, "all"),
        ["first", "fourth"],
        "a frame polled later comes after the older ones"
    );
    for tx in txs.into_iter().flatten() {
        tx.send(()).unwrap();
    }
    assert!(poll_once(fut.as_mut()).is_ready());
}

#[test]
fn a_task_with_more_frames_than_a_snapshot_keeps_shows_the_newest_in_order() {
    let max = asyncdump_agent::MAX_FRAMES_PER_TASK;
    // One slice, so that the frames' ids (their addresses) grow in the order they are first polled.
    let mut leaves: Pin<Box<[_]>> = (0..max + 100)
        .map(|_| futures::future::pending::<()>().frame("leaf"))
        .collect::<Box<[_]>>()
        .into();
    let (base, stride) = (leaves.as_ptr() as u64, size_of_val(&leaves[0]) as u64);
    let mut fut = Box::pin(instrument(
        futures::future::poll_fn(move |cx| {
            for i in 0..leaves.len() {
                // SAFETY: the slice is pinned and its elements are never moved out of it.
                let leaf = unsafe { leaves.as_mut().map_unchecked_mut(|s| &mut s[i]) };
                let _ = leaf.poll(cx);
            }
            Poll::<()>::Pending
        })
        .frame("all"),
    ));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    // Another spec's snapshot in this process may be copying these 4,196 frames right now (a snapshot
    // reads every task), and the agent then reports the task unavailable rather than wait: ask again.
    let fresh = |s: &Snapshot| task(s, id).capture == Capture::Fresh;
    let s = (0..100)
        .map(|_| snap())
        .find(fresh)
        .expect("a fresh capture");
    let frames = &task(&s, id).frames;
    assert_eq!(frames.len(), max, "capped at {max}");
    let ids: Vec<u64> = frames[1..].iter().map(|f| f.id).collect();
    assert!(ids.is_sorted(), "children in first-poll order");
    // `all` takes one place: 4,095 of the 4,196 leaves are kept.
    assert_eq!(
        (ids[0] - base) / stride,
        101,
        "the 101 oldest leaves are the ones left out"
    );
}

#[test]
fn works_under_the_futures_executor_too() {
    let (tx, rx) = futures::channel::oneshot::channel();
    let mut pool = futures::executor::LocalPool::new();
    let fut = instrument_named("on-local-pool", outer(rx));
    let id = fut.task_id();
    let handle =
        futures::task::LocalSpawnExt::spawn_local_with_handle(&pool.spawner(), fut).unwrap();
    pool.run_until_stalled();
    let s = snap();
    assert_eq!(
        chain(&s, id),
        ["main::outer", "main::middle", "oneshot::Receiver"]
    );
    // futures' oneshot keeps the waker: that is the delegate.
    assert_eq!(task(&s, id).delegate.map(|d| d.clones), Some(1));
    tx.send(1).unwrap();
    assert_eq!(pool.run_until(handle), 2);
    let t = task(&snap(), id).clone();
    assert!(matches!(t.state, TaskState::Completed { .. }));
    assert_eq!(t.wakes, 1);
}

/// A leaf that never touches the waker.
struct Forever;
impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

#[test]
fn no_delegate_unless_a_leaf_keeps_the_waker_and_the_chain_is_complete_anyway() {
    let mut fut = Box::pin(instrument(async { Forever.frame("forever").await }));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    let s = snap();
    assert_eq!(task(&s, id).delegate, None);
    assert_eq!(chain(&s, id), ["forever"]);
}

#[test]
fn a_dropped_task_unlinks_every_frame_and_is_retained_as_completed() {
    let (_tx, rx) = futures::channel::oneshot::channel::<u32>();
    let mut fut = Box::pin(instrument(outer(rx)));
    let id = fut.task_id();
    assert!(poll_once(fut.as_mut()).is_pending());
    drop(fut);
    let t = task(&snap(), id).clone();
    assert!(matches!(t.state, TaskState::Completed { .. }));
    assert!(t.frames.is_empty());
    assert_eq!(t.delegate, None, "the leaf's waker clone died with it");
}

#[test]
fn a_frame_polled_in_one_task_then_moved_to_another_relinks() {
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let mut moved: Pin<Box<dyn Future<Output = u32>>> = Box::pin(middle(rx));
    let mut first = Box::pin(instrument(async {}));
    // Poll `moved` inside task `first` by hand.
    {
        let mut once = Box::pin(instrument(futures::future::poll_fn(|cx| {
            let _ = moved.as_mut().poll(cx);
            Poll::<()>::Pending
        })));
        let first_id = once.task_id();
        assert!(poll_once(once.as_mut()).is_pending());
        assert_eq!(
            chain(&snap(), first_id),
            ["main::middle", "oneshot::Receiver"]
        );
    } // the first task ends while `moved` is still alive and linked into it
    let mut second = Box::pin(instrument(moved));
    let second_id = second.task_id();
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(
        chain(&snap(), second_id),
        ["main::middle", "oneshot::Receiver"]
    );
    tx.send(5).unwrap();
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(5));
    assert!(poll_once(first.as_mut()).is_ready());
}

#[frame]
async fn step() {
    tokio::task::yield_now().frame("yield_now").await;
}

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[frame]
async fn spin() {
    while !STOP.load(std::sync::atomic::Ordering::Relaxed) {
        step().await;
    }
}

#[test]
fn snapshots_while_tasks_run_on_other_threads_are_never_torn() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let handles: Vec<_> = (0..4).map(|_| rt.spawn(instrument(spin()))).collect();
    let (mut fresh, mut snapshots) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fresh < 50 && std::time::Instant::now() < deadline {
        let s = snap();
        snapshots += 1;
        for t in s.tasks.iter().filter(|t| t.spawn_site_root_is_spin(&s)) {
            if t.capture == Capture::Fresh
                && !matches!(t.state, TaskState::Completed { .. })
                && t.polls > 0
            {
                fresh += 1;
                assert_eq!(chain(&s, t.id), ["main::spin", "main::step", "yield_now"]);
            }
        }
    }
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        rt.block_on(h).unwrap();
    }
    assert!(
        fresh >= 50,
        "only {fresh} fresh captures of busy tasks in {snapshots} snapshots"
    );
}

trait SpinTask {
    fn spawn_site_root_is_spin(&self, s: &Snapshot) -> bool;
}
impl SpinTask for Task {
    fn spawn_site_root_is_spin(&self, s: &Snapshot) -> bool {
        s.spawn_sites[self.spawn_site as usize]
            .root_type
            .contains("spin")
    }
}

/// Counts wakes of one waker.
struct Counter(std::sync::atomic::AtomicUsize);
impl futures::task::ArcWake for Counter {
    fn wake_by_ref(me: &std::sync::Arc<Self>) {
        me.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Keeps the last waker it was given, like a channel's receiver.
struct Keeper(std::sync::Arc<std::sync::Mutex<Option<Waker>>>);
impl Future for Keeper {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn wakes_reach_the_newest_executor_waker_even_when_the_executor_changes_it_every_poll() {
    let kept = std::sync::Arc::new(std::sync::Mutex::new(None));
    let mut fut = Box::pin(instrument(Keeper(kept.clone())));
    let id = fut.task_id();
    // More fresh wakers than the agent publishes lock-free: the task switches to the locked path.
    let counters: Vec<_> = (0..20)
        .map(|_| std::sync::Arc::new(Counter(Default::default())))
        .collect();
    for (i, c) in counters.iter().enumerate() {
        let waker = futures::task::waker(c.clone());
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        kept.lock().unwrap().take().unwrap().wake();
        let woken: Vec<usize> = counters
            .iter()
            .map(|c| c.0.load(std::sync::atomic::Ordering::SeqCst))
            .collect();
        assert_eq!(
            woken[i], 1,
            "poll {i}: the waker of the latest poll is woken"
        );
        assert_eq!(woken.iter().sum::<usize>(), i + 1, "poll {i}: and no other");
    }
    assert_eq!(task(&snap(), id).wakes, 20);
}

/// A boxed framed future that any task may poll (as `futures::Shared` would).
type SharedFrame = std::sync::Arc<std::sync::Mutex<Pin<Box<dyn Future<Output = ()> + Send>>>>;

fn shared_frame(label: &'static str) -> SharedFrame {
    std::sync::Arc::new(std::sync::Mutex::new(Box::pin(
        std::future::pending::<()>().frame(label),
    )))
}

/// Polls `first` once, then on its second poll meets the other thread at `barrier` (both tasks are then
/// being polled, each holding its own task lock) and polls `second`, which is linked into the other task.
fn crossing_task(
    first: SharedFrame,
    second: SharedFrame,
    barrier: std::sync::Arc<std::sync::Barrier>,
) -> impl Future<Output = ()> + Send {
    let mut polls = 0;
    futures::future::poll_fn(move |cx| {
        polls += 1;
        if polls == 1 {
            let _ = first.lock().unwrap().as_mut().poll(cx);
        } else {
            barrier.wait();
            let _ = second.lock().unwrap().as_mut().poll(cx);
        }
        if polls == 2 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
}

// Regression: two tasks each moving a frame out of the other, at the same time, used to wait on each
// other's task lock forever.
#[test]
fn two_tasks_taking_each_others_frames_at_once_do_not_deadlock() {
    let (f1, f2) = (shared_frame("f1"), shared_frame("f2"));
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let mut a = Box::pin(instrument(crossing_task(
        f1.clone(),
        f2.clone(),
        barrier.clone(),
    )));
    let mut b = Box::pin(instrument(crossing_task(f2.clone(), f1.clone(), barrier)));
    // First polls, one after the other: f1 links into task a, f2 into task b.
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for mut task in [a, b] {
        let done = done_tx.clone();
        std::thread::spawn(move || {
            assert!(poll_once(task.as_mut()).is_ready());
            done.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("deadlocked: a task poll never returned");
    }
    drop((f1, f2));
}
