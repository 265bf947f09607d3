//! Zero-annotation chains: walk plans built from DWARF, and the agent's walks turned back into frames.
//!
//! [`Decoder::for_every_root`] starts at every root future type (each root anchor, resolved through
//! the DWARF's `Instrumented<F>::poll` instantiations) and classifies every type reachable through fields
//! that hold the awaited future. Each type gets a [`TypePlan`] for the agent (what to read, which fields to
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

use std::collections::HashMap;
use std::sync::Arc;

use asyncdump_protocol::agent_names as names;
use asyncdump_protocol::{
    Case, Discr, Edge, NO_PARENT, NodeStatus, Target, TypePlan, WalkNode, WalkPlan,
};
use gimli::constants;
use serde::{Deserialize, Serialize};

use crate::dwarf::Debug;
use crate::model::{FastMap, FrameInfo, FrameNode, Loc, Source};

mod runtime;

/// Most nodes and bytes the agent walks per task.
pub const MAX_NODES: u32 = 1024;
pub const MAX_BYTES: u32 = 256 * 1024;

/// How a node of one plan type is shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Kind {
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
    /// (a [`Kind::CellRef`]) names the agent's task, whose own walk shows the chain.
    AgentRoot,
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
    /// A leaf future.
    Leaf(Arc<FrameInfo>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StateView {
    info: Arc<FrameInfo>,
    /// `Returned` or `Panicked`: a finished branch of a `select!`, not part of the chain.
    done: bool,
}

/// A plan for one process, and what its types mean. Serialized whole (at load bias 0) by the plan cache.
#[derive(Default, Serialize, Deserialize)]
pub struct Decoder {
    pub plan: WalkPlan,
    kinds: Vec<Kind>,
    /// Hand-written futures followed through their fields, by plan type: named as a chain's leaf when
    /// nothing below them shows (their fields hold no future we can read further).
    hand_written: FastMap<u32, Arc<FrameInfo>>,
    /// The root future's type name from DWARF, by root anchor: exact, where `type_name` says
    /// `{{closure}}`.
    pub root_names: FastMap<u64, Arc<str>>,
    /// Where `asyncdump_agent`'s owned-waker vtable is in the process: a waker with it is one of ours.
    pub owned_vtable: Option<u64>,
    /// Where tokio's task waker vtable is in the process: the data pointer of such a waker is the
    /// header of the task it wakes.
    pub tokio_vtable: Option<u64>,
    /// Why the registered runtimes' tasks cannot be listed, when they cannot.
    pub runtime_note: Option<String>,
    /// The future type of each task type a runtime can list, by its poll function.
    pub task_types: runtime::TaskTypes,
}

/// What pointers found by a walk lead to: task cells (the agent's records) and tokio task headers, each
/// to the dump's key of that task.
#[derive(Default)]
pub struct TaskRefs {
    pub cells: FastMap<u64, u64>,
    pub headers: FastMap<u64, u64>,
    /// The oneshot channels whose `Sender` a task holds across an await: channel address → task.
    pub senders: FastMap<u64, u64>,
}

impl Decoder {
    /// Plans every root future type the DWARF has (every `Instrumented<F>::poll`), so that a task of a
    /// root type first seen later needs no new plan; with `runtimes`, also the plan for listing tokio
    /// runtimes' tasks, which plans every future type tokio can run. Addresses are the file's (load
    /// bias 0): what the plan cache keeps, and [`Decoder::rebase`] moves to where a process loaded it.
    pub fn for_every_root(debug: &Debug, runtimes: bool) -> Decoder {
        let mut b = Builder {
            debug,
            types: Vec::new(),
            kinds: Vec::new(),
            by_die: HashMap::new(),
            depth: 0,
            hand_written: FastMap::default(),
            descended: FastMap::default(),
        };
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
        Decoder {
            plan: WalkPlan {
                types: b.types,
                roots,
                vtables,
                max_nodes: MAX_NODES,
                max_bytes: MAX_BYTES,
                runtime,
            },
            kinds: b.kinds,
            hand_written: b.hand_written,
            root_names,
            owned_vtable: debug.owned_waker_vtable(),
            tokio_vtable: debug.static_addr("tokio::runtime::task::waker::WAKER_VTABLE"),
            runtime_note,
            task_types,
        }
    }

    /// Moves every address in the plan by `bias`: a plan made at load bias 0 for a process whose
    /// executable is loaded at `bias`.
    pub fn rebase(&mut self, bias: u64) {
        let moved = |a: &mut u64| *a = a.wrapping_add(bias);
        let plan = &mut self.plan;
        plan.roots.iter_mut().for_each(|(a, _)| moved(a));
        plan.vtables.iter_mut().for_each(|(a, _)| moved(a));
        if let Some(rt) = &mut plan.runtime {
            rt.tasks.iter_mut().for_each(|t| moved(&mut t.poll_fn));
            rt.set_wakers
                .iter_mut()
                .for_each(|w| moved(&mut w.clone_fn));
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
    }

    /// The frames of one task: its walk merged with its annotated frames.
    ///
    /// `walk` lists each node after its parent, siblings in the plan's order (the agent walks
    /// breadth-first). `annotated` are the task's annotated frames in pre-order (id, parent, info,
    /// awaited tasks).
    /// Annotated frames the walk reached replace the decoded node they wrap; the others hang under their
    /// own continuation (parent frame), so no annotated frame is ever lost. Tasks awaited through a
    /// decoded `JoinHandle` are moved from `root_awaits` to that handle's line. Also returns what the
    /// chain's oneshot receivers say about the waker (see `delegates`).
    pub fn merge(
        &self,
        walk: &[WalkNode],
        annotated: &[AnnotatedFrame],
        root_awaits: &mut Vec<u64>,
        refs: &TaskRefs,
    ) -> (Vec<FrameNode>, Vec<DecodedDelegate>) {
        let by_id: FastMap<u64, usize> = annotated
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id, i))
            .collect();
        let mut arena = Arena::default();
        let mut placed: Vec<Placed> = Vec::with_capacity(walk.len());
        let mut matched: FastMap<u64, usize> = FastMap::default();
        // A select's `disabled` mask (set on the select's node), and per tuple the next branch number.
        let mut mask: Vec<Option<u64>> = vec![None; walk.len()];
        let mut next_branch: Vec<u32> = vec![0; walk.len()];
        let mut receivers = Vec::new();
        for (i, n) in walk.iter().enumerate() {
            let parent = (n.parent != NO_PARENT)
                .then_some(n.parent as usize)
                .filter(|&p| p < placed.len());
            let under = parent.and_then(|p| placed[p].attach);
            let folded_into = parent.and_then(|p| placed[p].wraps);
            let mut here = Placed {
                attach: under,
                ..Placed::default()
            };
            let kind = self.kinds.get(n.ty as usize);
            let parent_kind = parent.and_then(|p| self.kinds.get(walk[p].ty as usize));
            let mut disabled = false;
            if let (Some(p), Some(Kind::Tuple)) = (parent, parent_kind) {
                let branch = next_branch[p];
                next_branch[p] += 1;
                disabled = self
                    .select_of(walk, p)
                    .and_then(|s| mask[s])
                    .is_some_and(|m| branch < 64 && m & (1 << branch) != 0);
            }
            let internal = matches!(
                kind,
                Some(
                    Kind::OneshotInner
                        | Kind::WakerVtable
                        | Kind::WakerData
                        | Kind::SelectMask
                        | Kind::OneshotSender
                )
            );
            let parent_skipped = parent.is_some_and(|p| placed[p].skipped);
            if !parent_skipped {
                match kind {
                    Some(Kind::SelectMask) if n.status == NodeStatus::Read => {
                        if let Some(p) = parent {
                            mask[p] = n.discr;
                        }
                    }
                    Some(Kind::OneshotInner) => receivers.push(i),
                    _ => {}
                }
            }
            if parent_skipped || internal || disabled {
                // A disabled select branch is not pending; internal nodes are read for the delegate
                // or the mask, never shown as part of the chain.
                here.skipped = true;
            } else {
                match (n.status, kind) {
                    (NodeStatus::Null, _) => {}
                    (NodeStatus::Fault, _) => {
                        let info = leaf(format!("unreadable future at {:#x}", n.addr));
                        here.attach = Some(arena.push(under, Arc::new(info)));
                    }
                    (NodeStatus::UnknownVtable { vtable }, _) => {
                        let info = leaf(format!(
                            "dyn Future (vtable {vtable:#x} not in the binary's DWARF)"
                        ));
                        here.attach = Some(arena.push(under, Arc::new(info)));
                    }
                    (_, None) => {
                        let info = leaf("a future of a type the plan does not know".into());
                        here.attach = Some(arena.push(under, Arc::new(info)));
                    }
                    (_, Some(kind)) => match kind {
                        Kind::Transparent => {}
                        Kind::Coroutine(states) => {
                            let state = n.discr.and_then(|d| states.get(&d));
                            match (state, folded_into) {
                                (Some(s), _) if s.done => here.skipped = true,
                                (Some(s), Some(d)) => {
                                    let merged = arena.nodes[d]
                                        .info
                                        .with_suspended_at(s.info.suspended_at.clone());
                                    arena.nodes[d].info = Arc::new(merged);
                                }
                                (Some(s), None) => match under.filter(|&d| {
                                    arena.nodes[d].children.is_empty()
                                        && is_own_block(&arena.nodes[d].info, &s.info)
                                }) {
                                    // An async fn that only awaits its own block (`#[instrument]`,
                                    // tokio's `Mutex::lock`): one line, at the block's real await.
                                    Some(d) => {
                                        let merged = arena.nodes[d]
                                            .info
                                            .with_suspended_at(s.info.suspended_at.clone());
                                        arena.nodes[d].info = Arc::new(merged);
                                        here.attach = Some(d);
                                    }
                                    None => here.attach = Some(arena.push(under, s.info.clone())),
                                },
                                (None, _) => {
                                    let info = leaf(format!(
                                        "a state machine in unknown state {:?}",
                                        n.discr
                                    ));
                                    here.attach = Some(arena.push(under, Arc::new(info)));
                                }
                            }
                        }
                        Kind::Framed { node_offset } => {
                            let id = n.addr.wrapping_add(*node_offset);
                            if let Some(&a) = by_id.get(&id) {
                                let f = &annotated[a];
                                let d = arena.push(under, f.info.clone());
                                arena.nodes[d].awaits = f.awaits.clone();
                                matched.insert(id, d);
                                here.attach = Some(d);
                                here.wraps = Some(d);
                            }
                        }
                        Kind::Combinator(info) | Kind::Select(info) => {
                            here.attach = Some(arena.push(under, info.clone()))
                        }
                        Kind::Tuple | Kind::SelectMask => {}
                        Kind::Leaf(info) | Kind::Oneshot(info) => match folded_into {
                            Some(d) if arena.nodes[d].info.source != Source::Decoded => {
                                let merged = arena.nodes[d].info.with_awaits_type(&info.name);
                                arena.nodes[d].info = Arc::new(merged);
                            }
                            _ => here.attach = Some(arena.push(under, info.clone())),
                        },
                        Kind::JoinHandle(info) => {
                            let d = arena.push(under, info.clone());
                            here.attach = Some(d);
                            here.join = Some(d);
                        }
                        Kind::OneshotInner
                        | Kind::WakerVtable
                        | Kind::WakerData
                        | Kind::OneshotSender => {}
                        Kind::CellRef { .. } | Kind::HeaderRef if n.status != NodeStatus::Read => {}
                        Kind::AgentRoot => {}
                        Kind::CellRef { .. } | Kind::HeaderRef => {
                            let task = n.discr.and_then(|v| match kind {
                                Kind::CellRef { plus } => {
                                    refs.cells.get(&v.wrapping_add(*plus)).copied()
                                }
                                _ => refs.headers.get(&v).copied(),
                            });
                            if let (Some(d), Some(task)) =
                                (parent.and_then(|p| placed[p].join), task)
                            {
                                // The agent attributes the edge to the innermost annotated frame (or
                                // the root); the handle's own line is more precise: show it there only.
                                root_awaits.retain(|&t| t != task);
                                let mut up = arena.nodes[d].parent;
                                while let Some(a) = up {
                                    arena.nodes[a].awaits.retain(|&t| t != task);
                                    up = arena.nodes[a].parent;
                                }
                                arena.nodes[d].awaits.push(task);
                            }
                        }
                    },
                }
            }
            here.shows = !here.skipped
                && n.status != NodeStatus::Null
                && !matches!(
                    kind,
                    Some(Kind::Transparent | Kind::Tuple | Kind::AgentRoot | Kind::SelectMask)
                );
            placed.push(here);
        }
        self.name_dead_ends(walk, &placed, &mut arena);
        // Annotated frames the walk did not reach (behind a leaf it cannot see into, or cut by a limit)
        // hang under their own parent frame, which pre-order guarantees is placed already.
        for f in annotated {
            if matched.contains_key(&f.id) {
                continue;
            }
            let under = f.parent.and_then(|p| matched.get(&p).copied());
            let d = arena.push(under, f.info.clone());
            arena.nodes[d].awaits = f.awaits.clone();
            matched.insert(f.id, d);
        }
        (arena.into_trees(), self.delegates(walk, &receivers, refs))
    }

    /// A hand-written future the walk went into but below which nothing shows (its fields hold no
    /// future the plan can read further: hyper's HTTP/2 connection, waiting on its socket) is what its
    /// parent awaits: it is named as the leaf, once, at the topmost such future of its branch.
    fn name_dead_ends(&self, walk: &[WalkNode], placed: &[Placed], arena: &mut Arena) {
        let parent_of = |i: usize| {
            let p = walk[i].parent;
            (p != NO_PARENT && (p as usize) < i).then_some(p as usize)
        };
        let mut below = vec![false; walk.len()];
        for i in (0..walk.len()).rev() {
            below[i] |= placed[i].shows;
            if let (true, Some(p)) = (below[i], parent_of(i)) {
                below[p] = true;
            }
        }
        let dead = |i: usize| {
            !below[i]
                && !placed[i].skipped
                && walk[i].status == NodeStatus::Read
                && self.hand_written.contains_key(&walk[i].ty)
        };
        for i in (0..walk.len()).filter(|&i| dead(i)) {
            let mut up = parent_of(i);
            let mut topmost = true;
            while let Some(a) = up.filter(|&a| !below[a]) {
                if dead(a) {
                    topmost = false;
                    break;
                }
                up = parent_of(a);
            }
            if topmost {
                arena.push(placed[i].attach, self.hand_written[&walk[i].ty].clone());
            }
        }
    }

    /// The oneshot channels whose `Sender` the walked task holds (their addresses).
    pub fn senders_held<'w>(&'w self, walk: &'w [WalkNode]) -> impl Iterator<Item = u64> + 'w {
        walk.iter().filter_map(|n| {
            let sender = matches!(self.kinds.get(n.ty as usize), Some(Kind::OneshotSender));
            (sender && n.status == NodeStatus::Read)
                .then_some(n.discr)
                .flatten()
                .filter(|&p| p != 0)
        })
    }

    /// The agent's task cell that a runtime task's walk leads to, when the task was spawned through the
    /// agent (its future is an `Instrumented`).
    pub fn agent_cell(&self, walk: &[WalkNode]) -> Option<u64> {
        walk.iter().enumerate().find_map(|(i, n)| {
            if !matches!(self.kinds.get(n.ty as usize), Some(Kind::AgentRoot)) {
                return None;
            }
            walk.iter().skip(i + 1).find_map(|c| {
                let plus = match self.kinds.get(c.ty as usize) {
                    Some(Kind::CellRef { plus }) => *plus,
                    _ => return None,
                };
                (c.parent as usize == i && c.status == NodeStatus::Read)
                    .then(|| c.discr.map(|v| v.wrapping_add(plus)))
                    .flatten()
            })
        })
    }

    /// The select whose branches tuple node `t` holds: up through the pointers between them.
    fn select_of(&self, walk: &[WalkNode], t: usize) -> Option<usize> {
        let mut at = t;
        for _ in 0..4 {
            let p = walk.get(at)?.parent as usize;
            match self.kinds.get(walk.get(p)?.ty as usize)? {
                Kind::Select(_) => return Some(p),
                Kind::Transparent => at = p,
                _ => return None,
            }
        }
        None
    }

    /// What the leaves of a walk say about the task's waker: for each `oneshot::Receiver` reached, whether
    /// it has a waker registered and whose. Extra information only: nothing else depends on it.
    /// `receivers` are the walk's `Inner` nodes of receivers that are part of the chain.
    fn delegates(
        &self,
        walk: &[WalkNode],
        receivers: &[usize],
        refs: &TaskRefs,
    ) -> Vec<DecodedDelegate> {
        // Sized for every receiver: one dump holds one such list per task, and growing from empty
        // would leave room for four.
        let mut out = Vec::with_capacity(receivers.len());
        for &i in receivers {
            let n = &walk[i];
            if n.status != NodeStatus::Read {
                continue;
            }
            let Some(state) = n.discr else { continue };
            let leaf = walk
                .get(n.parent as usize)
                .and_then(|p| match self.kinds.get(p.ty as usize) {
                    Some(Kind::Oneshot(info)) => Some(info.name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let child = |kind: fn(&Kind) -> bool| {
                // Children come after their parent, not necessarily right after it.
                walk.iter()
                    .skip(i + 1)
                    .find(|c| {
                        c.parent as usize == i
                            && c.status == NodeStatus::Read
                            && self.kinds.get(c.ty as usize).is_some_and(kind)
                    })
                    .and_then(|c| c.discr)
            };
            let vtable = child(|k| matches!(k, Kind::WakerVtable));
            let data = child(|k| matches!(k, Kind::WakerData));
            let registered = state & ONESHOT_RX_TASK_SET != 0;
            // The agent's wakers point at its task cell, tokio's at the task header.
            let (ours, task) = match vtable {
                Some(v) if Some(v) == self.owned_vtable => {
                    (true, data.and_then(|d| refs.cells.get(&d).copied()))
                }
                Some(v) if Some(v) == self.tokio_vtable => {
                    (true, data.and_then(|d| refs.headers.get(&d).copied()))
                }
                _ => (false, None),
            };
            out.push(DecodedDelegate {
                leaf,
                registered,
                waker_of: (registered && ours).then_some(task).flatten(),
                foreign_vtable: (registered && !ours).then_some(vtable).flatten(),
                value_sent: state & ONESHOT_VALUE_SENT != 0,
                closed: state & ONESHOT_CLOSED != 0,
                sender_held_by: refs.senders.get(&n.addr).copied(),
            });
        }
        out
    }

    /// A one-line note on a walk that did not give a full chain, if any.
    pub fn note(walk: &asyncdump_protocol::Walk) -> Option<String> {
        use asyncdump_protocol::Walk;
        match walk {
            Walk::Nodes {
                truncated: true, ..
            } => Some(format!(
                "decoded chain cut at the walk limit ({MAX_NODES} futures, {MAX_BYTES} bytes)"
            )),
            Walk::Nodes { .. } | Walk::Busy => None,
            Walk::NotStarted => Some("not decoded: the task has not been polled yet".into()),
            Walk::UnknownRoot => Some(
                "not decoded: its root future type is not in the binary's DWARF (another binary?)"
                    .into(),
            ),
            Walk::Unsupported { errno } => Some(format!(
                "not decoded: the process cannot read its own memory (process_vm_readv errno {errno}; seccomp?)"
            )),
        }
    }
}

/// tokio's oneshot state bits (`tokio/src/sync/oneshot.rs`, unchanged since tokio 1.0; checked on 1.54).
const ONESHOT_RX_TASK_SET: u64 = 0b001;
const ONESHOT_VALUE_SENT: u64 = 0b010;
const ONESHOT_CLOSED: u64 = 0b100;

/// The waker a leaf keeps, as read through DWARF.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DecodedDelegate {
    /// The leaf's type.
    pub leaf: String,
    /// Whether the leaf has a waker registered at all. A pending receiver without one is never woken.
    pub registered: bool,
    /// The task whose waker (the agent's or tokio's own) it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waker_of: Option<u64>,
    /// The vtable of a waker that is neither the agent's nor tokio's (another executor's or wrapper's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreign_vtable: Option<u64>,
    /// The sender already sent a value: the task should have been woken.
    pub value_sent: bool,
    /// The sender was dropped.
    pub closed: bool,
    /// The task that holds the `Sender` across an await, when a walk found it: who can wake this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_held_by: Option<u64>,
}

/// Where `merge` put one walk node.
#[derive(Default)]
struct Placed {
    /// The shown node its children hang under (`None`: the task root).
    attach: Option<usize>,
    /// Its subtree is not shown (a finished or disabled branch, or data read for the delegate).
    skipped: bool,
    /// The shown annotated frame it is (a `Framed`): its inner future is folded into that line.
    wraps: Option<usize>,
    /// The shown line of the `JoinHandle` it is: its child names the joined task.
    join: Option<usize>,
    /// It shows something itself: a line, or what it adds to its parent's line.
    shows: bool,
}

/// One annotated frame of a task, as `merge` needs it.
pub struct AnnotatedFrame {
    pub id: u64,
    pub parent: Option<u64>,
    pub info: Arc<FrameInfo>,
    pub awaits: Vec<u64>,
}

fn leaf(name: String) -> FrameInfo {
    FrameInfo::new(name, None, Source::Awaitee)
}

/// Whether `child` is an async block defined in the async fn `parent` (`f::{async block#0}` in `f`),
/// both decoded, and suspended where `parent` is: a wrapper the fn awaits, whose await is the real one.
fn is_own_block(parent: &FrameInfo, child: &FrameInfo) -> bool {
    if parent.source != Source::Decoded || child.source != Source::Decoded {
        return false;
    }
    let (p, c) = (base_name(&parent.name), base_name(&child.name));
    c.strip_prefix(p)
        .and_then(|rest| rest.strip_prefix("::{async block#"))
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// A path without its trailing generic arguments (`Mutex::lock<()>` → `Mutex::lock`); a qualified
/// impl (`<F as Handler>::call`) keeps its own.
fn base_name(name: &str) -> &str {
    if !name.ends_with('>') {
        return name;
    }
    let bytes = name.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().rev() {
        match b {
            // The arrow of a `fn(A) -> B` argument closes nothing.
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' => depth += 1,
            b'<' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return if name[..i].ends_with("::") || i == 0 {
                        name
                    } else {
                        &name[..i]
                    };
                }
            }
            _ => {}
        }
    }
    name
}

/// Shown nodes, children always after their parent.
#[derive(Default)]
struct Arena {
    nodes: Vec<ArenaNode>,
    roots: Vec<usize>,
}

struct ArenaNode {
    parent: Option<usize>,
    info: Arc<FrameInfo>,
    awaits: Vec<u64>,
    children: Vec<usize>,
}

impl Arena {
    fn push(&mut self, under: Option<usize>, info: Arc<FrameInfo>) -> usize {
        let i = self.nodes.len();
        self.nodes.push(ArenaNode {
            parent: under,
            info,
            awaits: Vec::new(),
            children: Vec::new(),
        });
        match under {
            Some(p) => self.nodes[p].children.push(i),
            None => self.roots.push(i),
        }
        i
    }

    /// Builds the trees bottom-up (children have higher indices), so depth costs no recursion.
    fn into_trees(self) -> Vec<FrameNode> {
        let mut built: Vec<Option<FrameNode>> = Vec::with_capacity(self.nodes.len());
        built.resize_with(self.nodes.len(), || None);
        let mut children_of: Vec<Vec<usize>> = Vec::with_capacity(self.nodes.len());
        let mut infos = Vec::with_capacity(self.nodes.len());
        for n in self.nodes {
            children_of.push(n.children);
            let mut awaits = n.awaits;
            awaits.sort_unstable();
            awaits.dedup();
            infos.push(Some((n.info, awaits)));
        }
        for i in (0..infos.len()).rev() {
            let (meta, awaits_tasks) = infos[i].take().expect("each node built once");
            // Exact sizes here and for the roots: `collect` through a filter starts at room for four,
            // and a dump keeps every one of these lists.
            let mut children = Vec::with_capacity(children_of[i].len());
            children.extend(children_of[i].iter().filter_map(|&c| built[c].take()));
            built[i] = Some(FrameNode {
                id: 0,
                meta,
                awaits_tasks,
                children,
            });
        }
        let mut roots = Vec::with_capacity(self.roots.len());
        roots.extend(self.roots.iter().filter_map(|&r| built[r].take()));
        roots
    }
}

/// Classifies types into plans, each once.
struct Builder<'a> {
    debug: &'a Debug,
    types: Vec<TypePlan>,
    kinds: Vec<Kind>,
    by_die: HashMap<u64, u32>,
    /// How many types are being classified, one inside the other.
    depth: usize,
    hand_written: FastMap<u32, Arc<FrameInfo>>,
    /// Types `classify` just followed through `descend`, for `ty` to record in `hand_written`.
    descended: FastMap<u64, ()>,
}

/// Deepest nesting of types classified one inside the other (each a stack frame of `classify`).
const MAX_DEPTH: usize = 256;

/// Plan types of nested futures are bounded by the program's types, but a pathological DWARF could
/// still chain wrappers forever: stop classifying past this many.
const MAX_TYPES: usize = 100_000;

impl Builder<'_> {
    /// The plan type of DIE `die`, classifying it (and what it leads to) on first sight.
    fn ty(&mut self, die: u64) -> u32 {
        let die = self.strip(die);
        if let Some(&t) = self.by_die.get(&die) {
            return t;
        }
        let t = self.types.len() as u32;
        self.by_die.insert(die, t);
        // A placeholder while classifying, so that recursive types (through a box) terminate.
        self.types.push(TypePlan::default());
        self.kinds.push(Kind::Transparent);
        let (plan, kind) = if self.types.len() > MAX_TYPES || self.depth >= MAX_DEPTH {
            self.leaf(die)
        } else {
            self.depth += 1;
            let classified = self.classify(die);
            self.depth -= 1;
            classified
        };
        if self.descended.remove(&die).is_some() {
            let name = self.leaf_name(die);
            self.hand_written.insert(t, Arc::new(leaf(name)));
        }
        self.types[t as usize] = plan;
        self.kinds[t as usize] = kind;
        t
    }

    /// Follows typedefs and qualifiers to the type itself.
    fn strip(&self, mut die: u64) -> u64 {
        for _ in 0..16 {
            match self.debug.node(die) {
                Some(n)
                    if matches!(
                        n.tag,
                        constants::DW_TAG_typedef
                            | constants::DW_TAG_const_type
                            | constants::DW_TAG_volatile_type
                    ) =>
                {
                    match n.type_ref {
                        Some(t) => die = t,
                        None => break,
                    }
                }
                _ => break,
            }
        }
        die
    }

    fn is_leaf(&self, t: u32) -> bool {
        matches!(self.kinds[t as usize], Kind::Leaf(_))
    }

    fn leaf(&self, die: u64) -> (TypePlan, Kind) {
        let name = self.leaf_name(die);
        (TypePlan::default(), Kind::Leaf(Arc::new(leaf(name))))
    }

    /// A leaf future's name: its type's, or for a wrapper of one future (`Coop<Recv<()>>`, tokio's
    /// budget around a receive) the wrapped future's, which is what the task awaits.
    fn leaf_name(&self, mut die: u64) -> String {
        for _ in 0..8 {
            match self.wrapped(die) {
                Some(inner) => die = inner,
                None => break,
            }
        }
        short_type(&self.debug.qualified_name(die))
    }

    /// The future a structure wraps: its only member's type, when that is one of the structure's own
    /// type parameters (`struct Coop<F> { fut: F }`) and a structure or enum, but not a closure
    /// (`PollFn<F> { f: F }` is the future; its closure is not).
    fn wrapped(&self, die: u64) -> Option<u64> {
        let node = self.debug.node(die)?;
        let [(_, _, member)] = self.members(die)[..] else {
            return None;
        };
        let member = self.strip(member);
        let inner = self.debug.node(member)?;
        let is_data = matches!(
            inner.tag,
            constants::DW_TAG_structure_type | constants::DW_TAG_enumeration_type
        );
        if !is_data || inner.name.as_deref().is_none_or(|n| n.contains("{closure")) {
            return None;
        }
        let is_param = |c: &crate::dwarf::Node| {
            c.tag == constants::DW_TAG_template_type_parameter
                && c.type_ref.map(|t| self.strip(t)) == Some(member)
        };
        node.children
            .iter()
            .any(|&c| is_param(&self.debug.nodes[c]))
            .then_some(member)
    }

    /// The data members of a structure: (name, offset, type DIE).
    fn members(&self, die: u64) -> Vec<(String, u64, u64)> {
        let Some(n) = self.debug.node(die) else {
            return Vec::new();
        };
        n.children
            .iter()
            .map(|&c| &self.debug.nodes[c])
            .filter(|c| c.tag == constants::DW_TAG_member)
            .filter_map(|c| {
                Some((
                    c.name.clone().unwrap_or_default(),
                    c.member_offset.unwrap_or(0),
                    c.type_ref?,
                ))
            })
            .collect()
    }

    fn member(&self, die: u64, names: &[&str]) -> Option<(u64, u64)> {
        self.members(die)
            .into_iter()
            .find(|(n, _, _)| names.contains(&n.as_str()))
            .map(|(_, off, ty)| (off, ty))
    }

    /// A Rust enum's discriminant and variants: (discr value, variant name, variant struct DIE, offset).
    #[allow(clippy::type_complexity)]
    fn variants(&self, die: u64) -> Option<(Discr, Vec<(Option<u64>, String, u64, u64)>)> {
        let d = self.debug;
        let part = d.variant_part(die)?;
        let discr = Discr {
            offset: d.nodes[part.discr].member_offset? as u32,
            size: part.discr_size as u8,
        };
        let variants = part
            .variants
            .iter()
            .filter_map(|&(value, m)| {
                let m = &d.nodes[m];
                Some((
                    value,
                    m.name.clone().unwrap_or_default(),
                    m.type_ref?,
                    m.member_offset.unwrap_or(0),
                ))
            })
            .collect();
        Some((discr, variants))
    }

    fn classify(&mut self, die: u64) -> (TypePlan, Kind) {
        let Some(node) = self.debug.node(die) else {
            return self.leaf(die);
        };
        let (tag, size) = (node.tag, node.byte_size.unwrap_or(0) as u32);
        let pointee = node.type_ref;
        let name = self.debug.qualified_name(die);
        if let Some(m) = self.debug.machine(die) {
            return self.coroutine(m);
        }
        let plan = |edges: Vec<Edge>| TypePlan {
            size,
            always: edges,
            ..TypePlan::default()
        };
        let inline = |offset: u64, to: u32| Edge {
            offset: offset as u32,
            to: Target::Inline(to),
        };
        if matches!(
            tag,
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type
        ) {
            // `Box<T>`, `&mut T`: a thin pointer to the future.
            let Some(pointee) = pointee else {
                return self.leaf(die);
            };
            let t = self.ty(pointee);
            let edge = Edge {
                offset: 0,
                to: Target::Pointer(t),
            };
            let size = if size == 0 { 8 } else { size };
            return (
                TypePlan {
                    size,
                    always: vec![edge],
                    ..TypePlan::default()
                },
                Kind::Transparent,
            );
        }
        if tag != constants::DW_TAG_structure_type {
            return self.leaf(die);
        }
        if name.starts_with("core::pin::Pin<") {
            return match self.member(die, &["pointer", "__pointer"]) {
                Some((off, ty)) => {
                    let t = self.ty(ty);
                    (plan(vec![inline(off, t)]), Kind::Transparent)
                }
                None => self.leaf(die),
            };
        }
        let members = self.members(die);
        if members.len() == 2 && name.contains("dyn core::future::future::Future") {
            // `Box<dyn Future>` / `*const dyn Future`: data pointer and vtable.
            if let (Some((_, data, _)), Some((_, vtable, _))) = (
                members.iter().find(|m| m.0 == "pointer"),
                members.iter().find(|m| m.0 == "vtable"),
            ) {
                let edge = Edge {
                    offset: *data as u32,
                    to: Target::Dyn {
                        vtable_offset: *vtable as u32,
                    },
                };
                return (plan(vec![edge]), Kind::Transparent);
            }
        }
        if members.len() == 2 && name.contains('[') {
            // `Box<[T]>` / `*const [T]`: data pointer and length.
            if let (Some((_, data, ptr)), Some((_, len, _))) = (
                members.iter().find(|m| m.0 == "data_ptr"),
                members.iter().find(|m| m.0 == "length"),
            ) && let Some(elem) = self.debug.node(self.strip(*ptr)).and_then(|p| p.type_ref)
            {
                let elem = self.strip(elem);
                let stride = self.debug.node(elem).and_then(|e| e.byte_size).unwrap_or(0);
                let t = self.ty(elem);
                let edge = Edge {
                    offset: *data as u32,
                    to: Target::Slice {
                        len_offset: *len as u32,
                        elem: t,
                        stride: stride as u32,
                    },
                };
                return (plan(vec![edge]), Kind::Transparent);
            }
        }
        if names::spellings(names::FRAMED).any(|p| is_generic(&name, p)) {
            if let (Some((inner, ty)), Some((node_offset, _))) = (
                self.member(die, &[names::FRAMED_INNER]),
                self.member(die, &[names::FRAMED_NODE]),
            ) {
                let t = self.ty(ty);
                return (plan(vec![inline(inner, t)]), Kind::Framed { node_offset });
            }
            return self.leaf(die);
        }
        if names::spellings(names::JOIN_HANDLE).any(|p| is_generic(&name, p)) {
            let info = Arc::new(leaf(short_type(&name.replacen("tokio_support::", "", 1))));
            return match self.task_id_path(die, names::JOIN_HANDLE_TASK) {
                Some(edge) => (plan(vec![edge]), Kind::JoinHandle(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if name.starts_with("tokio::runtime::task::join::JoinHandle<") {
            let info = Arc::new(leaf(short_type(&name.replacen(
                "runtime::task::join::",
                "task::",
                1,
            ))));
            return match self.header_path(die) {
                Some(edge) => (plan(vec![edge]), Kind::JoinHandle(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if names::spellings(names::INSTRUMENTED).any(|p| is_generic(&name, p)) {
            // A runtime task spawned through the agent: read only which agent task it is.
            return match self.task_id_path(die, names::INSTRUMENTED_TASK) {
                Some(edge) => (plan(vec![edge]), Kind::AgentRoot),
                None => self.leaf(die),
            };
        }
        if name.starts_with("tokio::runtime::task::core::Stage<") {
            // A runtime task's stage: the future while it runs, then its output.
            if let Some((discr, variants)) = self.variants(die) {
                let cases: Vec<Case> = variants
                    .into_iter()
                    .filter(|v| v.1 == "Running")
                    .filter_map(|(value, _, vdie, voff)| {
                        let (off, ty) = self.member(vdie, &["__0"])?;
                        Some(Case {
                            value,
                            edges: vec![inline(voff + off, self.ty(ty))],
                        })
                    })
                    .collect();
                return (enum_plan(size, discr, cases), Kind::Transparent);
            }
            return self.leaf(die);
        }
        if name.starts_with("tokio::sync::oneshot::Receiver<") {
            let info = Arc::new(leaf(short_type(&name)));
            return match self.oneshot_path(die) {
                Some(edge) => (plan(vec![edge]), Kind::Oneshot(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if name.starts_with("core::future::poll_fn::PollFn<")
            || name.starts_with("tokio::future::poll_fn::PollFn<")
        {
            // `tokio::join!` / `tokio::select!`: the closure holds (a pointer to) the tuple of branches.
            // Before 1.39 tokio's macros use its own `PollFn`, with the same field.
            if let Some((f_off, closure)) = self.member(die, &["f"]) {
                let closure = self.strip(closure);
                let caps = self.members(closure);
                if let Some((_, off, ty)) = caps
                    .iter()
                    .find(|m| m.0 == "futures" || m.0 == "_ref__futures")
                {
                    let (off, ty) = (*off, *ty);
                    let disabled = caps
                        .iter()
                        .find(|m| m.0 == "disabled" || m.0 == "_ref__disabled")
                        .map(|m| (m.1, m.2));
                    let label = if disabled.is_some() {
                        "tokio::select!"
                    } else {
                        "tokio::join!"
                    };
                    let info = Arc::new(FrameInfo::new(label.into(), None, Source::Decoded));
                    let mut edges = Vec::new();
                    // The mask first: the walk then reaches it before the branches, which sit deeper.
                    if let Some(edge) =
                        disabled.and_then(|(m_off, m_ty)| self.mask(f_off + m_off, m_ty))
                    {
                        edges.push(edge);
                    }
                    let t = self.ty(ty);
                    edges.push(inline(f_off + off, t));
                    let kind = match disabled {
                        Some(_) => Kind::Select(info),
                        None => Kind::Combinator(info),
                    };
                    return (plan(edges), kind);
                }
            }
            return self.leaf(die);
        }
        if name.starts_with('(') {
            // A tuple of join/select branches, in branch order (`__0`, `__1`, ...).
            let mut fields: Vec<(u64, u64, u64)> = members
                .iter()
                .filter_map(|(n, off, ty)| Some((n.strip_prefix("__")?.parse().ok()?, *off, *ty)))
                .collect();
            fields.sort_unstable();
            let edges = fields
                .into_iter()
                .map(|(_, off, ty)| {
                    let t = self.ty(ty);
                    inline(off, t)
                })
                .collect();
            return (plan(edges), Kind::Tuple);
        }
        if name.starts_with("futures_util::future::poll_fn::PollFn<")
            && let Some(found) = self.futures_macro(die, size)
        {
            return found;
        }
        if name.starts_with("futures_util::future::join_all::JoinAll<") {
            // Up to 30 futures: a boxed slice of `MaybeDone`s, followed by the enum rule below. More
            // become a `FuturesOrdered`, whose linked tasks this does not follow.
            return self.combinator(die, size, "kind", "futures::future::join_all");
        }
        if name.starts_with("tokio::time::timeout::Timeout<") {
            return self.combinator(die, size, "value", "tokio::time::timeout");
        }
        let maybe_done = name.starts_with("tokio::future::maybe_done::MaybeDone<")
            || name.starts_with("futures_util::future::maybe_done::MaybeDone<")
            || name.starts_with("futures_util::future::try_maybe_done::TryMaybeDone<");
        if maybe_done || name.starts_with("futures_util::") {
            // Wrappers: follow the inner future through the variant that still holds one. Generic
            // `futures_util` types count only when what they lead to is itself a future we know.
            if let Some((discr, variants)) = self.variants(die) {
                let mut cases = Vec::new();
                for (value, vname, vdie, voff) in variants {
                    if !matches!(
                        vname.as_str(),
                        "Future" | "Incomplete" | "First" | "Second" | "Pending" | "Small"
                    ) {
                        continue;
                    }
                    if let Some((off, ty)) =
                        self.member(vdie, &["future", "f", "__0", "fut", "elems"])
                    {
                        let t = self.ty(ty);
                        if maybe_done || !self.is_leaf(t) {
                            cases.push(Case {
                                value,
                                edges: vec![inline(voff + off, t)],
                            });
                        }
                    }
                }
                if !cases.is_empty() {
                    return (enum_plan(size, discr, cases), Kind::Transparent);
                }
            } else if let Some((off, ty)) = self.member(die, &["inner", "future", "fut"]) {
                let t = self.ty(ty);
                if !self.is_leaf(t) {
                    return (plan(vec![inline(off, t)]), Kind::Transparent);
                }
            }
        }
        match self.descend(die, size) {
            Some(found) => {
                self.descended.insert(die, ());
                found
            }
            None => self.leaf(die),
        }
    }

    /// `futures::join!` / `futures::try_join!`: a `PollFn` whose closure holds `_fut0`, `_fut1`, ... (each
    /// a `Pin<&mut MaybeDone>` into the enclosing state machine); `futures::select!`: one whose closure
    /// holds `_ref___0`, `_ref___1`, ... (each a `&mut` to a branch's fused future, which shows nothing
    /// once it is done). Branches in order.
    fn futures_macro(&mut self, die: u64, size: u32) -> Option<(TypePlan, Kind)> {
        let (f_off, closure) = self.member(die, &["f"])?;
        let closure = self.strip(closure);
        let members = self.members(closure);
        let numbered = |prefix: &str| -> Vec<(u64, u64, u64)> {
            let mut v: Vec<_> = members
                .iter()
                .filter_map(|(n, off, ty)| Some((n.strip_prefix(prefix)?.parse().ok()?, *off, *ty)))
                .collect();
            v.sort_unstable();
            v
        };
        let (label, branches) = match (numbered("_fut"), numbered("_ref___")) {
            (join, _) if !join.is_empty() => ("futures::join!", join),
            (_, select) if !select.is_empty() => ("futures::select!", select),
            _ => return None,
        };
        let edges = branches
            .into_iter()
            .map(|(_, off, ty)| Edge {
                offset: (f_off + off) as u32,
                to: Target::Inline(self.ty(ty)),
            })
            .collect();
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        let plan = TypePlan {
            size,
            always: edges,
            ..TypePlan::default()
        };
        Some((plan, Kind::Combinator(Arc::new(info))))
    }

    /// Any other hand-written future (pin-project structs and enums of hyper, axum, tower, ...): not
    /// shown itself, followed through each field that leads to a future the plan can read further, in
    /// an enum only through the variant its discriminant selects. `None` when no field does: a leaf.
    fn descend(&mut self, die: u64, size: u32) -> Option<(TypePlan, Kind)> {
        let plan = match self.variants(die) {
            Some((discr, variants)) => {
                let cases: Vec<Case> = variants
                    .into_iter()
                    .filter_map(|(value, _, vdie, voff)| {
                        let edges = self.future_fields(vdie, voff);
                        (!edges.is_empty()).then_some(Case { value, edges })
                    })
                    .collect();
                enum_plan(size, discr, cases)
            }
            None => TypePlan {
                size,
                always: self.future_fields(die, 0),
                ..TypePlan::default()
            },
        };
        (!plan.always.is_empty() || !plan.cases.is_empty()).then_some((plan, Kind::Transparent))
    }

    /// Edges to the fields of structure `of` (at `base` in the enclosing type) that may hold a future.
    fn future_fields(&mut self, of: u64, base: u64) -> Vec<Edge> {
        self.members(of)
            .into_iter()
            .filter_map(|(_, off, ty)| {
                self.future_field(ty).map(|t| Edge {
                    offset: (base + off) as u32,
                    to: Target::Inline(t),
                })
            })
            .collect()
    }

    /// The plan type of a field's type if it may hold a future to read further: a structure or enum
    /// held inline, or a `Box` the future owns. Never another pointer: an `Arc`, `&` or raw pointer
    /// leads to state other threads change under the read.
    fn future_field(&mut self, ty: u64) -> Option<u32> {
        let ty = self.strip(ty);
        let node = self.debug.node(ty)?;
        let owned = match node.tag {
            constants::DW_TAG_structure_type => true,
            constants::DW_TAG_pointer_type => node
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("alloc::boxed::Box<")),
            _ => false,
        };
        if !owned {
            return None;
        }
        let t = self.ty(ty);
        self.leads_further(t, 8).then_some(t)
    }

    /// Whether a node of plan type `t` can show more than a plain leaf: a state machine, a combinator,
    /// one of the agent's or tokio's types, or a wrapper or tuple of one (looked through `depth` wrappers
    /// deep; past that, assumed so). A wrapper of leaves only (`Pin<Box<dyn Sleep>>`, a boxed slice of
    /// indices) does not: inside a hand-written future it is state, not what the task waits on.
    fn leads_further(&self, t: u32, depth: usize) -> bool {
        match &self.kinds[t as usize] {
            Kind::Leaf(_) => false,
            Kind::Transparent | Kind::Tuple if depth == 0 => true,
            // A tuple met inside a hand-written future (hyper's `(Recorder, Ponger)`) is state unless an
            // element leads on; the tuples of `join!`/`select!` are reached through their macro's rule.
            Kind::Transparent | Kind::Tuple => {
                let plan = &self.types[t as usize];
                plan.always
                    .iter()
                    .chain(plan.cases.iter().flat_map(|c| &c.edges))
                    .any(|e| match e.to {
                        Target::Inline(to) | Target::Pointer(to) => {
                            self.leads_further(to, depth - 1)
                        }
                        Target::Slice { elem, .. } => self.leads_further(elem, depth - 1),
                        Target::Dyn { .. } => true,
                    })
            }
            _ => true,
        }
    }

    /// A combinator shown as its own line, `label`, over the future in its field `field`.
    fn combinator(&mut self, die: u64, size: u32, field: &str, label: &str) -> (TypePlan, Kind) {
        let Some((off, ty)) = self.member(die, &[field]) else {
            return self.leaf(die);
        };
        let t = self.ty(ty);
        let plan = TypePlan {
            size,
            always: vec![Edge {
                offset: off as u32,
                to: Target::Inline(t),
            }],
            ..TypePlan::default()
        };
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        (plan, Kind::Combinator(Arc::new(info)))
    }

    fn coroutine(&mut self, m: crate::dwarf::StateMachine) -> (TypePlan, Kind) {
        let name = display_name(&m.name);
        let header = m
            .states
            .iter()
            .find(|s| s.name == "Unresumed")
            .map(|s| loc(&s.file, s.line));
        let mut states = FastMap::default();
        let mut cases = Vec::new();
        for s in &m.states {
            let suspended = s.name.starts_with("Suspend");
            let mut info = FrameInfo::new(name.clone(), header.clone(), Source::Decoded);
            if suspended {
                info = info.with_suspended_at(Some(loc(&s.file, s.line)));
            }
            states.insert(
                s.discr,
                StateView {
                    info: Arc::new(info),
                    done: matches!(s.name.as_str(), "Returned" | "Panicked"),
                },
            );
            if let Some(a) = &s.awaitee {
                let t = self.ty(a.type_die);
                let mut edges = vec![Edge {
                    offset: a.offset as u32,
                    to: Target::Inline(t),
                }];
                for &(offset, die) in &s.senders {
                    if let Some(t) = self.sender(die) {
                        edges.push(Edge {
                            offset: offset as u32,
                            to: Target::Inline(t),
                        });
                    }
                }
                cases.push(Case {
                    value: Some(s.discr),
                    edges,
                });
            }
        }
        (
            TypePlan {
                size: m.size as u32,
                discr: Some(Discr {
                    offset: m.state_offset as u32,
                    size: m.state_size as u8,
                }),
                always: Vec::new(),
                cases,
            },
            Kind::Coroutine(states),
        )
    }

    /// Descends from field `names[0]`'s type through single-pointer wrappers (`Option` niche, `Arc`,
    /// `NonNull`) to a thin pointer; returns its offset within `die` and the pointee's DIE.
    fn pointer_to(&mut self, die: u64, field: &str) -> Option<(u64, u64)> {
        let (mut off, t) = self.member(die, &[field])?;
        let mut ty = self.strip(t);
        for _ in 0..6 {
            let node = self.debug.node(ty)?;
            if node.tag == constants::DW_TAG_pointer_type {
                return Some((off, self.strip(node.type_ref?)));
            }
            let next = match self.variants(ty) {
                // `Option<P>` with a non-null niche: `Some`'s payload is the pointer.
                Some((_, vs)) => {
                    let (_, _, vdie, voff) = vs.into_iter().find(|v| v.1 == "Some")?;
                    let (o, t) = self.member(vdie, &["__0"])?;
                    (voff + o, t)
                }
                None => self.member(ty, &["ptr", "pointer", "__0"])?,
            };
            off += next.0;
            ty = self.strip(next.1);
        }
        None
    }

    /// A synthetic plan type that reads one `u64` at `offset` (as its discriminant).
    fn synthetic(&mut self, offset: u64, kind: Kind) -> u32 {
        self.synthetic_sized(offset, 8, kind)
    }

    fn synthetic_sized(&mut self, offset: u64, size: u8, kind: Kind) -> u32 {
        let t = self.types.len() as u32;
        self.types.push(TypePlan {
            size: offset as u32 + size as u32,
            discr: Some(Discr {
                offset: offset as u32,
                size,
            }),
            ..TypePlan::default()
        });
        self.kinds.push(kind);
        t
    }

    /// The edge to a `select!`'s `disabled` mask, captured at `offset` by value or by reference.
    fn mask(&mut self, offset: u64, ty: u64) -> Option<Edge> {
        let node = self.debug.node(self.strip(ty))?;
        let (pointer, size) = match node.tag {
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type => {
                let pointee = self.debug.node(self.strip(node.type_ref?))?;
                (true, pointee.byte_size?)
            }
            _ => (false, node.byte_size?),
        };
        if !matches!(size, 1 | 2 | 4 | 8) {
            return None;
        }
        let t = self.synthetic_sized(0, size as u8, Kind::SelectMask);
        Some(Edge {
            offset: offset as u32,
            to: if pointer {
                Target::Pointer(t)
            } else {
                Target::Inline(t)
            },
        })
    }

    /// In `tokio::sync::oneshot::Receiver`: `inner: Option<Arc<Inner>>` → `Inner { state, rx_task }`,
    /// where `rx_task` holds a `Waker { data, vtable }`. Returns the edge to a view of `Inner` whose
    /// discriminant is the state word, with children for the waker's vtable and data pointer, read from
    /// the same copy: one read per receiver. (The state word changes under the read as the sender acts;
    /// `rx_task` only changes when the receiving task, which the agent holds still, polls it.)
    fn oneshot_path(&mut self, die: u64) -> Option<Edge> {
        let (ptr_off, arc_inner) = self.pointer_to(die, "inner")?;
        let (data_off, inner) = self.member(arc_inner, &["data"])?;
        let inner = self.strip(inner);
        let (state_off, _) = self.member(inner, &["state"])?;
        let (rx_off, rx_ty) = self.member(inner, &["rx_task"])?;
        let vtable_off = self.find_member(rx_ty, "vtable", 8)?;
        let waker_data_off = self.find_member(rx_ty, "data", 8)?;
        let base = data_off + rx_off;
        let vt = self.synthetic(base + vtable_off, Kind::WakerVtable);
        // The data pointer of an asyncdump waker is `Arc::<TaskCell>::into_raw`: the cell itself.
        let data = self.synthetic(base + waker_data_off, Kind::WakerData);
        let size = self.debug.node(arc_inner)?.byte_size?;
        let view = self.types.len() as u32;
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: (data_off + state_off) as u32,
                size: 8,
            }),
            always: vec![
                Edge {
                    offset: 0,
                    to: Target::Inline(vt),
                },
                Edge {
                    offset: 0,
                    to: Target::Inline(data),
                },
            ],
            cases: Vec::new(),
        });
        self.kinds.push(Kind::OneshotInner);
        Some(Edge {
            offset: ptr_off as u32,
            to: Target::Pointer(view),
        })
    }

    /// The plan type of a `oneshot::Sender` (DIE `die`): its channel pointer read as the discriminant,
    /// nothing followed. `None` if its layout is not the one known.
    fn sender(&mut self, die: u64) -> Option<u32> {
        let die = self.strip(die);
        if let Some(&t) = self.by_die.get(&die) {
            return matches!(self.kinds[t as usize], Kind::OneshotSender).then_some(t);
        }
        let (ptr_off, _) = self.pointer_to(die, "inner")?;
        let size = self.debug.node(die)?.byte_size?;
        let t = self.types.len() as u32;
        self.by_die.insert(die, t);
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: ptr_off as u32,
                size: 8,
            }),
            ..TypePlan::default()
        });
        self.kinds.push(Kind::OneshotSender);
        Some(t)
    }

    /// The offset of the first member named `name` anywhere inside `die` (depth-first, through nested
    /// structures and unions), at most `depth` levels down.
    fn find_member(&self, die: u64, name: &str, depth: usize) -> Option<u64> {
        self.find_member_typed(die, name, depth).map(|(off, _)| off)
    }

    /// Like [`Self::find_member`], with the member's type.
    fn find_member_typed(&self, die: u64, name: &str, depth: usize) -> Option<(u64, u64)> {
        let die = self.strip(die);
        // An enum's fields are in its variants (`Option<Waker>`: the waker is in `Some`).
        let variant_fields = self.variants(die).into_iter().flat_map(|(_, vs)| {
            vs.into_iter()
                .map(|(_, vname, vdie, voff)| (vname, voff, vdie))
        });
        for (n, off, ty) in self.members(die).into_iter().chain(variant_fields) {
            if n == name {
                return Some((off, ty));
            }
            if depth > 0
                && let Some((inner, inner_ty)) = self.find_member_typed(ty, name, depth - 1)
            {
                return Some((off + inner, inner_ty));
            }
        }
        None
    }

    /// In tokio's `JoinHandle`: `raw: RawTask { ptr: NonNull<Header> }`. Returns the edge to a value that
    /// reads that pointer: the joined task's header, compared with the listed runtime tasks' headers.
    fn header_path(&mut self, die: u64) -> Option<Edge> {
        let (off, _) = self.pointer_to(die, "raw")?;
        let t = self.synthetic(0, Kind::HeaderRef);
        Some(Edge {
            offset: off as u32,
            to: Target::Inline(t),
        })
    }

    /// In `asyncdump_agent::JoinHandle` and `Instrumented`: `field: Arc<TaskCell>` points at
    /// `ArcInner { .., data: TaskCell }`.
    /// Returns the edge to a value that reads that pointer: the joined task's cell, compared with the
    /// snapshot's task cells, names the task without another read.
    fn task_id_path(&mut self, die: u64, field: &str) -> Option<Edge> {
        let (off, arc_inner) = self.pointer_to(die, field)?;
        let (data_off, _) = self.member(arc_inner, &["data"])?;
        let t = self.synthetic(0, Kind::CellRef { plus: data_off });
        Some(Edge {
            offset: off as u32,
            to: Target::Inline(t),
        })
    }
}

/// Whether `name` is an instantiation of the generic type `path` (`path<…>`).
fn is_generic(name: &str, path: &str) -> bool {
    name.strip_prefix(path)
        .is_some_and(|rest| rest.starts_with('<'))
}

/// A leaf's type as people write it: the std paths every Rust programmer knows, without the default
/// allocator. (`tokio::sync::oneshot::Receiver<alloc::string::String>` → `…Receiver<String>`.)
fn short_type(name: &str) -> String {
    name.replace(", alloc::alloc::Global>", ">")
        .replace("alloc::string::String", "String")
        .replace("alloc::vec::Vec<", "Vec<")
        .replace("alloc::boxed::Box<", "Box<")
        .replace("alloc::sync::Arc<", "Arc<")
        .replace("core::option::Option<", "Option<")
        .replace("core::result::Result<", "Result<")
        .replace("core::pin::Pin<", "Pin<")
}

/// The plan of an enum (or state machine) that follows each of `cases` by its discriminant.
fn enum_plan(size: u32, discr: Discr, cases: Vec<Case>) -> TypePlan {
    TypePlan {
        size,
        discr: Some(discr),
        always: Vec::new(),
        cases,
    }
}

fn loc(file: &str, line: u64) -> Loc {
    Loc {
        file: file.to_owned(),
        line: line as u32,
        column: 0,
    }
}

/// `a::b::{async_fn_env#0}` → `a::b`; `a::main::{async_fn#0}::{async_block_env#1}` →
/// `a::main::{async block#1}`.
pub(crate) fn display_name(qualified: &str) -> String {
    // Every pattern starts with `::{async` or `{async`: a name without one (most leaf and frame
    // names) is copied as it is, without three scans.
    if !qualified.contains("{async") {
        return qualified.to_owned();
    }
    qualified
        .replace("::{async_fn_env#0}", "")
        .replace("::{async_fn#0}", "")
        .replace("{async_block_env#", "{async block#")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_types_drop_std_paths_and_the_default_allocator() {
        assert_eq!(
            short_type(
                "tokio::sync::oneshot::Receiver<alloc::vec::Vec<alloc::string::String, alloc::alloc::Global>>"
            ),
            "tokio::sync::oneshot::Receiver<Vec<String>>"
        );
    }

    #[test]
    fn state_machine_names_read_like_the_source() {
        assert_eq!(
            display_name("plain_chain::descend::{async_fn_env#0}"),
            "plain_chain::descend"
        );
        assert_eq!(
            display_name("two_blocks::main::{async_fn#0}::{async_block_env#1}"),
            "two_blocks::main::{async block#1}"
        );
        assert_eq!(
            display_name("tokio::sync::mpsc::bounded::{impl#0}::recv::{async_fn_env#0}<u32>"),
            "tokio::sync::mpsc::bounded::{impl#0}::recv<u32>"
        );
    }

    fn decoded(name: &str) -> FrameInfo {
        FrameInfo::new(name.into(), None, Source::Decoded)
    }

    #[test]
    fn an_async_fn_awaiting_only_its_own_block_is_one_frame() {
        let own = |p: &str, c: &str| is_own_block(&decoded(p), &decoded(c));
        assert!(own("svc::slept", "svc::slept::{async block#0}"));
        assert!(own(
            "tokio::sync::mutex::Mutex::lock<()>",
            "tokio::sync::mutex::Mutex::lock::{async block#0}<()>"
        ));
        assert!(own(
            "axum::handler::<F as Handler>::call<fn(State<Deps>) -> svc::locked, S>",
            "axum::handler::<F as Handler>::call::{async block#3}<fn(State<Deps>) -> svc::locked, S>"
        ));
        // Another fn's block, a block's block, or an annotated frame: kept apart.
        assert!(!own("svc::slept", "svc::slept_more::{async block#0}"));
        assert!(!own(
            "svc::slept",
            "svc::slept::{async block#0}::{async block#1}"
        ));
        assert!(!own("svc::a::{async block#0}", "svc::a::{async block#0}"));
        let annotated = FrameInfo::new("svc::slept".into(), None, Source::AnnotatedFn);
        assert!(!is_own_block(
            &annotated,
            &decoded("svc::slept::{async block#0}")
        ));
    }

    #[test]
    fn base_names_drop_trailing_generics_only() {
        assert_eq!(base_name("a::f<u32, Vec<u8>>"), "a::f");
        assert_eq!(base_name("a::<F as H>::call"), "a::<F as H>::call");
        assert_eq!(base_name("a::f<fn(X) -> Y>"), "a::f");
        assert_eq!(base_name("<F as H>"), "<F as H>");
    }
}
