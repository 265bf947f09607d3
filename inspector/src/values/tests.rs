//! The values stage over memory held here: what is read, what is bounded, and what a torn or bad
//! read shows instead of a value.

use std::sync::Arc;

use asyncdump_walker::memory::ImageMemory;

use super::{MAX_DEPTH, MAX_TEXT, read_locals};
use crate::model::values::{Check, Local, PointerKind, Value};
use crate::model::{Dump, FrameInfo, FrameNode, Source};
use crate::plan::values::{FieldShape, Shape, ValueType, ValueTypes};

/// The frame's state byte, which each local's check expects to read as 3.
const STATE: u64 = 0x1000;

fn ty(name: &str, size: u32, shape: Shape) -> ValueType {
    ValueType {
        name: name.into(),
        size,
        shape,
    }
}

/// Types: 0 `u64`, 1 `String` (pointer at 0, length at 8), 2 `Vec<u64>`, 3 `bool`, 4 `Box<Node>`
/// where 5 `Node { value: u64, next: Box<Node> }`.
fn types() -> ValueTypes {
    ValueTypes::new(vec![
        ty("u64", 8, Shape::Int { signed: false }),
        ty("String", 24, Shape::Str { ptr: 0, len: 8 }),
        ty(
            "Vec<u64>",
            24,
            Shape::Seq {
                ptr: 0,
                len: 8,
                elem: 0,
                stride: 8,
            },
        ),
        ty("bool", 1, Shape::Bool),
        ty(
            "Box<Node>",
            8,
            Shape::Pointer {
                kind: PointerKind::Box,
                to: 5,
            },
        ),
        ty(
            "Node",
            16,
            Shape::Struct {
                fields: vec![
                    FieldShape {
                        name: "value".into(),
                        offset: 0,
                        ty: 0,
                    },
                    FieldShape {
                        name: "next".into(),
                        offset: 8,
                        ty: 4,
                    },
                ],
                tuple: false,
            },
        ),
    ])
}

/// Reads one local of type `shape` at `addr` from `mem` (whose state byte is at [`STATE`]).
fn read_one(mem: &ImageMemory, shape: u32, addr: u64) -> Value {
    let check = Check {
        addr: STATE,
        size: 1,
        expected: 3,
    };
    let local = Local::new("x", "", Value::Unread { shape, addr, check });
    let mut frame = FrameNode::cut(0);
    frame.meta = Arc::new(FrameInfo::new("f".into(), None, Source::Decoded));
    frame.locals = vec![local];
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    dump.tasks.truncate(1);
    dump.tasks[0].frames = Arc::new(vec![frame]);
    read_locals(&mut dump, &types(), mem, None);
    dump.tasks[0].frames[0].locals[0].value.clone()
}

fn memory(regions: &[(u64, Vec<u8>)]) -> ImageMemory {
    let mut m = ImageMemory::new();
    assert!(m.insert(STATE, vec![3]));
    for (at, bytes) in regions {
        assert!(m.insert(*at, bytes.clone()));
    }
    m
}

/// An `Arc` to type `to`, as std lays out its shared block: the counts, then the value.
fn arc_to(to: u32) -> Shape {
    Shape::Counted {
        kind: PointerKind::Arc,
        ptr: 0,
        strong: 0,
        weak: 8,
        data: 16,
        to,
    }
}

fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn a_string_is_read_to_its_length_and_no_further_than_the_cap() {
    let text = "x".repeat(MAX_TEXT * 2);
    let mem = memory(&[
        (0x2000, words(&[0x3000, 5, 5])),
        (0x3000, text.clone().into_bytes()),
    ]);
    assert_eq!(
        read_one(&mem, 1, 0x2000),
        Value::Str {
            text: "xxxxx".into(),
            len: 5
        }
    );
    // A length of a terabyte reads MAX_TEXT bytes, and says how long it claims to be.
    let mem = memory(&[
        (0x2000, words(&[0x3000, 1 << 40, 0])),
        (0x3000, text.into_bytes()),
    ]);
    let Value::Str { text, len } = read_one(&mem, 1, 0x2000) else {
        panic!()
    };
    assert_eq!((text.len(), len), (MAX_TEXT, 1 << 40));
}

#[test]
fn a_sequence_shows_its_length_and_first_items() {
    let items: Vec<u64> = (1..=100).collect();
    let mem = memory(&[
        (0x2000, words(&[0x3000, 100, 100])),
        (0x3000, words(&items)),
    ]);
    let Value::Seq { len, items } = read_one(&mem, 2, 0x2000) else {
        panic!()
    };
    assert_eq!(len, 100);
    assert_eq!(items, (1..=8).map(Value::Uint).collect::<Vec<_>>());
}

#[test]
fn a_frame_whose_state_moved_while_read_shows_changed_not_a_torn_value() {
    let mut mem = ImageMemory::new();
    assert!(mem.insert(STATE, vec![4]));
    assert!(mem.insert(0x2000, words(&[7])));
    assert_eq!(read_one(&mem, 0, 0x2000), Value::Changed);
}

#[test]
fn a_pointer_to_memory_that_is_not_there_is_unreadable() {
    let mem = memory(&[(0x2000, words(&[0xdead_0000, 5, 5]))]);
    assert_eq!(read_one(&mem, 1, 0x2000), Value::Unreadable);
    // And a local whose own bytes are gone.
    assert_eq!(read_one(&mem, 0, 0x9000), Value::Unreadable);
}

#[test]
fn bytes_that_are_no_value_of_the_type_are_unreadable_not_guessed() {
    let mem = memory(&[
        (0x2000, vec![7]),
        (0x2100, words(&[0x3000, 2, 2])),
        (0x3000, vec![0xff, 0xfe]),
    ]);
    assert_eq!(read_one(&mem, 3, 0x2000), Value::Unreadable);
    assert_eq!(read_one(&mem, 1, 0x2100), Value::Unreadable);
}

#[test]
fn a_list_that_points_at_itself_is_followed_only_to_the_depth_limit() {
    // Node at 0x3000: value 1, next → itself.
    let mem = memory(&[(0x2000, words(&[0x3000])), (0x3000, words(&[1, 0x3000]))]);
    let mut v = read_one(&mem, 4, 0x2000);
    let mut depth = 0;
    loop {
        match v {
            Value::Pointer { to, .. } => v = *to,
            Value::Struct { mut fields, .. } => v = fields.remove(1).value,
            Value::Cut => break,
            other => panic!("{other:?}"),
        }
        depth += 1;
    }
    assert!(depth <= 2 * (MAX_DEPTH + 1), "{depth}");
}

/// A semaphore acquire at 0x2000 (its semaphore pointer at 0, its node at 8), the semaphore at
/// 0x5000 (permits word at 0, the wait list's tail at 8), each waiter's `prev` at 0 of it: the
/// semaphore type is number 6.
fn semaphore_types() -> ValueTypes {
    let mut t = types();
    let shape = Shape::Semaphore {
        ptr: 0,
        permits: 0,
        tail: 8,
        node: 8,
        prev: 0,
    };
    t.types.push(ty("Semaphore", 16, shape));
    t
}

fn read_with(types: &ValueTypes, mem: &ImageMemory, shape: u32, addr: u64) -> Value {
    let check = Check::default();
    let local = Local::new("s", "", Value::Unread { shape, addr, check });
    let mut frame = FrameNode::cut(0);
    frame.locals = vec![local];
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    dump.tasks.truncate(1);
    dump.tasks[0].frames = Arc::new(vec![frame]);
    read_locals(&mut dump, types, mem, None);
    dump.tasks[0].frames[0].locals[0].value.clone()
}

/// The fields of a semaphore's value, by name.
fn fields(v: &Value) -> Vec<(String, Value)> {
    let Value::Struct { fields, .. } = v else {
        panic!("{v:?}")
    };
    fields
        .iter()
        .map(|f| (f.name.to_string(), f.value.clone()))
        .collect()
}

#[test]
fn a_waiter_knows_its_place_counted_from_the_tail_and_the_queues_length() {
    // Tail 0x6000 → prev 0x2008 (this acquire's node) → prev 0x7000 → null: 3 waiting, this 2nd.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0x7000])),
        (0x5000, words(&[4 << 1, 0x6000])),
        (0x6000, words(&[0x2008])),
        (0x7000, words(&[0])),
    ]);
    let f = fields(&read_with(&semaphore_types(), &mem, 6, 0x2000));
    assert!(f.contains(&("available".into(), Value::Uint(4))));
    assert!(f.contains(&("closed".into(), Value::Bool(false))));
    assert!(f.contains(&("queued".into(), Value::Uint(3))));
    assert!(f.contains(&("position".into(), Value::Uint(2))));
    assert!(f.contains(&("more".into(), Value::Bool(false))));
}

/// Memory that counts the words it is asked to follow a list through, one by one.
struct Chasing<'a> {
    mem: &'a ImageMemory,
    steps: std::cell::Cell<usize>,
}

impl asyncdump_walker::memory::Memory for Chasing<'_> {
    fn read_many(
        &self,
        reads: &mut [asyncdump_walker::memory::Read<'_>],
    ) -> Result<(), asyncdump_walker::memory::Unreadable> {
        self.mem.read_many(reads)
    }

    fn chase_all(&self, lists: &[(u64, u32, usize)]) -> Vec<asyncdump_walker::memory::Chased> {
        let chased = self.mem.chase_all(lists);
        let steps: usize = chased.iter().map(|c| c.nodes.len() + 1).sum();
        self.steps.set(self.steps.get() + steps);
        chased
    }
}

#[test]
fn a_queue_of_waiters_read_as_values_is_followed_through_their_own_bytes() {
    // Three acquires (at 0x2000, 0x2100, 0x2200, each node 8 bytes in) wait on the semaphore at
    // 0x5000, whose tail is the first's node; each node's `prev` leads to the next, the third's
    // to a waiter that is no value read here (0x7000), and that one's to none.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0x2108])),
        (0x2100, words(&[0x5000, 0x2208])),
        (0x2200, words(&[0x5000, 0x7000])),
        (0x5000, words(&[0, 0x2008])),
        (0x7000, words(&[0])),
    ]);
    let mut dump = one_frame(6, &[0x2000, 0x2100, 0x2200]);
    let chasing = Chasing {
        mem: &mem,
        steps: Default::default(),
    };
    read_locals(&mut dump, &semaphore_types(), &chasing, None);
    for (i, l) in dump.tasks[0].frames[0].locals.iter().enumerate() {
        let f = fields(&l.value);
        assert!(f.contains(&("queued".into(), Value::Uint(4))), "{f:?}");
        assert!(
            f.contains(&("position".into(), Value::Uint(i as u64 + 1))),
            "{f:?}"
        );
    }
    assert_eq!(
        chasing.steps.get(),
        1,
        "one word followed in memory: the `prev` of the waiter no value holds, which ends the list"
    );
}

#[test]
fn a_wait_list_that_loops_is_counted_only_to_the_bound() {
    // 0x6000 ↔ 0x7000 forever, as a list torn mid-change could read.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0])),
        (0x5000, words(&[1, 0x6000])),
        (0x6000, words(&[0x7000])),
        (0x7000, words(&[0x6000])),
    ]);
    let f = fields(&read_with(&semaphore_types(), &mem, 6, 0x2000));
    assert!(f.contains(&("queued".into(), Value::Uint(super::MAX_QUEUE))));
    assert!(f.contains(&("more".into(), Value::Bool(true))));
    assert!(f.contains(&("closed".into(), Value::Bool(true))));
    assert!(!f.iter().any(|(n, _)| n == "position"));
}

#[test]
fn a_bad_pointer_read_beside_good_ones_fails_alone() {
    // Two strings in one page, one of whose text pointer leads nowhere: the other still reads.
    // Memory holds 0x3000.. but not 0x3ff0, in the same page: a read merged over both fails whole.
    let mem = memory(&[
        (0x2000, words(&[0x3000, 2, 2])),
        (0x2018, words(&[0x3ff0, 2, 2])),
        (0x3000, b"ok".to_vec()),
    ]);
    let got = two_strings(&mem, [0x2000, 0x2018]);
    assert_eq!(
        got,
        [
            Value::Str {
                text: "ok".into(),
                len: 2
            },
            Value::Unreadable
        ]
    );
}

/// [`types`], then 6 a `MutexGuard` (its lock's pointer at 0, the semaphore 8 bytes into the lock),
/// 7 a future held as a value (its state byte at 8; in state 4, `Suspend1`, stopped at line 40, it
/// holds guard `entry` at 0, taken at line 13), 8 a `Box` of the guard, 9 an `Arc` of it.
fn guard_types() -> ValueTypes {
    use crate::plan::values::VariantShape;
    let at = |line| crate::model::Loc {
        file: "src/app.rs".into(),
        line,
        column: 0,
    };
    let mut t = types();
    let guard = Shape::Guard {
        ptr: 0,
        sem: 8,
        lock: "Mutex".into(),
        write: false,
    };
    t.types.push(ty("MutexGuard<u64>", 8, guard));
    let future = Shape::Enum {
        discr: Some(asyncdump_protocol::Discr { offset: 8, size: 1 }),
        variants: vec![VariantShape {
            value: Some(4),
            name: "Suspend1".into(),
            at: Some(at(40)),
            acquired: vec![("entry".into(), at(13))],
            fields: vec![FieldShape {
                name: "entry".into(),
                offset: 0,
                ty: 6,
            }],
        }],
        bare: false,
    };
    t.types.push(ty("{async_block_env#0}", 16, future));
    let boxed = Shape::Pointer {
        kind: PointerKind::Box,
        to: 6,
    };
    t.types.push(ty("Box<MutexGuard<u64>>", 8, boxed));
    t.types.push(ty("Arc<MutexGuard<u64>>", 8, arc_to(6)));
    t
}

#[test]
fn a_guard_reads_as_its_locks_semaphore_and_inside_a_future_says_which_and_where() {
    let types = guard_types();
    let mut state = words(&[0x5000]);
    state.extend([4, 0, 0, 0, 0, 0, 0, 0]);
    let mem = memory(&[(0x2000, state)]);
    let Value::Variant { name, fields } = read_with(&types, &mem, 7, 0x2000) else {
        panic!("not a variant")
    };
    assert_eq!(&*name, "Suspend1");
    let Value::Guard {
        addr,
        within,
        acquired_at,
        ..
    } = &fields[0].value
    else {
        panic!("{:?}", fields[0].value)
    };
    assert_eq!(*addr, 0x5008);
    let within = within.as_ref().expect("inside the future");
    assert_eq!(
        (within.addr, within.stopped_at.as_ref().map(|l| l.line)),
        (0x2000, Some(40))
    );
    assert_eq!(acquired_at.as_ref().map(|l| l.line), Some(13));
    // A guard that is the local itself lies in no future.
    let Value::Guard { within, .. } = read_with(&types, &mem, 6, 0x2000) else {
        panic!("not a guard")
    };
    assert!(within.is_none());
}

#[test]
fn what_may_hold_a_guard_is_read_for_the_wait_graph_and_a_shared_pointer_is_not() {
    let types = guard_types();
    let holds: Vec<u32> = (0..types.types.len() as u32)
        .filter(|&t| types.may_hold(t))
        .collect();
    assert_eq!(
        holds,
        [6, 7, 8],
        "the guard, the future holding it, its box; not its Arc"
    );
}

/// A bounded channel at 0x3000 reached from a leaf at 0x2000 through two pointers (the leaf's word
/// at 0 to 0x2800, whose word at 0 is 0x2ff0, the channel 16 bytes past it): permits at 0, bound at
/// 8, `tx_count` at 16, `rx_closed` at 24.
fn channel_at(permits: u64, rx_closed: u8) -> (ValueTypes, ImageMemory) {
    let layout = crate::plan::values::ChanLayout {
        permits: 0,
        bound: Some(8),
        tx_count: 16,
        rx_closed: 24,
    };
    let shape = Shape::Channel {
        hops: vec![0, 0],
        data: 16,
        back: 0,
        layout,
    };
    let mut t = types();
    t.types.push(ty("channel", 8, shape));
    let mut chan = words(&[permits, 4, 2]);
    chan.push(rx_closed);
    let mem = memory(&[
        (0x2000, words(&[0x2800])),
        (0x2800, words(&[0x2ff0])),
        (0x3000, chan),
    ]);
    (t, mem)
}

#[test]
fn a_channel_says_its_capacity_what_is_queued_its_senders_and_its_receiver() {
    // One free slot of four (the permit word shifted left one, the low bit `closed`).
    let (types, mem) = channel_at(1 << 1, 0);
    let v = read_with(&types, &mem, 6, 0x2000);
    let want = [
        ("addr", Value::Address(0x3000)),
        ("capacity", Value::Uint(4)),
        ("queued", Value::Uint(3)),
        ("senders", Value::Uint(2)),
        ("receiver_alive", Value::Bool(true)),
    ];
    let got = fields(&v);
    let got: Vec<(&str, Value)> = got.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    assert_eq!(got, want);
    let (types, mem) = channel_at(0, 1);
    let closed = fields(&read_with(&types, &mem, 6, 0x2000));
    assert_eq!(closed[4], ("receiver_alive".to_owned(), Value::Bool(false)));
    // A flag that is no bool is no channel: nothing is guessed.
    let (types, mem) = channel_at(0, 7);
    assert_eq!(read_with(&types, &mem, 6, 0x2000), Value::Unreadable);
}

#[test]
fn a_channel_whose_parts_lie_past_any_real_channel_is_unreadable_not_read() {
    let (mut types, mem) = channel_at(0, 0);
    let Shape::Channel { layout, .. } = &mut types.types[6].shape else {
        panic!("the channel type")
    };
    // As a damaged plan cache could give it: 4 GiB to read.
    layout.rx_closed = u32::MAX;
    let local = Local::new(
        "channel",
        "",
        Value::Unread {
            shape: 6,
            addr: 0x2000,
            check: Check::default(),
        },
    );
    let mut frame = FrameNode::cut(0);
    frame.locals = vec![local];
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    dump.tasks.truncate(1);
    dump.tasks[0].frames = Arc::new(vec![frame]);
    let read = read_locals(&mut dump, &types, &mem, None);
    assert_eq!(dump.tasks[0].frames[0].locals[0].value, Value::Unreadable);
    assert!(read.bytes < 4096, "{} bytes asked for", read.bytes);
}

/// A `Notified` at 0x2000 (its `Notify` pointer at 0, its waiter node at 8, the waiter's
/// notification word at 24), its `Notify` at 0x5000 (state at 0, the wait list's tail at 8), each
/// waiter's `prev` at 0 of it: type number 6.
fn notify_types() -> ValueTypes {
    let mut t = types();
    let shape = Shape::Notify {
        ptr: 0,
        state: 0,
        tail: 8,
        node: 8,
        prev: 0,
        notification: 24,
    };
    t.types.push(ty("Notify", 32, shape));
    t
}

#[test]
fn a_notify_waiter_knows_its_place_and_whether_it_was_notified() {
    // Waiting (state 1, two `notify_waiters` calls above it), 2 in the list, this one first:
    // the tail is its node, whose `prev` is the other.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0x7000, 0, 0])),
        (0x5000, words(&[(2 << 2) | 1, 0x2008])),
        (0x7000, words(&[0])),
    ]);
    let f = fields(&read_with(&notify_types(), &mem, 6, 0x2000));
    assert!(f.contains(&("addr".into(), Value::Address(0x5000))));
    let waiting = Value::Str {
        text: "waiting".into(),
        len: 7,
    };
    assert!(f.contains(&("state".into(), waiting)));
    assert!(f.contains(&("notified".into(), Value::Bool(false))));
    assert!(f.contains(&("queued".into(), Value::Uint(2))));
    assert!(f.contains(&("position".into(), Value::Uint(1))));
    // Notified (by `notify_one`) and out of the list: no place in it.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0, 0, 1])),
        (0x5000, words(&[0, 0])),
    ]);
    let f = fields(&read_with(&notify_types(), &mem, 6, 0x2000));
    assert!(f.contains(&("notified".into(), Value::Bool(true))));
    assert!(f.contains(&("queued".into(), Value::Uint(0))));
    assert!(!f.iter().any(|(n, _)| n == "position"));
    // A state no `Notify` has is no value.
    let mem = memory(&[
        (0x2000, words(&[0x5000, 0, 0, 0])),
        (0x5000, words(&[3, 0])),
    ]);
    assert_eq!(
        read_with(&notify_types(), &mem, 6, 0x2000),
        Value::Unreadable
    );
}

/// Words through pointers: type number 6, over a value at 0x2000 whose pointer at 8 leads to a
/// block whose pointer at 16 leads to another.
fn words_types() -> ValueTypes {
    use crate::plan::values::Word;
    let w = |name: &str, hops: Vec<u32>, at, size| Word {
        name: name.into(),
        hops,
        at,
        size,
    };
    let mut t = types();
    let shape = Shape::Words {
        words: vec![
            w("own", vec![], 0, 4),
            w("addr", vec![8], 0, 0),
            w("near", vec![8], 8, 8),
            w("far", vec![8, 16], 4, 1),
        ],
    };
    t.types.push(ty("watch", 16, shape));
    t
}

#[test]
fn chosen_words_are_read_through_their_pointers() {
    let mem = memory(&[
        (0x2000, words(&[7, 0x5000])),
        (0x5000, words(&[0, 42, 0x6000])),
        (0x6000, vec![0, 0, 0, 0, 9, 0, 0, 0]),
    ]);
    let f = fields(&read_with(&words_types(), &mem, 6, 0x2000));
    assert_eq!(
        f,
        [
            ("own".into(), Value::Uint(7)),
            ("addr".into(), Value::Address(0x5000)),
            ("near".into(), Value::Uint(42)),
            ("far".into(), Value::Uint(9)),
        ]
    );
    // A pointer on the way that leads nowhere: the whole value is unreadable, not half of it.
    let mem = memory(&[
        (0x2000, words(&[7, 0x5000])),
        (0x5000, words(&[0, 42, 0x9000])),
    ]);
    assert_eq!(
        read_with(&words_types(), &mem, 6, 0x2000),
        Value::Unreadable
    );
}

/// A dump of one task of one frame, with a local of type `shape` at each of `addrs`, unread and
/// with no state to check.
fn one_frame(shape: u32, addrs: &[u64]) -> Dump {
    let check = Check::default();
    let mut frame = FrameNode::cut(0);
    frame.locals = (addrs.iter())
        .map(|&addr| Local::new("s", "", Value::Unread { shape, addr, check }))
        .collect();
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    dump.tasks.truncate(1);
    dump.tasks[0].frames = Arc::new(vec![frame]);
    dump
}

/// Reads two `String` locals at `addrs` from `mem`: their values.
fn two_strings(mem: &ImageMemory, addrs: [u64; 2]) -> Vec<Value> {
    let mut dump = one_frame(1, &addrs);
    read_locals(&mut dump, &types(), mem, None);
    (dump.tasks[0].frames[0].locals.iter())
        .map(|l| l.value.clone())
        .collect()
}

#[test]
fn a_merged_read_that_failed_leaves_what_lay_between_its_values_unread_not_unreadable() {
    // Two strings at either end of a page, the first one's text in the middle of it, and nothing
    // between them (as where a run spans an unmapped page): the read over both fails, each is read
    // alone, and the text, in the failed read's span, is read then.
    let mem = memory(&[
        (0x2000, words(&[0x2800, 2, 2])),
        (0x2800, b"in".to_vec()),
        (0x2f00, words(&[0x9000, 3, 3])),
        (0x9000, b"out".to_vec()),
    ]);
    let got = two_strings(&mem, [0x2000, 0x2f00]);
    assert_eq!(got, [Value::text("in"), Value::text("out")]);
}

#[test]
fn many_words_through_one_pointer_take_its_rounds_not_one_round_each() {
    // Seven words through one pointer, each on a page of its own (no read of one brings another
    // along): more words than there are rounds.
    use crate::plan::values::Word;
    let far = |k: u32| Word {
        name: format!("w{k}").into(),
        hops: vec![8],
        at: k * 0x1000,
        size: 8,
    };
    let mut types = types();
    let words_of = Shape::Words {
        words: (0..7).map(far).collect(),
    };
    types.types.push(ty("broadcast", 16, words_of));
    let mut regions = vec![(0x2000, words(&[0, 0x10_0000]))];
    regions.extend((0..7u64).map(|k| (0x10_0000 + k * 0x1000, words(&[100 + k]))));
    let f = fields(&read_with(&types, &memory(&regions), 6, 0x2000));
    let want: Vec<(String, Value)> = (0..7)
        .map(|k| (format!("w{k}"), Value::Uint(100 + k)))
        .collect();
    assert_eq!(f, want);
}

#[test]
fn every_hop_on_a_page_of_its_own_is_still_read_whole() {
    // Each value reached through pointers, each block on a page of its own and far from the
    // others: no read of one brings the next along, so each hop must be asked for in its round.
    let far = |k: u64| k * 0x10_0000;
    // A channel two pointers away (the leaf's word to a block, its word to the channel's base, the
    // channel 16 bytes past it, on the next page).
    let (chan_types, _) = channel_at(1 << 1, 0);
    let mut chan = words(&[1 << 1, 4, 2]);
    chan.push(0);
    let mem = memory(&[
        (0x2000, words(&[far(1)])),
        (far(1), words(&[far(2) + 0xff0])),
        (far(2) + 0x1000, chan),
    ]);
    let got = fields(&read_with(&chan_types, &mem, 6, 0x2000));
    let want = [
        ("addr", Value::Address(far(2) + 0x1000)),
        ("capacity", Value::Uint(4)),
        ("queued", Value::Uint(3)),
        ("senders", Value::Uint(2)),
        ("receiver_alive", Value::Bool(true)),
    ];
    let want: Vec<(String, Value)> = want.into_iter().map(|(n, v)| (n.into(), v)).collect();
    assert_eq!(got, want, "the channel");
    // An `Arc<String>`: the local's pointer to the shared block (counts, then the string), the
    // string's pointer to its text.
    let mut arc_types = types();
    arc_types.types.push(ty("Arc<String>", 8, arc_to(1)));
    let mem = memory(&[
        (0x2000, words(&[far(1)])),
        (far(1), words(&[2, 1, far(2), 5, 5])),
        (far(2), b"hello".to_vec()),
    ]);
    let want = Value::Pointer {
        kind: PointerKind::Arc,
        addr: far(1),
        strong: Some(2),
        weak: Some(1),
        to: Box::new(Value::text("hello")),
    };
    assert_eq!(read_with(&arc_types, &mem, 6, 0x2000), want, "the Arc");
    // A descriptor: the I/O object's pointer to its registration, the descriptor 12 bytes in.
    let mut fd_types = types();
    fd_types
        .types
        .push(ty("PollEvented", 8, Shape::Fd { ptr: 0, fd: 12 }));
    let mut registration = vec![0u8; 12];
    registration.extend(7i32.to_le_bytes());
    let mem = memory(&[(0x2000, words(&[far(1)])), (far(1), registration)]);
    assert_eq!(
        read_with(&fd_types, &mem, 6, 0x2000),
        Value::Int(7),
        "the fd"
    );
}

proptest::proptest! {
    #[test]
    fn an_ipv4_socket_address_reads_as_the_standard_library_writes_it(
        octets in proptest::prelude::any::<[u8; 4]>(),
        port in proptest::prelude::any::<u16>(),
    ) {
        // Bytes as a plan may place them: the port (native order) at 2, the address at 4.
        let mut b = [0u8; 16];
        b[2..4].copy_from_slice(&port.to_ne_bytes());
        b[4..8].copy_from_slice(&octets);
        let want = std::net::SocketAddrV4::new(octets.into(), port).to_string();
        proptest::prop_assert_eq!(super::decode::socket(&b, false, 4, 2), Some(Value::SocketAddr(want)));
    }
}

#[test]
fn a_dump_of_many_frames_is_read_in_groups_each_frame_whole_and_a_queue_shared_across_them() {
    // `GROUP` frames of two or three locals each (more than two groups of them): frame `i` has its state
    // byte at its start, then `i` (u64), then a `String` of text "s{i:04}", read through its
    // pointer. Every 1,000th frame has moved on. The first and the last each wait on the same
    // semaphore at 0x5000, the last one's node at the tail, the first one's before it.
    let frames = super::GROUP as u64;
    let base = |i: u64| 0x10_0000 + i * 0x100;
    let text = |i: u64| 0x100_0000 + i * 0x10;
    let node = |i: u64| base(i) + 0x40 + 8;
    let moved = |i: u64| i % 1000 == 999;
    let mut mem = ImageMemory::new();
    assert!(mem.insert(0x5000, words(&[4 << 1, node(frames - 1)])));
    let types = semaphore_types();
    let mut nodes = Vec::new();
    for i in 0..frames {
        let mut bytes = vec![0u8; 0x60];
        bytes[0] = if moved(i) { 4 } else { 3 };
        bytes[0x10..0x18].copy_from_slice(&i.to_le_bytes());
        bytes[0x20..0x38].copy_from_slice(&words(&[text(i), 5, 5]));
        // The last one's node follows to the first one's, which ends the list.
        let prev = if i == frames - 1 { node(0) } else { 0 };
        bytes[0x40..0x50].copy_from_slice(&words(&[0x5000, prev]));
        assert!(mem.insert(base(i), bytes));
        assert!(mem.insert(text(i), format!("s{i:04}").into_bytes()));
        let check = Check {
            addr: base(i),
            size: 1,
            expected: 3,
        };
        let local = |name: &str, shape: u32, at: u64| {
            Local::new(
                name,
                "",
                Value::Unread {
                    shape,
                    addr: base(i) + at,
                    check,
                },
            )
        };
        let mut frame = FrameNode::cut(0);
        frame.locals = vec![local("n", 0, 0x10), local("s", 1, 0x20)];
        if i == 0 || i == frames - 1 {
            frame.locals.push(local("acquire", 6, 0x40));
        }
        nodes.push(frame);
    }
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    dump.tasks.truncate(1);
    dump.tasks[0].frames = Arc::new(nodes);
    let read = read_locals(&mut dump, &types, &mem, None);
    assert_eq!(read.locals, 2 * frames as usize + 2);
    assert_eq!(
        read.changed_frames,
        (0..frames).filter(|&i| moved(i)).count()
    );
    for (i, f) in (0..frames).zip(dump.tasks[0].frames.iter()) {
        let values: Vec<&Value> = f.locals.iter().map(|l| &l.value).collect();
        if moved(i) {
            assert!(values.iter().all(|v| **v == Value::Changed), "frame {i}");
            continue;
        }
        assert_eq!(values[0], &Value::Uint(i), "frame {i}");
        assert_eq!(values[1], &Value::text(format!("s{i:04}")), "frame {i}");
    }
    let place = |i: usize| {
        let f = fields(&dump.tasks[0].frames[i].locals[2].value);
        let at = |name: &str| f.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        (at("queued"), at("position"))
    };
    let (first, last) = (place(0), place(frames as usize - 1));
    assert_eq!(
        (first.0.clone(), last.0.clone()),
        (Some(Value::Uint(2)), Some(Value::Uint(2)))
    );
    assert_eq!(
        (first.1, last.1),
        (Some(Value::Uint(2)), Some(Value::Uint(1)))
    );
}

#[test]
fn reading_names_the_tasks_the_stages_after_it_look_at_and_only_those() {
    use crate::model::values::{WaitKind, WaitOn};
    let unread = |shape| Value::Unread {
        shape,
        addr: 0x2000,
        check: Check::default(),
    };
    let waiting = |kind| {
        Box::new(WaitOn {
            kind,
            parts: vec![Local::new("fd", "i32", unread(0))],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        })
    };
    let mut with_local = FrameNode::cut(0);
    with_local.locals = vec![Local::new("n", "u64", unread(0))];
    let mut reading = FrameNode::cut(0);
    reading.waits_on = Some(waiting(WaitKind::Io { write: false }));
    let mut sleeping = FrameNode::cut(0);
    sleeping.waits_on = Some(waiting(WaitKind::Sleep));
    let mut sending = FrameNode::cut(0);
    sending.waits_on = Some(waiting(WaitKind::Permits {
        lock: "channel".into(),
    }));
    // The I/O wait a frame below the root: every frame of a task is looked at.
    let mut above = FrameNode::cut(0);
    above.children = vec![reading];
    let mut dump = Dump::build(&crate::testing::handshake(), &crate::testing::sample(), 0);
    let template = dump.tasks[0].clone();
    dump.tasks = [with_local, above, sleeping, FrameNode::cut(0), sending]
        .into_iter()
        .map(|f| {
            let mut t = template.clone();
            t.frames = Arc::new(vec![f]);
            t
        })
        .collect();
    let read = read_locals(&mut dump, &types(), &memory(&[(0x2000, words(&[7]))]), None);
    assert_eq!(
        read.fd_tasks,
        [1],
        "the task reading a descriptor, for its socket"
    );
    assert_eq!(
        read.held_tasks,
        [0, 4],
        "a local may be a guard; a send's channel is held"
    );
}

#[test]
fn a_request_head_reads_as_its_method_and_target() {
    use super::decode::http;
    use crate::model::values::Field;
    use crate::plan::values::HttpPart;
    let field = |name: &str, value: Value| Field {
        name: name.into(),
        value,
    };
    let text = |t: &str, len: u64| Value::Str {
        text: t.into(),
        len,
    };
    let path = http(
        HttpPart::PathAndQuery,
        &[field("data", text("/order?id=42", 12))],
    );
    let uri = http(HttpPart::Uri, &[field("path_and_query", path)]);
    let post = Value::Variant {
        name: "Post".into(),
        fields: Vec::new(),
    };
    let method = http(HttpPart::Method, &[field("0", post)]);
    let parts = http(
        HttpPart::Parts,
        &[field("method", method), field("uri", uri)],
    );
    let request = http(HttpPart::Request, &[field("head", parts)]);
    assert_eq!(
        request,
        Value::Http {
            method: Some("POST".into()),
            target: Some("/order?id=42".into())
        }
    );
    // An empty path is the root's; a target longer than was read says so.
    let root = http(HttpPart::PathAndQuery, &[field("data", text("", 0))]);
    assert!(matches!(root, Value::Http { target: Some(t), .. } if t == "/"));
    let long = http(HttpPart::PathAndQuery, &[field("data", text("/a", 300))]);
    assert!(matches!(long, Value::Http { target: Some(t), .. } if t == "/a…"));
    // What was not read is not made up.
    let unread = http(HttpPart::Parts, &[field("method", Value::Unreadable)]);
    assert_eq!(
        unread,
        Value::Http {
            method: None,
            target: None
        }
    );
}
