//! The decode stage: a walk (the nodes a walker visited in one task) merged with the task's annotated
//! frames into the frame trees a dump shows, by what the [`Plan`] says each type means; and what the
//! walk's oneshot receivers say about the waker ([`DecodedDelegate`]).

use std::sync::Arc;

use asyncdump_protocol::{NO_PARENT, NodeStatus, WalkNode};

use crate::model::{DecodedDelegate, FastMap, FrameInfo, FrameNode, Source};
use crate::names::base_name;
use crate::plan::{Kind, MAX_BYTES, MAX_NODES, Plan};

/// What pointers found by a walk lead to: task cells (the agent's records) and tokio task headers, each
/// to the dump's key of that task.
#[derive(Default)]
pub struct TaskRefs {
    pub cells: FastMap<u64, u64>,
    pub headers: FastMap<u64, u64>,
    /// The oneshot channels whose `Sender` a task holds across an await: channel address → task.
    pub senders: FastMap<u64, u64>,
}

impl Plan {
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
                        let info =
                            FrameInfo::awaitee(format!("unreadable future at {:#x}", n.addr));
                        here.attach = Some(arena.push(under, Arc::new(info)));
                    }
                    (NodeStatus::UnknownVtable { vtable }, _) => {
                        let info = FrameInfo::awaitee(format!(
                            "dyn Future (vtable {vtable:#x} not in the binary's DWARF)"
                        ));
                        here.attach = Some(arena.push(under, Arc::new(info)));
                    }
                    (_, None) => {
                        let info =
                            FrameInfo::awaitee("a future of a type the plan does not know".into());
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
                                    let info = FrameInfo::awaitee(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
