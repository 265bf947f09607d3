//! Who keeps each waiting task's waker: `dump --group waker` lists the tasks by it, the empty group
//! (nobody keeps it: nothing can wake them) first. The keeper is read from what the task waits on
//! (a lock's wait queue, a channel, tokio's timer or I/O driver keep the waker of a task waiting on
//! them), then from the awaited `JoinHandle` (the awaited task keeps it), then from the count the
//! agent or tokio keeps of it: evidence that a waker is kept somewhere the dump does not name.

use serde::{Deserialize, Serialize};

use super::values::{Value, WaitKind, WaitOn};
use super::{Dump, FrameNode, State, TaskView};

/// Who keeps a task's waker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Keeper {
    /// Nobody: no waker of the task exists (see [`super::verdicts::NoWaker`]).
    Nobody,
    /// What the task waits on keeps it: `what` names it (`Mutex @ 0x…`, `mpsc channel @ 0x…`,
    /// `tokio's timer`, `tokio's I/O driver, fd 9`).
    Waited { what: String },
    /// The task whose `JoinHandle` it awaits keeps it, in its join waker slot.
    Joined { task: u64 },
    /// A `oneshot` it receives from keeps it.
    Oneshot { leaf: String },
    /// Kept somewhere the dump does not name: `refs` references that may be wakers (tokio's count
    /// beyond the task's list and `JoinHandle`, or the agent's count of its waker's clones).
    Elsewhere {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refs: Option<u64>,
    },
}

/// One group of `--group waker`: the keeper, and the waiting tasks whose waker it keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakerGroup {
    pub kept_by: Keeper,
    pub tasks: Vec<u64>,
}

/// The waiting tasks of `dump` by who keeps their waker: the empty group first, always (with no
/// task in it where every waker is kept), then the biggest.
pub fn groups(dump: &Dump) -> Vec<WakerGroup> {
    let mut by: super::FastMap<Keeper, Vec<u64>> = super::FastMap::default();
    by.insert(Keeper::Nobody, Vec::new());
    for t in dump.tasks.iter().filter(|t| t.state.suspended()) {
        by.entry(keeper(t)).or_default().push(t.id);
    }
    let mut groups: Vec<WakerGroup> = (by.into_iter())
        .map(|(kept_by, tasks)| WakerGroup { kept_by, tasks })
        .collect();
    groups.sort_by(|a, b| {
        (b.kept_by == Keeper::Nobody)
            .cmp(&(a.kept_by == Keeper::Nobody))
            .then(b.tasks.len().cmp(&a.tasks.len()))
            .then(a.kept_by.cmp(&b.kept_by))
    });
    groups
}

/// Who keeps `t`'s waker, as far as the dump tells.
pub fn keeper(t: &TaskView) -> Keeper {
    // The counts first: a task waiting on a lock with a waker that is not its own (a future that
    // polled it with another) is in the lock's queue, and still nobody keeps its waker.
    if t.state == State::Idle && super::verdicts::no_waker(t).is_some() {
        return Keeper::Nobody;
    }
    if let Some(what) = first_wait(&t.frames).and_then(waited) {
        return Keeper::Waited { what };
    }
    if let Some(d) = t.decoded_delegates.iter().find(|d| d.registered) {
        return Keeper::Oneshot {
            leaf: d.leaf.clone(),
        };
    }
    let joined = t.awaits_tasks.first().copied().or_else(|| {
        let mut stack: Vec<&FrameNode> = t.frames.iter().collect();
        while let Some(f) = stack.pop() {
            if let Some(&task) = f.awaits_tasks.first() {
                return Some(task);
            }
            stack.extend(&f.children);
        }
        None
    });
    if let Some(task) = joined {
        return Keeper::Joined { task };
    }
    let refs = match (t.agent_id, t.tokio_task) {
        (Some(_), _) => t.delegate.map(|d| u64::from(d.clones)),
        (None, Some(k)) => k.other_refs,
        _ => None,
    };
    Keeper::Elsewhere { refs }
}

/// The first decoded wait of a chain's leaves.
fn first_wait(frames: &[FrameNode]) -> Option<&WaitOn> {
    let mut stack: Vec<&FrameNode> = frames.iter().rev().collect();
    while let Some(f) = stack.pop() {
        if let Some(w) = f.waits_on.as_deref() {
            return Some(w);
        }
        stack.extend(f.children.iter().rev());
    }
    None
}

/// What keeps the waker of a task waiting on `w`, named.
fn waited(w: &WaitOn) -> Option<String> {
    let addr = |part: &str| match w.part(part)?.field("addr")? {
        Value::Address(a) => Some(*a),
        _ => None,
    };
    let fd = || match w.part("fd") {
        Some(Value::Int(fd)) => Some(*fd),
        _ => None,
    };
    Some(match &w.kind {
        WaitKind::Sleep => "tokio's timer".to_owned(),
        WaitKind::Permits { lock } => {
            let at = addr("channel").or_else(|| addr("semaphore"))?;
            format!("{lock} @ {at:#x}")
        }
        WaitKind::Io { .. } | WaitKind::Accept => format!("tokio's I/O driver, fd {}", fd()?),
        WaitKind::Receive => format!("mpsc channel @ {:#x}", addr("channel")?),
        WaitKind::Notify => format!("Notify @ {:#x}", addr("notify")?),
        WaitKind::Watch => format!("watch @ {:#x}", addr("watch")?),
        WaitKind::Broadcast => format!("broadcast @ {:#x}", addr("broadcast")?),
        WaitKind::Barrier => format!("Barrier @ {:#x}", addr("barrier")?),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::values::{Field, Local};
    use crate::model::{DelegateView, FrameInfo};
    use crate::testing::{edge_snapshot, handshake};

    fn waiting_on(kind: WaitKind, part: &str, addr: u64) -> Arc<Vec<FrameNode>> {
        let value = Value::Struct {
            type_name: "".into(),
            fields: vec![Field {
                name: "addr".into(),
                value: Value::Address(addr),
            }],
        };
        Arc::new(vec![FrameNode {
            meta: Arc::new(FrameInfo::awaitee("leaf".into())),
            waits_on: Some(Box::new(WaitOn {
                kind,
                parts: vec![Local::new(part, "", value)],
                holders: Vec::new(),
                statics: Vec::new(),
                threads: Vec::new(),
            })),
            ..FrameNode::cut(0)
        }])
    }

    #[test]
    fn a_waker_is_kept_by_what_the_task_waits_on_the_task_it_joins_or_nobody() {
        let mut d = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        for t in &mut d.tasks {
            t.state = State::Idle;
            t.delegate = Some(DelegateView {
                clones: 2,
                held_ns: 0,
            });
        }
        d.tasks[0].frames = waiting_on(WaitKind::Notify, "notify", 0x40);
        d.tasks[1].awaits_tasks = vec![4];
        d.tasks[2].delegate = None;
        let groups = groups(&d);
        let kept: Vec<(Keeper, Vec<u64>)> =
            (groups.into_iter()).map(|g| (g.kept_by, g.tasks)).collect();
        let waited = Keeper::Waited {
            what: "Notify @ 0x40".into(),
        };
        let expect = [
            (Keeper::Nobody, vec![3]),
            (waited, vec![1]),
            (Keeper::Joined { task: 4 }, vec![2]),
            (Keeper::Elsewhere { refs: Some(2) }, vec![4]),
        ];
        assert_eq!(kept, expect);
    }

    #[test]
    fn the_empty_group_is_listed_when_every_waker_is_kept() {
        let mut d = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        d.tasks.truncate(1);
        d.tasks[0].state = State::Idle;
        d.tasks[0].frames = waiting_on(WaitKind::Sleep, "deadline", 0);
        d.tasks[0].delegate = Some(DelegateView {
            clones: 1,
            held_ns: 0,
        });
        let g = groups(&d);
        assert_eq!(g[0].kept_by, Keeper::Nobody);
        assert!(g[0].tasks.is_empty());
        assert_eq!(
            g[1].kept_by,
            Keeper::Waited {
                what: "tokio's timer".into()
            }
        );
    }
}
