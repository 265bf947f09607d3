//! [`Instrumented`]: the executor-agnostic task root, and the [`FrameExt`] combinators.
//!
//! Wrapping a future with [`instrument`] registers a task for it at once (the one allocation a task costs)
//! and, on each poll: takes the task lock, records running state and timings, sets the thread-local
//! current task so frames inside can link themselves, and hands the future a borrowed waker that counts wakes
//! and records the delegate only if a leaf clones it. Any executor can poll it: tokio, `futures::executor`,
//! smol, a hand-written loop.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use super::cell::{TaskCell, registry};
use super::frame::{Enter, Framed, Label};
use super::waker::PollWaker;
use crate::sys;

/// A future registered as an asyncdump task. Made by [`instrument`], [`FrameExt::instrument`] and
/// `asyncdump_agent::spawn`.
#[must_use = "futures do nothing unless polled"]
pub struct Instrumented<F> {
    // Dropped by hand in `Drop`, while holding the task lock, so that frames unlinking during the drop
    // find the lock already held by this thread.
    inner: ManuallyDrop<F>,
    task: Arc<TaskCell>,
}

/// Registers `fut` as a task; the caller's location is its spawn site.
#[track_caller]
pub fn instrument<F: Future>(fut: F) -> Instrumented<F> {
    Instrumented::new(None, Location::caller(), fut)
}

/// Like [`instrument`], with a task name shown in dumps.
#[track_caller]
pub fn instrument_named<F: Future>(name: impl Into<String>, fut: F) -> Instrumented<F> {
    Instrumented::new(Some(name.into().into_boxed_str()), Location::caller(), fut)
}

impl<F: Future> Instrumented<F> {
    pub(crate) fn new(name: Option<Box<str>>, spawn: &'static Location<'static>, inner: F) -> Self {
        // Monomorphized per `F`: its address names the root future's exact type in the binary's DWARF
        // (closures and async blocks share `type_name`s). Read once here, never on the poll path.
        let anchor =
            <Self as Future>::poll as fn(Pin<&mut Self>, &mut Context<'_>) -> Poll<F::Output>;
        let task = TaskCell::register(name, spawn, std::any::type_name::<F>(), anchor as usize);
        Instrumented {
            inner: ManuallyDrop::new(inner),
            task,
        }
    }
}

impl<F> Instrumented<F> {
    /// The agent's id for this task (as shown by `asyncdump dump`).
    pub fn task_id(&self) -> u64 {
        self.task.id
    }

    #[cfg_attr(not(any(feature = "tokio", test)), allow(dead_code))]
    pub(crate) fn cell(&self) -> &Arc<TaskCell> {
        &self.task
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned and never moved out; `task` is not pinned and not moved.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut *this.inner) };
        let task = &this.task;
        let _lock = task.lock_for_poll();
        // Pinned from here on, so the address stays valid until the drop, which takes the same lock.
        task.future_addr
            .store(&*inner as *const F as usize, Relaxed);
        task.poll_waker_data
            .store(cx.waker().data() as usize, Relaxed);
        let start = sys::ticks();
        task.running_since_ns.store(start, Relaxed);
        // Before and after the poll: a subscriber that looks during a long poll sees it running, and
        // the end of the poll is a change of its own.
        super::changes::mark(task);
        let out = {
            let _enter = Enter::new(Arc::as_ptr(task), &task.root);
            let poll_waker = PollWaker {
                inner: cx.waker(),
                task,
            };
            let waker = poll_waker.as_waker();
            inner.poll(&mut Context::from_waker(&waker))
        };
        let end = sys::ticks();
        // Only the lock holder writes these, so load + store is enough (no read-modify-write needed).
        task.polls.store(task.polls.load(Relaxed) + 1, Relaxed);
        task.busy_ns.store(
            task.busy_ns.load(Relaxed) + end.saturating_sub(start),
            Relaxed,
        );
        task.last_poll_end_ns.store(end, Relaxed);
        if out.is_ready() {
            task.mark_completed(end);
        }
        super::changes::mark(task);
        out
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        // Declared first so it runs last, also when dropping `inner` unwinds.
        let _exit = Exit {
            task: self.task.clone(),
        };
        let _lock = self.task.lock_for_poll();
        let _enter = Enter::new(Arc::as_ptr(&self.task), &self.task.root);
        // A walk that takes the lock after us must not read the future being freed.
        self.task.future_addr.store(0, Relaxed);
        // SAFETY: `inner` is dropped exactly once, here; `self` is being dropped so it is never used again.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
    }
}

/// Ends a task: orphans frames that outlived the future, marks it completed and moves it to the completed
/// ring. The executor's waker stays in the cell until the cell is freed (see `waker`): owned clones held
/// by leaves may still wake through it.
struct Exit {
    task: Arc<TaskCell>,
}

impl Drop for Exit {
    fn drop(&mut self) {
        let task = &self.task;
        {
            let _lock = task.lock_for_poll();
            // SAFETY: we hold the lock; this is the task's own root. Children left here are frames that
            // were moved out of the task's future before it was dropped.
            if unsafe { task.root.orphan_children() } {
                task.leak_on_exit();
            }
        }
        task.mark_completed(sys::ticks());
        registry().retire(task);
        super::changes::mark(task);
        if task.leak.load(Relaxed) {
            // Frames orphaned from this task may still hold a pointer to its cell (see `frame`): keep the
            // cell alive for the rest of the process. Only futures polled in one task and then moved to
            // another cause this.
            std::mem::forget(task.clone());
        }
    }
}

/// Combinators for any future.
pub trait FrameExt: Future + Sized {
    /// Shows this future as a frame named `label` in its task's chain, at the caller's location.
    #[track_caller]
    fn frame(self, label: &'static str) -> Framed<Self, Label> {
        Framed::labelled(self, label, Location::caller())
    }

    /// Registers this future as a task (see [`instrument`]).
    #[track_caller]
    fn instrument(self) -> Instrumented<Self> {
        Instrumented::new(None, Location::caller(), self)
    }

    /// Registers this future as a named task (see [`instrument_named`]).
    #[track_caller]
    fn instrument_named(self, name: impl Into<String>) -> Instrumented<Self> {
        Instrumented::new(Some(name.into().into_boxed_str()), Location::caller(), self)
    }
}

impl<F: Future> FrameExt for F {}

#[doc(hidden)]
pub mod __private {
    use super::*;

    pub use crate::task::frame::Meta;

    /// Used by `#[frame]`: wraps an async fn's body; `meta` is the function's own `static`.
    #[inline]
    pub fn framed_fn<F: Future>(meta: &'static Meta, body: F) -> Framed<F> {
        Framed::annotated(body, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::agent_names as names;

    #[test]
    fn the_inspector_finds_instrumented_by_the_names_in_the_protocol() {
        let root = instrument(async {});
        let ty = std::any::type_name_of_val(&root);
        assert!(ty.starts_with(&format!("{}<", names::INSTRUMENTED)), "{ty}");
        let [_, task] = field_names!(root, Instrumented { inner, task });
        assert_eq!(task, names::INSTRUMENTED_TASK);
        // The anchor, `<Instrumented<F> as Future>::poll`, as a demangled v0 symbol spells it.
        let ty = std::any::type_name::<Instrumented<std::future::Ready<()>>>();
        assert!(names::is_anchor(&format!(
            "<{ty} as core::future::future::Future>::poll"
        )));
    }
}
