//! One spec per wait-target rule, on type descriptions made by hand.

use crate::dwarf::synthetic::Types;
use crate::plan::builder::Builder;
use crate::plan::values::{ChanLayout, Shape, TargetKind, TargetPlan, Word};

/// tokio's `Sleep`, its deadline (an instant) 40 bytes in, through its timer entry.
fn tokio_sleep(t: &mut Types) -> u64 {
    let ts = super::value_tests::timespec(t);
    let instant = t.structure("tokio::time::instant::Instant", 16);
    t.member(instant, "std", 0, ts);
    let entry = t.structure("tokio::runtime::time::entry::TimerEntry", 40);
    t.member(entry, "deadline", 24, instant);
    let sleep = t.structure("tokio::time::sleep::Sleep", 64);
    t.member(sleep, "entry", 16, entry);
    sleep
}

#[test]
fn a_sleep_waits_for_its_deadline() {
    let mut t = Types::new();
    let sleep = tokio_sleep(&mut t);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(sleep).expect("a target");
    assert_eq!(target.kind, TargetKind::Sleep);
    assert_eq!(
        (&*target.parts[0].name, target.parts[0].offset),
        ("deadline", 40)
    );
    let ty = &b.values.types[target.parts[0].ty as usize];
    assert_eq!(ty.shape, Shape::Instant { secs: 0, nanos: 8 });
}

#[test]
fn a_semaphore_acquire_waits_for_permits_in_the_semaphores_queue() {
    let mut t = Types::new();
    let usize_ = t.base("usize", 8);
    let bool_ = t.base("bool", 1);
    let u8_ = t.base("u8", 1);
    let raw = t.pointer("*const u8", u8_);
    let inner = t.structure("tokio::util::linked_list::PointersInner<Waiter>", 16);
    t.member(inner, "prev", 0, raw)
        .member(inner, "next", 8, raw);
    let pointers = t.structure("tokio::util::linked_list::Pointers<Waiter>", 16);
    t.member(pointers, "inner", 0, inner);
    let waiter = t.structure("tokio::sync::batch_semaphore::Waiter", 40);
    t.member(waiter, "state", 0, usize_)
        .member(waiter, "pointers", 24, pointers);
    let list = t.structure("tokio::util::linked_list::LinkedList<Waiter>", 16);
    t.member(list, "head", 0, raw).member(list, "tail", 8, raw);
    let waitlist = t.structure("tokio::sync::batch_semaphore::Waitlist", 24);
    t.member(waitlist, "queue", 0, list)
        .member(waitlist, "closed", 16, bool_);
    let sem = t.structure("tokio::sync::batch_semaphore::Semaphore", 40);
    t.member(sem, "waiters", 8, waitlist)
        .member(sem, "permits", 32, usize_);
    let sem_ptr = t.pointer("*const tokio::sync::batch_semaphore::Semaphore", sem);
    let acquire = t.structure("tokio::sync::batch_semaphore::Acquire", 64);
    t.member(acquire, "semaphore", 0, sem_ptr)
        .member(acquire, "node", 8, waiter)
        .member(acquire, "num_permits", 48, usize_)
        .member(acquire, "queued", 56, bool_);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(acquire).expect("a target");
    assert_eq!(target.kind, TargetKind::Permits);
    let names: Vec<(&str, u32)> = target.parts.iter().map(|p| (&*p.name, p.offset)).collect();
    assert_eq!(names, [("wanted", 48), ("semaphore", 0)]);
    let sem_ty = &b.values.types[target.parts[1].ty as usize];
    let want = Shape::Semaphore {
        ptr: 0,
        permits: 32,
        tail: 16,
        node: 8,
        prev: 24,
    };
    assert_eq!(sem_ty.shape, want);
}

#[test]
fn a_leaf_no_rule_knows_has_no_target() {
    let mut t = Types::new();
    let s = t.structure("tokio::sync::task::Unknown", 8);
    let debug = t.build();
    assert!(Builder::new(&debug).target(s).is_none());
    // One a rule takes by name but whose fields it does not find declines too.
    let mut t = Types::new();
    let s = t.structure("tokio::sync::notify::Notified", 8);
    let debug = t.build();
    assert!(Builder::new(&debug).target(s).is_none());
}

/// tokio's `PollEvented<{io}>` (24 bytes), its file descriptor 16 bytes in, inside an `OwnedFd`
/// (inside std's `Socket` when `socket`).
fn evented(t: &mut Types, io: &str, socket: bool) -> u64 {
    let i32_ = t.base("i32", 4);
    let mut inner = t.structure("std::os::fd::owned::OwnedFd", 4);
    t.member(inner, "fd", 0, i32_);
    if socket {
        let owned = inner;
        inner = t.structure("std::sys::net::Socket", 4);
        t.member(inner, "__0", 0, owned);
    }
    let evented = t.structure(&format!("tokio::io::poll_evented::PollEvented<{io}>"), 24);
    t.member(evented, "io", 16, inner);
    evented
}

#[test]
fn a_read_waits_on_the_descriptor_of_what_it_reads() {
    let mut t = Types::new();
    let evented = evented(&mut t, "mio::net::tcp::stream::TcpStream", true);
    let stream = t.structure("tokio::net::tcp::stream::TcpStream", 24);
    t.member(stream, "io", 0, evented);
    let ptr = t.pointer("*mut tokio::net::tcp::stream::TcpStream", stream);
    let read = t.structure(
        "tokio::io::util::read::Read<tokio::net::tcp::stream::TcpStream>",
        24,
    );
    t.member(read, "reader", 0, ptr);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(read).expect("a target");
    assert_eq!(target.kind, TargetKind::Io { write: false });
    let fd = &b.values.types[target.parts[0].ty as usize];
    assert_eq!(fd.shape, Shape::Fd { ptr: 0, fd: 16 });
}

/// A bounded channel of `u64` as tokio lays it out: its batch semaphore 0x140 in (permits 32 bytes
/// into that), its bound at 0x168, `tx_count` at 0x170, `rx_closed` 24 bytes into `rx_fields` at
/// 0x120. Gives the `Arc` a channel end points at it through, and the batch semaphore.
fn bounded_channel(t: &mut Types) -> (u64, u64) {
    let usize_ = t.base("usize", 8);
    let bool_ = t.base("bool", 1);
    let batch = t.structure("tokio::sync::batch_semaphore::Semaphore", 40);
    t.member(batch, "permits", 32, usize_);
    let bounded = t.structure("tokio::sync::mpsc::bounded::Semaphore", 48);
    t.member(bounded, "semaphore", 0, batch)
        .member(bounded, "bound", 40, usize_);
    let rx_fields = t.structure("tokio::sync::mpsc::chan::RxFields<u64>", 32);
    t.member(rx_fields, "rx_closed", 24, bool_);
    let chan_name = "tokio::sync::mpsc::chan::Chan<u64, tokio::sync::mpsc::bounded::Semaphore>";
    let chan = t.structure(chan_name, 0x200);
    t.member(chan, "rx_fields", 0x120, rx_fields)
        .member(chan, "semaphore", 0x140, bounded)
        .member(chan, "tx_count", 0x170, usize_);
    let arc = super::value_tests::arc(t, "Chan<u64, bounded::Semaphore>", chan, 0x200);
    (arc, batch)
}

const CHANNEL: ChanLayout = ChanLayout {
    permits: 0x140 + 32,
    bound: Some(0x140 + 40),
    tx_count: 0x170,
    rx_closed: 0x120 + 24,
};

#[test]
fn a_receive_waits_on_the_channel_its_receiver_points_at() {
    let mut t = Types::new();
    let (arc, _) = bounded_channel(&mut t);
    let rx = t.structure("tokio::sync::mpsc::chan::Rx<u64, bounded::Semaphore>", 8);
    t.member(rx, "inner", 0, arc);
    let to_rx = t.pointer("*mut tokio::sync::mpsc::chan::Rx<u64>", rx);
    let closure = t.structure(
        "tokio::sync::mpsc::bounded::{impl#0}::recv::{async_fn#0}::{closure_env#0}<u64>",
        8,
    );
    t.member(closure, "_ref__self__chan", 0, to_rx);
    let poll_fn = t.structure(
        "core::future::poll_fn::PollFn<tokio::sync::mpsc::bounded::{impl#0}::recv::{async_fn#0}::{closure_env#0}<u64>>",
        8,
    );
    t.member(poll_fn, "f", 0, closure);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(poll_fn).expect("a target");
    assert_eq!(target.kind, TargetKind::Receive);
    let want = Shape::Channel {
        hops: vec![0, 0],
        data: 16,
        back: 0,
        layout: CHANNEL,
    };
    assert_eq!(b.values.types[target.parts[0].ty as usize].shape, want);
}

#[test]
fn a_semaphore_acquire_also_reads_the_channel_around_it_where_the_binary_has_bounded_ones() {
    let mut t = Types::new();
    let (_, sem) = bounded_channel(&mut t);
    let usize_ = t.base("usize", 8);
    let waiter = t.structure("tokio::sync::batch_semaphore::Waiter", 40);
    let u8_ = t.base("u8", 1);
    let raw = t.pointer("*const u8", u8_);
    t.member(waiter, "prev", 24, raw);
    let list = t.structure("tokio::util::linked_list::LinkedList<Waiter>", 16);
    t.member(list, "tail", 8, raw);
    t.member(sem, "waiters", 0, list);
    let sem_ptr = t.pointer("*const tokio::sync::batch_semaphore::Semaphore", sem);
    let acquire = t.structure("tokio::sync::batch_semaphore::Acquire", 64);
    t.member(acquire, "semaphore", 0, sem_ptr)
        .member(acquire, "node", 8, waiter)
        .member(acquire, "num_permits", 48, usize_);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(acquire).expect("a target");
    let channel = (target.parts.iter())
        .find(|p| &*p.name == "channel")
        .expect("a channel part");
    let want = Shape::Channel {
        hops: vec![0],
        data: 0,
        back: 0x140,
        layout: CHANNEL,
    };
    assert_eq!(b.values.types[channel.ty as usize].shape, want);
}

/// A tokio wait-list waiter: its links (`prev` 8 bytes into them) at `links`, and a `notification`
/// word at 32.
fn waiter(t: &mut Types, name: &str, links: u64) -> u64 {
    let (usize_, raw) = (t.base("usize", 8), t.pointer("*const u8", 0));
    let inner = t.structure("tokio::util::linked_list::PointersInner<Waiter>", 16);
    t.member(inner, "next", 0, raw)
        .member(inner, "prev", 8, raw);
    let pointers = t.structure("tokio::util::linked_list::Pointers<Waiter>", 16);
    t.member(pointers, "inner", 0, inner);
    let waiter = t.structure(name, 40);
    t.member(waiter, "pointers", links, pointers)
        .member(waiter, "notification", 32, usize_);
    waiter
}

#[test]
fn a_notified_waits_in_its_notifys_list_for_a_notification() {
    let mut t = Types::new();
    let usize_ = t.base("usize", 8);
    let raw = t.pointer("*const u8", usize_);
    let list = t.structure("tokio::util::linked_list::LinkedList<Waiter>", 16);
    t.member(list, "head", 0, raw).member(list, "tail", 8, raw);
    let notify = t.structure("tokio::sync::notify::Notify", 40);
    t.member(notify, "state", 0, usize_)
        .member(notify, "waiters", 16, list);
    let to_notify = t.pointer("&tokio::sync::notify::Notify", notify);
    let waiter = waiter(&mut t, "tokio::sync::notify::Waiter", 0);
    let notified = t.structure("tokio::sync::notify::Notified", 64);
    t.member(notified, "notify", 0, to_notify)
        .member(notified, "waiter", 16, waiter);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(notified).expect("a target");
    assert_eq!(target.kind, TargetKind::Notify);
    let want = Shape::Notify {
        ptr: 0,
        state: 0,
        tail: 24,
        node: 16,
        prev: 8,
        notification: 48,
    };
    assert_eq!(b.values.types[target.parts[0].ty as usize].shape, want);
}

fn word(name: &str, hops: &[u32], at: u32, size: u8) -> Word {
    Word {
        name: name.into(),
        hops: hops.to_vec(),
        at,
        size,
    }
}

fn words_of(b: &Builder<'_>, target: &TargetPlan) -> Vec<Word> {
    match part_shape(b, target) {
        Shape::Words { words } => words,
        other => panic!("{other:?}"),
    }
}

fn part_shape(b: &Builder<'_>, target: &TargetPlan) -> Shape {
    b.values.types[target.parts[0].ty as usize].shape.clone()
}

#[test]
fn a_broadcast_receive_inside_coop_reads_its_position_and_the_channels_tail() {
    let mut t = Types::new();
    let (u64_, bool_) = (t.base("u64", 8), t.base("bool", 1));
    let tail = t.structure("tokio::sync::broadcast::Tail", 48);
    t.member(tail, "pos", 0, u64_)
        .member(tail, "rx_cnt", 8, u64_)
        .member(tail, "closed", 16, bool_);
    let cell = t.structure("core::cell::UnsafeCell<Tail>", 48);
    t.member(cell, "value", 0, tail);
    let mutex = t.structure("std::sync::poison::mutex::Mutex<Tail>", 56);
    t.member(mutex, "data", 8, cell);
    let shared = t.structure("tokio::sync::broadcast::Shared<u64>", 96);
    t.member(shared, "mask", 16, u64_)
        .member(shared, "tail", 24, mutex)
        .member(shared, "num_tx", 80, u64_);
    let arc = super::value_tests::arc(&mut t, "Shared<u64>", shared, 96);
    let receiver = t.structure("tokio::sync::broadcast::Receiver<u64>", 16);
    t.member(receiver, "shared", 0, arc)
        .member(receiver, "next", 8, u64_);
    let to_receiver = t.pointer("&mut tokio::sync::broadcast::Receiver<u64>", receiver);
    let recv = t.structure("tokio::sync::broadcast::Recv<u64>", 48);
    t.member(recv, "receiver", 0, to_receiver);
    let coop = t.structure(
        "tokio::task::coop::Coop<tokio::sync::broadcast::Recv<u64>>",
        56,
    );
    t.member(coop, "fut", 8, recv);
    t.type_param(coop, "F", recv);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let target = b.target(coop).expect("a target, through the wrapper");
    assert_eq!(target.kind, TargetKind::Broadcast);
    assert_eq!(
        target.parts[0].offset, 8,
        "the receive is 8 bytes into Coop"
    );
    let data = 16 + 24 + 8;
    assert_eq!(
        words_of(&b, &target),
        [
            word("addr", &[0, 0], 16, 0),
            word("next", &[0], 8, 8),
            word("tail", &[0, 0], data, 8),
            word("receivers", &[0, 0], data + 8, 8),
            word("closed", &[0, 0], data + 16, 1),
            word("mask", &[0, 0], 16 + 16, 8),
            word("senders", &[0, 0], 16 + 80, 8),
        ]
    );
}

/// Suspend state 0 of a state machine `name` whose locals are `locals` (name, offset, type), and
/// what a frame rule plans for it.
fn frame_target(
    t: Types,
    name: &str,
    locals: &[(&str, u64, u64)],
) -> (Option<TargetPlan>, Option<Shape>) {
    let (target, types) = frame_target_types(t, name, locals);
    let shape = target
        .as_ref()
        .map(|t| types[t.parts[0].ty as usize].shape.clone());
    (target, shape)
}

/// The target a frame rule gives a state machine `name` suspended with `locals`, and every value
/// type the plan made for it.
fn frame_target_types(
    mut t: Types,
    name: &str,
    locals: &[(&str, u64, u64)],
) -> (Option<TargetPlan>, Vec<crate::plan::values::ValueType>) {
    let leaf = t.structure("tokio::sync::notify::Notified", 64);
    let sm = t.state_machine(
        &format!("{name}::{{async_fn_env#0}}"),
        256,
        250,
        &[(10, 128, leaf)],
    );
    let s = t.suspend_state(sm, 0);
    for &(local, at, ty) in locals {
        t.member(s, local, at, ty);
    }
    let debug = t.build();
    let machine = debug.machine(sm).expect("a state machine");
    let suspend = (machine.states.iter())
        .find(|s| s.name == "Suspend0")
        .expect("a suspend state");
    let mut b = Builder::new(&debug);
    let target = b.frame_target(&machine, name, suspend);
    (target, b.values.types)
}

#[test]
fn a_watch_change_reads_the_version_seen_and_the_watchs_state() {
    let mut t = Types::new();
    let usize_ = t.base("usize", 8);
    let shared = t.structure("tokio::sync::watch::Shared<u32>", 200);
    t.member(shared, "state", 40, usize_)
        .member(shared, "ref_count_rx", 48, usize_)
        .member(shared, "ref_count_tx", 56, usize_);
    let to_shared = t.pointer("&tokio::sync::watch::Shared<u32>", shared);
    let version = t.structure("tokio::sync::watch::state::Version", 8);
    let to_version = t.pointer("&mut tokio::sync::watch::state::Version", version);
    let locals = [("version", 16, to_version), ("shared", 24, to_shared)];
    let (target, shape) = frame_target(t, "tokio::sync::watch::changed_impl<u32>", &locals);
    let target = target.expect("a target");
    assert_eq!(target.kind, TargetKind::Watch);
    assert_eq!(target.parts[0].offset, 16, "from the first local it reads");
    assert_eq!(
        shape.expect("a shape"),
        Shape::Words {
            words: vec![
                word("addr", &[8], 0, 0),
                word("state", &[8], 40, 8),
                word("senders", &[8], 56, 8),
                word("seen", &[0], 0, 8),
            ]
        }
    );
    // A state that does not keep both locals has no target: nothing is guessed.
    let mut t = Types::new();
    let usize_ = t.base("usize", 8);
    let (target, _) = frame_target(
        t,
        "tokio::sync::watch::changed_impl<u32>",
        &[("version", 16, usize_)],
    );
    assert!(target.is_none());
}

#[test]
fn a_barrier_wait_reads_how_many_arrived_of_how_many() {
    let mut t = Types::new();
    let usize_ = t.base("usize", 8);
    let state = t.structure("tokio::sync::barrier::BarrierState", 24);
    t.member(state, "arrived", 8, usize_)
        .member(state, "generation", 16, usize_);
    let mutex = t.structure("tokio::loom::std::mutex::Mutex<BarrierState>", 32);
    t.member(mutex, "data", 8, state);
    let barrier = t.structure("tokio::sync::barrier::Barrier", 64);
    t.member(barrier, "state", 0, mutex)
        .member(barrier, "n", 56, usize_);
    let to_barrier = t.pointer("&tokio::sync::barrier::Barrier", barrier);
    let (target, shape) = frame_target(
        t,
        "tokio::sync::barrier::Barrier::wait_internal",
        &[("self", 32, to_barrier)],
    );
    let target = target.expect("a target");
    assert_eq!(
        (target.kind, target.parts[0].offset),
        (TargetKind::Barrier, 32)
    );
    assert_eq!(
        shape.expect("a shape"),
        Shape::Words {
            words: vec![
                word("addr", &[0], 0, 0),
                word("arrived", &[0], 16, 8),
                word("n", &[0], 56, 8),
            ]
        }
    );
}

#[test]
fn an_accept_waits_on_its_listeners_descriptor() {
    let mut t = Types::new();
    let evented = evented(&mut t, "mio::net::TcpListener", false);
    let listener = t.structure("tokio::net::tcp::listener::TcpListener", 24);
    t.member(listener, "io", 0, evented);
    let to_listener = t.pointer("&tokio::net::tcp::listener::TcpListener", listener);
    let (target, shape) = frame_target(
        t,
        "tokio::net::tcp::listener::TcpListener::accept",
        &[("self", 40, to_listener)],
    );
    let target = target.expect("a target");
    assert_eq!(
        (target.kind, target.parts[0].offset),
        (TargetKind::Accept, 40)
    );
    assert_eq!(&*target.parts[0].name, "fd");
    assert_eq!(shape, Some(Shape::Fd { ptr: 0, fd: 16 }));
}

/// `Interval::tick` awaits a `poll_fn` that says nothing; its `self` leads to the interval, whose
/// boxed `Sleep` (`delay: Pin<Box<Sleep>>`) keeps the next tick's deadline: read through both
/// pointers, as a sleep's.
#[test]
fn an_interval_tick_waits_for_the_deadline_of_the_sleep_it_keeps_boxed() {
    let mut t = Types::new();
    let sleep = tokio_sleep(&mut t);
    let to_sleep = t.pointer("*const tokio::time::sleep::Sleep", sleep);
    let boxed = t.structure("alloc::boxed::Box<tokio::time::sleep::Sleep>", 8);
    t.member(boxed, "__0", 0, to_sleep);
    let pinned = t.structure("core::pin::Pin<Box<Sleep>>", 8);
    t.member(pinned, "pointer", 0, boxed);
    let interval = t.structure("tokio::time::interval::Interval", 32);
    t.member(interval, "delay", 24, pinned);
    let to_interval = t.pointer("&mut tokio::time::interval::Interval", interval);
    let (target, types) = frame_target_types(
        t,
        "tokio::time::interval::Interval::tick",
        &[("self", 48, to_interval)],
    );
    let target = target.expect("a target");
    assert_eq!(
        (target.kind, &*target.parts[0].name, target.parts[0].offset),
        (TargetKind::Sleep, "deadline", 48)
    );
    // self → the interval; its box at 24 → the sleep; its deadline at 40 (16 + 24), an instant.
    let shape = |t: u32| types[t as usize].shape.clone();
    let follow = |t: u32| match shape(t) {
        Shape::Pointer { to, .. } => to,
        other => panic!("a pointer: {other:?}"),
    };
    let field = |t: u32| match shape(t) {
        Shape::Struct { fields, .. } => (fields[0].offset, fields[0].ty),
        other => panic!("a structure: {other:?}"),
    };
    let (delay, boxed) = field(follow(target.parts[0].ty));
    let (deadline, instant) = field(follow(boxed));
    assert_eq!((delay, deadline), (24, 40));
    assert_eq!(shape(instant), Shape::Instant { secs: 0, nanos: 8 });
}
