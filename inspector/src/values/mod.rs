//! The values stage: the locals a dump's decoded frames carry unread ([`Value::Unread`], put there
//! by the decode stage when `-v` or `--fields` asked for them), and the parts of what each leaf waits
//! for, read from the target's memory, by the plan's value shapes ([`crate::plan::values`]).
//!
//! Locals are read a few thousand at a time (`GROUP`), each group in rounds, each round one batch
//! of reads over the [`Memory`] source: the first reads the locals' own bytes; what they point to (a
//! string's text, a box's pointee, an `Arc`'s counts) is read in the next, up to [`MAX_DEPTH`]
//! pointers deep. Then each of the group's frames has its state read again: a frame that moved to
//! another await meanwhile (the process kept running) has every local shown as
//! [`Value::Changed`], never as a value that may be torn. Everything read is bounded: text and items by
//! [`MAX_TEXT`] and [`MAX_ITEMS`], whatever length the value states, and a dump's reads by
//! [`MAX_TOTAL_BYTES`].

mod decode;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use asyncdump_walker::bytes::uint;
use asyncdump_walker::memory::Memory;

use crate::model::values::{Check, Local, Value, WaitKind, WaitOn};
use crate::model::{Dump, FrameNode};
use crate::plan::values::{StaticPlan, ValueTypes};

/// Most bytes of text shown per string.
pub const MAX_TEXT: usize = 256;
/// Most items shown per sequence.
pub const MAX_ITEMS: usize = 8;
/// Most pointers followed from a local.
pub const MAX_DEPTH: usize = 4;
/// Most bytes read for one dump's values; past them, values are [`Value::Cut`].
pub const MAX_TOTAL_BYTES: u64 = 32 << 20;
/// Most bytes of a value's own that are read (a larger one is opaque).
const MAX_INLINE: u32 = 4096;
/// Most waiters counted in a semaphore's queue (one read each, in turn).
pub const MAX_QUEUE: u64 = 1024;
/// Rounds of reads: one per pointer followed, and one more. (A queue is followed within a round.)
const MAX_ROUNDS: usize = MAX_DEPTH + 2;

/// What reading a dump's locals cost, and which tasks the stages after it look at.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ValuesRead {
    pub locals: usize,
    pub bytes: u64,
    pub rounds: usize,
    /// Frames whose state moved while their locals were read.
    pub changed_frames: usize,
    /// The tasks (by place in the dump) with a leaf waiting on a file descriptor: the ones
    /// [`describe_fds`] looks at.
    pub fd_tasks: Vec<usize>,
    /// The tasks (by place, in order) with a local, or a leaf waiting for what a frame may hold:
    /// the ones the wait graph looks at (`crate::waits::resolve`).
    pub held_tasks: Vec<usize>,
}

/// Most locals read together. Their own bytes are read in one batch, then what they point to, round
/// by round; group after group, the bytes read take the same memory, little enough to stay in the
/// cache while their values are decoded (every frame's at once was 7.6 MB at 10,000 tasks of 15
/// locals). Read through an agent, each group is three exchanges or more, and there fewer, larger
/// groups cost less (4,096 locals a group: 173 ms against 166 ms for 8,192, at 150,000 locals);
/// read from outside, the two are within noise.
const GROUP: usize = 8192;

/// Reads every unread local of `dump` from `mem`. `now_ns` is the snapshot's time on the monotonic
/// clock, which an `Instant`'s age is measured from (`None`: no age, as for a core file).
pub fn read_locals(
    dump: &mut Dump,
    types: &ValueTypes,
    mem: &dyn Memory,
    now_ns: Option<u64>,
) -> ValuesRead {
    let given = std::mem::take(&mut dump.register_bytes);
    // Each value is decoded into its local where it stands: a side list of 150,000 values was
    // 8 MB of fresh memory, and a second walk of the dump to put them back.
    let (unread, tasks) = unread_locals(dump);
    let mut roots = Roots::with_capacity(unread.len());
    for u in unread {
        roots.push(u);
    }
    if roots.locals.is_empty() {
        return ValuesRead {
            fd_tasks: tasks.fd,
            held_tasks: tasks.held,
            ..ValuesRead::default()
        };
    }
    let mut reads = Reads {
        types,
        mem,
        now_ns,
        bytes: decode::Bytes::default(),
        queues: decode::Queues::default(),
        spent: 0,
        rounds: 0,
        moved: Vec::new(),
    };
    reads.bytes.given(given);
    let mut from = 0;
    while from < roots.locals.len() {
        let to = roots.group_end(from);
        reads.group(&mut roots, from..to);
        from = to;
    }
    reads.moved.sort_unstable();
    reads.moved.dedup();
    ValuesRead {
        locals: roots.locals.len(),
        bytes: reads.spent,
        rounds: reads.rounds,
        changed_frames: reads.moved.len(),
        fd_tasks: tasks.fd,
        held_tasks: tasks.held,
    }
}

/// What reading a dump's locals keeps from group to group.
struct Reads<'a> {
    types: &'a ValueTypes,
    mem: &'a dyn Memory,
    now_ns: Option<u64>,
    bytes: decode::Bytes,
    /// Queues are followed once for the dump: their waiters may lie in any group.
    queues: decode::Queues,
    /// Bytes read for the groups before.
    spent: u64,
    rounds: usize,
    /// Frames that moved, as (state address, state expected).
    moved: Vec<(u64, u64)>,
}

impl Reads<'_> {
    /// Reads the locals `range` of `roots`, then checks their frames.
    fn group(&mut self, roots: &mut Roots<'_>, range: std::ops::Range<usize>) {
        let bytes = &mut self.bytes;
        bytes.clear();
        // Each frame's locals lie together in it: one read of the span they cover.
        bytes.read(self.mem, roots.frame_spans(self.types, range.clone()));
        // Which locals are still unread, by place in `roots`.
        let mut pending: Vec<u32> = range.clone().map(|i| i as u32).collect();
        let mut rounds = 1;
        loop {
            let mut needs = Vec::new();
            let round = decode::Round {
                types: self.types,
                bytes,
                now_ns: self.now_ns,
                last: rounds > MAX_ROUNDS || self.spent + bytes.total >= MAX_TOTAL_BYTES,
            };
            let queues = &mut self.queues;
            // Only values still waiting for bytes are decoded again.
            pending.retain(|&i| {
                let (shape, addr) = roots.wanted[i as usize];
                let before = (needs.len(), queues.asked);
                let value = decode::value(&round, &mut needs, queues, shape, addr);
                let done = (needs.len(), queues.asked) == before || round.last;
                if done {
                    roots.locals[i as usize].value = value;
                }
                !done
            });
            if (needs.is_empty() && !queues.waiting()) || pending.is_empty() {
                break;
            }
            bytes.read(self.mem, needs);
            queues.follow_all(self.mem, bytes);
            rounds += 1;
        }
        self.spent += bytes.total;
        self.rounds = self.rounds.max(rounds);
        let checks = roots.checks_of(range.clone());
        let changed = roots.changed_frames(self.mem, checks.clone());
        let moved = |i: usize| changed[roots.check_of[i] as usize - checks.start];
        // What is still unread was cut short; where a frame moved, every local is changed.
        for i in pending.into_iter().map(|i| i as usize) {
            roots.locals[i].value = Value::Cut;
        }
        for i in range.filter(|&i| moved(i)) {
            roots.locals[i].value = Value::Changed;
        }
        let moved = (roots.checks[checks].iter().zip(changed)).filter(|&(_, c)| c);
        self.moved.extend(moved.map(|(c, _)| (c.addr, c.expected)));
    }
}

/// Adds to each I/O wait (and each accept) whose descriptor was read what `socket_of` says of it, as a part
/// `socket` (for a live process: its `/proc`; a core has none). Only `tasks` are looked at: those
/// [`read_locals`] found waiting on a descriptor ([`ValuesRead::fd_tasks`]).
pub fn describe_fds(dump: &mut Dump, tasks: &[usize], socket_of: &dyn Fn(i64) -> Option<Value>) {
    fn visit(nodes: &mut [FrameNode], socket_of: &dyn Fn(i64) -> Option<Value>) {
        for n in nodes {
            if let Some(w) = n.waits_on.as_mut().filter(|w| on_fd(w))
                && let Some(&Value::Int(fd)) = w.part("fd")
                && let Some(value) = socket_of(fd)
            {
                w.parts.push(Local::new("socket", "socket", value));
            }
            visit(&mut n.children, socket_of);
        }
    }
    for &i in tasks {
        if let Some(t) = dump.tasks.get_mut(i) {
            visit(Arc::make_mut(&mut t.frames).as_mut_slice(), socket_of);
        }
    }
}

fn on_fd(w: &WaitOn) -> bool {
    matches!(w.kind, WaitKind::Io { .. } | WaitKind::Accept)
}

/// Every local to read, in [`unread_locals`]' order, and each frame's check once: a frame's
/// locals come one after another and share it.
#[derive(Default)]
struct Roots<'a> {
    locals: Vec<&'a mut Local>,
    /// Each local's shape and address, kept as the walk of the dump found it: read round after
    /// round without going back to the local in the dump (a cache miss each, at 10,000 tasks),
    /// which is written once, with its value.
    wanted: Vec<(u32, u64)>,
    /// Each local's frame's check, in `checks`.
    check_of: Vec<u32>,
    checks: Vec<Check>,
}

impl<'a> Roots<'a> {
    /// Room for `n` locals: grown a push at a time, its lists took as much fresh memory again.
    fn with_capacity(n: usize) -> Roots<'a> {
        Roots {
            locals: Vec::with_capacity(n),
            wanted: Vec::with_capacity(n),
            check_of: Vec::with_capacity(n),
            checks: Vec::new(),
        }
    }

    fn push(&mut self, u: Unread<'a>) {
        if self.checks.last() != Some(&u.check) {
            self.checks.push(u.check);
        }
        self.check_of.push((self.checks.len() - 1) as u32);
        self.wanted.push((u.shape, u.addr));
        self.locals.push(u.local);
    }

    /// Where the group of locals from `from` ends: after at most [`GROUP`], or as many more as
    /// its last frame has (a frame's span is read once, in one group).
    fn group_end(&self, from: usize) -> usize {
        let mut to = (from + GROUP).min(self.locals.len());
        while to < self.locals.len() && self.check_of[to] == self.check_of[to - 1] {
            to += 1;
        }
        to
    }

    /// The checks of the locals `range` (one after another, as their locals are).
    fn checks_of(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        self.check_of[range.start] as usize..self.check_of[range.end - 1] as usize + 1
    }

    /// The bytes each frame's locals cover, for the locals `range`.
    fn frame_spans(&self, types: &ValueTypes, range: std::ops::Range<usize>) -> Vec<(u64, u32)> {
        let checks = self.checks_of(range.clone());
        let first = checks.start;
        let mut spans: Vec<Option<(u64, u64)>> = vec![None; checks.len()];
        // A leaf's parts have no frame to check (size 0): they are read each on their own.
        let wanted = self.wanted[range.clone()].iter();
        for (&(shape, addr), &check) in wanted.zip(&self.check_of[range]) {
            if self.checks[check as usize].size == 0 {
                continue;
            }
            let size = types.get(shape).map_or(0, |t| t.size.min(MAX_INLINE));
            let end = addr.saturating_add(u64::from(size));
            let span = spans[check as usize - first].get_or_insert((addr, end));
            *span = (span.0.min(addr), span.1.max(end));
        }
        (spans.into_iter().flatten())
            .filter_map(|(start, end)| Some((start, u32::try_from(end - start).ok()?)))
            .filter(|&(_, len)| len > 0 && len <= 16 * MAX_INLINE)
            .collect()
    }

    /// The states of `checks` read again, after their locals: whether each frame moved (or can no
    /// longer be read).
    fn changed_frames(&self, mem: &dyn Memory, checks: std::ops::Range<usize>) -> Vec<bool> {
        let checks = &self.checks[checks];
        let mut words = vec![[0u8; 8]; checks.len()];
        let into = (checks.iter().zip(words.iter_mut()))
            .map(|(c, w)| &mut w[..usize::from(c.size.min(8))]);
        let read = (&mem).read_each(checks.iter().map(|c| c.addr), into);
        (checks.iter().zip(words).zip(read))
            .map(|((c, w), read)| c.size > 0 && (!read || uint(&w, 0, c.size) != Some(c.expected)))
            .collect()
    }
}

/// The tasks (by place in the dump) that later stages look at, found while the locals are.
#[derive(Default)]
struct Tasks {
    /// With a leaf waiting on a file descriptor.
    fd: Vec<usize>,
    /// With a local, or a leaf waiting for what a frame may hold.
    held: Vec<usize>,
}

/// A local not read yet, with what reading it needs, taken as the walk of the dump meets it.
struct Unread<'a> {
    local: &'a mut Local,
    shape: u32,
    addr: u64,
    check: Check,
}

impl<'a> Unread<'a> {
    fn of(local: &'a mut Local) -> Option<Unread<'a>> {
        let Value::Unread { shape, addr, check } = local.value else {
            return None;
        };
        Some(Unread {
            local,
            shape,
            addr,
            check,
        })
    }
}

/// Every unread local (and wait target's part) of every frame of every task, then the statics and
/// the threads' locals read with them, in one fixed order; and the tasks later stages look at,
/// which saves each of them a walk of every frame.
fn unread_locals(dump: &mut Dump) -> (Vec<Unread<'_>>, Tasks) {
    /// What a task's frames carry: a wait on a descriptor, a local or a wait that may be held.
    #[derive(Default)]
    struct Carries {
        fd: bool,
        held: bool,
    }
    fn visit<'a>(nodes: &'a mut [FrameNode], out: &mut Vec<Unread<'a>>, c: &mut Carries) {
        for n in nodes {
            let FrameNode {
                locals,
                waits_on,
                children,
                ..
            } = n;
            c.held |= !locals.is_empty();
            out.extend(locals.iter_mut().filter_map(Unread::of));
            if let Some(w) = waits_on {
                c.fd |= on_fd(w);
                c.held |= w.kind.may_be_held();
                out.extend(w.parts.iter_mut().filter_map(Unread::of));
            }
            visit(children, out, c);
        }
    }
    let has = |n: &FrameNode| !n.locals.is_empty() || n.waits_on.is_some();
    let mut out = Vec::new();
    let mut tasks = Tasks::default();
    for (i, t) in dump.tasks.iter_mut().enumerate() {
        // Frames shared with a live view's kept chains are looked through first, and copied to be
        // changed only where they carry something; a dump's own are walked once (each frame is a
        // cache miss at 10,000 tasks), the walk that gathers finding nothing where nothing is.
        let shared = Arc::strong_count(&t.frames) > 1 || Arc::weak_count(&t.frames) > 0;
        if shared && !crate::model::any_frame(&t.frames, &has) {
            continue;
        }
        let mut c = Carries::default();
        visit(
            Arc::make_mut(&mut t.frames).as_mut_slice(),
            &mut out,
            &mut c,
        );
        if c.fd {
            tasks.fd.push(i);
        }
        if c.held {
            tasks.held.push(i);
        }
    }
    out.extend(dump.statics.iter_mut().filter_map(Unread::of));
    out.extend((dump.on_threads.iter_mut()).filter_map(|l| Unread::of(&mut l.local)));
    (out, tasks)
}

/// Gives `dump` the plan's statics that may hold a lock guard or a channel's end, unread, for
/// [`read_locals`] to read with the frames' locals: where a task waits for what no task holds, the
/// wait graph looks among them.
pub fn add_statics(dump: &mut Dump, statics: &[StaticPlan], types: &ValueTypes) {
    dump.statics = (statics.iter())
        .map(|s| {
            let type_name = (types.get(s.ty)).map_or_else(|| "".into(), |t| t.name.clone());
            // A static stays where it is: nothing to check it against.
            let value = Value::Unread {
                shape: s.ty,
                addr: s.addr,
                check: Check::default(),
            };
            Local::new(s.name.clone(), type_name, value)
        })
        .collect();
}
