//! The task's waker as a lazily populated delegate.
//!
//! While an instrumented task is polled, its future sees a *borrowed* waker ([`PollWaker`], on the stack) that
//! forwards to the executor's waker. Nothing is recorded and nothing allocated unless a leaf keeps the waker
//! (clones it): only then does the delegate come into being. A clone is an owned waker whose data pointer
//! is the task's `Arc<TaskCell>` (a reference-count increment, no allocation); the executor's waker it must
//! eventually wake is kept once per task in [`DelegateSlot`] (re-cloned only when the executor hands over a
//! different one), and woken without a lock. Waking through any of these counts a wake for the task; the number of live clones is
//! what the snapshot reports as the delegate.

use std::mem::ManuallyDrop;
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{RawWaker, RawWakerVTable, Waker};

use super::cell::TaskCell;

/// Most executor wakers published for lock-free waking per task; past this the task's wakes take the lock.
const MAX_PUBLISHED: usize = 8;

/// The executor's waker for owned clones to wake, and the delegate counters.
///
/// Waking is lock-free: the current executor waker's raw parts are published through a seqlock
/// (`seq`, `data`, `vtable`), and every waker ever published is kept alive in `state` until the `TaskCell`
/// is dropped. Every owned waker holds an `Arc<TaskCell>`, so any pair a waking thread can read is still
/// valid while it uses it. An executor that keeps handing over new wakers (more than [`MAX_PUBLISHED`])
/// switches the task to `churn` mode, where wakes clone the current waker under the lock instead, so the
/// number of wakers kept stays bounded.
#[derive(Default)]
pub(crate) struct DelegateSlot {
    seq: AtomicU64,
    data: AtomicUsize,
    vtable: AtomicUsize,
    churn: AtomicBool,
    /// Identity (data, vtable) of the current waker, to skip the lock when it is unchanged. Only ever
    /// compared, never dereferenced; written under the lock.
    held_data: AtomicUsize,
    held_vtable: AtomicUsize,
    state: Mutex<SlotState>,
    pub(crate) clones: AtomicU32,
    /// When the live-clone count last rose from zero.
    pub(crate) since_ns: AtomicU64,
}

#[derive(Default)]
struct SlotState {
    current: Option<Waker>,
    /// Whether `current` was published through the seqlock (and so must never be dropped early).
    current_published: bool,
    /// Published wakers that were replaced: kept alive, see [`DelegateSlot`]. Allocates only when the
    /// executor changes a task's waker, which tokio never does.
    retired: Vec<Waker>,
}

impl DelegateSlot {
    fn register(&self, waker: &Waker) {
        // Fast path without the lock: executors hand a task the same waker poll after poll.
        if self.held_data.load(Relaxed) == waker.data() as usize
            && self.held_vtable.load(Relaxed) == waker.vtable() as *const _ as usize
        {
            return;
        }
        let dropped = {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if st.current.as_ref().is_some_and(|w| w.will_wake(waker)) {
                None
            } else {
                let new = waker.clone();
                let publish = !self.churn.load(Relaxed) && st.retired.len() < MAX_PUBLISHED;
                if publish {
                    self.seq.fetch_add(1, Release);
                    self.data.store(new.data() as usize, Relaxed);
                    self.vtable
                        .store(new.vtable() as *const _ as usize, Relaxed);
                    self.seq.fetch_add(1, Release);
                } else {
                    self.churn.store(true, Release);
                }
                let was_published = std::mem::replace(&mut st.current_published, publish);
                match st.current.replace(new) {
                    Some(old) if was_published => {
                        st.retired.push(old);
                        None
                    }
                    old => old,
                }
            }
        };
        self.held_data.store(waker.data() as usize, Relaxed);
        self.held_vtable
            .store(waker.vtable() as *const _ as usize, Relaxed);
        // Dropped outside the lock: dropping the executor's last reference may drop the task itself.
        drop(dropped);
    }

    fn wake(&self) {
        if !self.churn.load(Acquire) {
            let (data, vtable) = loop {
                let s1 = self.seq.load(Acquire);
                let (data, vtable) = (self.data.load(Relaxed), self.vtable.load(Relaxed));
                std::sync::atomic::fence(Acquire);
                if s1.is_multiple_of(2) && self.seq.load(Relaxed) == s1 {
                    break (data, vtable);
                }
                std::hint::spin_loop();
            };
            if data == 0 && vtable == 0 {
                return; // nothing registered yet
            }
            // SAFETY: (data, vtable) are the raw parts of a waker that `state` owns and keeps alive until
            // this TaskCell is dropped (published wakers are retired, never dropped); the caller holds an
            // Arc to this TaskCell. ManuallyDrop: the waker is borrowed, its reference stays with `state`.
            let waker = ManuallyDrop::new(unsafe {
                Waker::from_raw(RawWaker::new(
                    data as *const (),
                    &*(vtable as *const RawWakerVTable),
                ))
            });
            waker.wake_by_ref();
            return;
        }
        let waker = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .current
            .clone();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// `now` is a recent tick: the start of the current poll, so that cloning reads no clock.
    fn add_clone(&self, now: u64) {
        if self.clones.fetch_add(1, Relaxed) == 0 {
            self.since_ns.store(now, Relaxed);
        }
    }
}

/// The borrowed waker handed to the task's future for one poll.
pub(crate) struct PollWaker<'a> {
    pub(crate) inner: &'a Waker,
    pub(crate) task: &'a Arc<TaskCell>,
}

impl PollWaker<'_> {
    /// A `Waker` borrowing `self`; it must not outlive `self`, hence `ManuallyDrop` and the borrow.
    #[inline]
    pub(crate) fn as_waker(&self) -> ManuallyDrop<Waker> {
        let raw = RawWaker::new((self as *const Self).cast(), &POLL_VTABLE);
        // SAFETY: POLL_VTABLE's functions treat the data pointer as `&PollWaker`, which `self` is; the waker
        // is only lent to the future for the duration of this poll (Context borrows it), and any clone is
        // turned into an owned waker that does not point at `self`.
        ManuallyDrop::new(unsafe { Waker::from_raw(raw) })
    }
}

static POLL_VTABLE: RawWakerVTable =
    RawWakerVTable::new(poll_clone, poll_wake, poll_wake, poll_drop);
static OWNED_VTABLE: RawWakerVTable =
    RawWakerVTable::new(owned_clone, owned_wake, owned_wake_by_ref, owned_drop);
/// Where the inspector looks for [`OWNED_VTABLE`] in the DWARF.
#[cfg(test)]
const OWNED_VTABLE_PATH: &str = concat!(module_path!(), "::OWNED_VTABLE");

/// # Safety
/// `data` is a `*const PollWaker` that is alive (guaranteed for the poll the borrowed waker was lent to).
unsafe fn poll_clone(data: *const ()) -> RawWaker {
    // SAFETY: per this function's contract.
    let pw = unsafe { &*data.cast::<PollWaker<'_>>() };
    pw.task.delegate.register(pw.inner);
    pw.task
        .delegate
        .add_clone(pw.task.running_since_ns.load(Relaxed));
    RawWaker::new(Arc::into_raw(pw.task.clone()).cast(), &OWNED_VTABLE)
}

/// # Safety
/// As for [`poll_clone`]. (By-value wake cannot reach a borrowed waker, which nobody owns; by-ref can.)
unsafe fn poll_wake(data: *const ()) {
    // SAFETY: per this function's contract.
    let pw = unsafe { &*data.cast::<PollWaker<'_>>() };
    pw.task.record_wake();
    pw.inner.wake_by_ref();
}

unsafe fn poll_drop(_: *const ()) {}

/// # Safety
/// `data` came from `Arc::<TaskCell>::into_raw` and this waker still owns that reference.
unsafe fn owned_clone(data: *const ()) -> RawWaker {
    // SAFETY: per contract, the Arc is alive; we add one reference for the new waker.
    unsafe { Arc::increment_strong_count(data.cast::<TaskCell>()) };
    // SAFETY: as above.
    let task = unsafe { &*data.cast::<TaskCell>() };
    task.delegate.add_clone(task.last_poll_end_ns.load(Relaxed));
    RawWaker::new(data, &OWNED_VTABLE)
}

/// # Safety
/// As for [`owned_clone`]; consumes this waker's reference.
unsafe fn owned_wake(data: *const ()) {
    // SAFETY: per contract.
    unsafe { owned_wake_by_ref(data) };
    // SAFETY: per contract; by-value wake consumes the waker.
    unsafe { owned_drop(data) };
}

/// # Safety
/// As for [`owned_clone`].
unsafe fn owned_wake_by_ref(data: *const ()) {
    // SAFETY: per contract, the Arc is alive.
    let task = unsafe { &*data.cast::<TaskCell>() };
    task.record_wake();
    task.delegate.wake();
}

/// # Safety
/// As for [`owned_clone`]; releases this waker's reference.
unsafe fn owned_drop(data: *const ()) {
    // SAFETY: per contract, the Arc is alive until we release our reference just below.
    unsafe { &*data.cast::<TaskCell>() }
        .delegate
        .clones
        .fetch_sub(1, Relaxed);
    // SAFETY: this waker owned exactly one strong reference.
    unsafe { drop(Arc::from_raw(data.cast::<TaskCell>())) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::agent_names as names;

    #[test]
    fn the_inspector_finds_the_owned_waker_vtable_by_the_name_in_the_protocol() {
        // Naming the static here ties this check to it: renaming or moving it fails to compile.
        let _ = &OWNED_VTABLE;
        assert_eq!(OWNED_VTABLE_PATH, names::OWNED_WAKER_VTABLE);
    }
}
