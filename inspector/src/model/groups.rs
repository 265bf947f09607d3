//! `--coalesce`: tasks grouped by their chain, as Go's goroutine profile groups goroutines.
//!
//! Two tasks are in one group when they are in the same state, spawned at the same place, with
//! the same root type, suspended in the same chain: the same frames, by name, location and await,
//! branching the same way. What their frames wait for and hold (a place in a queue, a deadline,
//! which task's `JoinHandle`) and their locals' values are no part of the chain: they vary inside
//! a group, and each distinct chain as read is kept as one of its [`Group::variants`] for a view
//! to show the spread.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::Serialize;

use super::{FastMap, FrameNode, Loc, State, TaskView};

/// Tasks suspended in one chain (see the module docs).
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub count: usize,
    pub task_ids: Vec<u64>,
    pub state: State,
    pub spawned_at: Option<Arc<Loc>>,
    pub root_type: Arc<str>,
    /// The range of time in their state, of the tasks whose time the agent knows.
    pub min_age_ns: Option<u64>,
    pub max_age_ns: Option<u64>,
    /// The first task's chain, as read: the chain every task of the group is in, with that task's
    /// wait targets, holds and locals.
    pub frames: Arc<Vec<FrameNode>>,
    /// The tasks the group's tasks await at their roots, every one once, ascending.
    pub awaits_tasks: Vec<u64>,
    /// Each distinct chain as read among the group's tasks (the first is `frames`), with how many
    /// tasks it is: every one has `frames`' shape.
    #[serde(skip)]
    pub variants: Vec<(Arc<Vec<FrameNode>>, usize)>,
}

/// A chain compared as a group compares it: by its frames' names, locations and awaits and the
/// shape of their tree, not by what the frames wait for, hold or keep in their locals.
#[derive(Clone, Copy)]
struct Chain<'a>(&'a [FrameNode]);

impl Hash for Chain<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Iterative: chains may be deep.
        let mut stack: Vec<&[FrameNode]> = vec![self.0];
        while let Some(nodes) = stack.pop() {
            state.write_usize(nodes.len());
            for n in nodes {
                n.meta.hash(state);
                stack.push(&n.children);
            }
        }
    }
}

impl PartialEq for Chain<'_> {
    fn eq(&self, other: &Self) -> bool {
        let mut stack: Vec<(&[FrameNode], &[FrameNode])> = vec![(self.0, other.0)];
        while let Some((a, b)) = stack.pop() {
            if a.len() != b.len() {
                return false;
            }
            for (x, y) in a.iter().zip(b) {
                if !(Arc::ptr_eq(&x.meta, &y.meta) || x.meta == y.meta) {
                    return false;
                }
                stack.push((&x.children, &y.children));
            }
        }
        true
    }
}

impl Eq for Chain<'_> {}

/// What makes two tasks one group.
type GroupKey<'a> = (State, Chain<'a>, Option<&'a Loc>, &'a str);

/// The tasks in groups, biggest first (ties: by their first task's id).
pub fn coalesce<'a>(tasks: impl IntoIterator<Item = &'a TaskView>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: FastMap<GroupKey<'_>, usize> = FastMap::default();
    // Each group's variants, by the whole chain as read.
    let mut variants: FastMap<(usize, &[FrameNode]), usize> = FastMap::default();
    for t in tasks {
        let key = (
            t.state,
            Chain(&t.frames[..]),
            t.spawned_at.as_deref(),
            &*t.root_type,
        );
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                count: 0,
                task_ids: Vec::new(),
                state: t.state,
                spawned_at: t.spawned_at.clone(),
                root_type: t.root_type.clone(),
                min_age_ns: t.state_age_ns,
                max_age_ns: t.state_age_ns,
                frames: t.frames.clone(),
                awaits_tasks: Vec::new(),
                variants: Vec::new(),
            });
            groups.len() - 1
        });
        let group = &mut groups[g];
        group.count += 1;
        group.task_ids.push(t.id);
        group.awaits_tasks.extend_from_slice(&t.awaits_tasks);
        // `None` (not timed) is no minimum: `Option::min` would take it as one.
        group.min_age_ns = match (group.min_age_ns, t.state_age_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        group.max_age_ns = group.max_age_ns.max(t.state_age_ns);
        match variants.get(&(g, &t.frames[..])) {
            Some(&v) => group.variants[v].1 += 1,
            None => {
                variants.insert((g, &t.frames[..]), group.variants.len());
                group.variants.push((t.frames.clone(), 1));
            }
        }
    }
    for g in &mut groups {
        g.awaits_tasks.sort_unstable();
        g.awaits_tasks.dedup();
    }
    // Biggest groups first, as in Go's goroutine profile: the pile-up is what you came for.
    groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.task_ids[0].cmp(&b.task_ids[0]))
    });
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::values::{Local, Value, WaitKind, WaitOn};
    use crate::model::{Dump, FrameInfo, Source};
    use crate::testing::{edge_snapshot, handshake};

    #[test]
    fn identical_chains_coalesce_with_a_count() {
        let dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        let groups = coalesce(&dump.tasks);
        assert_eq!(groups.len(), 1);
        assert_eq!(
            (groups[0].count, groups[0].task_ids.clone()),
            (4, vec![1, 2, 3, 4])
        );
        assert_eq!(groups[0].variants.len(), 1);
    }

    /// `handler` at `line`, waiting on a `Notify` at `position` in its queue.
    fn waiting(line: u32, position: u64) -> Arc<Vec<FrameNode>> {
        let node = |meta: FrameInfo, waits_on, children| FrameNode {
            id: 0,
            meta: Arc::new(meta),
            awaits_tasks: Vec::new(),
            locals: Vec::new(),
            waits_on,
            holds: Vec::new(),
            walked_within: Vec::new(),
            children,
        };
        let at = Loc {
            file: "src/main.rs".into(),
            line,
            column: 0,
        };
        let wait = WaitOn {
            kind: WaitKind::Notify,
            parts: vec![Local::new("position", "usize", Value::Uint(position))],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        };
        let leaf = node(
            FrameInfo::awaitee("tokio::sync::notify::Notified".into()),
            Some(Box::new(wait)),
            Vec::new(),
        );
        let handler = FrameInfo::new("app::handler".into(), Some(at), Source::Decoded);
        Arc::new(vec![node(handler, None, vec![leaf])])
    }

    #[test]
    fn chains_alike_but_for_what_they_wait_on_are_one_group_with_each_wait_a_variant() {
        let dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        let mut tasks = dump.tasks[..3].to_vec();
        tasks[0].frames = waiting(7, 1);
        tasks[1].frames = waiting(7, 2);
        tasks[2].frames = waiting(7, 1);
        let groups = coalesce(&tasks);
        assert_eq!(groups.len(), 1, "one chain, two places in the queue");
        let g = &groups[0];
        assert_eq!(g.count, 3);
        let counts: Vec<usize> = g.variants.iter().map(|v| v.1).collect();
        assert_eq!(counts, [2, 1], "the first task's wait first, each counted");
        assert!(Arc::ptr_eq(&g.variants[0].0, &g.frames));
        // Another await is another chain.
        tasks[2].frames = waiting(8, 1);
        assert_eq!(coalesce(&tasks).len(), 2);
    }
}
