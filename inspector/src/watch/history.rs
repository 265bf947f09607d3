//! What the live view remembers from one screen to the next: which tasks changed since the last
//! one (new, moved to another await or state, ran and came back to the same await), and for each
//! task the awaits it was seen at, oldest first: its timeline. A recording replayed builds the same,
//! update by update; a step back in it starts them again.
//!
//! Cheap at 100,000 tasks: a live view's updates share the chains of tasks that did not change, so
//! a task whose chain is the one of the last screen (the same allocation) is looked at no further.

use std::sync::Arc;

use crate::model::diff::{Place, place};
use crate::model::progress::chain_print;
use crate::model::{Dump, FastMap, State, TaskView};

/// The most awaits a task's timeline keeps: the oldest go first.
pub const MAX_TIMELINE: usize = 32;

/// How a task changed since the last screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Not on the last screen.
    New,
    /// At another await, or in another state.
    Moved,
    /// At the same await, waiting for something else: it ran and came back (a loop's next turn).
    Ran,
}

impl Change {
    /// Its mark in the table, one character.
    pub fn mark(self) -> char {
        match self {
            Change::New => '+',
            Change::Moved => '→',
            Change::Ran => '↻',
        }
    }
}

/// One await a task was seen at, from the update that first saw it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The process's uptime at that update.
    pub uptime_ns: u64,
    pub state: State,
    pub at: Place,
}

#[derive(Default)]
pub struct History {
    changes: FastMap<u64, Change>,
    /// See [`History::counts`]: counted once an update, not at each redraw.
    counts: (usize, usize, usize, usize),
    timelines: FastMap<u64, Vec<Seen>>,
    /// The uptime of the last update: a replay stepping back goes below it.
    last_uptime: u64,
}

impl History {
    /// `after` replaces `before` on screen.
    pub fn update(&mut self, before: Option<&Dump>, after: &Dump) {
        let uptime = after.process.uptime_ns;
        let before = match before {
            Some(b) if uptime >= self.last_uptime => Some(b),
            // Back in a replay: what was seen after this moment has not happened yet.
            _ => {
                self.timelines.clear();
                None
            }
        };
        self.last_uptime = uptime;
        self.changes.clear();
        let was: FastMap<u64, &TaskView> = before
            .map(|b| b.tasks.iter().map(|t| (t.id, t)).collect())
            .unwrap_or_default();
        for t in &after.tasks {
            let old = was.get(&t.id).copied();
            let same_chain =
                old.is_some_and(|o| Arc::ptr_eq(&o.frames, &t.frames) && o.state == t.state);
            if same_chain && self.timelines.contains_key(&t.id) {
                continue;
            }
            let now = Seen {
                uptime_ns: uptime,
                state: t.state,
                at: place(t),
            };
            let change = match old {
                None if before.is_some() => Some(Change::New),
                None => None,
                Some(o) if (o.state, place(o)) != (now.state, now.at.clone()) => {
                    Some(Change::Moved)
                }
                Some(o) if chain_print(o) != chain_print(t) => Some(Change::Ran),
                Some(_) => None,
            };
            if let Some(c) = change {
                self.changes.insert(t.id, c);
            }
            let line = self.timelines.entry(t.id).or_default();
            if line
                .last()
                .is_none_or(|l| (l.state, &l.at) != (now.state, &now.at))
            {
                if line.len() == MAX_TIMELINE {
                    line.remove(0);
                }
                line.push(now);
            }
        }
        let live: FastMap<u64, ()> = after.tasks.iter().map(|t| (t.id, ())).collect();
        let gone = was.keys().filter(|id| !live.contains_key(id)).count();
        self.timelines.retain(|id, _| live.contains_key(id));
        let count = |c| self.changes.values().filter(|&&v| v == c).count();
        self.counts = (
            count(Change::New),
            count(Change::Moved),
            count(Change::Ran),
            gone,
        );
    }

    /// How task `id` changed since the last screen, if it did.
    pub fn change(&self, id: u64) -> Option<Change> {
        self.changes.get(&id).copied()
    }

    /// Since the last screen: how many tasks are new, moved, ran, and gone.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        self.counts
    }

    /// The awaits task `id` was seen at, oldest first.
    pub fn timeline(&self, id: u64) -> &[Seen] {
        self.timelines.get(&id).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{FrameInfo, FrameNode, Loc, Source};

    /// A task suspended in `app::f` at `line`, awaiting `leaf`, whose leaf waits on `deadline`.
    pub(crate) fn task(id: u64, line: u32, leaf: &str) -> TaskView {
        let at = Loc {
            file: "src/main.rs".into(),
            line,
            column: 0,
        };
        let f = FrameInfo::new("app::f".into(), Some(at.clone()), Source::Decoded)
            .with_suspended_at(Some(at));
        let leaf = FrameNode {
            meta: Arc::new(FrameInfo::awaitee(leaf.into())),
            ..FrameNode::cut(0)
        };
        TaskView {
            frames: Arc::new(vec![FrameNode {
                meta: Arc::new(f),
                children: vec![leaf],
                ..FrameNode::cut(0)
            }]),
            ..TaskView::decoded(id, State::Idle, "f".into())
        }
    }

    pub(crate) fn dump(uptime_ns: u64, tasks: Vec<TaskView>) -> Dump {
        let mut d = Dump::default();
        d.process.uptime_ns = uptime_ns;
        d.tasks = tasks;
        d
    }

    #[test]
    fn each_task_is_new_moved_ran_or_unchanged_since_the_last_screen_and_the_gone_counted() {
        let mut h = History::default();
        let a = dump(
            100,
            vec![
                task(1, 10, "Sleep"),
                task(2, 10, "Sleep"),
                task(3, 5, "Recv"),
            ],
        );
        h.update(None, &a);
        // The first screen has nothing to compare with.
        assert_eq!(h.counts(), (0, 0, 0, 0));
        let mut again = task(1, 10, "Sleep");
        again.state = State::Idle;
        // Task 1 again at its await, its chain read anew with another leaf's wait.
        Arc::make_mut(&mut again.frames)[0].children[0].waits_on =
            Some(Box::new(crate::model::values::WaitOn {
                kind: crate::model::values::WaitKind::Sleep,
                parts: Vec::new(),
                holders: Vec::new(),
                statics: Vec::new(),
                threads: Vec::new(),
            }));
        let b = dump(200, vec![again, task(2, 12, "Acquire"), task(4, 5, "Recv")]);
        h.update(Some(&a), &b);
        assert_eq!(
            (h.change(1), h.change(2), h.change(4)),
            (Some(Change::Ran), Some(Change::Moved), Some(Change::New))
        );
        assert_eq!(h.counts(), (1, 1, 1, 1));
        // The same chain, shared with the last screen: unchanged.
        let c = dump(300, b.tasks.clone());
        h.update(Some(&b), &c);
        assert_eq!(h.counts(), (0, 0, 0, 0));
        assert_eq!(h.change(2), None);
    }

    #[test]
    fn a_timeline_keeps_each_await_a_task_was_seen_at_and_a_step_back_starts_again() {
        let mut h = History::default();
        let a = dump(100, vec![task(1, 10, "Sleep")]);
        let b = dump(200, vec![task(1, 12, "Acquire")]);
        let c = dump(300, vec![task(1, 12, "Acquire")]);
        h.update(None, &a);
        h.update(Some(&a), &b);
        h.update(Some(&b), &c);
        let seen: Vec<(u64, Option<u32>)> = (h.timeline(1).iter())
            .map(|s| (s.uptime_ns, s.at.own_at.as_ref().map(|l| l.line)))
            .collect();
        assert_eq!(seen, [(100, Some(10)), (200, Some(12))]);
        // Back to the first state of a recording: what came after has not happened yet.
        h.update(Some(&c), &a);
        assert_eq!(h.timeline(1).len(), 1);
        // At most MAX_TIMELINE awaits, the newest kept.
        let mut before = a;
        for i in 0..(MAX_TIMELINE as u64 + 5) {
            let next = dump(1_000 + i, vec![task(1, 20 + i as u32, "Sleep")]);
            h.update(Some(&before), &next);
            before = next;
        }
        let line = h.timeline(1);
        assert_eq!(line.len(), MAX_TIMELINE);
        assert_eq!(
            line.last().unwrap().uptime_ns,
            1_000 + MAX_TIMELINE as u64 + 4
        );
    }
}
