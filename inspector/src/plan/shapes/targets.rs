//! The table of wait targets: what a leaf future waits for, where its type says. A rule of
//! [`RULES`] that takes a leaf's type gives the parts to read of it (each a value at an offset, of a
//! value type), and the view says in words what they mean. One spec each in `target_tests.rs`. A
//! rule that does not find every field it needs declines: the leaf shows its type alone.

use std::sync::Arc;

use crate::dwarf::{State, StateMachine};
use crate::plan::builder::Builder;
use crate::plan::values::{ChanLayout, LocalPlan, Shape, TargetKind, TargetPlan, ValueType, Word};

struct TargetRule {
    name: &'static str,
    /// The leaf's qualified type name.
    matches: fn(&str) -> bool,
    plan: fn(&mut Builder<'_>, u64) -> Option<TargetPlan>,
}

const RULES: &[&TargetRule] = &[
    &SLEEP,
    &SEMAPHORE_ACQUIRE,
    &IO,
    &RECEIVE,
    &NOTIFIED,
    &BROADCAST_RECV,
];

/// A library's async fn whose locals say what the leaf below it waits for, better than the leaf
/// can (a `watch`'s `changed` awaits a bare `Notified`): the target is planned per suspend state,
/// from the locals that state keeps, and given to the leaf of that await.
struct FrameRule {
    name: &'static str,
    /// The fn's path, without generics (`tokio::sync::watch::changed_impl`).
    matches: fn(&str) -> bool,
    plan: fn(&mut Builder<'_>, &[StateLocal]) -> Option<TargetPlan>,
}

/// A local a suspend state keeps: (name, offset within the state machine, type DIE).
type StateLocal = (String, u64, u64);

const FRAME_RULES: &[&FrameRule] = &[&WATCH_CHANGED, &BARRIER_WAIT, &ACCEPT, &INTERVAL_TICK];

/// `tokio::time::Sleep`: its deadline, an instant a few fields in.
const SLEEP: TargetRule = TargetRule {
    name: "tokio Sleep",
    matches: |n| n == "tokio::time::sleep::Sleep",
    plan: |b, die| {
        let (at, ty) = b.find_member_typed(die, "deadline", 3)?;
        let deadline = part(b, "deadline", at, ty)?;
        Some(TargetPlan {
            kind: TargetKind::Sleep,
            parts: Arc::from([deadline]),
        })
    },
};

/// tokio's semaphore `Acquire` (under every `Mutex::lock`, `RwLock` read and write, `Semaphore`
/// acquire and bounded `mpsc` send): the permits it wants, and the semaphore's free permits and
/// wait list, in which its `node` is queued. Where the binary has bounded channels, also the
/// channel around the semaphore (part `channel`), which the decode stage keeps for a send only.
const SEMAPHORE_ACQUIRE: TargetRule = TargetRule {
    name: "tokio semaphore Acquire",
    matches: |n| n == "tokio::sync::batch_semaphore::Acquire",
    plan: |b, die| {
        let (wanted_at, wanted_ty) = b.member(die, &["num_permits"])?;
        let (ptr, sem) = b.pointer_to(die, "semaphore")?;
        let (node, waiter) = b.member(die, &["node"])?;
        let prev = b.find_member(b.strip(waiter), "prev", 4)?;
        let shape = Shape::Semaphore {
            ptr: u32::try_from(ptr).ok()?,
            permits: u32::try_from(b.find_member(sem, "permits", 1)?).ok()?,
            tail: u32::try_from(b.find_member(sem, "tail", 6)?).ok()?,
            node: u32::try_from(node).ok()?,
            prev: u32::try_from(prev).ok()?,
        };
        // Up to the node's link: a queue is followed through its waiters' bytes where they are read.
        let size = u32::try_from(ptr.max(node + prev) + 8).ok()?;
        let ty = b.synthetic_value("Semaphore", size, shape);
        let wanted = part(b, "wanted", wanted_at, wanted_ty)?;
        let semaphore = LocalPlan {
            name: "semaphore".into(),
            offset: 0,
            ty,
            acquired: None,
            info: Default::default(),
        };
        let mut parts = vec![wanted, semaphore];
        if let Some((layout, back)) = b.bounded_channel() {
            let shape = Shape::Channel {
                hops: vec![u32::try_from(ptr).ok()?],
                data: 0,
                back: u32::try_from(back).ok()?,
                layout,
            };
            parts.push(synthetic_part(b, "channel", ptr as u32 + 8, shape));
        }
        Some(TargetPlan {
            kind: TargetKind::Permits,
            parts: Arc::from(parts),
        })
    },
};

/// tokio's `AsyncReadExt`/`AsyncWriteExt` futures (`read`, `read_exact`, `write_all`, ...): the
/// file descriptor of the object they read or write, found through its fields (a `TcpStream`'s
/// `PollEvented`, mio's socket, std's, its `OwnedFd`).
const IO: TargetRule = TargetRule {
    name: "tokio read or write",
    matches: |n| io_op(n).is_some(),
    plan: |b, die| {
        let name = b.debug.qualified_name(die);
        let (field, write) = io_op(&name)?;
        let (ptr, object) = b.pointer_to(die, field)?;
        let fd = b.find_member(object, "fd", 12)?;
        let shape = Shape::Fd {
            ptr: u32::try_from(ptr).ok()?,
            fd: u32::try_from(fd).ok()?,
        };
        let ty = b.synthetic_value("fd", ptr as u32 + 8, shape);
        Some(TargetPlan {
            kind: TargetKind::Io { write },
            parts: Arc::from([LocalPlan {
                name: "fd".into(),
                offset: 0,
                ty,
                acquired: None,
                info: Default::default(),
            }]),
        })
    },
};

/// A tokio `mpsc` receive (`recv`'s `poll_fn`): the channel, through the closure's pointer to the
/// receiving end and that end's `Arc`.
const RECEIVE: TargetRule = TargetRule {
    name: "tokio mpsc receive",
    matches: |n| {
        n.starts_with("core::future::poll_fn::PollFn<tokio::sync::mpsc::")
            && n.contains("::recv::{async_fn#0}::{closure_env#0}")
    },
    plan: |b, die| {
        let (f, closure) = b.member(die, &["f"])?;
        let closure = b.strip(closure);
        let (at, end) = (b.members(closure).into_iter())
            .find(|m| m.0.contains("chan"))
            .map(|m| (m.1, m.2))?;
        let end = b.strip(b.debug.node(b.strip(end))?.type_ref?);
        let (inner, arc) = b.find_member_typed(end, "inner", 2)?;
        let (ptr, shared) = b.pointer_to(b.strip(arc), "ptr")?;
        let (data, chan) = b.member(shared, &["data"])?;
        let (layout, _) = b.chan_layout(b.strip(chan))?;
        let shape = Shape::Channel {
            hops: vec![
                u32::try_from(f + at).ok()?,
                u32::try_from(inner + ptr).ok()?,
            ],
            data: u32::try_from(data).ok()?,
            back: 0,
            layout,
        };
        let part = synthetic_part(b, "channel", (f + at) as u32 + 8, shape);
        Some(TargetPlan {
            kind: TargetKind::Receive,
            parts: Arc::from([part]),
        })
    },
};

/// tokio's `Notified` (`Notify::notified()`): the `Notify`'s state and wait list, where this
/// waiter is in it, and whether it was notified.
const NOTIFIED: TargetRule = TargetRule {
    name: "tokio Notified",
    matches: |n| n == "tokio::sync::notify::Notified",
    plan: |b, die| {
        let (ptr, notify) = b.pointer_to(die, "notify")?;
        let (node, waiter) = b.member(die, &["waiter"])?;
        let waiter = b.strip(waiter);
        let prev = b.find_member(waiter, "prev", 4)?;
        let notification = node + b.member(waiter, &["notification"])?.0;
        let shape = Shape::Notify {
            ptr: u32::try_from(ptr).ok()?,
            state: u32::try_from(b.member(notify, &["state"])?.0).ok()?,
            tail: u32::try_from(b.find_member(notify, "tail", 6)?).ok()?,
            node: u32::try_from(node).ok()?,
            prev: u32::try_from(prev).ok()?,
            notification: u32::try_from(notification).ok()?,
        };
        // Up to the node's link too, as a semaphore acquire's.
        let size = u32::try_from(ptr.max(notification).max(node + prev) + 8).ok()?;
        let part = synthetic_part(b, "notify", size, shape);
        Some(TargetPlan {
            kind: TargetKind::Notify,
            parts: Arc::from([part]),
        })
    },
};

/// tokio's `broadcast` `Recv`: the next position this receiver reads and the channel's tail, whose
/// difference past the capacity is how far it lagged; senders and receivers alive.
const BROADCAST_RECV: TargetRule = TargetRule {
    name: "tokio broadcast Recv",
    matches: |n| n.starts_with("tokio::sync::broadcast::Recv<"),
    plan: |b, die| {
        let (ptr, receiver) = b.pointer_to(die, "receiver")?;
        let (next, _) = b.member(receiver, &["next"])?;
        let (arc_at, arc) = b.member(receiver, &["shared"])?;
        let ((arc_ptr, data), shared) = b.arc_data(arc)?;
        let (tail, lock) = b.member(shared, &["tail"])?;
        let in_tail = |b: &Builder<'_>, name| Some(data + tail + b.find_member(lock, name, 6)?);
        let ptr = u32::try_from(ptr).ok()?;
        let hops = vec![ptr, u32::try_from(arc_at + arc_ptr).ok()?];
        let words = vec![
            word("addr", hops.clone(), data, 0)?,
            word("next", vec![ptr], next, 8)?,
            word("tail", hops.clone(), in_tail(b, "pos")?, 8)?,
            word("receivers", hops.clone(), in_tail(b, "rx_cnt")?, 8)?,
            word("closed", hops.clone(), in_tail(b, "closed")?, 1)?,
            word(
                "mask",
                hops.clone(),
                data + b.member(shared, &["mask"])?.0,
                8,
            )?,
            word("senders", hops, data + b.member(shared, &["num_tx"])?.0, 8)?,
        ];
        let part = synthetic_part(b, "broadcast", ptr + 8, Shape::Words { words });
        Some(TargetPlan {
            kind: TargetKind::Broadcast,
            parts: Arc::from([part]),
        })
    },
};

/// tokio's `watch::Receiver::changed` (and so a `Barrier`'s wait, below it): the watch's state
/// word (its version, and whether its senders are gone), its senders, and the version seen.
const WATCH_CHANGED: FrameRule = FrameRule {
    name: "tokio watch changed",
    matches: |n| n == "tokio::sync::watch::changed_impl",
    plan: |b, locals| {
        let [(shared_at, shared), (seen_at, _)] = by_name(locals, ["shared", "version"])?;
        let shared = b.pointee(shared)?;
        let base = shared_at.min(seen_at);
        let (ptr, seen) = (hop(shared_at - base)?, hop(seen_at - base)?);
        let words = vec![
            word("addr", vec![ptr], 0, 0)?,
            word("state", vec![ptr], b.member(shared, &["state"])?.0, 8)?,
            word(
                "senders",
                vec![ptr],
                b.member(shared, &["ref_count_tx"])?.0,
                8,
            )?,
            word("seen", vec![seen], 0, 8)?,
        ];
        frame_part(
            b,
            "watch",
            base,
            ptr.max(seen) + 8,
            words,
            TargetKind::Watch,
        )
    },
};

/// tokio's `Barrier::wait`: how many of how many arrived.
const BARRIER_WAIT: FrameRule = FrameRule {
    name: "tokio Barrier wait",
    matches: |n| n == "tokio::sync::barrier::Barrier::wait_internal",
    plan: |b, locals| {
        let [(at, barrier)] = by_name(locals, ["self"])?;
        let barrier = b.pointee(barrier)?;
        let words = vec![
            word("addr", vec![0], 0, 0)?,
            word("arrived", vec![0], b.find_member(barrier, "arrived", 6)?, 8)?,
            word("n", vec![0], b.member(barrier, &["n"])?.0, 8)?,
        ];
        frame_part(b, "barrier", at, 8, words, TargetKind::Barrier)
    },
};

/// tokio's `Interval::tick`: its next tick, the deadline of the `Sleep` the interval keeps boxed
/// (`self.delay`), read through `self` and the box as a sleep's own (its leaf, a `poll_fn`, says
/// nothing of it).
const INTERVAL_TICK: FrameRule = FrameRule {
    name: "tokio Interval tick",
    matches: |n| n == "tokio::time::interval::Interval::tick",
    plan: |b, locals| {
        let [(at, interval)] = by_name(locals, ["self"])?;
        let interval = b.pointee(interval)?;
        let (delay, boxed) = b.member(interval, &["delay"])?;
        let (box_at, sleep) = b.pointer_to_in(boxed)?;
        let (deadline_at, instant) = b.find_member_typed(sleep, "deadline", 3)?;
        let instant = b.value(instant);
        let field = |name: &str, offset: u64, ty: u32| {
            Some(crate::plan::values::FieldShape {
                name: name.into(),
                offset: u32::try_from(offset).ok()?,
                ty,
            })
        };
        let view = |b: &mut Builder<'_>, name: &str, fields: Vec<_>, size: u64| -> Option<u32> {
            let shape = Shape::Struct {
                fields,
                tuple: false,
            };
            Some(b.synthetic_value(name, u32::try_from(size).ok()?, shape))
        };
        let sleep = view(
            b,
            "Sleep",
            vec![field("deadline", deadline_at, instant)?],
            deadline_at + 16,
        )?;
        let to_sleep = pointer(b, "Box<Sleep>", sleep);
        let interval = view(
            b,
            "Interval",
            vec![field("delay", delay + box_at, to_sleep)?],
            delay + box_at + 8,
        )?;
        let to_interval = pointer(b, "&mut Interval", interval);
        Some(TargetPlan {
            kind: TargetKind::Sleep,
            parts: Arc::from([LocalPlan {
                name: "deadline".into(),
                offset: u32::try_from(at).ok()?,
                ty: to_interval,
                acquired: None,
                info: Default::default(),
            }]),
        })
    },
};

/// A value type of the plan's making: a thin pointer to a `to`.
fn pointer(b: &mut Builder<'_>, name: &str, to: u32) -> u32 {
    let shape = Shape::Pointer {
        kind: crate::plan::values::PointerKind::Box,
        to,
    };
    b.synthetic_value(name, 8, shape)
}

/// tokio's `TcpListener::accept` and `UnixListener::accept`: the listener's file descriptor.
const ACCEPT: FrameRule = FrameRule {
    name: "tokio listener accept",
    matches: |n| {
        n == "tokio::net::tcp::listener::TcpListener::accept"
            || n == "tokio::net::unix::listener::UnixListener::accept"
    },
    plan: |b, locals| {
        let [(at, listener)] = by_name(locals, ["self"])?;
        let fd = b.find_member(b.pointee(listener)?, "fd", 12)?;
        let shape = Shape::Fd {
            ptr: 0,
            fd: u32::try_from(fd).ok()?,
        };
        let ty = b.synthetic_value("fd", 8, shape);
        Some(TargetPlan {
            kind: TargetKind::Accept,
            parts: Arc::from([LocalPlan {
                name: "fd".into(),
                offset: u32::try_from(at).ok()?,
                ty,
                acquired: None,
                info: Default::default(),
            }]),
        })
    },
};

/// The locals named `names`, in that order: (offset, type DIE) each; `None` unless all are kept.
fn by_name<const N: usize>(locals: &[StateLocal], names: [&str; N]) -> Option<[(u64, u64); N]> {
    let mut found = [(0, 0); N];
    for (slot, name) in found.iter_mut().zip(names) {
        let (_, at, die) = locals.iter().find(|l| l.0 == name)?;
        *slot = (*at, *die);
    }
    Some(found)
}

fn hop(offset: u64) -> Option<u32> {
    u32::try_from(offset).ok()
}

fn word(name: &str, hops: Vec<u32>, at: u64, size: u8) -> Option<Word> {
    Some(Word {
        name: name.into(),
        hops,
        at: u32::try_from(at).ok()?,
        size,
    })
}

/// A frame rule's one part, `base` bytes into the state machine, `size` bytes long.
fn frame_part(
    b: &mut Builder<'_>,
    name: &str,
    base: u64,
    size: u32,
    words: Vec<Word>,
    kind: TargetKind,
) -> Option<TargetPlan> {
    let mut part = synthetic_part(b, name, size, Shape::Words { words });
    part.offset = u32::try_from(base).ok()?;
    Some(TargetPlan {
        kind,
        parts: Arc::from([part]),
    })
}

/// A part at the leaf's start, of a value type of the plan's making.
fn synthetic_part(b: &mut Builder<'_>, name: &str, size: u32, shape: Shape) -> LocalPlan {
    let ty = b.synthetic_value(name, size, shape);
    LocalPlan {
        name: name.into(),
        offset: 0,
        ty,
        acquired: None,
        info: Default::default(),
    }
}

/// The field that points at the I/O object, and whether it writes, of tokio's I/O futures by name.
fn io_op(name: &str) -> Option<(&'static str, bool)> {
    const OPS: &[(&str, &str, bool)] = &[
        ("read::Read<", "reader", false),
        ("read_exact::ReadExact<", "reader", false),
        ("read_buf::ReadBuf<", "reader", false),
        ("read_to_end::ReadToEnd<", "reader", false),
        ("read_to_string::ReadToString<", "reader", false),
        ("read_line::ReadLine<", "reader", false),
        ("write::Write<", "writer", true),
        ("write_all::WriteAll<", "writer", true),
        ("write_buf::WriteBuf<", "writer", true),
        ("flush::Flush<", "a", true),
    ];
    let rest = name.strip_prefix("tokio::io::util::")?;
    (OPS.iter())
        .find(|(prefix, _, _)| rest.starts_with(prefix))
        .map(|&(_, field, write)| (field, write))
}

fn part(b: &mut Builder<'_>, name: &str, at: u64, ty: u64) -> Option<LocalPlan> {
    Some(LocalPlan {
        name: name.into(),
        offset: u32::try_from(at).ok()?,
        ty: b.value(ty),
        acquired: None,
        info: Default::default(),
    })
}

impl Builder<'_> {
    /// What a leaf future of type `die` waits for, if a rule knows its type.
    /// A wrapper a leaf is named through (`Coop<Recv<T>>`: `Recv<T>`) is looked through too.
    pub(in crate::plan) fn target(&mut self, die: u64) -> Option<TargetPlan> {
        let (mut at, mut inner) = (0, die);
        for _ in 0..8 {
            let name = self.debug.qualified_name(inner);
            if let Some(rule) = RULES.iter().find(|r| (r.matches)(&name)) {
                let mut plan = (rule.plan)(self, inner)?;
                if at > 0 {
                    let shifted = plan.parts.iter().map(|p| {
                        let offset = p.offset.checked_add(u32::try_from(at).ok()?)?;
                        Some(LocalPlan {
                            offset,
                            ..p.clone()
                        })
                    });
                    plan.parts = shifted.collect::<Option<Arc<[_]>>>()?;
                }
                self.values.decided_by.insert(die, rule.name);
                return Some(plan);
            }
            let next = self.wrapped(inner)?;
            at += self.members(inner).first()?.1;
            inner = next;
        }
        None
    }

    /// What the leaf of suspend state `s` of state machine `name` waits for, where a frame rule
    /// knows the fn and finds the locals it reads.
    pub(in crate::plan) fn frame_target(
        &mut self,
        m: &StateMachine,
        name: &str,
        s: &State,
    ) -> Option<TargetPlan> {
        let path = name.split('<').next().unwrap_or(name);
        let rule = FRAME_RULES.iter().find(|r| (r.matches)(path))?;
        let plan = (rule.plan)(self, &s.locals)?;
        self.values.decided_by.insert(m.die, rule.name);
        Some(plan)
    }

    /// What a pointer type `die` points at.
    /// Where a `Box<T>` or `Pin<Box<T>>` of type `boxed` keeps its pointer, and `T`.
    fn pointer_to_in(&mut self, boxed: u64) -> Option<(u64, u64)> {
        let mut off = 0;
        let mut ty = self.strip(boxed);
        for _ in 0..6 {
            let node = self.debug.node(ty)?;
            if node.tag == gimli::constants::DW_TAG_pointer_type {
                return Some((off, self.strip(node.type_ref?)));
            }
            let (o, t) = self.member(ty, &["pointer", "__0", "ptr"])?;
            off += o;
            ty = self.strip(t);
        }
        None
    }

    fn pointee(&self, die: u64) -> Option<u64> {
        let node = self.debug.node(self.strip(die))?;
        (node.tag == gimli::constants::DW_TAG_pointer_type)
            .then_some(node.type_ref)
            .flatten()
            .map(|t| self.strip(t))
    }

    /// Where an `Arc<T>` (type `arc`) keeps its pointer, and where in what it points at its value
    /// is, with the value's type: ((pointer's offset, value's offset), value type).
    fn arc_data(&mut self, arc: u64) -> Option<((u64, u64), u64)> {
        let (ptr, shared) = self.pointer_to(self.strip(arc), "ptr")?;
        let (data, ty) = self.member(shared, &["data"])?;
        Some(((ptr, data), self.strip(ty)))
    }

    /// Where a tokio `mpsc` channel of type `chan` keeps its parts, and where its semaphore (what a
    /// send's acquire points at) is in it.
    fn chan_layout(&self, chan: u64) -> Option<(ChanLayout, u64)> {
        let (at, sem) = self.member(chan, &["semaphore"])?;
        let sem = self.strip(sem);
        let (back, permits, bound) = match self.member(sem, &["semaphore"]) {
            // Bounded: a batch semaphore of free slots, and the bound.
            Some((inner, batch)) => {
                let permits = self.find_member(batch, "permits", 1)?;
                let (bound, _) = self.member(sem, &["bound"])?;
                (at + inner, at + inner + permits, Some(at + bound))
            }
            // Unbounded: one word of queued messages.
            None => (at, at, None),
        };
        let layout = ChanLayout {
            permits: u32::try_from(permits).ok()?,
            bound: bound.and_then(|b| u32::try_from(b).ok()),
            tx_count: u32::try_from(self.member(chan, &["tx_count"])?.0).ok()?,
            rx_closed: u32::try_from(self.find_member(chan, "rx_closed", 4)?).ok()?,
        };
        Some((layout, back))
    }

    /// The layout every bounded channel of the binary shares (their parts do not depend on what
    /// they carry), if it has any, and they agree.
    fn bounded_channel(&self) -> Option<(ChanLayout, u64)> {
        let chans = self
            .debug
            .generic_types(&["tokio", "sync", "mpsc", "chan"], "Chan");
        let mut layouts = (chans.iter())
            .filter(|(args, _)| args.ends_with("tokio::sync::mpsc::bounded::Semaphore>"))
            .map(|(_, &die)| self.chan_layout(die));
        let first = layouts.next()??;
        layouts.all(|l| l == Some(first)).then_some(first)
    }

    /// A value type of the plan's own making (not from a DIE).
    fn synthetic_value(&mut self, name: &str, size: u32, shape: Shape) -> u32 {
        let t = self.values.types.len() as u32;
        self.values.types.push(ValueType {
            name: name.into(),
            size,
            shape,
        });
        t
    }
}
