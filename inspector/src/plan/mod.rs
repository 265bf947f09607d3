//! The plan stage: walk plans built from a binary's DWARF, and what each planned type means.
//!
//! [`Plan::for_every_root`] starts at every root future type (each root anchor, resolved through
//! the DWARF's `Instrumented<F>::poll` instantiations) and classifies every type reachable through fields
//! that hold the awaited future. Each type gets a [`TypePlan`](asyncdump_protocol::TypePlan) for the agent (what to read, which fields to
//! follow) and a `Kind` for us (how a node of that type is shown):
//!
//! - an async fn or block's state machine: its `__state`, and per `SuspendN` the `__awaitee` field;
//! - pointers to futures: `Pin<Box<T>>`, `Box<T>`, `&mut T`, `Pin<Box<dyn Future>>` through the
//!   vtable statics `<T as Future>::{vtable}`, and boxed slices (`futures::future::join_all`);
//! - `tokio::join!` / `tokio::select!` (a `PollFn` closure holding a pointer to the tuple of branches),
//!   `MaybeDone`, `tokio::time::Timeout`, `futures::join!` and `futures::select!` (a `PollFn` closure
//!   holding a pointer to each branch), and `futures_util` wrappers (`Map`, `Then`, `Flatten`, ...);
//! - `asyncdump_agent`'s own `Framed` (an annotated frame: matched by its node's address, so an annotated
//!   future that is also decoded is shown once) and `JoinHandle` (whose target task id it reads);
//! - anything else is a leaf: the chain ends with "awaiting TYPE".
//!
//! Only fields a suspended task owns are followed (its state machines, its boxes, pointers into its own
//! frame), never shared state such as a channel's `Arc`: that memory may change under the agent's read,
//! and a wrong chain is worse than a short one. The one exception is the id in a `JoinHandle`'s task
//! cell, which never changes after spawn.

use std::sync::Arc;

use asyncdump_protocol::WalkPlan;
use serde::{Deserialize, Serialize};

use crate::dwarf::Debug;
use crate::model::{FastMap, FastSet, FrameInfo};

mod builder;
pub mod cache;
mod interned;
pub mod planner;
mod runtime;
mod shapes;
pub mod values;

use builder::Builder;
pub use runtime::TaskTypes;

/// Most nodes and bytes the agent walks per task.
pub const MAX_NODES: u32 = 1024;
pub const MAX_BYTES: u32 = 256 * 1024;

/// How a node of one plan type is shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Kind {
    /// An async fn or block; what it shows depends on its state.
    Coroutine(FastMap<u64, StateView>),
    /// Not shown; its children hang under the nearest shown ancestor.
    Transparent,
    /// Shown as its own line (`tokio::join!`, `tokio::time::timeout`).
    Combinator(Arc<FrameInfo>),
    /// `tokio::select!`: like a combinator, but branches its `disabled` mask has set are not pending.
    Select(Arc<FrameInfo>),
    /// The select's `disabled` mask, in the discriminant.
    SelectMask,
    /// A tuple of join/select branches: not shown.
    Tuple,
    /// `asyncdump_agent::Framed`: an annotated frame whose node is this far into the type.
    Framed { node_offset: u64 },
    /// `asyncdump_agent::JoinHandle`: a leaf whose child reads the joined task's id.
    JoinHandle(Arc<FrameInfo>),
    /// A pointer into a task cell (`Arc<TaskCell>`), in the discriminant: the cell is at the value plus
    /// `plus`. Read from the copy its parent made, so it costs no read of its own.
    CellRef { plus: u64 },
    /// A pointer to a tokio task header (in a tokio `JoinHandle`), in the discriminant.
    HeaderRef,
    /// `asyncdump_agent::Instrumented`, the root of a tokio task spawned through the agent: its child
    /// (a [`Kind::CellRef`]) names the agent's task, whose own walk shows the chain. `inner` leads to
    /// the future it wraps: followed only without the agent ([`Plan::walk_without_agent`]), which
    /// would otherwise walk every agent task twice.
    AgentRoot {
        inner: Option<asyncdump_protocol::Edge>,
    },
    /// `tokio::sync::oneshot::Receiver`: a leaf, whose shared state is read for the delegate only.
    Oneshot(Arc<FrameInfo>),
    /// The receiver's `Inner`: its state word in the discriminant.
    OneshotInner,
    /// The vtable pointer of the waker the receiver registered, in the discriminant.
    WakerVtable,
    /// The registered waker's data pointer: a task cell, if it is an asyncdump waker.
    WakerData,
    /// A `tokio::sync::oneshot::Sender` held across an await: its channel's address in the
    /// discriminant, matched to a receiver's to name who can wake it. Never shown.
    OneshotSender,
    /// h2's reference to one HTTP/2 stream (`OpaqueStreamRef`, in hyper's `H2Stream` and h2's
    /// `ResponseFuture`): the stream's id in the discriminant, its child the connection's shared
    /// state. Never shown: it says which stream a task serves.
    H2Stream,
    /// The shared state of an HTTP/2 connection's streams (the block of h2's `Arc<Mutex<Inner>>`):
    /// its address names the connection; its children read the waker of the task that drives the
    /// connection (`actions.task`, a [`Kind::WakerVtable`] and a [`Kind::WakerData`]).
    H2Connection,
    /// A leaf future.
    Leaf(Arc<FrameInfo>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StateView {
    pub(crate) info: Arc<FrameInfo>,
    /// `Returned` or `Panicked`: a finished branch of a `select!`, not part of the chain.
    pub(crate) done: bool,
    /// For a suspend state, the locals that live across its await.
    pub(crate) locals: Arc<[values::LocalPlan]>,
    /// For a suspend state of a library's async fn whose locals say what its leaf waits for (a
    /// `watch`'s `changed`: the watch and the version seen), that target: the leaf's own, if any,
    /// says less.
    #[serde(default)]
    pub(crate) target: Option<values::TargetPlan>,
}

/// A plan for one binary, and what its types mean. Serialized whole (at load bias 0) by the plan cache;
/// how a walk is read back with it is the `decode` stage's (`Plan::merge`).
#[derive(Default, Serialize, Deserialize)]
pub struct Plan {
    /// What the walker follows.
    pub walk: WalkPlan,
    /// What each of the walk plan's types means, by type number.
    pub(crate) kinds: Vec<Kind>,
    /// Hand-written futures followed through their fields, by plan type: named as a chain's leaf when
    /// nothing below them shows (their fields hold no future we can read further).
    pub(crate) hand_written: FastMap<u32, Arc<FrameInfo>>,
    /// Those of `hand_written` followed only for the `oneshot::Sender`s they hold: the leaf where a
    /// future holds them (hyper's connection), state where another hand-written type does.
    pub(crate) sender_only: FastSet<u32>,
    /// The root future's type name from DWARF, by root anchor: exact, where `type_name` says
    /// `{{closure}}`.
    pub root_names: FastMap<u64, Arc<str>>,
    /// Where `asyncdump_agent`'s owned-waker vtable is in the process: a waker with it is one of ours.
    pub owned_vtable: Option<u64>,
    /// Where tokio's task waker vtable is in the process: the data pointer of such a waker is the
    /// header of the task it wakes.
    pub tokio_vtable: Option<u64>,
    /// Other wakers' vtables in the process, sorted, each with the function its clone slot holds: a
    /// waker neither ours nor tokio's is named by it (`…futures_unordered::task::waker_ref::clone_arc_raw`).
    pub waker_vtables: Vec<(u64, Arc<str>)>,
    /// Why the registered runtimes' tasks cannot be listed, when they cannot.
    pub runtime_note: Option<String>,
    /// The future type of each task type a runtime can list, by its poll function.
    pub task_types: TaskTypes,
    /// The types of the locals of every planned state machine's suspend states, and of the parts
    /// of wait targets.
    pub values: values::ValueTypes,
    /// What each leaf future waits for, by plan type, where its type is known.
    pub targets: FastMap<u32, values::TargetPlan>,
    /// The statics that may hold a lock guard or a channel's end.
    #[serde(default)]
    pub statics: Vec<values::StaticPlan>,
    /// The locals of function bodies that may hold a lock guard or a channel's end, by scope.
    #[serde(default)]
    #[serde(with = "interned")]
    pub frame_locals: Vec<values::FrameLocalPlan>,
    /// The futures `block_on`s keep pinned on their threads' stacks, by scope.
    #[serde(default)]
    pub block_ons: Vec<BlockOnPlan>,
    /// The code of an executor's own functions, between two polls of a `block_on`'s future, and
    /// (`true`) of tasks' polls: `[start, end)`, out of line, sorted. A thread whose frames inside
    /// a `block_on` are all here is not polling that future.
    #[serde(default)]
    pub executor_code: Vec<(u64, u64, bool)>,
    /// Where parking_lot's `ThreadData` keeps what its thread is parked on, where the program links
    /// parking_lot.
    #[serde(default)]
    pub parked: Option<ParkedKey>,
    /// Where tokio's `ScheduledIo` keeps the wakers of the tasks reading and writing its
    /// descriptor, where the program links tokio's I/O driver.
    #[serde(default)]
    pub io_wakers: Option<IoWakers>,
}

/// tokio registers each descriptor with epoll under the address of its `ScheduledIo`, which keeps
/// the waker of the task waiting to read it and of the one waiting to write it (each an
/// `Option<Waker>`: a null vtable is `None`). Their offsets, and the waker's data and vtable's
/// within a waker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoWakers {
    pub reader: u32,
    pub writer: u32,
    pub data: u32,
    pub vtable: u32,
    /// The list of the `ScheduledIo`'s other waiters (readiness futures: an `accept`, a UDP
    /// receive, a `readable()`), where the layout was found.
    #[serde(default)]
    pub waiters: Option<IoWaiters>,
}

/// Where a `ScheduledIo` keeps the head of its waiter list, and where each waiter (a node of
/// tokio's intrusive list, inside the readiness future) keeps its waker's data and vtable, the
/// interest it waits for (bit 0 readable, bit 1 writable) and the next node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoWaiters {
    pub head: u32,
    pub data: u32,
    pub vtable: u32,
    pub interest: u32,
    pub next: u32,
}

impl IoWaiters {
    /// Bytes of a waiter to read to hold every part of it.
    pub fn span(&self) -> u32 {
        [self.data, self.vtable, self.interest, self.next]
            .into_iter()
            .max()
            .unwrap_or(0)
            + 8
    }
}

/// parking_lot parks a thread on a futex word of its own, in its thread-local `ThreadData`, next to
/// the key it parks under: the address of the lock it waits for. Their offsets in `ThreadData`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkedKey {
    pub futex: u32,
    pub key: u32,
}

impl ParkedKey {
    /// The key a thread sleeping on futex word `futex` parks under, read through `read_word`; none
    /// where it is not a plausible address.
    pub fn key_of(self, futex: u64, read_word: &dyn Fn(u64) -> Option<u64>) -> Option<u64> {
        let data = futex.checked_sub(u64::from(self.futex))?;
        let key = read_word(data.checked_add(u64::from(self.key))?)?;
        (key >= 0x1000).then_some(key)
    }
}

/// Where a `block_on` keeps the future it runs: its `Pin<&mut F>` local (or, where optimised code
/// placed none, the variable of type `F` it pins), where it is over which code (a thread whose frame is there runs `F`), and the plan type of `F`, walked at the address
/// the local holds, as a task's future is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockOnPlan {
    /// The `block_on` function (or the closure in it) the local is in.
    pub function: Arc<str>,
    /// The code addresses where the local is at `location`, `[start, end)`.
    pub scope: (u64, u64),
    pub location: crate::dwarf::Location,
    /// The local is the future itself (optimised code placed no `Pin`), not a pointer to it: its
    /// address is the future's.
    #[serde(default)]
    pub by_value: bool,
    /// The plan type of `F`.
    pub ty: u32,
    /// `F`'s name.
    pub future: Arc<str>,
}

impl Plan {
    /// Plans every root future type the DWARF has (every `Instrumented<F>::poll`), so that a task of a
    /// root type first seen later needs no new plan; with `runtimes`, also the plan for listing tokio
    /// runtimes' tasks, which plans every future type tokio can run. Addresses are the file's (load
    /// bias 0): what the plan cache keeps, and [`Plan::rebase`] moves to where a process loaded it.
    pub fn for_every_root(debug: &Debug, runtimes: bool) -> Plan {
        let mut b = Builder::new(debug);
        let mut roots = Vec::new();
        let mut root_names = FastMap::default();
        for anchor in debug.anchors() {
            roots.push((anchor.low_pc, b.ty(anchor.root_die)));
            root_names.insert(
                anchor.low_pc,
                Arc::from(debug.qualified_name(anchor.root_die)),
            );
        }
        // A `dyn Future` may hide any future type the binary has a vtable for, so all of them are
        // planned; they are few next to all types.
        let mut vtables: Vec<(u64, u32)> = debug
            .vtables
            .iter()
            .map(|&(addr, die)| (addr, b.ty(die)))
            .collect();
        vtables.sort_unstable();
        vtables.dedup_by_key(|v| v.0);
        let (runtime, task_types, runtime_note) = match runtimes.then(|| b.runtime_plan()) {
            Some(Ok((plan, names))) => (Some(Box::new(plan)), names, None),
            Some(Err(why)) => (None, FastMap::default(), Some(why)),
            None => (None, FastMap::default(), None),
        };
        let block_ons = (debug.pinned_futures.iter())
            .map(|v| {
                // A `Pin<&mut F>` points at the future; a variable of type `F` is it.
                let pinned = crate::dwarf::pinned_mut(debug, v.ty);
                let future = pinned.unwrap_or(v.ty);
                BlockOnPlan {
                    function: v.function.as_str().into(),
                    scope: v.scope,
                    location: v.location.clone(),
                    by_value: pinned.is_none(),
                    ty: b.ty(future),
                    future: debug.qualified_name(future).into(),
                }
            })
            .collect();
        let statics = b.holding_statics();
        let frame_locals = b.holding_frame_locals();
        let parked = b.parked_key();
        let io_wakers = b.io_wakers();
        let values = values::ValueTypes::new(b.values.types);
        let statics = (statics.into_iter())
            .filter(|s| values.may_hold(s.ty))
            .collect();
        let frame_locals = (frame_locals.into_iter())
            .filter(|l| values.may_hold(l.ty))
            .collect();
        Plan {
            walk: WalkPlan {
                types: b.types,
                roots,
                vtables,
                max_nodes: MAX_NODES,
                max_bytes: MAX_BYTES,
                runtime,
            },
            kinds: b.kinds,
            hand_written: b.hand_written,
            sender_only: b.sender_only_types,
            root_names,
            owned_vtable: debug.owned_waker_vtable(),
            tokio_vtable: debug.static_addr("tokio::runtime::task::waker::WAKER_VTABLE"),
            waker_vtables: (debug.waker_vtables.iter())
                .map(|(a, name)| (*a, Arc::from(name.as_str())))
                .collect(),
            runtime_note,
            task_types,
            values,
            targets: b.values.targets,
            statics,
            frame_locals,
            block_ons,
            executor_code: debug.executor_code.clone(),
            parked,
            io_wakers,
        }
    }

    /// The walk plan for reading a process without its agent: the agent's task roots
    /// (`Kind::AgentRoot`) are followed into the futures they wrap, since no agent walks them.
    pub fn walk_without_agent(&self) -> WalkPlan {
        let mut walk = self.walk.clone();
        for (ty, kind) in self.kinds.iter().enumerate() {
            if let (Kind::AgentRoot { inner: Some(edge) }, Some(t)) = (kind, walk.types.get_mut(ty))
            {
                t.always.push(*edge);
            }
        }
        walk
    }

    /// Moves every address in the plan by `bias`: a plan made at load bias 0 for a process whose
    /// executable is loaded at `bias`.
    pub fn rebase(&mut self, bias: u64) {
        let moved = |a: &mut u64| *a = a.wrapping_add(bias);
        let plan = &mut self.walk;
        plan.roots.iter_mut().for_each(|(a, _)| moved(a));
        plan.vtables.iter_mut().for_each(|(a, _)| moved(a));
        if let Some(rt) = &mut plan.runtime {
            rt.tasks.iter_mut().for_each(|t| moved(&mut t.poll_fn));
            rt.set_wakers
                .iter_mut()
                .for_each(|w| moved(&mut w.clone_fn));
            let census = rt.census.iter_mut();
            for v in census.flat_map(|c| c.vtables.iter_mut().chain(&mut c.blocking)) {
                moved(&mut v.addr);
                moved(&mut v.poll_fn);
            }
        }
        self.root_names = std::mem::take(&mut self.root_names)
            .into_iter()
            .map(|(a, n)| (a.wrapping_add(bias), n))
            .collect();
        self.task_types = std::mem::take(&mut self.task_types)
            .into_iter()
            .map(|(a, n)| (a.wrapping_add(bias), n))
            .collect();
        self.owned_vtable.iter_mut().for_each(moved);
        self.tokio_vtable.iter_mut().for_each(moved);
        self.waker_vtables.iter_mut().for_each(|(a, _)| moved(a));
        self.statics.iter_mut().for_each(|s| moved(&mut s.addr));
        for l in &mut self.frame_locals {
            moved(&mut l.scope.0);
            moved(&mut l.scope.1);
        }
        for b in &mut self.block_ons {
            moved(&mut b.scope.0);
            moved(&mut b.scope.1);
        }
        for (start, end, _) in &mut self.executor_code {
            moved(start);
            moved(end);
        }
    }

    /// What the code at `pc` is to a `block_on`: `Some(true)` a task's poll, `Some(false)` its
    /// executor's own, `None` neither (as far as the plan knows: code out of line only).
    pub fn executor_code_at(&self, pc: u64) -> Option<bool> {
        let code = &self.executor_code;
        let i = code.partition_point(|c| c.0 <= pc).checked_sub(1)?;
        let (_, end, polls) = code[i];
        (pc < end).then_some(polls)
    }

    /// The clone function of the waker vtable at `vtable`, if the binary has one there.
    pub(crate) fn waker_named(&self, vtable: u64) -> Option<&Arc<str>> {
        let i = self
            .waker_vtables
            .binary_search_by_key(&vtable, |v| v.0)
            .ok()?;
        Some(&self.waker_vtables[i].1)
    }
}
