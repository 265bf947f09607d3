//! Root causes, ranked: the waiting tasks' [`Verdict`]s grouped by what, in the end, holds each
//! up (a task that others wait behind, a wait cycle, a thread, a static; the await where wake-ups
//! are lost or no waker is kept; a peer that is silent; the sleep they share), each naming the
//! code to look at. Worst first: what is wrong or holds others up before what merely waits on the
//! world outside (an idle connection is no cause), then the most tasks, then the worse kind.
//!
//! With `--samples`, a task a later sample saw progress is left out: it is slow, not stuck.

use serde::{Deserialize, Serialize};

use super::progress::Verdict as Seen;
use super::verdicts::{End, Outside, Verdict};
use super::{Dump, FastMap, Loc, THREAD, TaskView, summary};

/// The most code locations a cause names.
pub const MAX_LOOK_AT: usize = 3;
/// The most a starved runtime's cause names: each of its workers is held somewhere.
pub const MAX_STARVED_AT: usize = 8;

/// One root cause: the tasks it holds up, and what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// How it holds them up: a verdict's name (`deadlocked`, `blocked_behind`, `lost_wake_up`,
    /// `woken_not_polled`, `nothing_can_wake`, `outside`, `unknown`).
    pub kind: String,
    /// The task (or, keyed with [`THREAD`], thread) at the end, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// The names (given, or from their chains) of the tasks it names, the end and a cycle's: a
    /// dump filtered to waiting tasks leaves a running one out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<TaskName>,
    /// Every task held up by it, ascending: those blocked behind the end, and the end itself.
    pub tasks: Vec<u64>,
    /// What it is: the end's own verdict, or the group's.
    pub what: Verdict,
    /// Where to look: the program's own awaits (or a thread's own frame) it comes down to, at most
    /// [`MAX_LOOK_AT`], the most shared first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub look_at: Vec<Loc>,
    /// For tasks woken or ready in a runtime none of whose workers is free: that runtime's place
    /// in the dump's starved runtimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starved: Option<usize>,
    /// It is wrong, or holds other tasks up: ranked before what only waits on the world outside.
    pub severe: bool,
}

/// A task a cause names, and its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskName {
    pub id: u64,
    pub name: std::sync::Arc<str>,
}

/// What groups tasks into one cause.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Cycle(Vec<u64>),
    Behind(u64),
    /// Ready or woken in a runtime none of whose workers is free: its place in the dump's starved
    /// runtimes.
    Starved(usize),
    Static(String),
    /// The verdict's kind, the await (where it tells tasks apart), and what else does: the peer,
    /// the leaf.
    Own(&'static str, Option<Loc>, String),
}

/// The root causes of `dump`'s verdicts, worst first (see the module docs).
pub fn of(dump: &Dump) -> Vec<Cause> {
    let waiting = || {
        (dump.tasks.iter()).filter(|t| !t.progress.is_some_and(|p| p.verdict == Seen::Progressing))
    };
    let ends: FastMap<u64, ()> = waiting()
        .filter_map(|t| match t.verdict.as_deref() {
            Some(Verdict::BlockedBehind {
                end: End::Task { task, .. },
                ..
            }) => Some((*task, ())),
            _ => None,
        })
        .collect();
    let mut groups: FastMap<Key, Vec<&TaskView>> = FastMap::default();
    let mut order: Vec<Key> = Vec::new();
    for t in waiting() {
        let Some(v) = t.verdict.as_deref() else {
            continue;
        };
        let key = match ends.contains_key(&t.id) && !is_blocked(v) {
            true => Key::Behind(t.id),
            false => key(dump, t, v),
        };
        // A key is copied once a group, not once a task.
        match groups.get_mut(&key) {
            Some(group) => group.push(t),
            None => {
                order.push(key.clone());
                groups.insert(key, vec![t]);
            }
        }
    }
    let mut causes: Vec<Cause> = (order.into_iter())
        .map(|k| {
            let tasks = groups.remove(&k).unwrap_or_default();
            cause(dump, k, &tasks)
        })
        .collect();
    causes.sort_by(|a, b| {
        (b.severe.cmp(&a.severe))
            .then(b.tasks.len().cmp(&a.tasks.len()))
            .then(worse(&a.kind).cmp(&worse(&b.kind)))
            .then(a.tasks.first().cmp(&b.tasks.first()))
    });
    causes
}

/// Between causes holding as many tasks: the worse kind first (nothing ends a deadlock; a
/// chain of blocked tasks may end when its end does).
fn worse(kind: &str) -> usize {
    const ORDER: [&str; 7] = [
        "deadlocked",
        "nothing_can_wake",
        "lost_wake_up",
        "woken_not_polled",
        "blocked_behind",
        "outside",
        "unknown",
    ];
    ORDER.iter().position(|k| *k == kind).unwrap_or(ORDER.len())
}

fn is_blocked(v: &Verdict) -> bool {
    matches!(
        v,
        Verdict::BlockedBehind { .. } | Verdict::Deadlocked { .. }
    )
}

/// The starved runtime `t` is one of, by its place in the dump's.
fn starved_by(dump: &Dump, t: &TaskView) -> usize {
    (dump.starved.iter())
        .position(|s| s.holds(dump, t))
        .unwrap_or(usize::MAX)
}

/// The group of a task that is no end others wait behind.
fn key(dump: &Dump, t: &TaskView, v: &Verdict) -> Key {
    if let Some(cycle) = cycle_behind(v) {
        return Key::Cycle(cycle.to_vec());
    }
    let own = |kind, what: String| Key::Own(kind, look_at(t), what);
    match v {
        Verdict::Deadlocked { cycle } => Key::Cycle(cycle.clone()),
        Verdict::BlockedBehind { end, .. } => match end {
            End::Task { task, .. } => Key::Behind(*task),
            End::Thread { tid, .. } => Key::Behind(THREAD | u64::from(*tid)),
            End::Static { name } => Key::Static(name.to_string()),
            End::Deadlock { cycle } => Key::Cycle(cycle.clone()),
        },
        Verdict::LostWakeUp { .. } => own("lost_wake_up", String::new()),
        Verdict::WokenNotPolled { starved: true, .. } => Key::Starved(starved_by(dump, t)),
        Verdict::WokenNotPolled { .. } => own("woken_not_polled", String::new()),
        Verdict::NothingCanWake { .. } => own("nothing_can_wake", String::new()),
        // Tasks waiting on one peer or listener are one cause, from whatever await.
        Verdict::Outside {
            on: Outside::Socket {
                peer: Some(peer), ..
            },
            ..
        } => Key::Own("outside", None, format!("peer {peer}")),
        Verdict::Outside {
            on: Outside::Accept { fd, local },
            ..
        } => Key::Own("outside", None, format!("listen {fd} {local:?}")),
        Verdict::Outside { on, .. } => own("outside", outside_kind(on).to_owned()),
        Verdict::Running { .. } => own("running", String::new()),
        Verdict::Unknown { why, leaf, .. } => own(
            "unknown",
            format!("{why:?} {}", leaf.as_deref().unwrap_or("")),
        ),
    }
}

/// The wait cycle a verdict is in, or blocked behind (at the end of its chain, or as what its
/// end does).
fn cycle_behind(v: &Verdict) -> Option<&[u64]> {
    match v {
        Verdict::Deadlocked { cycle }
        | Verdict::BlockedBehind {
            end: End::Deadlock { cycle },
            ..
        } => Some(cycle),
        Verdict::BlockedBehind {
            end: End::Task { doing, .. },
            ..
        } => match &**doing {
            Verdict::Deadlocked { cycle } => Some(cycle),
            _ => None,
        },
        _ => None,
    }
}

/// What an outside wait is on, where the await tells its tasks apart.
fn outside_kind(on: &Outside) -> &'static str {
    match on {
        Outside::Sleep { .. } => "sleep",
        Outside::Socket { .. } => "socket",
        Outside::Accept { .. } => "accept",
        Outside::ChildProcess { .. } => "child",
        Outside::Signal { .. } => "signal",
    }
}

fn cause(dump: &Dump, key: Key, tasks: &[&TaskView]) -> Cause {
    let first = tasks[0];
    let first_verdict = first
        .verdict
        .as_deref()
        .cloned()
        .unwrap_or(Verdict::Running {
            thread: None,
            blocked: None,
        });
    let mut ids: Vec<u64> = tasks.iter().map(|t| t.id).collect();
    ids.sort_unstable();
    let (end, what, look) = match &key {
        Key::Cycle(cycle) => {
            let members = cycle.iter().filter_map(|&id| dump.task(id));
            let what = Verdict::Deadlocked {
                cycle: cycle.clone(),
            };
            (None, what, locations(dump, members))
        }
        Key::Behind(end) => behind(dump, *end, tasks),
        Key::Starved(i) => {
            let what = Verdict::WokenNotPolled {
                ready: None,
                woken_ago_ns: None,
                at_least: false,
                starved: true,
                others_queued: 0,
            };
            (None, what, starved_at(dump, *i))
        }
        Key::Own(_, Some(at), _) => (None, first_verdict, vec![at.clone()]),
        Key::Static(_) | Key::Own(..) => {
            (None, first_verdict, locations(dump, tasks.iter().copied()))
        }
    };
    let severe = match &what {
        Verdict::Outside { .. } | Verdict::Unknown { .. } | Verdict::Running { .. } => {
            matches!(key, Key::Behind(_) | Key::Static(_))
        }
        Verdict::WokenNotPolled { starved, .. } => *starved || matches!(key, Key::Behind(_)),
        _ => true,
    };
    let mut mentioned: Vec<u64> = end.into_iter().collect();
    if let Verdict::Deadlocked { cycle } = &what {
        mentioned.extend(cycle);
    }
    let names = (mentioned.into_iter())
        .filter_map(|id| {
            let t = dump.task(id)?;
            let name = t.name.clone().or_else(|| t.derived_name.clone())?;
            Some(TaskName { id, name })
        })
        .collect();
    Cause {
        kind: kind(&key, &what).into(),
        end,
        names,
        tasks: ids,
        what,
        look_at: look,
        starved: match key {
            Key::Starved(i) => Some(i),
            _ => None,
        },
        severe,
    }
}

fn kind(key: &Key, what: &Verdict) -> &'static str {
    match (key, what) {
        (Key::Cycle(_), _) => "deadlocked",
        (Key::Starved(_), _) => "woken_not_polled",
        (Key::Behind(_) | Key::Static(_), _) => "blocked_behind",
        (_, Verdict::LostWakeUp { .. }) => "lost_wake_up",
        (_, Verdict::WokenNotPolled { .. }) => "woken_not_polled",
        (_, Verdict::NothingCanWake { .. }) => "nothing_can_wake",
        (_, Verdict::Outside { .. }) => "outside",
        _ => "unknown",
    }
}

/// The end others wait behind: what it does, and where to look (the thread's own frame where it
/// runs or is a thread, else its own await).
fn behind(dump: &Dump, end: u64, tasks: &[&TaskView]) -> (Option<u64>, Verdict, Vec<Loc>) {
    let doing = tasks.iter().find_map(|t| match t.verdict.as_deref() {
        Some(Verdict::BlockedBehind {
            end: End::Task { task, doing },
            ..
        }) if *task == end => Some((**doing).clone()),
        _ => None,
    });
    let thread_end = tasks.iter().find_map(|t| match t.verdict.as_deref() {
        Some(Verdict::BlockedBehind {
            end: e @ End::Thread { .. },
            ..
        }) => Some(e.clone()),
        _ => None,
    });
    // A thread's own future (its `block_on`'s) is a task of the dump too.
    let end_task = dump.task(end);
    let what = match (
        doing,
        end_task.and_then(|t| t.verdict.as_deref().cloned()),
        thread_end,
    ) {
        (Some(d), _, _) => d,
        (None, Some(v), _) => v,
        (None, None, Some(e)) => Verdict::BlockedBehind {
            through: Vec::new(),
            hops: 1,
            end: e,
        },
        _ => Verdict::Running {
            thread: None,
            blocked: None,
        },
    };
    let polled_by = |id: u64| dump.threads.iter().find(|th| th.polling == Some(id));
    let thread = match (end_task, end & THREAD != 0) {
        (None, true) => (dump.threads.iter()).find(|th| u64::from(th.tid) == end & !THREAD),
        _ => polled_by(end),
    };
    let native = thread.and_then(native_loc);
    let look = match (native, end_task) {
        (Some(l), _) => vec![l],
        (None, Some(t)) => look_at(t).into_iter().collect(),
        (None, None) => locations(dump, tasks.iter().copied()),
    };
    (Some(end), what, look)
}

/// Where the workers of starved runtime `i` are held: each one's own frame, as many as there are
/// places, at most [`MAX_STARVED_AT`].
fn starved_at(dump: &Dump, i: usize) -> Vec<Loc> {
    let Some(s) = dump.starved.get(i) else {
        return Vec::new();
    };
    let mut at: Vec<Loc> = Vec::new();
    for th in dump.threads.iter().filter(|th| s.threads.contains(&th.tid)) {
        if let Some(l) = native_loc(th)
            && !at.contains(&l)
        {
            at.push(l);
        }
    }
    // In the source's order, whatever order the threads were read in.
    at.sort();
    at.truncate(MAX_STARVED_AT);
    at
}

/// A thread's own innermost frame, where the debug info places it.
fn native_loc(th: &super::threads::ThreadView) -> Option<Loc> {
    let f = th.frames.iter().find(|f| f.own)?;
    Some(Loc {
        file: f.file.clone()?,
        line: f.line,
        column: 0,
    })
}

/// The program's own await a task waits at (the innermost frame of its own code on the branch that
/// matters), else its leaf's place.
pub fn look_at(t: &TaskView) -> Option<Loc> {
    let s = summary(&t.frames)?;
    (s.own.and_then(|f| f.meta.at()))
        .or_else(|| s.leaf.meta.at())
        .cloned()
}

/// The distinct places `tasks` wait at (a running one, where its thread is), the most shared
/// first, at most [`MAX_LOOK_AT`].
fn locations<'a>(dump: &Dump, tasks: impl Iterator<Item = &'a TaskView>) -> Vec<Loc> {
    let mut counts: FastMap<Loc, usize> = FastMap::default();
    let polled_at = |t: &TaskView| {
        let th = dump.threads.iter().find(|th| th.polling == Some(t.id))?;
        native_loc(th)
    };
    for l in tasks.filter_map(|t| polled_at(t).or_else(|| look_at(t))) {
        *counts.entry(l).or_default() += 1;
    }
    let mut by: Vec<(Loc, usize)> = counts.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by.into_iter().take(MAX_LOOK_AT).map(|(l, _)| l).collect()
}

#[cfg(test)]
#[path = "cause_tests.rs"]
mod tests;
