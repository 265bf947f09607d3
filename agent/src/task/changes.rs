//! Which tasks changed since a subscriber last looked: the journal behind [`Request::Subscribe`].
//!
//! While nobody subscribes, [`mark`] costs one relaxed load of a flag that is written only when a
//! subscription starts or ends. While someone does, the first mark of a task since the journal was last
//! drained pushes the task on a lock-free stack (one swap on the task's own flag, one compare-and-swap
//! on the stack's head, a reference count increment: no allocation, no lock); later marks of the same
//! task see its flag set and return. Marks happen where a task's record changes: it is registered, a poll
//! starts, a poll ends, it is woken, a JoinHandle edge to it appears, it ends.
//!
//! Subscribers drain the stack on their own threads ([`Journal::take`]). Every subscriber has a pending
//! set, and a drain moves the stack's tasks into all of them, so each sees every change once however its
//! ticks interleave with the others'. A pending set holds a task at most once: a subscriber that reads
//! slowly gets fewer, larger updates, never a growing backlog.
//!
//! [`Request::Subscribe`]: asyncdump_protocol::Request::Subscribe

use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr};
use std::sync::{Arc, Mutex, PoisonError};

use super::cell::TaskCell;
use crate::sys::FastMap;

/// Set while at least one subscription is open.
static TRACKING: AtomicBool = AtomicBool::new(false);
/// Head of the stack of marked tasks, linked through [`Link::next`]; each entry owns one reference.
static HEAD: AtomicPtr<TaskCell> = AtomicPtr::new(ptr::null_mut());

/// A task's membership of the stack, embedded in its cell.
#[derive(Default)]
pub(crate) struct Link {
    /// Set from the push until the drain that takes the task off the stack.
    queued: AtomicBool,
    /// The next entry below this one; written only by the thread that pushed the task.
    next: AtomicPtr<TaskCell>,
}

/// Records that `cell` changed. Called on the poll path: never blocks, never allocates.
#[inline]
pub(crate) fn mark(cell: &TaskCell) {
    if !TRACKING.load(Relaxed) || cell.changes.queued.load(Relaxed) {
        return;
    }
    if cell.changes.queued.swap(true, AcqRel) {
        return;
    }
    let entry: *const TaskCell = cell;
    // SAFETY: every `TaskCell` lives in an `Arc` (`TaskCell::register` is its only constructor), and
    // `cell` borrows it, so the count is at least one; the stack entry owns the reference added here.
    unsafe { Arc::increment_strong_count(entry) };
    let entry = entry.cast_mut();
    let mut head = HEAD.load(Relaxed);
    loop {
        cell.changes.next.store(head, Relaxed);
        match HEAD.compare_exchange_weak(head, entry, Release, Relaxed) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// Takes every marked task off the stack, clearing their flags so they can be marked again.
fn drain(out: &mut impl FnMut(Arc<TaskCell>)) {
    // Taking the whole stack at once (rather than popping) is what keeps it free of ABA problems.
    let mut entry = HEAD.swap(ptr::null_mut(), Acquire);
    while !entry.is_null() {
        // SAFETY: every entry on the stack came from `Arc::into_raw` in `mark` and owns that reference,
        // which we take back exactly once, here; the swap above made this thread the stack's only owner.
        let cell = unsafe { Arc::from_raw(entry) };
        entry = cell.changes.next.load(Relaxed);
        // After reading `next`: once the flag is clear, a poll may push the task again and rewrite it.
        cell.changes.queued.store(false, Release);
        out(cell);
    }
}

/// The open subscriptions' pending sets.
#[derive(Default)]
pub(crate) struct Journal {
    subscribers: FastMap<u64, FastMap<u64, Arc<TaskCell>>>,
    next_id: u64,
}

fn journal() -> &'static Mutex<Journal> {
    static JOURNAL: Mutex<Journal> = Mutex::new(Journal {
        subscribers: rustc_hash::FxHashMap::with_hasher(rustc_hash::FxBuildHasher),
        next_id: 1,
    });
    &JOURNAL
}

/// An open subscription's place in the journal; leaving it (drop) stops tracking once nobody else
/// subscribes.
pub(crate) struct Subscriber {
    id: u64,
}

impl Subscriber {
    /// Starts tracking changes for a new subscriber. Changes made before this call are not reported:
    /// the subscriber takes a full state right after.
    pub(crate) fn join() -> Subscriber {
        let mut j = journal().lock().unwrap_or_else(PoisonError::into_inner);
        let id = j.next_id;
        j.next_id += 1;
        j.subscribers.insert(id, FastMap::default());
        TRACKING.store(true, Relaxed);
        Subscriber { id }
    }

    /// The tasks marked since this subscriber's last call (or since it joined).
    pub(crate) fn take(&self) -> Vec<Arc<TaskCell>> {
        let mut j = journal().lock().unwrap_or_else(PoisonError::into_inner);
        let Journal { subscribers, .. } = &mut *j;
        drain(&mut |cell| {
            for set in subscribers.values_mut() {
                set.insert(cell.id, cell.clone());
            }
        });
        let mine = subscribers.get_mut(&self.id).map(std::mem::take);
        let mut out: Vec<Arc<TaskCell>> = mine.into_iter().flat_map(|m| m.into_values()).collect();
        out.sort_unstable_by_key(|c| c.id);
        out
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut j = journal().lock().unwrap_or_else(PoisonError::into_inner);
        j.subscribers.remove(&self.id);
        if j.subscribers.is_empty() {
            TRACKING.store(false, Relaxed);
            // Nobody will take them: release the references the stack holds.
            drain(&mut drop);
        }
    }
}
