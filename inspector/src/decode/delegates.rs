//! What a chain's oneshot receivers say about the waker: whether one is registered and whose, and
//! who holds the sender. Extra information only: no chain depends on it.

use asyncdump_protocol::{NodeStatus, WalkNode};

use super::TaskRefs;
use crate::model::DecodedDelegate;
use crate::plan::{Kind, Plan};

/// tokio's oneshot state bits (`tokio/src/sync/oneshot.rs`, unchanged since tokio 1.0; checked on 1.54).
const ONESHOT_RX_TASK_SET: u64 = 0b001;
const ONESHOT_VALUE_SENT: u64 = 0b010;
const ONESHOT_CLOSED: u64 = 0b100;

impl Plan {
    /// What the leaves of a walk say about the task's waker: for each `oneshot::Receiver` reached, whether
    /// it has a waker registered and whose. Extra information only: nothing else depends on it.
    /// `receivers` are the walk's `Inner` nodes of receivers that are part of the chain.
    pub(super) fn delegates(
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
            let child = |kind: fn(&Kind) -> bool| self.read_child(walk, i, kind)?.1.discr;
            let vtable = child(|k| matches!(k, Kind::WakerVtable));
            let data = child(|k| matches!(k, Kind::WakerData));
            let registered = state & ONESHOT_RX_TASK_SET != 0;
            let ours =
                vtable.is_some_and(|v| [self.owned_vtable, self.tokio_vtable].contains(&Some(v)));
            let task = self.waker_task(vtable, data, refs);
            let foreign_vtable = (registered && !ours).then_some(vtable).flatten();
            out.push(DecodedDelegate {
                leaf,
                registered,
                waker_of: (registered && ours).then_some(task).flatten(),
                foreign_vtable,
                foreign_waker: foreign_vtable
                    .and_then(|v| self.waker_named(v))
                    .map(|n| n.to_string()),
                value_sent: state & ONESHOT_VALUE_SENT != 0,
                closed: state & ONESHOT_CLOSED != 0,
                sender_held_by: refs.senders.get(&n.addr).copied(),
            });
        }
        out
    }
}
