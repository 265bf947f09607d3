//! asyncdump-agent's own types, by the names `asyncdump_protocol::agent_names` gives them (today's and
//! earlier agents'): annotated frames, the agent's `JoinHandle`, and task roots.

use std::sync::Arc;

use asyncdump_protocol::agent_names as names;
use asyncdump_protocol::{Edge, TypePlan};

use super::std::member;
use super::{Rule, Verdict, inline, plan};
use crate::model::FrameInfo;
use crate::names::short_type;
use crate::plan::Kind;
use crate::plan::builder::{Builder, is_generic};

/// `Framed<F>`: an annotated frame, matched by its node's address so that it shows once; its inner
/// future is followed.
pub(super) const FRAMED: Rule = Rule {
    name: "asyncdump_agent::Framed",
    matches: |t| is_agents(&t.name, names::FRAMED),
    plan: |b, t| match (
        member(t, &[names::FRAMED_INNER]),
        member(t, &[names::FRAMED_NODE]),
    ) {
        (Some((inner, ty)), Some((node_offset, _))) => {
            let to = b.ty(ty);
            let kind = Kind::Framed { node_offset };
            Verdict::Plan(plan(t.size, vec![inline(inner, to)]), kind)
        }
        _ => Verdict::Leaf,
    },
};

/// The agent's `JoinHandle<T>`: a leaf whose child reads which task it joins (a cross-task edge).
pub(super) const JOIN_HANDLE: Rule = Rule {
    name: "asyncdump_agent::JoinHandle",
    matches: |t| is_agents(&t.name, names::JOIN_HANDLE),
    plan: |b, t| {
        let name = short_type(&t.name.replacen("tokio_support::", "", 1));
        let info = Arc::new(FrameInfo::awaitee(name));
        match b.task_cell_path(t.die, names::JOIN_HANDLE_TASK) {
            Some(edge) => Verdict::Plan(plan(t.size, vec![edge]), Kind::JoinHandle(info)),
            None => Verdict::Plan(TypePlan::default(), Kind::Leaf(info)),
        }
    },
};

/// `Instrumented<F>`, a runtime task spawned through the agent: which agent task it is is read, and
/// (without the agent only, see [`Kind::AgentRoot`]) the future it wraps, in its `ManuallyDrop`.
pub(super) const INSTRUMENTED: Rule = Rule {
    name: "asyncdump_agent::Instrumented",
    matches: |t| is_agents(&t.name, names::INSTRUMENTED),
    plan: |b, t| match b.task_cell_path(t.die, names::INSTRUMENTED_TASK) {
        Some(edge) => {
            let inner = b
                .member(t.die, &[names::INSTRUMENTED_INNER])
                .and_then(|(off, wrapper)| {
                    let (value, fut) = b.manually_dropped(wrapper)?;
                    Some(inline(off + value, b.ty(fut)))
                });
            Verdict::Plan(plan(t.size, vec![edge]), Kind::AgentRoot { inner })
        }
        None => Verdict::Leaf,
    },
};

/// Whether `name` is an instance of the agent's generic type `path`, as this agent or an earlier one
/// spelled it.
fn is_agents(name: &str, path: &'static str) -> bool {
    names::spellings(path).any(|p| is_generic(name, p))
}

impl Builder<'_> {
    /// The value in a `ManuallyDrop<T>`: its offset and type, through the `MaybeDangling<T>` newer
    /// standard libraries keep it in (its one member, of the type parameter).
    fn manually_dropped(&self, die: u64) -> Option<(u64, u64)> {
        let (off, value) = self.member(die, &["value"])?;
        match self.wrapped(value) {
            Some(inner) => {
                let (within, _) = self
                    .members(value)
                    .into_iter()
                    .next()
                    .map(|(_, o, t)| (o, t))?;
                Some((off + within, inner))
            }
            None => Some((off, value)),
        }
    }

    /// In the agent's `JoinHandle` and `Instrumented`: `field: Arc<TaskCell>` points at
    /// `ArcInner { .., data: TaskCell }`. The edge to a value that reads that pointer: the task's cell,
    /// compared with the snapshot's task cells, names the task without another read.
    fn task_cell_path(&mut self, die: u64, field: &str) -> Option<Edge> {
        let (off, arc_inner) = self.pointer_to(die, field)?;
        let (data_off, _) = self.member(arc_inner, &["data"])?;
        let t = self.synthetic(0, Kind::CellRef { plus: data_off });
        Some(inline(off, t))
    }
}
