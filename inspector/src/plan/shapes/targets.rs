//! The table of wait targets: what a leaf future waits for, where its type says. A rule of
//! [`RULES`] that takes a leaf's type gives the parts to read of it (each a value at an offset, of a
//! value type), and the view says in words what they mean. One spec each in `target_tests.rs`. A
//! rule that does not find every field it needs declines: the leaf shows its type alone.

use std::sync::Arc;

use crate::plan::builder::Builder;
use crate::plan::values::{ChanLayout, LocalPlan, Shape, TargetKind, TargetPlan, ValueType};

struct TargetRule {
    name: &'static str,
    /// The leaf's qualified type name.
    matches: fn(&str) -> bool,
    plan: fn(&mut Builder<'_>, u64) -> Option<TargetPlan>,
}

const RULES: &[&TargetRule] = &[&SLEEP, &SEMAPHORE_ACQUIRE, &IO, &RECEIVE];

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
        let shape = Shape::Semaphore {
            ptr: u32::try_from(ptr).ok()?,
            permits: u32::try_from(b.find_member(sem, "permits", 1)?).ok()?,
            tail: u32::try_from(b.find_member(sem, "tail", 6)?).ok()?,
            node: u32::try_from(node).ok()?,
            prev: u32::try_from(b.find_member(b.strip(waiter), "prev", 4)?).ok()?,
        };
        let size = ptr.max(node) as u32 + 8;
        let ty = b.synthetic_value("Semaphore", size, shape);
        let wanted = part(b, "wanted", wanted_at, wanted_ty)?;
        let semaphore = LocalPlan {
            name: "semaphore".into(),
            offset: 0,
            ty,
            acquired: None,
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

/// A part at the leaf's start, of a value type of the plan's making.
fn synthetic_part(b: &mut Builder<'_>, name: &str, size: u32, shape: Shape) -> LocalPlan {
    let ty = b.synthetic_value(name, size, shape);
    LocalPlan {
        name: name.into(),
        offset: 0,
        ty,
        acquired: None,
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
    })
}

impl Builder<'_> {
    /// What a leaf future of type `die` waits for, if a rule knows its type.
    pub(in crate::plan) fn target(&mut self, die: u64) -> Option<TargetPlan> {
        let name = self.debug.qualified_name(die);
        let rule = RULES.iter().find(|r| (r.matches)(&name))?;
        let plan = (rule.plan)(self, die)?;
        self.values.decided_by.insert(die, rule.name);
        Some(plan)
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
