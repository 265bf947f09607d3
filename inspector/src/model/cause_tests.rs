//! How verdicts group into root causes, and how the causes rank.

use std::sync::Arc;

use super::*;
use crate::model::progress::{Evidence, Progress};
use crate::model::verdicts::{NoWaker, UnknownWhy};
use crate::model::{FrameInfo, FrameNode, Source, State};
use crate::testing::{edge_snapshot, handshake};

fn at(line: u32) -> Loc {
    Loc {
        file: "src/app.rs".into(),
        line,
        column: 0,
    }
}

/// Eight idle tasks, task `i` suspended in `app::handler` at line `10 + i`.
fn dump() -> Dump {
    let mut s = edge_snapshot(&[]);
    let one = s.tasks[0].clone();
    s.tasks = (1..=8)
        .map(|id| asyncdump_protocol::Task { id, ..one.clone() })
        .collect();
    let mut d = Dump::build(&handshake(), &s, 0);
    for t in &mut d.tasks {
        t.state = State::Idle;
        let own = FrameInfo::new("app::handler".into(), Some(at(1)), Source::Decoded);
        t.frames = Arc::new(vec![FrameNode {
            meta: Arc::new(own.with_suspended_at(Some(at(10 + t.id as u32)))),
            ..FrameNode::cut(0)
        }]);
    }
    d
}

fn sleeping(left_s: u64) -> Verdict {
    Verdict::Outside {
        on: Outside::Sleep {
            left_ns: Some(left_s * 1_000_000_000),
        },
        waited_ns: None,
        at_least: false,
    }
}

fn behind(end: u64, doing: Verdict) -> Verdict {
    Verdict::BlockedBehind {
        through: Vec::new(),
        hops: 1,
        end: End::Task {
            task: end,
            doing: Arc::new(doing),
        },
    }
}

fn set(d: &mut Dump, verdicts: &[(u64, Verdict)]) {
    for (id, v) in verdicts {
        let t = d.tasks.iter_mut().find(|t| t.id == *id).unwrap();
        t.verdict = Some(Box::new(v.clone()));
    }
}

#[test]
fn tasks_behind_one_end_are_one_cause_with_the_end_and_the_line_it_waits_at() {
    let mut d = dump();
    set(
        &mut d,
        &[
            (1, behind(4, sleeping(3600))),
            (2, behind(4, sleeping(3600))),
            (3, behind(4, sleeping(3600))),
            (4, sleeping(3600)),
        ],
    );
    let causes = of(&d);
    assert_eq!(causes.len(), 1, "{causes:?}");
    let c = &causes[0];
    assert_eq!(c.kind, "blocked_behind");
    assert_eq!((c.end, &c.tasks[..]), (Some(4), &[1, 2, 3, 4][..]));
    assert_eq!(c.what, sleeping(3600));
    assert_eq!(c.look_at, [at(14)]);
    assert!(c.severe);
}

#[test]
fn what_is_wrong_ranks_before_what_waits_outside_then_the_most_tasks_first() {
    let mut d = dump();
    let no_waker = Verdict::NothingCanWake {
        by: NoWaker::TokioRefs,
    };
    let cycle = Verdict::Deadlocked { cycle: vec![7, 8] };
    set(
        &mut d,
        &[
            (1, sleeping(5)),
            (2, sleeping(5)),
            (3, sleeping(5)),
            (4, no_waker.clone()),
            (5, no_waker),
            (6, behind(7, cycle.clone())),
            (7, cycle.clone()),
            (8, cycle),
        ],
    );
    // Three sleeps at three awaits, each its own cause, all after the severe ones.
    let causes = of(&d);
    let kinds: Vec<(&str, usize)> = (causes.iter()).map(|c| (&*c.kind, c.tasks.len())).collect();
    let expect = [
        ("deadlocked", 3),
        ("nothing_can_wake", 1),
        ("nothing_can_wake", 1),
        ("outside", 1),
        ("outside", 1),
        ("outside", 1),
    ];
    assert_eq!(kinds, expect);
}

#[test]
fn as_many_tasks_held_up_a_deadlock_ranks_before_a_chain_of_blocked_tasks() {
    let mut d = dump();
    let cycle = Verdict::Deadlocked { cycle: vec![3, 4] };
    set(
        &mut d,
        &[
            (1, behind(2, sleeping(60))),
            (2, sleeping(60)),
            (3, cycle.clone()),
            (4, cycle),
        ],
    );
    let kinds: Vec<String> = of(&d).into_iter().map(|c| c.kind).collect();
    assert_eq!(kinds, ["deadlocked", "blocked_behind"]);
}

#[test]
fn the_same_wait_at_the_same_await_is_one_cause_and_a_peer_one_from_any_await() {
    let mut d = dump();
    let unknown = Verdict::Unknown {
        why: UnknownWhy::NotRead,
        leaf: Some("app::Silent".into()),
        tasks: Vec::new(),
        ready: None,
    };
    let reading = Verdict::Outside {
        on: Outside::Socket {
            fd: 9,
            write: false,
            local: None,
            peer: Some("10.0.0.2:7001".into()),
        },
        waited_ns: None,
        at_least: false,
    };
    // Tasks 1 and 2 wait alike at one await, task 3 at another; 4 and 5 read from one peer (as
    // many as 1 and 2, and better known: first).
    for id in [1, 2, 3] {
        set(&mut d, &[(id, unknown.clone())]);
    }
    set(&mut d, &[(4, reading.clone()), (5, reading)]);
    let at_12 = d.tasks[0].frames.clone();
    d.tasks[1].frames = at_12;
    let causes = of(&d);
    let of_tasks: Vec<(&[u64], &[Loc])> = (causes.iter())
        .map(|c| (&c.tasks[..], &c.look_at[..]))
        .collect();
    assert_eq!(
        of_tasks,
        [
            (&[4, 5][..], &[at(14), at(15)][..]),
            (&[1, 2][..], &[at(11)][..]),
            (&[3][..], &[at(13)][..]),
        ]
    );
    assert!(causes.iter().all(|c| !c.severe));
}

#[test]
fn a_task_a_later_sample_saw_progress_is_no_cause() {
    let mut d = dump();
    set(&mut d, &[(1, behind(2, sleeping(60))), (2, sleeping(60))]);
    d.tasks[0].progress = Some(Progress {
        verdict: Seen::Progressing,
        by: Evidence::Polls,
    });
    let causes = of(&d);
    assert_eq!(causes.len(), 1);
    assert_eq!(
        (&*causes[0].kind, &causes[0].tasks[..]),
        ("outside", &[2][..])
    );
}
