//! The wait graph from dumps whose values are read: who holds what, who waits on whom, which waits
//! close a cycle, which wait on a future nobody polls.

use std::sync::Arc;

use super::resolve;
use crate::model::values::{
    Field, Local, LocalInfo, Reading, Value, WaitKind, WaitOn, Wanted, Within,
};
use crate::model::waits::WaitsFor;
use crate::model::{Dump, FrameInfo, FrameNode, Loc, Source};
use crate::testing::{edge_snapshot, handshake};

/// [`resolve`] over every task of `dump`: what reading its values would name, and more.
fn resolve_every(dump: &mut Dump, reading: &Reading) {
    let every: Vec<usize> = (0..dump.tasks.len()).collect();
    resolve(dump, reading, &every);
}

fn at(line: u32) -> Loc {
    Loc {
        file: "src/app.rs".into(),
        line,
        column: 0,
    }
}

fn frame(name: &str, line: u32, children: Vec<FrameNode>) -> FrameNode {
    let mut info = FrameInfo::new(name.into(), Some(at(1)), Source::Decoded);
    info = info.with_suspended_at(Some(at(line)));
    FrameNode {
        meta: Arc::new(info),
        children,
        ..FrameNode::cut(0)
    }
}

fn guard(addr: u64, within: Option<u64>) -> Value {
    Value::Guard {
        lock: "Mutex".into(),
        write: false,
        addr,
        within: within.map(|addr| {
            Box::new(Within {
                addr,
                stopped_at: Some(at(40)),
            })
        }),
        acquired_at: None,
    }
}

fn local(name: &str, value: Value, acquired: u32) -> Local {
    let info = LocalInfo {
        name: name.into(),
        type_name: "MutexGuard<u64>".into(),
        acquired: Some(at(acquired)),
    };
    Local {
        info: Arc::new(info),
        value,
    }
}

/// A leaf waiting for the mutex whose semaphore is at `addr`.
fn waiting_for(addr: u64) -> FrameNode {
    let semaphore = Value::Struct {
        type_name: "Semaphore".into(),
        fields: vec![
            Field {
                name: "addr".into(),
                value: Value::Address(addr),
            },
            Field {
                name: "available".into(),
                value: Value::Uint(0),
            },
        ],
    };
    let mut leaf = frame("tokio::sync::batch_semaphore::Acquire", 0, Vec::new());
    leaf.meta = Arc::new(FrameInfo::awaitee(
        "tokio::sync::batch_semaphore::Acquire".into(),
    ));
    leaf.waits_on = Some(Box::new(WaitOn {
        kind: WaitKind::Permits {
            lock: "Mutex".into(),
        },
        parts: vec![Local::new("semaphore", "Semaphore", semaphore)],
        holders: Vec::new(),
        statics: Vec::new(),
        threads: Vec::new(),
    }));
    leaf
}

/// Tasks 1 to 4, with these chains in order (the rest keep theirs).
fn dump_with(chains: Vec<Vec<FrameNode>>) -> Dump {
    let mut dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
    for (t, frames) in dump.tasks.iter_mut().zip(chains) {
        t.frames = Arc::new(frames);
    }
    dump
}

fn targets() -> Reading {
    Reading {
        locals: Wanted::None,
        targets: true,
        threads: false,
    }
}

/// `transfer` holding `held` (taken at line 10) and waiting at line 12 for `wanted`.
fn transfer(held: u64, wanted: u64) -> Vec<FrameNode> {
    let mut f = frame("app::transfer", 12, vec![waiting_for(wanted)]);
    f.locals = vec![local("source", guard(held, None), 10)];
    vec![f]
}

#[test]
fn two_tasks_each_holding_the_lock_the_other_waits_for_are_a_deadlock() {
    let mut dump = dump_with(vec![transfer(0xa, 0xb), transfer(0xb, 0xa)]);
    resolve_every(&mut dump, &targets());
    assert_eq!(dump.deadlocks, vec![vec![1, 2]]);
    let e = &dump.waits[0];
    assert_eq!(
        (e.from, e.to, e.waits_at.as_ref().map(|l| l.line)),
        (1, 2, Some(12))
    );
    let WaitsFor::Lock { holder } = &e.on else {
        panic!("{e:?}")
    };
    assert_eq!((holder.task, &*holder.held.local), (2, "source"));
    assert_eq!(holder.held.acquired_at.as_ref().map(|l| l.line), Some(10));
    assert!(holder.held.polled && !e.is_futurelock());
    // The waiting leaf names its holder; the holding frame says what it holds.
    let frames = &dump.tasks[0].frames;
    assert_eq!(frames[0].holds.len(), 1);
    let w = frames[0].children[0].waits_on.as_ref().unwrap();
    assert_eq!(w.holders.iter().map(|h| h.task).collect::<Vec<_>>(), [2]);
}

#[test]
fn locals_read_only_for_their_guards_are_dropped_unless_asked_for() {
    let mut dump = dump_with(vec![transfer(0xa, 0xb)]);
    resolve_every(&mut dump, &targets());
    assert!(dump.tasks[0].frames[0].locals.is_empty());
    let mut dump = dump_with(vec![transfer(0xa, 0xb)]);
    let all = Reading {
        locals: Wanted::All,
        targets: true,
        threads: false,
    };
    resolve_every(&mut dump, &all);
    assert_eq!(dump.tasks[0].frames[0].locals.len(), 1);
}

#[test]
fn a_guard_in_a_future_the_task_keeps_but_does_not_poll_is_a_futurelock() {
    // Task 1 waits for the mutex a future in its own frame holds; task 2 queues behind it.
    let mut refresh = frame("app::refresh", 22, vec![waiting_for(0xa)]);
    let update = Value::Variant {
        name: "Suspend1".into(),
        fields: vec![Field {
            name: "entry".into(),
            value: guard(0xa, Some(0x100)),
        }],
    };
    refresh.locals = vec![local("update", update, 13)];
    let read = frame("app::read", 30, vec![waiting_for(0xa)]);
    let mut dump = dump_with(vec![vec![refresh], vec![read]]);
    resolve_every(&mut dump, &targets());
    assert_eq!(dump.deadlocks, vec![vec![1]]);
    assert_eq!(dump.waits.len(), 2);
    assert!(dump.waits.iter().all(|e| e.is_futurelock() && e.to == 1));
    let held = &dump.tasks[0].frames[0].holds[0];
    assert_eq!((&*held.local, held.polled), ("update", false));
    assert_eq!(held.stopped_at.as_ref().map(|l| l.line), Some(40));
}

#[test]
fn a_guard_in_a_future_the_walk_went_into_is_that_futures_to_show() {
    // A select branch pinned in the frame: polled through the select, so not held unpolled here.
    let mut f = frame("app::refresh", 22, Vec::new());
    f.locals = vec![local("update", guard(0xa, Some(0x100)), 13)];
    f.walked_within = vec![0x100];
    let mut dump = dump_with(vec![
        vec![f],
        vec![frame("app::read", 30, vec![waiting_for(0xa)])],
    ]);
    resolve_every(&mut dump, &targets());
    assert!(dump.tasks[0].frames[0].holds.is_empty());
    assert!(dump.waits.is_empty() && dump.deadlocks.is_empty());
}

#[test]
fn a_mutex_held_where_polled_is_not_held_again_by_what_a_move_left_in_an_unpolled_future() {
    // `run_until(future)` moved `future` (whose captures hold the guard) into the future it
    // awaits; the argument's old bytes stay in its state machine, unpolled, naming the same guard.
    let mut outer = frame("app::run_until", 22, Vec::new());
    outer.locals = vec![local("future", guard(0xa, Some(0x100)), 13)];
    let mut inner = frame("app::main::{async block#0}", 30, vec![]);
    inner.locals = vec![local("held", guard(0xa, None), 12)];
    outer.children = vec![inner];
    let mut dump = dump_with(vec![
        vec![outer],
        vec![frame("app::read", 40, vec![waiting_for(0xa)])],
    ]);
    resolve_every(&mut dump, &targets());
    let outer = &dump.tasks[0].frames[0];
    assert!(outer.holds.is_empty(), "{:?}", outer.holds);
    assert_eq!(outer.children[0].holds.len(), 1);
    assert_eq!(dump.waits.len(), 1);
    assert!(!dump.waits[0].is_futurelock() && dump.waits[0].to == 1);
    // Alone, the unpolled future's guard is a futurelock still (see the spec above).
}

#[test]
fn a_guard_behind_a_shared_pointer_is_not_held_by_the_frame() {
    let mut f = frame("app::peek", 22, Vec::new());
    let shared = Value::Pointer {
        kind: crate::model::values::PointerKind::Arc,
        addr: 0x500,
        strong: Some(2),
        weak: Some(1),
        to: Box::new(guard(0xa, None)),
    };
    f.locals = vec![local("shared", shared, 10)];
    let mut dump = dump_with(vec![vec![f]]);
    resolve_every(&mut dump, &targets());
    assert!(dump.tasks[0].frames[0].holds.is_empty());
}

#[test]
fn a_join_cycle_stays_a_deadlock_beside_the_lock_edges() {
    let mut dump = Dump::build(&handshake(), &edge_snapshot(&[(1, 2), (2, 1)]), 0);
    let lock_holder = transfer(0xa, 0xb);
    dump.tasks[2].frames = Arc::new(lock_holder);
    resolve_every(&mut dump, &targets());
    assert_eq!(dump.deadlocks, vec![vec![1, 2]]);
    assert!(dump.waits.iter().all(|e| matches!(e.on, WaitsFor::Join)));
}

#[test]
fn a_locked_mutex_no_task_holds_has_no_holder_and_no_edge() {
    let mut dump = dump_with(vec![vec![frame("app::read", 30, vec![waiting_for(0xa)])]]);
    resolve_every(&mut dump, &targets());
    assert!(dump.waits.is_empty());
    let w = dump.tasks[0].frames[0].children[0]
        .waits_on
        .as_ref()
        .unwrap();
    assert!(w.holders.is_empty());
}

/// A leaf waiting on channel `chan`: a receive (`senders` alive) or a send into it when full.
fn on_channel(chan: u64, receive: Option<u64>) -> FrameNode {
    let uint = |name: &str, n| Field {
        name: name.into(),
        value: Value::Uint(n),
    };
    let mut fields = vec![
        Field {
            name: "addr".into(),
            value: Value::Address(chan),
        },
        Field {
            name: "receiver_alive".into(),
            value: Value::Bool(true),
        },
    ];
    fields.extend(receive.map(|n| uint("senders", n)));
    let channel = Local::new(
        "channel",
        "channel",
        Value::Struct {
            type_name: "Channel".into(),
            fields,
        },
    );
    let mut leaf = waiting_for(0x99);
    let w = leaf.waits_on.as_mut().unwrap();
    w.kind = match receive {
        Some(_) => WaitKind::Receive,
        None => WaitKind::Permits {
            lock: "channel".into(),
        },
    };
    w.parts.push(channel);
    leaf
}

fn end(name: &str, sender: bool, chan: u64) -> Local {
    Local::new(
        name,
        "Sender<u64>",
        Value::Endpoint {
            sender,
            addr: chan,
            within: None,
        },
    )
}

/// Task 1 receives from channel 0xc1 (`senders` alive), holding the receiver of 0xc2; task 2 sends
/// into the full 0xc2, holding a sender of 0xc1.
fn crossed_channels(senders: u64) -> Dump {
    let mut client = frame("app::client", 20, vec![on_channel(0xc1, Some(senders))]);
    client.locals = vec![end("requests", false, 0xc2)];
    let mut server = frame("app::server", 30, vec![on_channel(0xc2, None)]);
    server.locals = vec![end("replies", true, 0xc1)];
    let mut dump = dump_with(vec![vec![client], vec![server]]);
    resolve_every(&mut dump, &targets());
    dump
}

#[test]
fn a_receive_whose_one_sender_waits_for_its_receiver_is_a_deadlock() {
    let dump = crossed_channels(1);
    assert_eq!(dump.deadlocks, vec![vec![1, 2]]);
    assert!(
        dump.waits
            .iter()
            .all(|e| matches!(e.on, WaitsFor::Channel { .. }))
    );
}

#[test]
fn a_receive_another_sender_can_end_is_no_deadlock() {
    let dump = crossed_channels(2);
    assert!(dump.deadlocks.is_empty());
    let receive = dump
        .waits
        .iter()
        .find(|e| e.from == 1)
        .expect("the receive's edge");
    assert!(receive.any_of);
}

#[test]
fn a_oneshot_whose_sender_another_task_holds_is_an_edge_until_it_is_sent_or_dropped() {
    use crate::model::DecodedDelegate;
    let leaf = "tokio::sync::oneshot::Receiver<u64>";
    let mut receive = frame("app::ask", 12, Vec::new());
    receive.children = vec![frame(leaf, 0, Vec::new())];
    let delegate = |value_sent, closed| DecodedDelegate {
        leaf: leaf.into(),
        registered: true,
        waker_of: Some(1),
        foreign_vtable: None,
        foreign_waker: None,
        value_sent,
        closed,
        sender_held_by: Some(2),
    };
    for (sent, closed, edges) in [(false, false, 1), (true, false, 0), (false, true, 0)] {
        let mut dump = dump_with(vec![vec![receive.clone()]]);
        dump.tasks[0].decoded_delegates = Arc::new(vec![delegate(sent, closed)]);
        resolve_every(&mut dump, &targets());
        assert_eq!(dump.waits.len(), edges, "sent {sent}, dropped {closed}");
        if let Some(e) = dump.waits.first() {
            assert_eq!((e.from, e.to, &e.on), (1, 2, &WaitsFor::Oneshot));
            assert_eq!(e.waits_at.as_ref().map(|l| l.line), Some(12));
        }
    }
}

#[test]
fn a_lock_no_task_holds_but_a_static_does_is_held_by_that_static_with_no_edge() {
    let wait = frame("app::wait", 18, vec![waiting_for(0xa)]);
    let mut dump = dump_with(vec![vec![wait]]);
    // `static PARKED: std::sync::Mutex<Option<OwnedMutexGuard<u64>>>`, read as a structure.
    let parked = Value::Struct {
        type_name: "Mutex<Option<OwnedMutexGuard<u64>>>".into(),
        fields: vec![Field {
            name: "data".into(),
            value: Value::Variant {
                name: "Some".into(),
                fields: vec![Field {
                    name: "0".into(),
                    value: guard(0xa, None),
                }],
            },
        }],
    };
    let other = Value::Struct {
        type_name: "Mutex<Option<OwnedMutexGuard<u64>>>".into(),
        fields: Vec::new(),
    };
    dump.statics = vec![
        Local::new("app::PARKED", "", parked),
        Local::new("app::EMPTY", "", other),
    ];
    resolve_every(&mut dump, &targets());
    let w = (dump.tasks[0].frames[0].children[0].waits_on.as_ref()).unwrap();
    assert!(w.holders.is_empty());
    let statics: Vec<&str> = w.statics.iter().map(|s| &*s.name).collect();
    assert_eq!(statics, ["app::PARKED"]);
    assert!(dump.waits.is_empty() && dump.deadlocks.is_empty());
    assert!(dump.statics.is_empty(), "read for the graph only");
}

#[test]
fn a_thread_blocked_on_a_lock_is_matched_to_its_guards_by_the_words_the_lock_is_known_by() {
    use crate::model::threads::{Blocking, Doing};
    let blocked = |kind: &str, addr: u64| {
        let mut t = crate::testing::blocked_worker(7, 1);
        t.doing = Doing::Blocked {
            on: Blocking::Lock {
                kind: kind.into(),
                addr,
                static_name: None,
            },
        };
        super::lock_wait(&t)
    };
    let cases = [
        ("std::sync::Mutex", 0x1000, Some([0x1000, 0x1000])),
        // A reader sleeps on the state word, a writer on the word beside it.
        ("std::sync::RwLock (write)", 0x1004, Some([0x1004, 0x1000])),
        ("parking_lot::Mutex", 0x2000, Some([0x2000, 0x2000])),
        // A writer waiting for readers to leave parks one past the lock.
        (
            "parking_lot::RwLock (write)",
            0x2001,
            Some([0x2001, 0x2000]),
        ),
        ("parking_lot::RwLock (read)", 0x2000, Some([0x2000, 0x1fff])),
        // Its key could not be read: no lock to match.
        ("parking_lot::Mutex", 0, None),
        ("std::sync::Condvar", 0x3000, None),
        ("std::sync::RwLockish", 0x3000, None),
    ];
    for (kind, addr, want) in cases {
        assert_eq!(blocked(kind, addr), want, "{kind} @ {addr:#x}");
    }
}

#[test]
fn a_thread_parked_by_parking_lot_is_on_the_key_its_thread_data_keeps() {
    let parked = crate::plan::ParkedKey { futex: 0, key: 8 };
    let memory = |at: u64| match at {
        0x7000_0008 => Some(0x5555_0040),
        0x7100_0008 => Some(0),
        _ => None,
    };
    assert_eq!(parked.key_of(0x7000_0000, &memory), Some(0x5555_0040));
    assert_eq!(parked.key_of(0x7100_0000, &memory), None, "no lock at 0");
    assert_eq!(parked.key_of(0x7200_0000, &memory), None, "unreadable");
}
