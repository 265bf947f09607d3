//! The agent's state as a subscription's updates describe it: a protocol [`Snapshot`] kept current.
//!
//! Each [`Update`] appends names to the interned tables, replaces or adds the tasks it carries, and drops
//! the ones it reports gone; everything else stays as it was (see [`Update`]). The tasks stay sorted by
//! id, as in a snapshot. An update that does not follow on from the state (its tables start elsewhere,
//! or a task refers to a name not sent) is refused: the subscription must start again with a full state.
//! Completed tasks are kept up to [`COMPLETED_KEPT`], the newest ones.

use asyncdump_protocol::{Snapshot, Task, TaskState, Update};

/// Most completed tasks kept, as the agent keeps its own.
pub const COMPLETED_KEPT: usize = 256;

/// What one update did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub full: bool,
    pub new: usize,
    pub changed: usize,
    pub completed: usize,
    pub gone: usize,
    /// The update's size on the wire.
    pub bytes: usize,
    /// The agent's time on the update.
    pub agent_ns: u64,
    /// The inspector's time to apply it and build the dump.
    pub build_ns: u64,
    /// The distinct root anchors of the tasks it carried: where a root type new to the plan shows.
    pub anchors: Vec<u64>,
}

/// Why an update could not be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("update out of step with the subscription: {0}")]
pub struct OutOfStep(pub String);

#[derive(Debug, Default)]
pub struct Mirror {
    pub snap: Snapshot,
}

impl Mirror {
    pub fn apply(&mut self, u: Update) -> Result<Applied, OutOfStep> {
        if u.full {
            self.snap = Snapshot::default();
        }
        let snap = &mut self.snap;
        let (metas, sites) = (snap.frame_metas.len(), snap.spawn_sites.len());
        if u.metas_before as usize != metas || u.sites_before as usize != sites {
            return Err(OutOfStep(format!(
                "names start at {}/{}, {metas}/{sites} known",
                u.metas_before, u.sites_before
            )));
        }
        let (n_metas, n_sites) = (metas + u.frame_metas.len(), sites + u.spawn_sites.len());
        if let Some(why) = u
            .tasks
            .iter()
            .find_map(|t| crate::assemble::task_inconsistency(t, n_metas, n_sites))
        {
            return Err(OutOfStep(why));
        }
        snap.frame_metas.extend(u.frame_metas);
        snap.spawn_sites.extend(u.spawn_sites);
        snap.now_ns = u.now_ns;
        snap.capture_ns = u.capture_ns;
        snap.uptime_ns = u.uptime_ns;
        snap.stats = u.stats;
        if let Some(r) = u.runtimes {
            snap.runtimes = r;
            snap.census = u.census;
        }
        let mut applied = Applied {
            full: u.full,
            gone: u.gone.len(),
            agent_ns: u.capture_ns,
            ..Applied::default()
        };
        if !u.gone.is_empty() {
            let gone: rustc_hash::FxHashSet<u64> = u.gone.into_iter().collect();
            snap.tasks.retain(|t| !gone.contains(&t.id));
        }
        applied.anchors = u
            .tasks
            .iter()
            .map(|t| t.root_anchor)
            .filter(|&a| a != 0)
            .collect();
        applied.anchors.sort_unstable();
        applied.anchors.dedup();
        let mut fresh = Vec::new();
        for t in u.tasks {
            let done = matches!(t.state, TaskState::Completed { .. });
            match snap.tasks.binary_search_by_key(&t.id, |k| k.id) {
                Ok(i) => {
                    let was_done = matches!(snap.tasks[i].state, TaskState::Completed { .. });
                    if done && !was_done {
                        applied.completed += 1;
                    } else {
                        applied.changed += 1;
                    }
                    snap.tasks[i] = t;
                }
                Err(_) => {
                    applied.new += 1;
                    fresh.push(t);
                }
            }
        }
        if !fresh.is_empty() {
            snap.tasks.extend(fresh);
            snap.tasks.sort_by_key(|t| t.id);
        }
        self.trim_completed();
        Ok(applied)
    }

    /// Drops the oldest completed tasks beyond [`COMPLETED_KEPT`].
    fn trim_completed(&mut self) {
        let at = |t: &Task| match t.state {
            TaskState::Completed { at_ns } => Some(at_ns),
            _ => None,
        };
        let mut ends: Vec<u64> = self.snap.tasks.iter().filter_map(at).collect();
        if ends.len() <= COMPLETED_KEPT {
            return;
        }
        ends.sort_unstable();
        let cut = ends[ends.len() - COMPLETED_KEPT];
        self.snap.tasks.retain(|t| at(t).is_none_or(|e| e >= cut));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::{Frame, FrameMeta, FrameSource, Location, SpawnSite};

    fn task(id: u64, polls: u64, meta: Option<u32>) -> Task {
        let frames = meta.map(|meta| Frame {
            id: 1,
            parent: None,
            meta,
        });
        Task {
            polls,
            ..crate::testing::task(id, frames.into_iter().collect())
        }
    }

    fn loc() -> Location {
        Location {
            file: "src/main.rs".into(),
            line: 1,
            column: 1,
        }
    }

    fn full(tasks: Vec<Task>) -> Update {
        Update {
            full: true,
            frame_metas: vec![FrameMeta {
                name: "a".into(),
                location: loc(),
                source: FrameSource::Labelled,
            }],
            spawn_sites: vec![SpawnSite {
                location: loc(),
                root_type: "F".into(),
            }],
            tasks,
            ..Update::default()
        }
    }

    fn next(tasks: Vec<Task>, gone: Vec<u64>) -> Update {
        Update {
            metas_before: 1,
            sites_before: 1,
            tasks,
            gone,
            ..Update::default()
        }
    }

    #[test]
    fn updates_replace_add_and_drop_tasks_and_keep_the_rest() {
        let mut m = Mirror::default();
        m.apply(full(vec![task(1, 1, Some(0)), task(3, 1, None)]))
            .unwrap();
        let applied = m
            .apply(next(vec![task(2, 1, None), task(3, 5, Some(0))], vec![1]))
            .unwrap();
        assert_eq!((applied.new, applied.changed, applied.gone), (1, 1, 1));
        let ids: Vec<(u64, u64)> = m.snap.tasks.iter().map(|t| (t.id, t.polls)).collect();
        assert_eq!(ids, [(2, 1), (3, 5)], "sorted by id, 3 replaced, 1 dropped");
        m.apply(full(vec![task(9, 1, None)])).unwrap();
        assert_eq!(m.snap.tasks.len(), 1, "a full update starts afresh");
        assert_eq!(m.snap.frame_metas.len(), 1);
    }

    #[test]
    fn an_update_out_of_step_is_refused_and_changes_nothing() {
        let mut m = Mirror::default();
        m.apply(full(vec![task(1, 1, None)])).unwrap();
        let skipped = Update {
            metas_before: 5,
            sites_before: 1,
            ..Update::default()
        };
        assert!(m.apply(skipped).is_err());
        assert!(m.apply(next(vec![task(2, 1, Some(7))], vec![])).is_err());
        assert_eq!(m.snap.tasks.len(), 1);
    }

    #[test]
    fn only_the_newest_completed_tasks_are_kept() {
        let mut m = Mirror::default();
        let done = |id: u64| Task {
            state: TaskState::Completed { at_ns: id },
            ..task(id, 1, None)
        };
        m.apply(full((1..=COMPLETED_KEPT as u64 + 10).map(done).collect()))
            .unwrap();
        assert_eq!(m.snap.tasks.len(), COMPLETED_KEPT);
        assert_eq!(m.snap.tasks[0].id, 11);
    }
}
