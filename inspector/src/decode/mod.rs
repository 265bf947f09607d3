//! The decode stage: a walk (the nodes a walker visited in one task) merged with the task's annotated
//! frames into the frame trees a dump shows, by what the [`Plan`] says each type means; and what the
//! walk's oneshot receivers say about the waker ([`DecodedDelegate`]).

use std::sync::Arc;

use asyncdump_protocol::{NodeStatus, WalkNode};

use crate::model::values::{Reading, Stream};
use crate::model::{DecodedDelegate, FastMap, FrameInfo, FrameNode};
use crate::plan::{Kind, MAX_BYTES, MAX_NODES, Plan};

mod arena;
mod delegates;
mod merge;
#[cfg(test)]
mod tests;

use merge::Merge;

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
    /// decoded `JoinHandle` are moved from `root_awaits` to that handle's line. Decoded frames carry the
    /// locals of their state `reading` asks for, and leaves what they wait for, unread (the values
    /// stage reads them). Also returns what the
    /// chain's oneshot receivers say about the waker (see `delegates`).
    pub fn merge(
        &self,
        walk: &[WalkNode],
        annotated: &[AnnotatedFrame],
        root_awaits: &mut Vec<u64>,
        refs: &TaskRefs,
        reading: &Reading,
    ) -> (Vec<FrameNode>, Vec<DecodedDelegate>) {
        let (trees, receivers) = Merge::new(self, walk, annotated, refs, reading).run(root_awaits);
        (trees, self.delegates(walk, &receivers, refs))
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

    /// The HTTP/2 stream a walked task serves (or, a client's, awaits the response of): the first
    /// h2 stream reference its walk read, with the connection's shared state and, where that state
    /// keeps the waker of the connection's task, that task (by `refs`). The waker is the only part
    /// the connection's task writes while the stream's task holds still: read once, it may be a
    /// moment old, and names no task when it does not point at one listed.
    pub fn h2_stream(&self, walk: &[WalkNode], refs: &TaskRefs) -> Option<Stream> {
        let i = (walk.iter()).position(|n| self.read_as(n, |k| matches!(k, Kind::H2Stream)))?;
        let id = u32::try_from(walk[i].discr?).ok()?;
        let Some((c, conn)) = self.read_child(walk, i, |k| matches!(k, Kind::H2Connection)) else {
            return Some(Stream {
                id,
                connection: 0,
                connection_task: None,
                socket: None,
            });
        };
        let word = |kind: fn(&Kind) -> bool| self.read_child(walk, c, kind)?.1.discr;
        let vtable = word(|k| matches!(k, Kind::WakerVtable));
        let data = word(|k| matches!(k, Kind::WakerData));
        Some(Stream {
            id,
            connection: conn.addr,
            connection_task: self.waker_task(vtable, data, refs),
            socket: None,
        })
    }

    /// Whether walk node `n` was read and is of a kind `kind` accepts.
    fn read_as(&self, n: &WalkNode, kind: fn(&Kind) -> bool) -> bool {
        n.status == NodeStatus::Read && self.kinds.get(n.ty as usize).is_some_and(kind)
    }

    /// The first child of walk node `p` read and of a kind `kind` accepts. Children come after
    /// their parent, not necessarily right after it.
    fn read_child<'w>(
        &self,
        walk: &'w [WalkNode],
        p: usize,
        kind: fn(&Kind) -> bool,
    ) -> Option<(usize, &'w WalkNode)> {
        (walk.iter().enumerate().skip(p + 1))
            .find(|(_, c)| c.parent as usize == p && self.read_as(c, kind))
    }

    /// The task a waker names, by its vtable and data read from the target: the agent's wakers
    /// point at its task cell, tokio's at the task header.
    fn waker_task(&self, vtable: Option<u64>, data: Option<u64>, refs: &TaskRefs) -> Option<u64> {
        match (vtable?, data?) {
            (v, d) if Some(v) == self.owned_vtable => refs.cells.get(&d).copied(),
            (v, d) if Some(v) == self.tokio_vtable => refs.headers.get(&d).copied(),
            _ => None,
        }
    }

    /// The agent's task cell that a runtime task's walk leads to, when the task was spawned through the
    /// agent (its future is an `Instrumented`).
    pub fn agent_cell(&self, walk: &[WalkNode]) -> Option<u64> {
        walk.iter().enumerate().find_map(|(i, n)| {
            if !matches!(self.kinds.get(n.ty as usize), Some(Kind::AgentRoot { .. })) {
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
            Walk::Torn { tries } => Some(format!(
                "not decoded: the task was polled during each of {tries} reads of its chain (raise --retries, or use --stop)"
            )),
            Walk::Unsupported { errno } => Some(format!(
                "not decoded: the process cannot read its own memory (process_vm_readv errno {errno}; seccomp?)"
            )),
        }
    }
}

/// One annotated frame of a task, as `merge` needs it.
pub struct AnnotatedFrame {
    pub id: u64,
    pub parent: Option<u64>,
    pub info: Arc<FrameInfo>,
    pub awaits: Vec<u64>,
}
