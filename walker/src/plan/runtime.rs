//! Runtime task lists: how to list every task of a tokio runtime, including the ones nobody spawned
//! through the agent.
//!
//! The agent keeps the runtimes registered with it (their `tokio::runtime::Handle`s) and reports where
//! each lives. The inspector reads tokio's layout from the binary's DWARF
//! and sends a [`RuntimePlan`] inside the walk plan: from the handle to the runtime's owned-task lists
//! (one or more shards, each a linked list of task headers), what each header holds, and, per task type
//! (keyed by the address of tokio's `raw::poll::<T, S>`, which the header's vtable points at), where the
//! future sits so that the walk plan can decode its chain. The agent follows it with reads that fail
//! instead of faulting, and never takes tokio's locks: a wedged runtime must still be listed. Lists read
//! while tokio changes them are validated (owner id, known vtable, bounded length), and what fails is
//! counted in [`RuntimeReport::skipped`], never guessed at.

use serde::{Deserialize, Serialize};

use super::future::Discr;

/// How to list the tasks of a tokio runtime from its `Handle`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuntimePlan {
    /// The scheduler handle inside `tokio::runtime::Handle`: an enum with one variant per flavor.
    pub handle_discr: Option<Discr>,
    pub flavors: Vec<FlavorLayout>,
    pub owned: OwnedLayout,
    pub header: HeaderLayout,
    pub vtable: VtableLayout,
    pub trailer: TrailerLayout,
    pub state_bits: StateBits,
    /// Per task type, sorted by `poll_fn`.
    pub tasks: Vec<TaskLayout>,
    /// Join wakers of `JoinSet` members, one per set type, sorted by `clone_fn`.
    pub set_wakers: Vec<SetWakerLayout>,
    /// How to reach the task list of a registered `LocalSet`; `None` if the binary has none.
    pub local_set: Option<LocalSetLayout>,
    /// How to find task lists nobody registered, from the tasks themselves; `None`: only registered
    /// runtimes and `LocalSet`s are listed.
    pub census: Option<CensusLayout>,
    /// Most tasks listed per runtime.
    pub max_tasks: u32,
}

/// A census finds tasks without a handle to their runtime: every task header begins with a pointer to
/// its type's vtable, a static of the binary, so a scan of the process's writable memory for those
/// addresses (at the task allocation's alignment only) finds task headers wherever they are. Each hit
/// names its scheduler (the runtime's handle or the `LocalSet`'s shared state), which leads to the
/// task list the hit claims to belong to; only lists that check out are listed, the usual way.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CensusLayout {
    /// The alignment of every task allocation (tokio's `Cell` is 128-byte aligned on x86_64 and
    /// aarch64): only addresses that are multiples of it are looked at.
    pub align: u32,
    /// The state word's reference count unit: a live task holds at least one reference and never
    /// millions, which a stale or random word rarely matches.
    pub ref_one: u64,
    /// Every task vtable of the binary (load bias applied), sorted by address.
    pub vtables: Vec<TaskVtable>,
    /// The vtables of blocking tasks (`BlockingTask<F>`), sorted by address: such a header, owned by
    /// no list, is a task of the blocking pool.
    pub blocking: Vec<TaskVtable>,
}

/// One task vtable: where it is, and the poll function of its task type (a key of
/// [`RuntimePlan::tasks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskVtable {
    pub addr: u64,
    pub poll_fn: u64,
}

/// Where a task keeps its scheduler (`Core::scheduler`, an `Arc` pointer), and which kind of task list
/// the pointee owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SchedulerField {
    /// Offset from the header.
    pub offset: u32,
    /// `MultiThread` or `CurrentThread`: an `Arc` of the runtime's handle, whose task list is at the
    /// flavor's [`FlavorLayout::owned_offset`]; `LocalSet`: an `Arc` of the set's shared state, whose
    /// list is at [`LocalSetLayout::owned_offset`].
    pub flavor: RuntimeFlavor,
}

/// `LocalSet { context: Rc<Context { shared: Arc<Shared { local_state: { owned, .. }, .. }>, .. }>, .. }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalSetLayout {
    /// Offset, in the `LocalSet`, of the `Rc` pointer to its context.
    pub context: u32,
    /// Offset, from where that pointer points, of the `Arc` pointer to the shared state.
    pub shared: u32,
    /// Offset, from where that pointer points, of the `LocalOwnedTasks`.
    pub owned_offset: u32,
    /// The `LocalOwnedTasks` itself: one inline list, and no count.
    pub owned: OwnedLayout,
}

/// A `JoinSet` member's join waker is its set entry's (tokio's `waker_ref::<ListEntry<_>>`), whose data
/// points at the entry; the waker of the task polling the set is in the set's shared lists, behind the
/// entry's `parent` `Arc`. Such a waker's vtable has no symbol of its own: it is known by its first
/// field, the `clone` function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SetWakerLayout {
    /// Address of `tokio::util::wake::clone_arc_raw::<ListEntry<JoinHandle<_>>>` (load bias applied).
    pub clone_fn: u64,
    /// Offset, in the entry, of the `parent` pointer.
    pub parent: u32,
    /// Offsets, from where `parent` points, of the set waker's data and vtable (a zero vtable is none).
    pub waker_data: u32,
    pub waker_vtable: u32,
}

/// One variant of the scheduler handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlavorLayout {
    /// The discriminant value of this variant; `None`: taken when no other matches.
    pub value: Option<u64>,
    pub flavor: RuntimeFlavor,
    /// Offset, in `tokio::runtime::Handle`, of the variant's `Arc` pointer.
    pub arc_offset: u32,
    /// Offset, from the start of the allocation the `Arc` points at, of the runtime's `OwnedTasks`.
    pub owned_offset: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RuntimeFlavor {
    CurrentThread,
    MultiThread,
    /// A registered `tokio::task::LocalSet` (its `handle` is the `LocalSet`'s address).
    LocalSet,
    /// The blocking pool's tasks (`spawn_blocking` closures, queued or running), which no task list
    /// holds: found by a census, each header checked.
    Blocking,
}

/// `OwnedTasks`: its id (every task header names the list it belongs to) and its list of tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OwnedLayout {
    pub id: u32,
    /// The count of tasks in the list, kept by tokio (not in a `LocalSet`'s).
    pub count: Option<u32>,
    pub shards: Shards,
}

/// Where the heads of the task lists are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shards {
    /// A boxed slice of lists (tokio 1.35 on): the offsets of its data pointer and length in
    /// `OwnedTasks`, the bytes between two shards, and the offset of a list's head within a shard.
    Boxed {
        ptr: u32,
        len: u32,
        stride: u32,
        head: u32,
    },
    /// One list inside `OwnedTasks` itself (before 1.35): the offset of its head.
    Inline { head: u32 },
}

/// A task's `Header`, at the start of every task allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeaderLayout {
    pub size: u32,
    pub state: u32,
    pub vtable: u32,
    /// `Option<NonZeroU64>`: 0 is none.
    pub owner_id: u32,
}

/// The task vtable a header points at: the type's poll function, and where the rest of the task is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VtableLayout {
    pub size: u32,
    pub poll: u32,
    /// Fields holding byte offsets from the header: of the trailer, and of the task id.
    pub trailer_offset: u32,
    pub id_offset: u32,
}

/// A task's `Trailer`: the owned-list link to the next task, and the join waker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrailerLayout {
    pub size: u32,
    pub next: u32,
    /// The waker of whoever awaits the task's `JoinHandle` (`Option<Waker>`: a zero vtable is none).
    pub waker_data: u32,
    pub waker_vtable: u32,
}

/// Bits of the header's state word.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StateBits {
    pub running: u64,
    pub complete: u64,
    pub notified: u64,
    /// Set while the join waker field holds a waker.
    pub join_waker: u64,
}

/// One task type: where its future is, as a type of the enclosing walk plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskLayout {
    /// Address of `tokio::runtime::task::raw::poll::<T, S>` in the target (load bias applied).
    pub poll_fn: u64,
    /// Offset from the header of the task's stage (`Running(future)`, `Finished(output)`, `Consumed`).
    pub stage_offset: u32,
    /// Walk plan type of the stage.
    pub stage_ty: u32,
    /// The task's scheduler, when it owns a task list a census can follow.
    pub scheduler: Option<SchedulerField>,
}

/// What the agent found in one registered runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeReport {
    /// Where the registered handle is in the target (as the agent reports it), or the
    /// registered `LocalSet`.
    pub handle: u64,
    pub flavor: Option<RuntimeFlavor>,
    /// tokio's own count of the runtime's live tasks, whether or not they could be listed: from its
    /// public metrics (tokio 1.39 on), else from the task list's own counter when the list is read;
    /// `None` when neither is at hand.
    pub alive: Option<u64>,
    pub tasks: Vec<RuntimeTask>,
    /// Tasks that could not be listed: a header that did not validate (the list changed under the read),
    /// or the walk cut at [`RuntimePlan::max_tasks`].
    pub skipped: u64,
    /// Why the runtime could not be listed at all, one line; `None` when it was.
    pub error: Option<String>,
    /// How the agent knows this runtime.
    pub source: RuntimeSource,
}

/// How a runtime or `LocalSet` came to be listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RuntimeSource {
    /// Registered with the agent (`init` inside it, `register_runtime`, `register_local_set`).
    #[default]
    Registered,
    /// Found by a census, from one of its tasks.
    Census,
}

/// What a census covered and found (see [`CensusLayout`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CensusReport {
    /// Bytes of writable memory the process had, and how many of them were scanned.
    pub total_bytes: u64,
    pub scanned_bytes: u64,
    /// Bytes that could not be read (unmapped while scanned).
    pub unreadable_bytes: u64,
    /// The scan stopped at its deadline, before `total_bytes`.
    pub cut: bool,
    /// Words that matched a task vtable, and how many of those passed a header's checks.
    pub hits: u64,
    pub headers: u64,
    /// Task lists those headers named that did not check out (no such list, another id, no task).
    pub rejected_lists: u64,
    /// Runtimes and `LocalSet`s found that nobody registered.
    pub found: u64,
    /// Blocking pool tasks found (queued or running).
    pub blocking: u64,
    /// How long the scan and the checks took.
    pub elapsed_ns: u64,
    /// How long before this request the scan ran: 0 when it ran for it, else the lists it found
    /// served again (runtimes made since are found by the next scan).
    pub age_ns: u64,
}

/// One task of a runtime, as read from its header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeTask {
    /// tokio's task id (`tokio::task::Id`).
    pub id: u64,
    /// Address of the task's header: what tokio's `JoinHandle` and wakers point at.
    pub header: u64,
    /// The header's state word, read before the walk (bits in [`RuntimePlan::state_bits`]).
    pub state: u64,
    /// The task type's poll function (see [`TaskLayout::poll_fn`]).
    pub poll_fn: u64,
    /// The waker of whoever awaits this task's `JoinHandle`, when one is registered.
    pub join_waker: Option<RawWaker>,
    /// When the join waker is a `JoinSet` entry's: the waker of the task polling the set, if it waits.
    pub set_waker: Option<RawWaker>,
    /// The walk of the task's stage; `None` when the type is not in the plan, or the task was running
    /// or complete (see `state`), or changed state during the walk ([`crate::Walk::Busy`]).
    pub walk: Option<crate::Walk>,
    /// Since when the task has looked as it does now (its state and chain), by the listings of the one
    /// who listed it ([`crate::tasks::Ages`]), on its monotonic clock (the agent's `Snapshot::now_ns`);
    /// `None` from a lister that keeps no ages. A lower bound of how long it has been so.
    pub unchanged_since_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawWaker {
    pub data: u64,
    pub vtable: u64,
}
