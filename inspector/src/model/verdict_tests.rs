//! The rules of [`super`], one spec each, on dumps built by hand: four tasks of the agent, each
//! idle with one waker kept unless a spec says otherwise, waiting in `app::handler` on a leaf.

use std::sync::Arc;

use super::*;
use crate::model::values::{Field, Local};
use crate::model::{DecodedDelegate, DelegateView, FrameInfo, Loc, Source, TOKIO_ONLY, TokioTask};
use crate::testing::{blocked_worker, edge_snapshot, handshake, lock_edge, runtime};

fn at(line: u32) -> Loc {
    Loc {
        file: "src/app.rs".into(),
        line,
        column: 0,
    }
}

/// `app::handler` suspended at line `line`, awaiting `leaf`, which waits on `waits`.
fn chain(line: u32, leaf: &str, waits: Option<WaitOn>) -> Arc<Vec<FrameNode>> {
    let own = FrameInfo::new("app::handler".into(), Some(at(1)), Source::Decoded);
    let leaf = FrameNode {
        meta: Arc::new(FrameInfo::awaitee(leaf.into())),
        waits_on: waits.map(Box::new),
        ..FrameNode::cut(0)
    };
    Arc::new(vec![FrameNode {
        meta: Arc::new(own.with_suspended_at(Some(at(line)))),
        children: vec![leaf],
        ..FrameNode::cut(0)
    }])
}

fn wait(kind: WaitKind, parts: &[(&str, Value)]) -> WaitOn {
    WaitOn {
        kind,
        parts: (parts.iter())
            .map(|(n, v)| Local::new(*n, "", v.clone()))
            .collect(),
        holders: Vec::new(),
        statics: Vec::new(),
        threads: Vec::new(),
    }
}

fn fields(words: &[(&str, Value)]) -> Value {
    Value::Struct {
        type_name: "".into(),
        fields: (words.iter())
            .map(|(n, v)| Field {
                name: (*n).into(),
                value: v.clone(),
            })
            .collect(),
    }
}

fn receive(queued: u64, senders: u64) -> WaitOn {
    let channel = fields(&[
        ("addr", Value::Address(0x10)),
        ("queued", Value::Uint(queued)),
        ("senders", Value::Uint(senders)),
    ]);
    wait(WaitKind::Receive, &[("channel", channel)])
}

/// A sleep whose deadline is `age_ns` past (negative: still ahead).
fn sleep(age_ns: i64) -> WaitOn {
    let deadline = Value::Instant {
        monotonic_ns: 1,
        age_ns: Some(age_ns),
    };
    wait(WaitKind::Sleep, &[("deadline", deadline)])
}

const SECOND: u64 = 1_000_000_000;

/// Four idle tasks of the agent waiting a second each, one waker kept each, all on a channel
/// nobody sends to.
fn dump() -> Dump {
    let mut d = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
    for t in &mut d.tasks {
        t.state = State::Idle;
        t.state_age_ns = Some(SECOND);
        t.delegate = Some(DelegateView {
            clones: 1,
            held_ns: SECOND,
        });
        t.frames = chain(10 + t.id as u32, "Recv", Some(receive(0, 1)));
    }
    d
}

fn judged(mut d: Dump) -> Dump {
    judge(&mut d);
    d
}

fn verdict(d: &Dump, id: u64) -> Verdict {
    d.task(id)
        .and_then(|t| t.verdict.as_deref().cloned())
        .expect("a verdict")
}

#[test]
fn a_task_in_a_wait_cycle_is_deadlocked_even_inside_its_poll() {
    let mut d = dump();
    d.waits = vec![lock_edge(1, 2, 5, 4), lock_edge(2, 1, 6, 3)];
    d.deadlocks = vec![vec![1, 2]];
    d.tasks[1].state = State::Running;
    let d = judged(d);
    for id in [1, 2] {
        assert_eq!(verdict(&d, id), Verdict::Deadlocked { cycle: vec![1, 2] });
    }
}

/// Held stopped: each task's state and what it waits for were read at one moment.
fn held(mut d: Dump) -> Dump {
    d.snapshot.stopped = Some(crate::model::StoppedView {
        threads: 4,
        unstopped: 0,
        held_ns: 1_000_000,
    });
    d
}

#[test]
fn an_idle_task_whose_wait_is_ready_lost_its_wake_up_once_it_waited_past_the_grace() {
    let mut d = held(dump());
    d.tasks[0].frames = chain(10, "Recv", Some(receive(3, 1)));
    d.tasks[1].frames = chain(11, "Recv", Some(receive(0, 0)));
    d.tasks[2].frames = chain(12, "Sleep", Some(sleep(2 * SECOND as i64)));
    d.tasks[3].frames = chain(13, "Recv", Some(receive(3, 1)));
    d.tasks[3].state_age_ns = Some(GRACE_NS / 2);
    let d = judged(d);
    let lost = |ready| Verdict::LostWakeUp { ready };
    assert_eq!(verdict(&d, 1), lost(Ready::MessagesQueued { queued: 3 }));
    let closed = Ready::Closed {
        what: "its senders are gone".into(),
    };
    assert_eq!(verdict(&d, 2), lost(closed));
    let passed = Ready::DeadlinePassed { ago_ns: 2 * SECOND };
    assert_eq!(verdict(&d, 3), lost(passed));
    // Ready a moment ago: the wake-up may be on its way.
    assert!(matches!(
        verdict(&d, 4),
        Verdict::Unknown {
            why: UnknownWhy::JustReady,
            ..
        }
    ));
}

#[test]
fn read_after_its_state_from_a_running_process_what_is_ready_is_a_lost_wake_up_only_if_every_sample_says_so()
 {
    let mut d = dump();
    d.tasks[0].frames = chain(10, "Recv", Some(receive(3, 1)));
    d.tasks[1].frames = chain(11, "Recv", Some(receive(3, 1)));
    d.tasks[1].progress = Some(crate::model::progress::Progress {
        verdict: crate::model::progress::Verdict::Stuck,
        by: crate::model::progress::Evidence::Polls,
    });
    // A deadline long passed says so however late it was read.
    d.tasks[2].frames = chain(12, "Sleep", Some(sleep(2 * SECOND as i64)));
    let d = judged(d);
    let queued = Ready::MessagesQueued { queued: 3 };
    assert!(matches!(
        verdict(&d, 1),
        Verdict::Unknown { why: UnknownWhy::ReadyUnconfirmed, ready: Some(r), .. } if r == queued
    ));
    assert_eq!(verdict(&d, 2), Verdict::LostWakeUp { ready: queued });
    assert!(matches!(verdict(&d, 3), Verdict::LostWakeUp { .. }));
}

#[test]
fn a_scheduled_task_is_woken_not_polled_and_a_starved_runtime_is_named() {
    let mut d = dump();
    d.runtimes = vec![runtime("multi_thread")];
    for t in &mut d.tasks {
        t.tokio_task = Some(TokioTask {
            header: 0x1000 * t.id,
            poll_fn: 0x2000,
            runtime: 0,
            other_refs: Some(1),
        });
    }
    d.tasks[0].state = State::Scheduled;
    d.tasks[0].last_wake_ago_ns = Some(3 * SECOND);
    d.tasks[1].frames = chain(11, "Recv", Some(receive(2, 1)));
    let calm = judged(d.clone());
    let woken = Verdict::WokenNotPolled {
        ready: None,
        woken_ago_ns: Some(3 * SECOND),
        at_least: false,
        starved: false,
        others_queued: 0,
    };
    assert_eq!(verdict(&calm, 1), woken);
    // Ready where another task of its runtime waits for a worker: not a lost wake-up, not yet.
    assert!(matches!(
        verdict(&calm, 2),
        Verdict::WokenNotPolled {
            ready: Some(_),
            starved: false,
            others_queued: 1,
            ..
        }
    ));
    d.threads = vec![blocked_worker(7, 3)];
    d.starved = vec![crate::model::threads::Starved {
        flavor: "multi_thread".into(),
        workers: 1,
        blocked: 1,
        ready: 1,
        threads: vec![7],
        runtime: None,
        since: None,
    }];
    let starved = judged(d);
    assert!(matches!(
        verdict(&starved, 1),
        Verdict::WokenNotPolled { starved: true, .. }
    ));
    // Ready where no worker is free to poll it: not a lost wake-up.
    let ready = Ready::MessagesQueued { queued: 2 };
    assert!(matches!(
        verdict(&starved, 2),
        Verdict::WokenNotPolled { ready: Some(r), starved: true, .. } if r == ready
    ));
}

#[test]
fn blocked_behind_follows_the_wait_graph_to_its_end_and_says_what_the_end_does() {
    let mut d = dump();
    d.waits = vec![lock_edge(1, 2, 5, 4), lock_edge(2, 3, 6, 3)];
    d.tasks[2].frames = chain(12, "Sleep", Some(sleep(-60 * SECOND as i64)));
    let d = judged(d);
    let sleeping = Verdict::Outside {
        on: Outside::Sleep {
            left_ns: Some(60 * SECOND),
        },
        waited_ns: Some(SECOND),
        at_least: false,
    };
    let end = End::Task {
        task: 3,
        doing: Arc::new(sleeping.clone()),
    };
    let behind = |through: Vec<u64>, hops| Verdict::BlockedBehind {
        through,
        hops,
        end: end.clone(),
    };
    assert_eq!(verdict(&d, 1), behind(vec![2], 2));
    assert_eq!(verdict(&d, 2), behind(vec![], 1));
    assert_eq!(verdict(&d, 3), sleeping);
    assert_eq!(verdict(&d, 1).mentions(), [2, 3]);
}

#[test]
fn blocked_behind_a_wait_cycle_ends_in_it_and_a_running_end_names_its_blocking_call() {
    let mut d = dump();
    d.waits = vec![
        lock_edge(1, 2, 5, 4),
        lock_edge(2, 3, 6, 3),
        lock_edge(3, 2, 7, 2),
        lock_edge(4, 1 | TOKIO_ONLY, 8, 1),
    ];
    d.deadlocks = vec![vec![2, 3]];
    let d2 = judged(d.clone());
    assert_eq!(
        verdict(&d2, 1),
        Verdict::BlockedBehind {
            through: vec![],
            hops: 1,
            end: End::Deadlock { cycle: vec![2, 3] },
        }
    );
    d.waits = vec![lock_edge(1, 2, 5, 4)];
    d.deadlocks.clear();
    d.tasks[1].state = State::Running;
    d.threads = vec![blocked_worker(7, 2)];
    let d = judged(d);
    let Verdict::BlockedBehind {
        end: End::Task { task: 2, doing },
        ..
    } = verdict(&d, 1)
    else {
        panic!("{:?}", verdict(&d, 1));
    };
    assert!(
        matches!(
            *doing,
            Verdict::Running {
                blocked: Some(_),
                ..
            }
        ),
        "{doing:?}"
    );
}

#[test]
fn nothing_can_wake_an_idle_task_no_waker_of_which_exists() {
    let mut d = dump();
    // The agent's count of its waker's clones: none alive.
    d.tasks[0].delegate = None;
    d.tasks[0].frames = chain(10, "app::Silent", None);
    // tokio's references for a task the agent does not run: its list's and its JoinHandle's only.
    d.tasks[1].agent_id = None;
    d.tasks[1].frames = chain(11, "app::Silent", None);
    d.tasks[1].tokio_task = Some(TokioTask {
        header: 0x1000,
        poll_fn: 0x2000,
        runtime: 0,
        other_refs: Some(0),
    });
    // A oneshot receiver pending without a waker registered.
    d.tasks[2].frames = chain(12, "Receiver", None);
    d.tasks[2].decoded_delegates = Arc::new(vec![DecodedDelegate {
        leaf: "Receiver<()>".into(),
        registered: false,
        waker_of: None,
        foreign_vtable: None,
        foreign_waker: None,
        value_sent: false,
        closed: false,
        sender_held_by: None,
    }]);
    // A waker kept: no such verdict, though nothing else is known.
    d.tasks[3].frames = chain(13, "app::Silent", None);
    let d = judged(d);
    let none = |by| Verdict::NothingCanWake { by };
    assert_eq!(verdict(&d, 1), none(NoWaker::AgentClones));
    assert_eq!(verdict(&d, 2), none(NoWaker::TokioRefs));
    let leaf = "Receiver<()>".into();
    assert_eq!(verdict(&d, 3), none(NoWaker::Unregistered { leaf }));
    assert!(matches!(
        verdict(&d, 4),
        Verdict::Unknown {
            why: UnknownWhy::NotRead,
            ..
        }
    ));
}

#[test]
fn waits_on_the_world_outside_say_what_and_for_how_long() {
    let mut d = dump();
    d.tasks[0].frames = chain(10, "Sleep", Some(sleep(-5 * SECOND as i64)));
    let socket = fields(&[
        (
            "proto",
            Value::Str {
                text: "tcp".into(),
                len: 3,
            },
        ),
        ("local", Value::SocketAddr("127.0.0.1:40000".into())),
        ("peer", Value::SocketAddr("127.0.0.1:7001".into())),
        ("to_read", Value::Uint(0)),
    ]);
    let read = wait(
        WaitKind::Io { write: false },
        &[("fd", Value::Int(9)), ("socket", socket)],
    );
    d.tasks[1].frames = chain(11, "Readiness", Some(read));
    d.tasks[1].state_age_ns = None;
    d.tasks[1].unchanged_ns = Some(31 * SECOND);
    d.tasks[2].frames = chain(12, "tokio::process::imp::Child", None);
    let d = judged(d);
    assert!(matches!(
        verdict(&d, 1),
        Verdict::Outside { on: Outside::Sleep { left_ns }, .. } if left_ns == Some(5 * SECOND)
    ));
    assert_eq!(
        verdict(&d, 2),
        Verdict::Outside {
            on: Outside::Socket {
                fd: 9,
                write: false,
                local: Some("127.0.0.1:40000".into()),
                peer: Some("127.0.0.1:7001".into()),
            },
            waited_ns: Some(31 * SECOND),
            at_least: true,
        }
    );
    assert!(matches!(
        verdict(&d, 3),
        Verdict::Outside {
            on: Outside::ChildProcess { .. },
            ..
        }
    ));
}

#[test]
fn an_unknown_says_why() {
    let mut d = dump();
    d.tasks[0].frames = Arc::default();
    // A receive with senders alive, none held by a task: not ready, its signaller unknown.
    let mut any = lock_edge(2, 3, 5, 4);
    any.any_of = true;
    let mut also = lock_edge(2, 4, 5, 4);
    also.any_of = true;
    d.waits = vec![any, also];
    let notify = fields(&[
        ("addr", Value::Address(0x20)),
        ("notified", Value::Bool(false)),
    ]);
    d.tasks[2].frames = chain(
        12,
        "Notified",
        Some(wait(WaitKind::Notify, &[("notify", notify)])),
    );
    let sem = fields(&[
        ("addr", Value::Address(0x30)),
        ("available", Value::Uint(0)),
    ]);
    let lock = wait(
        WaitKind::Permits {
            lock: "Mutex".into(),
        },
        &[("semaphore", sem)],
    );
    d.tasks[3].frames = chain(13, "Acquire", Some(lock));
    let d = judged(d);
    let why = |id| match verdict(&d, id) {
        Verdict::Unknown { why, .. } => why,
        v => panic!("{v:?}"),
    };
    assert_eq!(why(1), UnknownWhy::NoChain);
    assert_eq!(why(2), UnknownWhy::AnyOf);
    assert_eq!(why(3), UnknownWhy::SignallerUnknown);
    assert_eq!(why(4), UnknownWhy::HolderNotFound);
    assert!(matches!(verdict(&d, 2), Verdict::Unknown { tasks, .. } if tasks == [3, 4]));
}

#[test]
fn running_and_completed_tasks_have_no_verdict() {
    let mut d = dump();
    d.tasks[0].state = State::Running;
    d.tasks[1].state = State::Completed;
    let d = judged(d);
    assert!(d.tasks[0].verdict.is_none() && d.tasks[1].verdict.is_none());
}
