//! Intrusive frames: a [`Node`] lives inside each pinned [`Framed`] future and links into its task's tree.
//!
//! Each node's `parent` is its continuation link (the frame that awaits it, or the task's root node); the
//! children of a node form a doubly linked list, newest first (a new child is pushed at the head, which needs
//! no tail pointer), read back oldest first, so a `join!`/`select!` with several pending framed branches
//! shows as a tree in first-poll order. Linking happens on a frame's first poll, by reading the
//! thread-local [`Current`] that the enclosing task (and each enclosing frame) sets while it polls; unlinking
//! happens when the frame completes or is dropped. Nothing is allocated: the node is part of the future.
//!
//! All link fields are atomics used with `Relaxed` ordering: the task lock (see [`super::cell`]) orders them.
//! Every write to a node's links happens while holding the lock of the task that node is linked into, and
//! the snapshot thread reads them only under that lock.
//!
//! Frames can outlive their place in a tree (a boxed future polled in one task, then handed to another).
//! When a node is dropped or polled while linked into a task other than the one polling it, it takes that
//! task's lock to unlink itself, giving up its own task's lock while it waits (see
//! `TaskCell::lock_from`), so that two tasks taking each other's frames cannot wait on each other. For
//! that pointer to stay valid, a task that ever had to orphan such frames deliberately leaks its
//! `TaskCell` (see [`super::instrument`]), so a stale owner pointer never dangles.

use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomPinned;
use std::panic::Location;
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::task::{Context, Poll};

use super::cell::TaskCell;

/// What kind of frame a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    AnnotatedFn,
    Labelled,
}

/// What a frame is: its name, where it is written and its kind. `#[frame]` makes one `static` per function,
/// so a node carries one pointer instead of these three fields, which every level of a chain would otherwise
/// copy each time its future moves.
#[doc(hidden)]
#[derive(Debug)]
pub struct Meta {
    pub(crate) name: &'static str,
    pub(crate) location: &'static Location<'static>,
    pub(crate) source: Source,
}

impl Meta {
    /// The metadata of an `async fn` annotated with `#[frame]`.
    pub const fn annotated_fn(name: &'static str, location: &'static Location<'static>) -> Meta {
        Meta {
            name,
            location,
            source: Source::AnnotatedFn,
        }
    }
}

pub(crate) struct Node {
    /// Null only for a task's root and for a labelled frame not linked yet (see [`Label`]).
    meta: AtomicPtr<Meta>,
    /// The task whose tree holds this node; null while unlinked.
    task: AtomicPtr<TaskCell>,
    parent: AtomicPtr<Node>,
    /// The newest child.
    first: AtomicPtr<Node>,
    /// The next newer and the next older sibling. Both null while unlinked, as is `first`.
    prev: AtomicPtr<Node>,
    next: AtomicPtr<Node>,
    _pin: PhantomPinned,
}

const fn null<T>() -> AtomicPtr<T> {
    AtomicPtr::new(ptr::null_mut())
}

fn raw<T>(r: &T) -> *mut T {
    r as *const T as *mut T
}

impl Node {
    const fn new(meta: *const Meta) -> Self {
        Node {
            meta: AtomicPtr::new(meta as *mut Meta),
            task: null(),
            parent: null(),
            first: null(),
            prev: null(),
            next: null(),
            _pin: PhantomPinned,
        }
    }

    /// A task's root: the parent of its outermost frames, never itself reported.
    pub(crate) const fn root() -> Self {
        Node::new(ptr::null())
    }

    /// What this frame is. Valid while the node is linked: the caller holds its task's lock.
    pub(crate) fn meta(&self) -> *const Meta {
        self.meta.load(Relaxed)
    }

    /// The child first polled, the tail of the children list, or, when there are more than `at_most`
    /// children, the `at_most`-th newest: a reader that keeps that many can stop there. The caller holds
    /// the task's lock.
    pub(crate) fn oldest_child(&self, at_most: usize) -> *const Node {
        let mut child: *const Node = self.first.load(Relaxed);
        for _ in 1..at_most {
            if child.is_null() {
                break;
            }
            // SAFETY: a linked child is alive (nodes unlink before they die) and the caller holds the lock
            // that guards its links.
            let older = unsafe { (*child).next.load(Relaxed) };
            if older.is_null() {
                break;
            }
            child = older;
        }
        child
    }
    /// The sibling first polled after this one. The caller holds the task's lock.
    pub(crate) fn newer_sibling(&self) -> *const Node {
        self.prev.load(Relaxed)
    }
    pub(crate) fn parent(&self) -> *const Node {
        self.parent.load(Relaxed)
    }

    /// Pushes `self` at the head of `parent`'s children in `task`'s tree.
    ///
    /// # Safety
    /// The caller holds `task`'s lock, `self` is unlinked, `parent` is in `task`'s tree (or is its root), and
    /// `self` is pinned: it stays at this address until its `Drop` runs.
    unsafe fn link(&self, task: *const TaskCell, parent: &Node, label: Option<&Meta>) {
        let me = raw(self);
        if let Some(label) = label {
            // The label lives beside this node in the same pinned future, so the pointer stays valid for as
            // long as the node is linked.
            self.meta.store(raw(label), Relaxed);
        }
        // `prev` and `first` are null already: `self` is unlinked.
        self.task.store(task as *mut _, Relaxed);
        self.parent.store(raw(parent), Relaxed);
        let older = parent.first.load(Relaxed);
        self.next.store(older, Relaxed);
        if !older.is_null() {
            // SAFETY: `older` is a linked child of `parent`, alive because linked nodes unlink before they
            // die, and we hold the lock that guards its links.
            unsafe { (*older).prev.store(me, Relaxed) };
        }
        parent.first.store(me, Relaxed);
    }

    /// Removes `self` from its tree and flattens any children it still has into unlinked nodes.
    /// Returns true if children had to be orphaned.
    ///
    /// # Safety
    /// The caller holds the lock of the task `self` is linked into.
    #[inline]
    pub(crate) unsafe fn unlink_locked(&self) -> bool {
        let parent = self.parent.load(Relaxed);
        if !parent.is_null() {
            let (prev, next) = (self.prev.load(Relaxed), self.next.load(Relaxed));
            // SAFETY (all three derefs): `parent`, `prev` and `next` are linked nodes of the same tree, alive
            // because linked nodes unlink before they die; we hold the lock guarding their links.
            unsafe {
                if prev.is_null() {
                    (*parent).first.store(next, Relaxed);
                } else {
                    (*prev).next.store(next, Relaxed);
                }
                if !next.is_null() {
                    (*next).prev.store(prev, Relaxed);
                }
            }
        }
        self.task.store(ptr::null_mut(), Relaxed);
        for field in [&self.parent, &self.prev, &self.next] {
            field.store(ptr::null_mut(), Relaxed);
        }
        // Children left at this point are frames moved out of this future: rare, so out of line.
        // SAFETY: same lock, same tree.
        !self.first.load(Relaxed).is_null() && unsafe { self.orphan_children() }
    }

    /// Unlinks every descendant of `self` without allocating: repeatedly detach the first child, hoisting
    /// its own children into `self`'s list. Returns true if there was any.
    ///
    /// # Safety
    /// The caller holds the lock of the task `self`'s subtree is linked into (or `self` is that task's root).
    #[cold]
    pub(crate) unsafe fn orphan_children(&self) -> bool {
        let mut any = false;
        loop {
            let child = self.first.load(Relaxed);
            if child.is_null() {
                return any;
            }
            any = true;
            // SAFETY: `child` is linked under `self`, so alive; the lock we hold guards its links.
            let child = unsafe { &*child };
            let grand_first = child.first.load(Relaxed);
            let mut grand_last = ptr::null_mut();
            let mut g = grand_first;
            while !g.is_null() {
                // SAFETY: as above, for each grandchild.
                unsafe {
                    (*g).parent.store(raw(self), Relaxed);
                    grand_last = g;
                    g = (*g).next.load(Relaxed);
                }
            }
            // `child` is the head (newest) of `self`'s list: its children take its place, in their order.
            let after = child.next.load(Relaxed);
            if grand_first.is_null() {
                self.first.store(after, Relaxed);
                if !after.is_null() {
                    // SAFETY: `after` is a linked sibling of `child`.
                    unsafe { (*after).prev.store(ptr::null_mut(), Relaxed) };
                }
            } else {
                self.first.store(grand_first, Relaxed);
                // SAFETY: `grand_last` is a linked grandchild, alive.
                unsafe { (*grand_last).next.store(after, Relaxed) };
                if !after.is_null() {
                    // SAFETY: `after` is a linked sibling of `child`.
                    unsafe { (*after).prev.store(grand_last, Relaxed) };
                }
            }
            child.task.store(ptr::null_mut(), Relaxed);
            for field in [&child.parent, &child.first, &child.prev, &child.next] {
                field.store(ptr::null_mut(), Relaxed);
            }
        }
    }

    /// Unlinks `self` from whatever task holds it, taking that task's lock if this thread does not hold it.
    #[inline]
    fn unlink_from_owner(&self) {
        // Almost always already unlinked (frames unlink when they complete): keep that check inline.
        if !self.task.load(Relaxed).is_null() {
            self.unlink_from_owner_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn unlink_from_owner_slow(&self) {
        let owner = self.task.load(Relaxed);
        if owner.is_null() {
            return;
        }
        // SAFETY: a TaskCell outlives every node linked into it: an instrumented task empties its tree when
        // dropped, and leaks its cell if it had to orphan nodes (so a pointer read just before orphaning
        // stays valid). We re-check ownership under the lock below.
        let owner = unsafe { &*owner };
        let polling = CURRENT.with(Cell::get).task;
        // SAFETY: `Current::task` names the task this thread is polling (or dropping), alive meanwhile.
        let polling =
            (!polling.is_null() && !ptr::eq(polling, owner)).then(|| unsafe { &*polling });
        let _lock = owner.lock_from(polling);
        if ptr::eq(self.task.load(Relaxed), owner) {
            // SAFETY: we hold the owner's lock and `self` is in its tree.
            if unsafe { self.unlink_locked() } {
                owner.leak_on_exit();
            }
        }
    }

    /// Puts `self` under `cur.node` in `cur.task`'s tree unless it is there already.
    ///
    /// # Safety
    /// This thread holds `cur.task`'s lock, and `self` is pinned, as is `label` (when given) in the same
    /// future.
    #[inline]
    unsafe fn attach(&self, cur: Current, label: Option<&Meta>) {
        let owner = self.task.load(Relaxed);
        if ptr::eq(owner, cur.task) && ptr::eq(self.parent.load(Relaxed), cur.node) {
            return;
        }
        if ptr::eq(owner, cur.task) {
            // SAFETY: we hold this task's lock.
            unsafe { self.unlink_locked() };
        } else {
            self.unlink_from_owner();
        }
        // SAFETY: `cur.node` is a linked node of `cur.task` (or its root): Current only ever names the node
        // being polled right now on this thread, and we hold that task's lock.
        unsafe { self.link(cur.task, &*cur.node, label) };
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Runs after the future that contained this node has been dropped (field order in `Framed`), so any
        // child frames have already unlinked themselves; usually the node itself was unlinked on completion.
        self.unlink_from_owner();
    }
}

/// What this thread is polling right now: the task, and the innermost frame (or the task root).
#[derive(Clone, Copy)]
pub(crate) struct Current {
    pub(crate) task: *const TaskCell,
    pub(crate) node: *const Node,
}

thread_local! {
    static CURRENT: Cell<Current> = const { Cell::new(Current { task: ptr::null(), node: ptr::null() }) };
}

/// The task being polled on this thread and the frame in it that is polling (0 for the task's root):
/// who awaits a `JoinHandle` polled now. `None` outside an instrumented task's poll.
#[cfg(feature = "tokio")]
pub(crate) fn polling_frame() -> Option<(u64, u64)> {
    let cur = CURRENT.with(Cell::get);
    if cur.task.is_null() {
        return None;
    }
    // SAFETY: a non-null `cur.task` is the task being polled on this thread (set by `Enter` for the
    // poll and restored after it), alive for the whole poll.
    let task = unsafe { &*cur.task };
    let frame = if ptr::eq(cur.node, &task.root) {
        0
    } else {
        cur.node as u64
    };
    Some((task.id, frame))
}

/// Sets [`Current`] for the duration of a poll and restores the previous value on drop (also on unwind).
pub(crate) struct Enter(Current);

impl Enter {
    #[inline]
    pub(crate) fn new(task: *const TaskCell, node: *const Node) -> Enter {
        Enter(CURRENT.with(|c| c.replace(Current { task, node })))
    }

    /// If this thread is polling a task, makes `node` its current frame (restored on drop).
    #[inline]
    fn frame(node: *const Node) -> Option<Enter> {
        CURRENT.with(|c| {
            let cur = c.get();
            if cur.task.is_null() {
                return None;
            }
            c.set(Current {
                task: cur.task,
                node,
            });
            Some(Enter(cur))
        })
    }
}

impl Drop for Enter {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// Where a frame's [`Meta`] is kept: `()` when it is a `static` the node points to from the start (`#[frame]`),
/// [`Label`] when it is only known at run time (`.frame(label)`) and is kept in the future itself.
pub trait MetaSlot: sealed::Sealed {
    #[doc(hidden)]
    fn inline(&self) -> Option<&Meta>;
}

/// The name and location of a frame made by [`crate::FrameExt::frame`], kept in its future.
pub struct Label(Meta);

impl MetaSlot for () {
    #[inline(always)]
    fn inline(&self) -> Option<&Meta> {
        None
    }
}

impl MetaSlot for Label {
    #[inline(always)]
    fn inline(&self) -> Option<&Meta> {
        Some(&self.0)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for super::Label {}
}

/// A future that appears as one frame in its task's chain. Made by `#[frame]` and [`crate::FrameExt::frame`].
#[must_use = "futures do nothing unless polled"]
pub struct Framed<F, M: MetaSlot = ()> {
    // Declared before `node` so that it is dropped first: child frames unlink before this one does.
    inner: F,
    node: Node,
    meta: M,
}

impl<F> Framed<F> {
    pub(crate) const fn annotated(inner: F, meta: &'static Meta) -> Self {
        Framed {
            inner,
            node: Node::new(meta),
            meta: (),
        }
    }
}

impl<F> Framed<F, Label> {
    pub(crate) fn labelled(
        inner: F,
        name: &'static str,
        location: &'static Location<'static>,
    ) -> Self {
        Framed {
            inner,
            node: Node::new(ptr::null()),
            meta: Label(Meta {
                name,
                location,
                source: Source::Labelled,
            }),
        }
    }
}

impl<F: Future, M: MetaSlot> Future for Framed<F, M> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` and `node` are structurally pinned: neither is ever moved out of `self`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let (node, label) = (&this.node, this.meta.inline());
        // One thread-local access: read what this thread polls and, inside a task, make `node` current.
        let Some(enter) = Enter::frame(node) else {
            // Polled outside any instrumented task: nothing to record.
            node.unlink_from_owner();
            return inner.poll(cx);
        };
        let cur = enter.0;
        // SAFETY: `cur.task` is set only by `Instrumented::poll`, which holds that task's lock on this thread
        // for the whole poll; `node` is pinned inside `self`.
        unsafe { node.attach(cur, label) };
        let out = inner.poll(cx);
        drop(enter);
        if out.is_ready() {
            // SAFETY: still inside the same task's poll, holding its lock.
            if unsafe { node.unlink_locked() } {
                // SAFETY: `cur.task` is valid for this poll (see above).
                unsafe { (*cur.task).leak_on_exit() };
            }
        }
        out
    }
}

/// Most frames read from one task; deeper trees are cut (and say so by ending early), and of a frame with
/// more children than that, the newest are read.
pub const MAX_FRAMES_PER_TASK: usize = 4096;

/// One frame as a snapshot copies it: its node's address as its id, its parent's, and its meta.
#[derive(Clone, Copy)]
pub(crate) struct RawFrame {
    pub(crate) id: usize,
    pub(crate) parent: usize,
    pub(crate) name: &'static str,
    pub(crate) location: &'static Location<'static>,
    pub(crate) source: Source,
}

/// Copies the tree under `root` in pre-order, siblings in first-poll order, at most [`MAX_FRAMES_PER_TASK`]
/// frames (the newest children of a node that has more).
///
/// # Safety
/// The caller holds the lock of the task whose tree this is, in reader mode ([`super::cell::ReadLock`]).
pub(super) unsafe fn copy_tree(root: &Node, out: &mut Vec<RawFrame>) {
    let root_ptr: *const Node = root;
    let mut node = root.oldest_child(MAX_FRAMES_PER_TASK);
    while !node.is_null() && out.len() < MAX_FRAMES_PER_TASK {
        // SAFETY: every node reachable from the root is linked and therefore alive (nodes unlink before
        // they are dropped, under the lock we hold), and its links are stable while we hold the lock.
        let n = unsafe { &*node };
        // SAFETY: a linked frame's meta is set (a `static`, or a label pinned in the same future as the node,
        // alive for the reason above).
        let meta = unsafe { &*n.meta() };
        out.push(RawFrame {
            id: node as usize,
            parent: n.parent() as usize,
            name: meta.name,
            location: meta.location,
            source: meta.source,
        });
        let child = n.oldest_child(MAX_FRAMES_PER_TASK - out.len());
        if !child.is_null() {
            node = child;
            continue;
        }
        // No children: move to the next sibling, climbing until one exists or we are back at the root.
        let mut up = node;
        node = std::ptr::null();
        while up != root_ptr {
            // SAFETY: as above.
            let u = unsafe { &*up };
            let next = u.newer_sibling();
            if !next.is_null() {
                node = next;
                break;
            }
            up = u.parent();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::agent_names as names;

    #[test]
    fn the_inspector_finds_framed_by_the_names_in_the_protocol() {
        let f = Framed::labelled(async {}, "x", Location::caller());
        let ty = std::any::type_name_of_val(&f);
        assert!(ty.starts_with(&format!("{}<", names::FRAMED)), "{ty}");
        let [inner, node, _] = field_names!(f, Framed { inner, node, meta });
        assert_eq!([inner, node], [names::FRAMED_INNER, names::FRAMED_NODE]);
    }
}
