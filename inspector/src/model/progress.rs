//! Stuck or progressing, from samples: a dump taken several times over an interval, each task of
//! the first compared with itself in the later ones. A task progressed when a sample saw it polled
//! (the agent counts polls), completed, gone, or, where nothing counts its polls, looking otherwise
//! than it did (its state and decoded walk: the listing's own comparison, which its
//! [`TaskView::unchanged_ns`] reports; a thread's `block_on` future, which no listing ages, by its
//! chain's frames and awaits). It is stuck when no sample saw it progress: a claim about
//! the samples' span only, which the verdict carries.

use serde::{Deserialize, Serialize};

use super::values::Value;
use super::{Dump, FastMap, State, TaskView};

/// How a dump was sampled: the samples taken (the first is the one shown), over how long, and why
/// sampling ended early, if it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    pub samples: u32,
    /// How many were asked for.
    pub asked: u32,
    /// From the first sample to the last.
    pub over_ns: u64,
    /// Why fewer than asked were taken (the process exited, a sample failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub stuck: usize,
    pub progressing: usize,
}

/// What the samples say of one task, and by what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Progress {
    pub verdict: Verdict,
    pub by: Evidence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No later sample saw it make progress.
    Stuck,
    /// A later sample saw it polled, completed, gone or changed.
    Progressing,
}

/// What a verdict rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The agent's count of the task's polls: stuck is not polled at all.
    Polls,
    /// Where nothing counts its polls: its state, chain and what its leaves wait for, as the
    /// samples saw them (a task polled that came back to the same await, waiting for the same,
    /// looks unchanged).
    Looks,
}

impl Progress {
    pub fn stuck(&self) -> bool {
        self.verdict == Verdict::Stuck
    }
}

/// What a later sample says of each task it has, by task id.
pub type Seen = FastMap<u64, Looked>;

/// How a task looked in a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Looked {
    pub polls: Option<u64>,
    pub unchanged_ns: Option<u64>,
    pub state: State,
    /// Its chain's frames and where each is suspended (see [`chain_print`]).
    pub chain: u64,
}

/// What one later sample says of its tasks.
pub fn seen(dump: &Dump) -> Seen {
    (dump.tasks.iter())
        .map(|t| {
            let looked = Looked {
                polls: t.polls,
                unchanged_ns: t.unchanged_ns,
                state: t.state,
                chain: chain_print(t),
            };
            (t.id, looked)
        })
        .collect()
}

/// A hash of how a task looks: its state, each frame's name and where it is suspended, in order,
/// and what its leaves wait for (a sleep's deadline, a channel's queue). Two samples with the same
/// print saw the task at the same awaits waiting for the same.
pub fn chain_print(t: &TaskView) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    let mut stack: Vec<(&super::FrameNode, usize)> = t.frames.iter().map(|f| (f, 0)).collect();
    while let Some((f, depth)) = stack.pop() {
        h.write_usize(depth);
        h.write(f.meta.name.as_bytes());
        if let Some(at) = &f.meta.suspended_at {
            h.write(at.file.as_bytes());
            h.write_u32(at.line);
        }
        if let Some(w) = &f.waits_on {
            w.kind.hash(&mut h);
            for part in &w.parts {
                stable_hash(&part.value, &mut h);
            }
        }
        stack.extend(f.children.iter().map(|c| (c, depth + 1)));
    }
    h.write_u8(t.state as u8);
    h.finish()
}

/// Hashes what a value says of the process, not of the moment it was read: an instant by its
/// time, not by its age; a counted pointer by where it points, not by its counts (other tasks
/// clone it).
fn stable_hash(v: &Value, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    std::mem::discriminant(v).hash(h);
    match v {
        Value::Instant { monotonic_ns, .. } => monotonic_ns.hash(h),
        Value::Seq { len, items } => {
            len.hash(h);
            items.iter().for_each(|i| stable_hash(i, h));
        }
        Value::Variant { name, fields }
        | Value::Struct {
            type_name: name,
            fields,
        } => {
            name.hash(h);
            for f in fields {
                f.name.hash(h);
                stable_hash(&f.value, h);
            }
        }
        Value::Pointer { addr, to, .. } => {
            addr.hash(h);
            stable_hash(to, h);
        }
        other => other.hash(h),
    }
}

/// Marks each task of `first` stuck or progressing by the later samples `later`, each taken the
/// given time after `first`; puts the stuck first (in their order), and says how the dump was
/// sampled.
pub fn mark(first: &mut Dump, later: &[(u64, Seen)], asked: u32, ended: Option<String>) {
    for t in &mut first.tasks {
        let print = chain_print(t);
        let mut before = 0;
        let mut moved = false;
        for (after, s) in later {
            moved |= progressed(t, print, (before, *after), s);
            before = *after;
        }
        t.progress = Some(Progress {
            verdict: match moved {
                true => Verdict::Progressing,
                false => Verdict::Stuck,
            },
            by: match t.polls {
                Some(_) => Evidence::Polls,
                None => Evidence::Looks,
            },
        });
    }
    let is_stuck = |t: &TaskView| t.progress.is_some_and(|p| p.stuck());
    let stuck = first.tasks.iter().filter(|t| is_stuck(t)).count();
    // Stable: within each kind, the order the dump had.
    (first.tasks).sort_by_key(|t| !is_stuck(t));
    first.reindex();
    first.snapshot.sampling = Some(Sampling {
        samples: 1 + later.len() as u32,
        asked,
        over_ns: later.last().map_or(0, |(after, _)| *after),
        ended,
        stuck,
        progressing: first.tasks.len() - stuck,
    });
}

/// Whether a sample taken `after` the first saw `t` make progress since the one before it (taken
/// `before` the first): polled since the first (where its polls are counted), completed or gone,
/// or (where they are not) changed, by the listing's ages where it keeps them (tasks), else by its
/// chain (a thread's `block_on` future).
///
/// A listing says since when it has seen a task as it is: the time of the listing that first saw
/// it so. Unchanged since before the sample before, that time is at most that sample's listing,
/// a little after `before`; changed since, it is this sample's listing, a little after `after`.
/// The midpoint tells them apart while a listing lags its snapshot's clock by less than half the
/// interval.
fn progressed(t: &TaskView, print: u64, (before, after): (u64, u64), seen: &Seen) -> bool {
    let Some(now) = seen.get(&t.id) else {
        return true;
    };
    if now.state == State::Completed && t.state != State::Completed {
        return true;
    }
    match (t.polls, now.polls) {
        (Some(before), Some(polls)) => polls != before,
        _ if now.chain != print => true,
        // No listing ages a thread's future: its chain is all there is.
        _ if t.block_on.is_some() => false,
        _ => {
            let since = after.saturating_sub(now.unchanged_ns.unwrap_or(0));
            since > before + (after - before) / 2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, polls: Option<u64>) -> TaskView {
        TaskView {
            polls,
            ..TaskView::decoded(id, State::Idle, "f".into())
        }
    }

    /// Polled since, gone and completed progress; a task the agent counts that no sample saw
    /// polled is stuck; one nothing counts is stuck while the listing saw it unchanged since
    /// before the sample before (its listing a little behind), and progressing once it did not.
    #[test]
    fn a_task_is_stuck_when_no_sample_saw_it_progress() {
        let ids = [
            (1, Some(4)),
            (2, Some(4)),
            (3, Some(4)),
            (4, None),
            (5, None),
            (6, Some(1)),
            (7, None),
            (8, None),
        ];
        let mut first = Dump::build(
            &crate::testing::handshake(),
            &asyncdump_protocol::Snapshot::default(),
            0,
        );
        first.tasks = ids.iter().map(|&(id, p)| task(id, p)).collect();
        let s = 1_000_000_000;
        // Each task of the first sample has no frames: one print, but for its state.
        let print = |state| {
            chain_print(&TaskView {
                state,
                ..task(0, None)
            })
        };
        let looked = |polls, unchanged_ns, state| Looked {
            polls,
            unchanged_ns,
            state,
            chain: print(state),
        };
        let one: Seen = [
            (1, looked(Some(5), None, State::Idle)),
            (2, looked(Some(4), None, State::Idle)),
            (4, looked(None, Some(s + 5), State::Idle)),
            (5, looked(None, Some(s / 4), State::Idle)),
            // Unchanged, the later listing 8 ms behind its snapshot's clock.
            (7, looked(None, Some(s - 8_000_000), State::Idle)),
            // Unchanged for the listing, but looking otherwise (woken since, not yet polled).
            (8, looked(None, Some(s + 5), State::Scheduled)),
            (6, looked(Some(1), None, State::Completed)),
        ]
        .into_iter()
        .collect();
        mark(
            &mut first,
            &[(s, one)],
            3,
            Some("the process exited".into()),
        );
        let marks: Vec<(u64, Verdict)> = (first.tasks.iter())
            .map(|t| (t.id, t.progress.unwrap().verdict))
            .collect();
        use Verdict::{Progressing as P, Stuck as S};
        assert_eq!(
            marks,
            [
                (2, S),
                (4, S),
                (7, S),
                (1, P),
                (3, P),
                (5, P),
                (6, P),
                (8, P)
            ]
        );
        let sampling = first.snapshot.sampling.clone().unwrap();
        assert_eq!(
            (sampling.samples, sampling.asked, sampling.over_ns),
            (2, 3, s)
        );
        assert_eq!((sampling.stuck, sampling.progressing), (3, 5));
        assert_eq!(
            first.task(4).map(|t| t.id),
            Some(4),
            "the index follows the order"
        );
    }
}
