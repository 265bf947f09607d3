//! Per-task bookkeeping ([`TaskCell`]), the per-task lock, and the registry of tasks.
//!
//! A `TaskCell` is allocated once, when a future is instrumented, and shared (`Arc`) by the [`Instrumented`]
//! wrapper, the registry, the task's `JoinHandle` and any waker clones a leaf keeps. It holds the root of
//! the task's intrusive frame tree and counters that only the polling thread writes.
//!
//! ## The task lock
//! `lock` is 0 when the task is idle, the OS tid of the thread that polls (or drops) the task, or
//! [`READER`] while the snapshot thread copies the frame tree. Every change to the tree happens under it,
//! and the snapshot reads the tree only under it: reading frames while another thread polls the task is
//! therefore never a data race. Storing the tid makes the lock aware of re-entry (a thread that already
//! holds it, e.g. while dropping a nested frame, does not wait for itself) and tells the snapshot which
//! thread runs the task. The snapshot holds it only while copying pointers, so a poll that finds it held
//! spins briefly; it never sleeps on a kernel lock.
//!
//! ## The registry
//! Live tasks sit in one of [`SHARDS`] slabs, chosen by task id; a shard's mutex is taken at spawn, at task
//! end and by the snapshot thread, never on the poll path. Ended tasks move to a bounded ring so that
//! `asyncdump dump --all` can show recently completed tasks.
//!
//! [`Instrumented`]: crate::Instrumented

use std::collections::VecDeque;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::frame::Node;
use super::waker::DelegateSlot;
use crate::sys;

/// Lock value while the snapshot thread reads the tree; no OS tid reaches it.
pub(crate) const READER: u32 = u32::MAX;

/// Number of registry shards; spreads spawn/exit contention across threads.
const SHARDS: usize = 16;

/// How many ended tasks are kept for `--all` unless the host sets otherwise ([`crate::Builder::completed_retained`]).
pub const COMPLETED_RETAINED: usize = 256;
/// The most ended tasks that can be kept: a bound on the memory they hold, whatever is asked.
pub const MAX_COMPLETED_RETAINED: usize = 100_000;

static RETAINED: AtomicUsize = AtomicUsize::new(COMPLETED_RETAINED);

/// Keeps the last `n` ended tasks (at most [`MAX_COMPLETED_RETAINED`]); returns what it was set to.
pub(crate) fn set_completed_retained(n: usize) -> usize {
    let n = n.min(MAX_COMPLETED_RETAINED);
    RETAINED.store(n, Relaxed);
    n
}

pub(crate) struct TaskCell {
    pub(crate) id: u64,
    pub(crate) name: Option<Box<str>>,
    pub(crate) spawn: &'static Location<'static>,
    pub(crate) root_type: &'static str,
    /// See `asyncdump_protocol::Task::root_anchor`.
    pub(crate) root_anchor: usize,
    /// Address of the pinned root future, stored by every poll (0 before the first): where a walk plan
    /// starts. Read only under the task lock, when no poll can move or drop the future.
    pub(crate) future_addr: AtomicUsize,
    /// The data pointer of the executor's waker, stored by every poll (see the protocol's
    /// `Task::poll_waker_data`).
    pub(crate) poll_waker_data: AtomicUsize,
    /// All `*_ns` timestamps here are in [`sys::ticks`], converted when a snapshot is taken.
    pub(crate) created_ns: u64,
    lock: AtomicU32,
    /// Root of the frame tree: its children are the frames the task root awaits directly.
    pub(crate) root: Node,
    pub(crate) running_since_ns: AtomicU64,
    pub(crate) polls: AtomicU64,
    pub(crate) busy_ns: AtomicU64,
    /// 0 until the first poll ends.
    pub(crate) last_poll_end_ns: AtomicU64,
    /// 0 while the task has not ended.
    pub(crate) completed_ns: AtomicU64,
    pub(crate) wakes: AtomicU64,
    pub(crate) last_wake_ns: AtomicU64,
    pub(crate) delegate: DelegateSlot,
    /// Task id (0: none) and frame id (0: the task root) of whoever awaits this task's JoinHandle.
    pub(crate) awaited_by_task: AtomicU64,
    pub(crate) awaited_by_frame: AtomicU64,
    slab_key: AtomicUsize,
    /// Set when the task orphaned frames that may still point at it: the cell is then never freed.
    pub(crate) leak: AtomicBool,
    /// The task's place in the journal of changes, while a subscription is open.
    pub(crate) changes: super::changes::Link,
}

impl TaskCell {
    /// The address of the task's root frame node: the parent id that top-level frames report.
    pub(crate) fn root_id(&self) -> usize {
        &self.root as *const Node as usize
    }

    /// Allocates and registers a task. This is the one allocation a task costs the agent.
    pub(crate) fn register(
        name: Option<Box<str>>,
        spawn: &'static Location<'static>,
        root_type: &'static str,
        root_anchor: usize,
    ) -> Arc<TaskCell> {
        let reg = registry();
        let id = reg.next_id.fetch_add(1, Relaxed);
        let cell = Arc::new(TaskCell {
            id,
            name,
            spawn,
            root_type,
            root_anchor,
            future_addr: AtomicUsize::new(0),
            poll_waker_data: AtomicUsize::new(0),
            created_ns: sys::ticks(),
            lock: AtomicU32::new(0),
            root: Node::root(),
            running_since_ns: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            last_poll_end_ns: AtomicU64::new(0),
            completed_ns: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            last_wake_ns: AtomicU64::new(0),
            delegate: DelegateSlot::default(),
            awaited_by_task: AtomicU64::new(0),
            awaited_by_frame: AtomicU64::new(0),
            slab_key: AtomicUsize::new(usize::MAX),
            leak: AtomicBool::new(false),
            changes: Default::default(),
        });
        reg.insert(&cell);
        super::changes::mark(&cell);
        cell
    }

    /// Takes the lock for polling or dropping the task; waits only while the snapshot thread copies frames.
    #[inline]
    pub(crate) fn lock_for_poll(&self) -> PollLock<'_> {
        let me = sys::tid();
        let mut spins = 0u32;
        loop {
            match self.lock.compare_exchange_weak(0, me, Acquire, Relaxed) {
                Ok(_) => {
                    return PollLock {
                        cell: self,
                        release: true,
                    };
                }
                Err(holder) if holder == me => {
                    return PollLock {
                        cell: self,
                        release: false,
                    };
                }
                Err(_) => backoff(&mut spins),
            }
        }
    }

    /// Takes this task's lock from a thread that may be polling another task, `polling`, and so hold its
    /// lock. While it waits it gives `polling`'s lock up, and takes it back once done with this one: two
    /// threads each needing the other's task would otherwise wait forever. Giving it up is safe because the
    /// only tree change under way is in this task's tree; `polling`'s tree is consistent meanwhile (a
    /// snapshot may read it). Only the innermost task a thread polls is given up: instrumented tasks nested
    /// inside each other, crossing frames with another such nest at the same instant, could still wait.
    pub(crate) fn lock_from<'a>(&'a self, polling: Option<&'a TaskCell>) -> ForeignLock<'a> {
        let me = sys::tid();
        if let Some(lock) = self.try_lock_for_poll(me) {
            return ForeignLock {
                lock: Some(lock),
                restore: None,
            };
        }
        let restore = polling.filter(|p| p.lock.load(Relaxed) == me);
        if let Some(p) = restore {
            p.lock.store(0, Release);
        }
        ForeignLock {
            lock: Some(self.lock_for_poll()),
            restore,
        }
    }

    fn try_lock_for_poll(&self, me: u32) -> Option<PollLock<'_>> {
        match self.lock.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => Some(PollLock {
                cell: self,
                release: true,
            }),
            Err(holder) if holder == me => Some(PollLock {
                cell: self,
                release: false,
            }),
            Err(_) => None,
        }
    }

    /// Tries to take the lock for reading, for at most `wait_ns` and not past `deadline_ns`; fails if the
    /// task stays busy. The clock is read only once the first attempt failed.
    pub(crate) fn lock_for_read(&self, wait_ns: u64, deadline_ns: u64) -> Option<ReadLock<'_>> {
        let mut give_up = None;
        let mut tries = 0u32;
        loop {
            if self
                .lock
                .compare_exchange_weak(0, READER, Acquire, Relaxed)
                .is_ok()
            {
                return Some(ReadLock { cell: self });
            }
            let until = *give_up.get_or_insert_with(|| (sys::now_ns() + wait_ns).min(deadline_ns));
            tries += 1;
            if tries.is_multiple_of(64) && sys::now_ns() >= until {
                return None;
            }
            std::hint::spin_loop();
            if tries.is_multiple_of(1024) {
                std::thread::yield_now();
            }
        }
    }

    /// Takes the lock for reading if the task is idle right now; never waits.
    pub(crate) fn try_lock_for_read(&self) -> Option<ReadLock<'_>> {
        self.lock
            .compare_exchange(0, READER, Acquire, Relaxed)
            .ok()
            .map(|_| ReadLock { cell: self })
    }

    /// The OS tid of the thread holding the lock, if a poller (not the reader) holds it.
    pub(crate) fn running_on(&self) -> Option<u32> {
        match self.lock.load(Relaxed) {
            0 | READER => None,
            tid => Some(tid),
        }
    }

    pub(crate) fn is_completed(&self) -> bool {
        self.completed_ns.load(Relaxed) != 0
    }

    pub(crate) fn mark_completed(&self, at_ns: u64) {
        let _ = self
            .completed_ns
            .compare_exchange(0, at_ns.max(1), Relaxed, Relaxed);
    }

    /// Frames orphaned from this task may still point at its cell: never free it (see `frame`).
    pub(crate) fn leak_on_exit(&self) {
        self.leak.store(true, Relaxed);
    }

    /// Records a wake of this task (from any thread).
    #[inline]
    pub(crate) fn record_wake(&self) {
        self.wakes.fetch_add(1, Relaxed);
        self.last_wake_ns.store(sys::ticks(), Relaxed);
        super::changes::mark(self);
    }
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 128 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Held while a thread polls or drops a task. Dropping it releases the lock, also on unwind.
pub(crate) struct PollLock<'a> {
    cell: &'a TaskCell,
    /// False when the thread already held the lock (re-entry): the outer holder releases it.
    release: bool,
}

impl Drop for PollLock<'_> {
    fn drop(&mut self) {
        if self.release {
            self.cell.lock.store(0, Release);
        }
    }
}

/// Another task's lock, see [`TaskCell::lock_from`]; dropping it releases that lock, then takes back the
/// lock of the task this thread polls if it was given up.
pub(crate) struct ForeignLock<'a> {
    lock: Option<PollLock<'a>>,
    restore: Option<&'a TaskCell>,
}

impl Drop for ForeignLock<'_> {
    fn drop(&mut self) {
        drop(self.lock.take());
        if let Some(p) = self.restore {
            let me = sys::tid();
            let mut spins = 0;
            while p
                .lock
                .compare_exchange_weak(0, me, Acquire, Relaxed)
                .is_err()
            {
                backoff(&mut spins);
            }
        }
    }
}

/// Held while the snapshot thread copies a task's frame tree.
pub(crate) struct ReadLock<'a> {
    cell: &'a TaskCell,
}

impl ReadLock<'_> {
    /// Copies the task's frame tree into `out` (see [`super::frame::copy_tree`]).
    pub(crate) fn copy_frames(&self, out: &mut Vec<super::frame::RawFrame>) {
        // SAFETY: this guard holds the task's lock in reader mode until it is dropped.
        unsafe { super::frame::copy_tree(&self.cell.root, out) }
    }
}

impl Drop for ReadLock<'_> {
    fn drop(&mut self) {
        self.cell.lock.store(0, Release);
    }
}

pub(crate) struct Registry {
    shards: [Mutex<Slab>; SHARDS],
    completed: Mutex<VecDeque<Arc<TaskCell>>>,
    next_id: AtomicU64,
    pub(crate) spawned: AtomicU64,
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Arc<TaskCell>>>,
    free: Vec<usize>,
    live: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a registry lock cannot leave a slab half-updated in a way that matters to
    // readers, so poisoning is ignored rather than spread into the host.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry {
        shards: [const {
            Mutex::new(Slab {
                entries: Vec::new(),
                free: Vec::new(),
                live: 0,
            })
        }; SHARDS],
        completed: Mutex::new(VecDeque::new()),
        next_id: AtomicU64::new(1),
        spawned: AtomicU64::new(0),
    };
    &REGISTRY
}

impl Registry {
    fn shard(&self, id: u64) -> &Mutex<Slab> {
        &self.shards[id as usize % SHARDS]
    }

    fn insert(&self, cell: &Arc<TaskCell>) {
        let mut slab = lock(self.shard(cell.id));
        let key = match slab.free.pop() {
            Some(key) => {
                slab.entries[key] = Some(cell.clone());
                key
            }
            None => {
                slab.entries.push(Some(cell.clone()));
                slab.entries.len() - 1
            }
        };
        slab.live += 1;
        cell.slab_key.store(key, Relaxed);
        self.spawned.fetch_add(1, Relaxed);
    }

    /// Moves an ended task from the live slab to the completed ring.
    pub(crate) fn retire(&self, cell: &Arc<TaskCell>) {
        let removed = {
            let mut slab = lock(self.shard(cell.id));
            let key = cell.slab_key.swap(usize::MAX, Relaxed);
            let removed = slab.entries.get_mut(key).and_then(Option::take);
            if removed.is_some() {
                slab.free.push(key);
                slab.live -= 1;
            }
            removed
        };
        if let Some(cell) = removed {
            let evicted = {
                let mut ring = lock(&self.completed);
                ring.push_back(cell);
                // Two at most, and no allocation: after the retention is lowered, the ring shrinks by
                // one per ended task until it fits.
                let keep = RETAINED.load(Relaxed);
                let mut pop = || (ring.len() > keep).then(|| ring.pop_front()).flatten();
                (pop(), pop())
            };
            // Dropped outside the lock: the last reference may run arbitrary destructors (the task name).
            drop(evicted);
        }
    }

    /// Every live task, and the retained completed ones if asked.
    pub(crate) fn collect(&self, include_completed: bool) -> Vec<Arc<TaskCell>> {
        let mut out = Vec::new();
        for shard in &self.shards {
            let slab = lock(shard);
            out.reserve(slab.live);
            out.extend(slab.entries.iter().flatten().cloned());
        }
        if include_completed {
            out.extend(lock(&self.completed).iter().cloned());
        }
        out.sort_unstable_by_key(|c| c.id);
        out
    }

    /// The distinct root anchors of the live tasks, sorted.
    pub(crate) fn root_anchors(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for shard in &self.shards {
            let slab = lock(shard);
            out.extend(slab.entries.iter().flatten().map(|c| c.root_anchor as u64));
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    pub(crate) fn stats(&self) -> asyncdump_protocol::Stats {
        let live = self.shards.iter().map(|s| lock(s).live as u64).sum();
        asyncdump_protocol::Stats {
            tasks_live: live,
            tasks_spawned: self.spawned.load(Relaxed),
            tasks_completed_retained: lock(&self.completed).len() as u64,
        }
    }
}
