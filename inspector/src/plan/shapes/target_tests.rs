//! One spec per wait-target rule, on type descriptions made by hand.

use crate::dwarf::synthetic::Types;
use crate::plan::builder::Builder;
use crate::plan::values::{ChanLayout, Shape, TargetKind};

#[test]
fn a_sleep_waits_for_its_deadline() {
    let mut t = Types::new();
    let ts = super::value_tests::timespec(&mut t);
    let instant = t.structure("tokio::time::instant::Instant", 16);
    t.member(instant, "std", 0, ts);
    let entry = t.structure("tokio::runtime::time::entry::TimerEntry", 40);
    t.member(entry, "deadline", 24, instant);
    let sleep = t.structure("tokio::time::sleep::Sleep", 64);
    t.member(sleep, "entry", 16, entry);
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
    let s = t.structure("tokio::sync::notify::Notified", 8);
    let debug = t.build();
    assert!(Builder::new(&debug).target(s).is_none());
}

#[test]
fn a_read_waits_on_the_descriptor_of_what_it_reads() {
    let mut t = Types::new();
    let i32_ = t.base("i32", 4);
    let owned = t.structure("std::os::fd::owned::OwnedFd", 4);
    t.member(owned, "fd", 0, i32_);
    let socket = t.structure("std::sys::net::Socket", 4);
    t.member(socket, "__0", 0, owned);
    let evented = t.structure(
        "tokio::io::poll_evented::PollEvented<mio::net::tcp::stream::TcpStream>",
        24,
    );
    t.member(evented, "io", 16, socket);
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
