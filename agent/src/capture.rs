//! Building a [`Snapshot`] from the registry, on the agent's own thread.
//!
//! For each task the capturer takes the task lock in reader mode and copies raw frame pointers (names and
//! locations are `&'static`), then releases it and does all formatting and interning afterwards, so the
//! time a poll could wait on the reader is the time to copy a few pointers.
//!
//! **What a running task shows.** A task being polled cannot be read. The capturer waits for it to become
//! idle, spinning for at most [`PER_TASK_WAIT_NS`] per task and [`TOTAL_WAIT_NS`] per snapshot. If it stays
//! busy, it is reported as running (OS thread and since when) with the frames from the most recent earlier
//! snapshot that caught it idle ([`Capture::Stale`]), or with none ([`Capture::Unavailable`]) if there is no
//! such snapshot. Earlier captures, with their decoded walk when that snapshot walked, are remembered
//! only for tasks once seen running, at most [`STALE_CACHE_MAX`] of them.

use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use asyncdump_protocol::{
    Awaiter, Capture, Delegate, Frame, FrameMeta, FrameSource, Snapshot, SnapshotRequest,
    SpawnSite, Task, TaskState, ThreadInfo, Walk, WalkPlan,
};

use crate::sys::{self, FastMap};
use crate::task::{RawFrame, Source};
use crate::task::{ReadLock, TaskCell, registry};
use asyncdump_walker::{ProcessMemory, Walker};

/// Longest wait for one running task to become idle.
pub const PER_TASK_WAIT_NS: u64 = 2_000_000;
/// Longest total wait for running tasks in one snapshot.
pub const TOTAL_WAIT_NS: u64 = 50_000_000;
/// Most tasks whose last capture is remembered for showing while they run.
pub const STALE_CACHE_MAX: usize = 4096;
/// The longest one request's memory walks (its tasks' chains, its runtimes' listing) may take: then
/// every walk stops where it is, marked cut, whatever the plan asks for.
pub const WALK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);
/// The most walk nodes one request gets back in all (a task's own walk is bounded apart): a hundred
/// thousand tasks of about ten futures each, twice over.
pub const WALK_NODES_PER_REQUEST: usize = 2_000_000;

/// Owns the memory of earlier captures; one per agent, used by one snapshot at a time.
#[derive(Default)]
pub(crate) struct Capturer {
    /// Tasks once seen running, with their last idle capture once there is one.
    stale: FastMap<u64, Option<Earlier>>,
    walker: Walker,
}

/// A task's last idle capture, shown while it runs.
struct Earlier {
    at_ns: u64,
    frames: Vec<RawFrame>,
    /// Its walk, when that snapshot walked, with the hash of the plan it followed: type numbers mean
    /// something only in their own plan, so it is shown again only under the same one.
    walk: Option<(u64, Walk)>,
}

/// What every task of one snapshot is captured with.
struct Pass<'a> {
    conv: &'a sys::TickConv,
    plan: Option<&'a Plan<'a>>,
}

/// A walk plan with its roots looked up by anchor.
struct Plan<'a> {
    plan: &'a WalkPlan,
    roots: FastMap<u64, u32>,
    hash: u64,
}

/// Takes a snapshot from inside the process (e.g. for a test, or to log chains on a signal).
pub fn snapshot(req: &SnapshotRequest) -> Snapshot {
    Capturer::default().capture(req)
}

/// Names and locations already numbered, for one snapshot or one subscription.
#[derive(Default)]
pub(crate) struct Interner {
    metas: FastMap<(usize, usize, Source), u32>,
    sites: FastMap<(usize, usize), u32>,
    /// Thread names, for one capture only (tids are reused).
    threads: FastMap<u32, Option<String>>,
}

impl Capturer {
    pub(crate) fn capture(&mut self, req: &SnapshotRequest) -> Snapshot {
        let cells = registry().collect(req.include_completed);
        let mut snap = self.capture_cells(&cells, req.walk.as_ref(), &mut Interner::default());
        // After every task lock is released: listing a runtime takes none of ours, and none of tokio's.
        let listing = crate::runtime::list_all(req.walk.as_ref(), &mut self.walker);
        snap.runtimes = listing.reports;
        snap.census = listing.census;
        if self.stale.len() > STALE_CACHE_MAX / 2 {
            let live: std::collections::HashSet<u64> = cells.iter().map(|c| c.id).collect();
            self.stale.retain(|id, _| live.contains(id));
        }
        snap.capture_ns = sys::now_ns() - snap.now_ns;
        snap
    }

    /// Lists every runtime (see `runtime::list_all`), with this capturer's walker.
    pub(crate) fn list_runtimes(&mut self, plan: Option<&WalkPlan>) -> crate::runtime::Listing {
        self.limit_walks();
        crate::runtime::list_all(plan, &mut self.walker)
    }

    /// Starts the walks of one request: they end at [`WALK_DEADLINE`] from now, or once they have
    /// given [`WALK_NODES_PER_REQUEST`] nodes.
    fn limit_walks(&mut self) {
        let deadline = std::time::Instant::now() + WALK_DEADLINE;
        self.walker.set_deadline(Some(deadline));
        self.walker.set_node_budget(Some(WALK_NODES_PER_REQUEST));
    }

    /// Captures `cells` (and walks them with `plan`), interning names with `interner`: a fresh one for
    /// a snapshot, a subscription's own across its updates, so that each update carries only the
    /// names new to it. `frame_metas` and `spawn_sites` of the result hold only those.
    pub(crate) fn capture_cells(
        &mut self,
        cells: &[Arc<TaskCell>],
        plan: Option<&WalkPlan>,
        interner: &mut Interner,
    ) -> Snapshot {
        self.limit_walks();
        let conv = sys::TickConv::now();
        let start = conv.ns_now;
        let wait_until = start + TOTAL_WAIT_NS;
        let mut snap = Snapshot {
            now_ns: start,
            uptime_ns: start.saturating_sub(sys::process_start_mono_ns()),
            tasks: Vec::with_capacity(cells.len()),
            stats: registry().stats(),
            ..Snapshot::default()
        };
        interner.threads.clear();
        let mut scratch = Vec::new();
        let plan = plan.map(|plan| Plan {
            plan,
            roots: plan.roots.iter().copied().collect(),
            hash: {
                use std::hash::BuildHasher;
                rustc_hash::FxBuildHasher.hash_one(plan)
            },
        });
        let pass = Pass {
            conv: &conv,
            plan: plan.as_ref(),
        };
        // Idle tasks to walk, still read-locked, walked together (see `walk`) once there are
        // `WALK_BATCH`, or before waiting on a task that is busy: no poll ever waits on a lock we hold
        // while we wait ourselves.
        let mut held: Vec<Held<'_>> = Vec::new();
        for cell in cells {
            let lock = if cell.is_completed() {
                None
            } else {
                match cell.try_lock_for_read() {
                    Some(lock) => Some(lock),
                    None => {
                        if let Some(plan) = &plan {
                            self.walk_held(plan, &mut held, &mut snap.tasks);
                        }
                        cell.lock_for_read(PER_TASK_WAIT_NS, wait_until)
                    }
                }
            };
            let (task, keep) =
                self.capture_task(cell, lock, &pass, &mut scratch, interner, &mut snap);
            if let Some((lock, ty, addr)) = keep {
                held.push(Held {
                    index: snap.tasks.len(),
                    _lock: lock,
                    ty,
                    addr,
                });
            }
            snap.tasks.push(task);
            if let Some(plan) = &plan
                && held.len() >= WALK_BATCH
            {
                self.walk_held(plan, &mut held, &mut snap.tasks);
            }
        }
        if let Some(plan) = &plan {
            self.walk_held(plan, &mut held, &mut snap.tasks);
        }
        snap.capture_ns = sys::now_ns() - start;
        snap
    }

    /// Captures one task, given its read lock if it was idle (`None`: completed, or busy throughout
    /// the wait). When the snapshot walks and the task has a walkable future, also returns the lock,
    /// still held, with where its walk starts.
    fn capture_task<'c>(
        &mut self,
        cell: &'c Arc<TaskCell>,
        lock: Option<ReadLock<'c>>,
        pass: &Pass<'_>,
        scratch: &mut Vec<RawFrame>,
        interner: &mut Interner,
        snap: &mut Snapshot,
    ) -> (Task, Option<(ReadLock<'c>, u32, usize)>) {
        // Held until the counters are read, so that they come from the same moment as the frames.
        let mut guard = None;
        let mut start = None;
        scratch.clear();
        let mut walk = pass.plan.map(|_| Walk::Busy);
        let (state, capture) = if cell.is_completed() {
            let at_ns = pass.conv.ns(cell.completed_ns.load(Relaxed));
            (TaskState::Completed { at_ns }, Capture::Fresh)
        } else if let Some(lock) = lock {
            start = self.capture_idle(cell, &lock, pass.plan, scratch, snap.now_ns, &mut walk);
            guard = Some(lock);
            (TaskState::Idle, Capture::Fresh)
        } else {
            let state = running(cell, pass.conv, interner);
            (
                state,
                self.capture_running(cell, pass.plan, scratch, &mut walk),
            )
        };
        let captured = Captured {
            state,
            capture,
            walk,
        };
        let task = record(cell, pass.conv, captured, scratch, interner, snap);
        let keep = guard.zip(start).map(|(lock, (ty, addr))| (lock, ty, addr));
        (task, keep)
    }

    /// An idle task's frames, copied under its lock, and where its walk starts (or why it cannot);
    /// remembered for showing while it runs, if it was seen running before.
    fn capture_idle(
        &mut self,
        cell: &TaskCell,
        lock: &ReadLock<'_>,
        plan: Option<&Plan<'_>>,
        scratch: &mut Vec<RawFrame>,
        now_ns: u64,
        walk: &mut Option<Walk>,
    ) -> Option<(u32, usize)> {
        lock.copy_frames(scratch);
        let mut start = None;
        match plan.map(|plan| walk_start(cell, plan)) {
            Some(Ok(at)) => start = Some(at),
            Some(Err(w)) => *walk = Some(w),
            None => {}
        }
        if let Some(entry) = self.stale.get_mut(&cell.id) {
            // The walk, if any, is added once the batch is walked (`walk_held`).
            *entry = Some(Earlier {
                at_ns: now_ns,
                frames: scratch.clone(),
                walk: None,
            });
        }
        start
    }

    /// A running task's frames and walk from its last idle capture, if one is remembered; from now
    /// on, its captures are remembered (up to `STALE_CACHE_MAX` tasks).
    fn capture_running(
        &mut self,
        cell: &TaskCell,
        plan: Option<&Plan<'_>>,
        scratch: &mut Vec<RawFrame>,
        walk: &mut Option<Walk>,
    ) -> Capture {
        match self.stale.get(&cell.id) {
            Some(Some(earlier)) => {
                scratch.extend_from_slice(&earlier.frames);
                // Frames and walk from the same earlier moment, or no walk at all.
                if let Some(plan) = plan {
                    *walk = Some(match &earlier.walk {
                        Some((hash, w)) if *hash == plan.hash => w.clone(),
                        _ => Walk::Busy,
                    });
                }
                Capture::Stale {
                    captured_ns: earlier.at_ns,
                }
            }
            Some(None) => Capture::Unavailable,
            None => {
                if self.stale.len() < STALE_CACHE_MAX {
                    self.stale.insert(cell.id, None);
                }
                Capture::Unavailable
            }
        }
    }

    /// Walks the held tasks together and releases their locks.
    fn walk_held(&mut self, plan: &Plan<'_>, held: &mut Vec<Held<'_>>, tasks: &mut [Task]) {
        if held.is_empty() {
            return;
        }
        let starts: Vec<(u32, u64)> = held.iter().map(|h| (h.ty, h.addr as u64)).collect();
        let walks = self
            .walker
            .walk_many(&ProcessMemory::own(), plan.plan, &starts);
        for (h, w) in held.iter().zip(walks) {
            let task = &mut tasks[h.index];
            if let Some(Some(earlier)) = self.stale.get_mut(&task.id) {
                earlier.walk = Some((plan.hash, w.clone()));
            }
            task.walk = Some(w);
        }
        held.clear();
    }
}

/// What one task's capture found: its state, how fresh its frames are, and its walk.
struct Captured {
    state: TaskState,
    capture: Capture,
    walk: Option<Walk>,
}

/// The state of a task some thread is polling.
fn running(cell: &TaskCell, conv: &sys::TickConv, interner: &mut Interner) -> TaskState {
    let tid = cell.running_on().unwrap_or(0);
    let name = (interner.threads)
        .entry(tid)
        .or_insert_with(|| sys::thread_name(tid))
        .clone();
    TaskState::Running {
        thread: ThreadInfo { tid, name },
        since_ns: conv.ns(cell.running_since_ns.load(Relaxed)),
    }
}

/// The task's record: what was captured, its frames (`scratch`), and its counters as of now.
fn record(
    cell: &Arc<TaskCell>,
    conv: &sys::TickConv,
    captured: Captured,
    scratch: &[RawFrame],
    interner: &mut Interner,
    snap: &mut Snapshot,
) -> Task {
    let root = cell.root_id();
    let frames = scratch
        .iter()
        .map(|f| Frame {
            id: f.id as u64,
            parent: (f.parent != root).then_some(f.parent as u64),
            meta: interner.meta(f, snap),
        })
        .collect();
    let nonzero = |v: u64| (v != 0).then_some(v);
    let awaited_by = nonzero(cell.awaited_by_task.load(Relaxed)).map(|task| Awaiter {
        task,
        frame: nonzero(cell.awaited_by_frame.load(Relaxed)),
    });
    let clones = cell.delegate.clones.load(Relaxed);
    let delegate = (clones > 0).then(|| Delegate {
        clones,
        since_ns: conv.ns(cell.delegate.since_ns.load(Relaxed)),
    });
    Task {
        id: cell.id,
        name: cell.name.as_deref().map(str::to_owned),
        spawn_site: interner.site(cell, snap),
        root_anchor: cell.root_anchor as u64,
        cell: Arc::as_ptr(cell) as u64,
        poll_waker_data: cell.poll_waker_data.load(Relaxed) as u64,
        state: captured.state,
        created_ns: conv.ns(cell.created_ns),
        polls: cell.polls.load(Relaxed),
        busy_ns: conv.duration_ns(cell.busy_ns.load(Relaxed)),
        last_poll_end_ns: nonzero(conv.ns(cell.last_poll_end_ns.load(Relaxed))),
        wakes: cell.wakes.load(Relaxed),
        last_wake_ns: nonzero(conv.ns(cell.last_wake_ns.load(Relaxed))),
        frames,
        capture: captured.capture,
        awaited_by,
        delegate,
        walk: captured.walk,
    }
}

/// Most tasks walked (and so held read-locked) at once: enough to share each read syscall widely, few
/// enough that a poll of one of them waits only microseconds.
const WALK_BATCH: usize = 64;

/// An idle task whose walk is pending; its read lock is released when this is dropped.
struct Held<'c> {
    /// Index of its `Task` in the snapshot.
    index: usize,
    _lock: ReadLock<'c>,
    ty: u32,
    addr: usize,
}

/// Where the walk of an idle task starts, or why it cannot. The caller holds the task's read lock, so
/// the future's address is stable (the drop clears it under the same lock).
fn walk_start(cell: &TaskCell, plan: &Plan<'_>) -> Result<(u32, usize), Walk> {
    let addr = cell.future_addr.load(Relaxed);
    if addr == 0 {
        return Err(Walk::NotStarted);
    }
    match plan.roots.get(&(cell.root_anchor as u64)) {
        Some(&ty) => Ok((ty, addr)),
        None => Err(Walk::UnknownRoot),
    }
}

fn location(loc: &Location<'_>) -> asyncdump_protocol::Location {
    asyncdump_protocol::Location {
        file: loc.file().to_owned(),
        line: loc.line(),
        column: loc.column(),
    }
}

impl Interner {
    fn meta(&mut self, f: &RawFrame, snap: &mut Snapshot) -> u32 {
        let key = (
            f.name.as_ptr() as usize,
            f.location as *const _ as usize,
            f.source,
        );
        let next = self.metas.len() as u32;
        *self.metas.entry(key).or_insert_with(|| {
            snap.frame_metas.push(FrameMeta {
                name: f.name.to_owned(),
                location: location(f.location),
                source: match f.source {
                    Source::AnnotatedFn => FrameSource::AnnotatedFn,
                    Source::Labelled => FrameSource::Labelled,
                },
            });
            next
        })
    }

    fn site(&mut self, cell: &TaskCell, snap: &mut Snapshot) -> u32 {
        let key = (
            cell.spawn as *const _ as usize,
            cell.root_type.as_ptr() as usize,
        );
        let next = self.sites.len() as u32;
        *self.sites.entry(key).or_insert_with(|| {
            snap.spawn_sites.push(SpawnSite {
                location: location(cell.spawn),
                root_type: cell.root_type.to_owned(),
            });
            next
        })
    }
}

/// Runs `f` on the one capturer, which keeps walk buffers and interned names between requests. A
/// capturer left poisoned by a contained panic is replaced by a fresh one: its caches may be half made.
pub(crate) fn with_capturer<T>(f: impl FnOnce(&mut Capturer) -> T) -> T {
    static CAPTURER: std::sync::OnceLock<std::sync::Mutex<Capturer>> = std::sync::OnceLock::new();
    let capturer = CAPTURER.get_or_init(Default::default);
    let mut guard = capturer.lock().unwrap_or_else(|poisoned| {
        let mut guard = poisoned.into_inner();
        *guard = Capturer::default();
        capturer.clear_poison();
        guard
    });
    f(&mut guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameExt, instrument};
    use std::future::Future;
    use std::task::{Context, Waker};

    /// Holds the task's lock on another thread, as a thread polling it would, until the guard is dropped.
    struct Busy(
        Option<std::sync::mpsc::Sender<()>>,
        Option<std::thread::JoinHandle<()>>,
    );

    fn busy(cell: &Arc<TaskCell>) -> Busy {
        let (cell, (held_tx, held_rx), (stop_tx, stop_rx)) = (
            cell.clone(),
            std::sync::mpsc::channel(),
            std::sync::mpsc::channel::<()>(),
        );
        let thread = std::thread::spawn(move || {
            let _lock = cell.lock_for_poll();
            held_tx.send(()).unwrap();
            let _ = stop_rx.recv();
        });
        held_rx.recv().unwrap();
        Busy(Some(stop_tx), Some(thread))
    }

    impl Drop for Busy {
        fn drop(&mut self) {
            drop(self.0.take());
            self.1.take().unwrap().join().unwrap();
        }
    }

    fn capture_of(c: &mut Capturer, id: u64) -> Task {
        c.capture(&SnapshotRequest::default())
            .tasks
            .into_iter()
            .find(|t| t.id == id)
            .unwrap()
    }

    #[test]
    fn a_task_running_throughout_shows_its_last_idle_chain_or_none() {
        let mut fut = Box::pin(instrument(std::future::pending::<()>().frame("leaf")));
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        let (cell, id) = (fut.cell().clone(), fut.task_id());
        let mut c = Capturer::default();
        for _ in 0..2 {
            let _running = busy(&cell);
            let t = capture_of(&mut c, id);
            assert!(matches!(t.state, TaskState::Running { .. }));
            assert_eq!(
                (t.capture, t.frames.len()),
                (Capture::Unavailable, 0),
                "no idle capture yet"
            );
        }
        let idle = capture_of(&mut c, id);
        assert_eq!((idle.capture, idle.frames.len()), (Capture::Fresh, 1));
        let _running = busy(&cell);
        let t = capture_of(&mut c, id);
        assert!(matches!(t.capture, Capture::Stale { captured_ns } if captured_ns > 0));
        assert_eq!(t.frames.len(), 1, "the frames of the last idle capture");
    }

    fn walking(plan: &WalkPlan) -> SnapshotRequest {
        SnapshotRequest {
            include_completed: false,
            walk: Some(plan.clone()),
        }
    }

    #[test]
    fn a_running_task_shows_the_walk_of_its_last_idle_capture_only_under_the_same_plan() {
        let mut fut = Box::pin(instrument(std::future::pending::<()>()));
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        let (cell, id) = (fut.cell().clone(), fut.task_id());
        // A plan that reads one byte of the root future: enough to tell a walk from none.
        let plan = |size| WalkPlan {
            types: vec![asyncdump_protocol::TypePlan {
                size,
                ..Default::default()
            }],
            roots: vec![(cell.root_anchor as u64, 0)],
            max_nodes: 8,
            max_bytes: 64,
            ..WalkPlan::default()
        };
        let (one, other) = (plan(1), plan(2));
        let walk_of = |c: &mut Capturer, req: &SnapshotRequest| {
            c.capture(req)
                .tasks
                .into_iter()
                .find(|t| t.id == id)
                .unwrap()
        };
        let mut c = Capturer::default();
        {
            let _running = busy(&cell);
            assert_eq!(walk_of(&mut c, &walking(&one)).walk, Some(Walk::Busy));
        }
        let idle = walk_of(&mut c, &walking(&one));
        assert!(matches!(&idle.walk, Some(Walk::Nodes { nodes, .. }) if nodes.len() == 1));
        let _running = busy(&cell);
        let stale = walk_of(&mut c, &walking(&one));
        assert!(matches!(stale.capture, Capture::Stale { .. }));
        assert_eq!(
            stale.walk, idle.walk,
            "the earlier walk, under the same plan"
        );
        let other_plan = walk_of(&mut c, &walking(&other));
        assert_eq!(
            other_plan.walk,
            Some(Walk::Busy),
            "never under another plan"
        );
    }
}
