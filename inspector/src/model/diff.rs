//! Two dumps of one process compared (`asyncdump diff A B`): the tasks only the later one has
//! (new), only the earlier one (gone), both but at another await or in another state (moved), at
//! the same await waiting for something else (again: it ran and came back, a loop's next turn),
//! and both alike (unchanged, for at least the time between them). A task is the same
//! task in both by its id; how it looks is [`super::progress::chain_print`]: its state, its frames and
//! their awaits, and what its leaves wait for.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::progress::chain_print;
use super::{Dump, FastMap, Loc, State, TaskView, summary};

/// What changed between two dumps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diff {
    pub format: String,
    pub version: u32,
    pub pid: u32,
    /// The later dump's time less the earlier's, on the process's clock (negative: B is older).
    pub between_ns: i64,
    pub new: Vec<Entry>,
    pub gone: Vec<Entry>,
    pub moved: Vec<Moved>,
    /// At the same await, in the same state, waiting for something else.
    pub again: Vec<Entry>,
    pub unchanged: Vec<Entry>,
}

/// The document's name and version, as `dump --json`'s.
pub const DIFF_FORMAT: &str = "asyncdump-diff";
pub const DIFF_VERSION: u32 = 1;

/// A task as one of the dumps saw it: who, and where it waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_name: Option<Arc<str>>,
    pub state: State,
    pub at: Place,
}

/// A task that both dumps have, looking otherwise in the later one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Moved {
    pub from: Entry,
    pub to: Entry,
}

/// Where a task waits, in a line: the innermost frame of the program's own code on the branch
/// that matters, and the leaf there.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Place {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_at: Option<Loc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf: Option<Arc<str>>,
}

/// Compares dump `a` with the later dump `b` of the same process.
pub fn diff(a: &Dump, b: &Dump) -> Diff {
    let before: FastMap<u64, &TaskView> = a.tasks.iter().map(|t| (t.id, t)).collect();
    let mut out = Diff {
        format: DIFF_FORMAT.into(),
        version: DIFF_VERSION,
        pid: b.process.pid,
        between_ns: b.snapshot.now_ns as i64 - a.snapshot.now_ns as i64,
        new: Vec::new(),
        gone: Vec::new(),
        moved: Vec::new(),
        again: Vec::new(),
        unchanged: Vec::new(),
    };
    let mut seen = FastMap::default();
    for t in &b.tasks {
        seen.insert(t.id, ());
        let Some(was) = before.get(&t.id) else {
            out.new.push(entry(t));
            continue;
        };
        let (from, to) = (entry(was), entry(t));
        if (from.at.clone(), from.state) != (to.at.clone(), to.state) {
            out.moved.push(Moved { from, to });
        } else if chain_print(was) != chain_print(t) {
            out.again.push(to);
        } else {
            out.unchanged.push(to);
        }
    }
    out.gone = (a.tasks.iter())
        .filter(|t| !seen.contains_key(&t.id))
        .map(entry)
        .collect();
    out
}

fn entry(t: &TaskView) -> Entry {
    Entry {
        id: t.id,
        name: t.name.clone(),
        derived_name: t.derived_name.clone(),
        state: t.state,
        at: place(t),
    }
}

/// Where `t` waits (see [`Place`]).
pub fn place(t: &TaskView) -> Place {
    let s = summary(&t.frames);
    let own = s.as_ref().and_then(|s| s.own);
    Place {
        own: own.map(|f| Arc::from(f.meta.name.as_str())),
        own_at: own.and_then(|f| f.meta.at().cloned()),
        leaf: s.map(|s| Arc::from(s.leaf.meta.name.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{FrameInfo, FrameNode, Source};

    /// A task suspended in `app::f` at `line`, awaiting `leaf`.
    fn task(id: u64, line: u32, leaf: &str) -> TaskView {
        let at = Loc {
            file: "src/main.rs".into(),
            line,
            column: 0,
        };
        let node = |meta: FrameInfo, children| FrameNode {
            id: 0,
            meta: Arc::new(meta),
            awaits_tasks: Vec::new(),
            locals: Vec::new(),
            waits_on: None,
            holds: Vec::new(),
            walked_within: Vec::new(),
            children,
        };
        let f = FrameInfo::new("app::f".into(), Some(at.clone()), Source::Decoded)
            .with_suspended_at(Some(at));
        let leaf = node(FrameInfo::awaitee(leaf.into()), Vec::new());
        TaskView {
            frames: Arc::new(vec![node(f, vec![leaf])]),
            ..TaskView::decoded(id, State::Idle, "f".into())
        }
    }

    /// Same id, same look: unchanged; another await: moved, with both places; only in the later
    /// dump: new; only in the earlier: gone.
    #[test]
    fn tasks_are_new_gone_moved_or_unchanged_by_id_and_look() {
        let dump = |tasks: Vec<TaskView>, now_ns| {
            let mut d = Dump::build(
                &crate::testing::handshake(),
                &asyncdump_protocol::Snapshot::default(),
                0,
            );
            (d.tasks, d.snapshot.now_ns) = (tasks, now_ns);
            d
        };
        let a = dump(
            vec![
                task(1, 10, "Sleep"),
                task(2, 10, "Sleep"),
                task(3, 5, "Recv"),
            ],
            100,
        );
        let b = dump(
            vec![
                task(1, 10, "Sleep"),
                task(2, 12, "Acquire"),
                task(4, 5, "Recv"),
            ],
            350,
        );
        let d = diff(&a, &b);
        let ids = |es: &[Entry]| es.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(
            (ids(&d.new), ids(&d.gone), ids(&d.unchanged)),
            (vec![4], vec![3], vec![1])
        );
        let [m] = &d.moved[..] else {
            panic!("{:?}", d.moved)
        };
        let line = |e: &Entry| e.at.own_at.as_ref().map(|l| l.line);
        assert_eq!(
            (m.to.id, line(&m.from), line(&m.to)),
            (2, Some(10), Some(12))
        );
        assert_eq!(m.to.at.leaf.as_deref(), Some("Acquire"));
        assert_eq!(d.between_ns, 250);
    }
}
