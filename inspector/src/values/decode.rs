//! One value from the bytes read so far, by its shape: what is not read yet is asked for in `needs`
//! and stands as [`Value::Cut`] until the next round.

use std::net::Ipv6Addr;
use std::sync::Arc;

use asyncdump_walker::bytes::uint;
use asyncdump_walker::memory::Memory;

use super::{MAX_DEPTH, MAX_INLINE, MAX_ITEMS, MAX_QUEUE, MAX_TEXT};
use crate::model::values::{Field, FloatBits, PointerKind, Value, Within};
use crate::plan::values::{ChanLayout, FieldShape, HttpPart, Shape, ValueType, ValueTypes, Word};

/// Every run of bytes read so far (or `None` where its read failed), sorted by start; each run's
/// bytes lie in one of `chunks`, one per batch: a batch of thousands of runs is one allocation.
#[derive(Default)]
pub(super) struct Bytes {
    runs: Vec<Run>,
    chunks: Vec<Vec<u8>>,
    /// How many of `chunks` were given (see [`Bytes::given`]), not read: kept by [`Bytes::clear`].
    given: usize,
    pub(super) total: u64,
    /// The runs the last two lookups found, the latest first: a frame's locals lie together, and
    /// so do the parts of what they point to, and a dump goes from one to the other and back.
    last: std::cell::Cell<[usize; 2]>,
}

/// Bytes `start..end` of the target: where they lie in [`Bytes::chunks`] (chunk, offset), or
/// `None` where the read failed.
struct Run {
    start: u64,
    end: u64,
    at: Option<(u32, usize)>,
}

/// Most bytes between two words of a lock read together ([`Decoder::word_beside`]).
const MAX_BESIDE: u32 = 256;

/// Most bytes read as one run.
const MAX_RUN: u64 = 64 << 10;
const PAGE: u64 = 4096;

impl Bytes {
    /// Reads `needs` in one batch: ranges not read yet (each was asked for because no run held it),
    /// merged into runs where they overlap or share a page (a page is mapped whole or not at all, so
    /// a merged read fails only where a part would have), which the kernel then pins once each.
    pub(super) fn read(&mut self, mem: &dyn Memory, mut needs: Vec<(u64, u32)>) {
        if needs.is_empty() {
            return;
        }
        needs.sort_unstable();
        // Each run with the needs it holds: where a run of several fails, each is read alone, so
        // that one bad pointer does not take its neighbours with it.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut held: Vec<Vec<(u64, u32)>> = Vec::new();
        for (addr, len) in needs {
            let end = addr.saturating_add(u64::from(len));
            match (runs.last_mut(), held.last_mut()) {
                (Some((start, run_end)), Some(h))
                    if (addr < *run_end || addr / PAGE == (*run_end - 1) / PAGE)
                        && end.max(*run_end) - *start <= MAX_RUN =>
                {
                    *run_end = end.max(*run_end);
                    h.push((addr, len));
                }
                _ => {
                    runs.push((addr, end));
                    held.push(vec![(addr, len)]);
                }
            }
        }
        let several: Vec<bool> = held.iter().map(|h| h.len() > 1).collect();
        let failed = self.read_runs(mem, runs, &several);
        let alone: Vec<(u64, u64)> = (held.into_iter().zip(failed))
            .filter(|(h, failed)| *failed && h.len() > 1)
            .flat_map(|(h, _)| h)
            .map(|(addr, len)| (addr, addr.saturating_add(u64::from(len))))
            .collect();
        if !alone.is_empty() {
            let one_each = vec![false; alone.len()];
            self.read_runs(mem, alone, &one_each);
        }
    }

    /// Keeps bytes read elsewhere (a local's, put together from registers) as runs of their own.
    pub(super) fn given(&mut self, given: Vec<(u64, Vec<u8>)>) {
        for (addr, bytes) in given {
            let end = addr.saturating_add(bytes.len() as u64);
            let at = Some((self.chunks.len() as u32, 0));
            self.chunks.push(bytes);
            self.runs.push(Run {
                start: addr,
                end,
                at,
            });
        }
        self.given = self.chunks.len();
        self.sort();
    }

    /// Forgets every run read, keeping those given: the next batch of locals reads its own, into
    /// the memory this one's bytes took.
    pub(super) fn clear(&mut self) {
        let given = self.given;
        (self.runs).retain(|r| r.at.is_some_and(|(chunk, _)| (chunk as usize) < given));
        self.chunks.truncate(given);
        self.total = 0;
        self.last.set([0, 0]);
    }

    /// Reads `runs` (each as long as a need, or merged up to [`MAX_RUN`]; `several`: whether each
    /// holds more than one need) in one batch, into one buffer, and keeps them; whether each
    /// failed. A run of several that fails is not kept: it is read again a need at a time, which
    /// says which fail, and kept as failed whole it would stand for what lies between them too.
    fn read_runs(
        &mut self,
        mem: &dyn Memory,
        runs: Vec<(u64, u64)>,
        several: &[bool],
    ) -> Vec<bool> {
        let ranges: Vec<(u64, u32)> = runs.iter().map(|&(a, e)| (a, (e - a) as u32)).collect();
        let (chunk, read) = (&mem).read_packed(&ranges);
        let failed: Vec<bool> = read.iter().map(|ok| !ok).collect();
        let index = self.chunks.len() as u32;
        let mut offset = 0;
        for ((&(start, end), &failed), &several) in runs.iter().zip(&failed).zip(several) {
            self.total += end - start;
            if !(failed && several) {
                let at = (!failed).then_some((index, offset));
                self.runs.push(Run { start, end, at });
            }
            offset += (end - start) as usize;
        }
        self.chunks.push(chunk);
        self.sort();
        failed
    }

    /// Sorts the runs by start: those of the last read, sorted, follow those before, sorted too,
    /// which a stable sort merges in one pass.
    fn sort(&mut self) {
        self.runs.sort_by_key(|r| r.start);
    }

    /// The run holding `[addr, addr + len)`: runs of different rounds may overlap, so a few before
    /// the last one starting at or below `addr` are looked at too, and one that read is preferred
    /// to one that failed.
    fn find(&self, addr: u64, len: u32) -> Option<Option<&[u8]>> {
        let end = addr.checked_add(u64::from(len))?;
        let holds = |i: usize, read: bool| {
            let r = &self.runs[i];
            r.start <= addr && end <= r.end && (r.at.is_some() || !read)
        };
        let [latest, before] = self.last.get();
        let cached = |i: usize| i < self.runs.len() && holds(i, true);
        let i = if cached(latest) {
            latest
        } else if cached(before) {
            self.last.set([before, latest]);
            before
        } else {
            let at = self.runs.partition_point(|r| r.start <= addr);
            let near = at.saturating_sub(8)..at;
            let i = (near.clone().rev().find(|&i| holds(i, true)))
                .or_else(|| near.rev().find(|&i| holds(i, false)))?;
            self.last.set([i, latest]);
            i
        };
        let r = &self.runs[i];
        let from = (addr - r.start) as usize;
        Some(r.at.map(|(chunk, offset)| {
            let at = offset + from;
            &self.chunks[chunk as usize][at..at + len as usize]
        }))
    }

    /// The word at `addr`, where a run read holds it.
    pub(super) fn word(&self, addr: u64) -> Option<u64> {
        word(self.find(addr, 8)??, 0)
    }

    /// `Ok(bytes)`, `Err(true)` if not read yet (now asked for), `Err(false)` if unreadable.
    fn get(&self, needs: &mut Vec<(u64, u32)>, addr: u64, len: u32) -> Result<&[u8], bool> {
        match self.find(addr, len) {
            Some(Some(b)) => Ok(b),
            Some(None) => Err(false),
            None if addr == 0 => Err(false),
            None => {
                needs.push((addr, len));
                Err(true)
            }
        }
    }
}

/// A semaphore's wait list, followed from its tail: the waiters' addresses, at most [`MAX_QUEUE`].
#[derive(Default)]
pub(super) struct Queue {
    nodes: Vec<u64>,
    /// It was followed: through the bytes read, or by [`Queues::follow_all`].
    done: bool,
    /// Until it is: where the word naming the next node is, not read yet.
    next: u64,
    /// A read on the way failed: what was counted is not the list.
    failed: bool,
    /// More wait past the ones counted.
    more: bool,
    /// `nodes` by address: every waiter in it looks itself up.
    index: crate::model::FastMap<u64, usize>,
}

impl Queue {
    /// A list whose tail pointer is at `tail`, each node's next `prev` bytes into it, followed as
    /// far as `bytes` go: most often they hold it whole (its waiters' values are among those
    /// read), and it is done without a round of reads of its own.
    fn new(bytes: &Bytes, tail: u64, prev: u32) -> Queue {
        let mut q = Queue {
            next: tail,
            ..Queue::default()
        };
        q.follow_through(bytes, prev);
        q
    }

    /// Follows the list on from [`Queue::next`] through `bytes` while they hold the next node;
    /// done once it ends, or once more than [`MAX_QUEUE`] are counted.
    fn follow_through(&mut self, bytes: &Bytes, prev: u32) {
        while self.nodes.len() <= MAX_QUEUE as usize {
            match bytes.word(self.next) {
                Some(0) => break,
                Some(node) => {
                    self.nodes.push(node);
                    self.next = node.wrapping_add(u64::from(prev));
                }
                None => return,
            }
        }
        self.finish();
    }

    /// Done with following: what was counted past [`MAX_QUEUE`] is only said to be more.
    fn finish(&mut self) {
        self.more = self.nodes.len() as u64 > MAX_QUEUE;
        self.nodes.truncate(MAX_QUEUE as usize);
        self.done = true;
    }

    /// Where `node` is, counted from the tail (0: next to be served).
    fn position(&mut self, node: u64) -> Option<usize> {
        // A short queue is looked through: most have one waiter or a few, and a map for each
        // costs more than the look.
        if self.nodes.len() <= 16 {
            return self.nodes.iter().position(|&n| n == node);
        }
        if self.index.is_empty() {
            self.index = (self.nodes.iter().enumerate())
                .map(|(i, &n)| (n, i))
                .collect();
        }
        self.index.get(&node).copied()
    }
}

/// Queues met, by (tail pointer's address, `prev`'s offset): shared by every waiter in one, and
/// followed once each, in one exchange where the source allows ([`Memory::chase`]).
#[derive(Default)]
pub(super) struct Queues {
    lists: crate::model::FastMap<(u64, u32), Queue>,
    /// How many times a value asked for a queue not followed yet: one that did waits for it.
    pub(super) asked: usize,
}

impl Queues {
    /// Whether a queue was met that is not followed yet.
    pub(super) fn waiting(&self) -> bool {
        self.lists.values().any(|q| !q.done)
    }

    /// Follows every queue met and not followed yet: on through the bytes read since it was met
    /// while they hold the next node, then from the first node they do not hold, all in one batch
    /// ([`Memory::chase_all`]).
    pub(super) fn follow_all(&mut self, mem: &dyn Memory, bytes: &Bytes) {
        let mut rest: Vec<(&mut Queue, (u64, u32, usize))> = Vec::new();
        for (&(_, prev), q) in self.lists.iter_mut().filter(|(_, q)| !q.done) {
            q.follow_through(bytes, prev);
            if !q.done {
                let list = (q.next, prev, MAX_QUEUE as usize + 1 - q.nodes.len());
                rest.push((q, list));
            }
        }
        let lists: Vec<(u64, u32, usize)> = rest.iter().map(|&(_, l)| l).collect();
        for ((q, _), chased) in rest.into_iter().zip(mem.chase_all(&lists)) {
            q.nodes.extend(chased.nodes);
            q.failed = chased.failed;
            q.finish();
        }
    }
}

/// What one round of decoding reads from: the bytes read so far, and whether it is the last.
pub(super) struct Round<'a> {
    pub(super) types: &'a ValueTypes,
    pub(super) bytes: &'a Bytes,
    /// The snapshot's time, which an `Instant`'s age is measured from.
    pub(super) now_ns: Option<u64>,
    /// A value still short of bytes in the last round is kept as it stands, its missing parts
    /// [`Value::Cut`]; in any other it is decoded again in the next, so it is only sketched: its
    /// parts are followed, for what they ask, and nothing more is built.
    pub(super) last: bool,
}

/// The value of type `ty` at `addr`, from the bytes `round` has; what it still needs is asked in
/// `needs` and `queues`.
pub(super) fn value(
    round: &Round<'_>,
    needs: &mut Vec<(u64, u32)>,
    queues: &mut Queues,
    ty: u32,
    addr: u64,
) -> Value {
    let asked_before = (needs.len(), queues.asked);
    let mut d = Decoder {
        types: round.types,
        bytes: round.bytes,
        needs,
        queues,
        now_ns: round.now_ns,
        within: None,
        last: round.last,
        asked_before,
    };
    d.value(ty, addr, 0)
}

struct Decoder<'a> {
    types: &'a ValueTypes,
    bytes: &'a Bytes,
    needs: &'a mut Vec<(u64, u32)>,
    queues: &'a mut Queues,
    now_ns: Option<u64>,
    /// The outermost future (a state machine held as a value) the value being decoded lies in.
    within: Option<Box<Within>>,
    last: bool,
    /// How much was asked before this value: more since, and it will be decoded again.
    asked_before: (usize, usize),
}

impl Decoder<'_> {
    /// Whether what is decoded now is thrown away (it asked for bytes, and this is not the last
    /// round): its parts are still followed, for what they ask, but no text, item list or field
    /// list is built for them.
    fn sketching(&self) -> bool {
        !self.last && (self.needs.len(), self.queues.asked) != self.asked_before
    }

    fn value(&mut self, ty: u32, addr: u64, depth: usize) -> Value {
        let Some(t) = self.types.get(ty) else {
            return Value::Unreadable;
        };
        let opaque = || Value::Opaque {
            type_name: t.name.clone(),
            addr,
        };
        match &t.shape {
            Shape::Unit => return unit(t),
            Shape::Opaque => return opaque(),
            _ if t.size == 0 || t.size > MAX_INLINE => return opaque(),
            _ if depth > MAX_DEPTH => return Value::Cut,
            _ => {}
        }
        let own = match self.bytes.get(self.needs, addr, t.size) {
            Ok(b) => b,
            Err(later) => return pending(later),
        };
        self.shaped(t, own, addr, depth)
            .unwrap_or(Value::Unreadable)
    }

    /// The value of `t` from its own bytes `b`; `None` where they hold no value of it.
    fn shaped(&mut self, t: &ValueType, b: &[u8], addr: u64, depth: usize) -> Option<Value> {
        Some(match &t.shape {
            Shape::Bool => match *b.first()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return None,
            },
            Shape::Char => Value::Char(char::from_u32(uint(b, 0, 4)? as u32)?),
            Shape::Int { signed } => int(b, *signed)?,
            Shape::Float => match b.len() {
                4 => Value::Float(FloatBits(
                    f64::from(f32::from_bits(uint(b, 0, 4)? as u32)).to_bits(),
                )),
                8 => Value::Float(FloatBits(uint(b, 0, 8)?)),
                _ => return None,
            },
            Shape::Str { ptr, len } => self.text(word(b, *ptr)?, word(b, *len)?),
            Shape::Seq {
                ptr,
                len,
                elem,
                stride,
            } => self.items(word(b, *ptr)?, word(b, *len)?, *elem, *stride, depth),
            Shape::Pointer { kind, to } => {
                let to = self.value(*to, word(b, 0)?, depth + 1);
                match self.sketching() {
                    true => Value::Cut,
                    false => pointer(*kind, word(b, 0)?, None, to),
                }
            }
            Shape::Counted { .. } => self.counted(&t.shape, b, depth)?,
            Shape::Address => Value::Address(word(b, 0)?),
            Shape::Duration { secs, nanos } => Value::Duration {
                secs: word(b, *secs)?,
                nanos: uint(b, *nanos, 4)? as u32,
            },
            Shape::Instant { secs, nanos } => {
                self.instant(word(b, *secs)? as i64, uint(b, *nanos, 4)?)?
            }
            Shape::Socket { v6, ip, port } => socket(b, *v6, *ip, *port)?,
            Shape::Enum { .. } => self.variant(&t.shape, b, addr, depth)?,
            Shape::Semaphore { .. }
            | Shape::Notify { .. }
            | Shape::Words { .. }
            | Shape::Fd { .. }
            | Shape::Guard { .. }
            | Shape::Endpoint { .. }
            | Shape::Channel { .. } => self.library(t, b, addr)?,
            Shape::Http { part, fields } => {
                let fields = self.fields(fields, addr, depth);
                http(*part, &fields)
            }
            Shape::Struct { fields, tuple } => Value::Struct {
                type_name: if *tuple {
                    Arc::from("")
                } else {
                    t.name.clone()
                },
                fields: self.fields(fields, addr, depth),
            },
            Shape::Unit | Shape::Opaque => return None,
        })
    }

    /// The value of one of the shapes the wait targets and the wait graph read (tokio's locks,
    /// channels, descriptors), from its own bytes `b`.
    fn library(&mut self, t: &ValueType, b: &[u8], addr: u64) -> Option<Value> {
        Some(match &t.shape {
            Shape::Semaphore { .. } => self.semaphore(&t.shape, b, addr)?,
            Shape::Notify { .. } => self.notify(&t.shape, b, addr)?,
            Shape::Words { words } => self.words(&t.name, words, b)?,
            Shape::Fd { ptr, fd } => {
                let at = word(b, *ptr)?.wrapping_add(u64::from(*fd));
                match self.bytes.get(self.needs, at, 4) {
                    Ok(w) => Value::Int(i64::from(uint(w, 0, 4)? as u32 as i32)),
                    Err(later) => pending(later),
                }
            }
            Shape::Guard {
                ptr,
                sem,
                lock,
                write,
            } => Value::Guard {
                lock: lock.clone(),
                write: *write,
                addr: word(b, *ptr)?.checked_add(u64::from(*sem))?,
                within: self.within.clone(),
                acquired_at: None,
            },
            Shape::Endpoint { ptr, data, sender } => Value::Endpoint {
                sender: *sender,
                addr: word(b, *ptr)?.checked_add(u64::from(*data))?,
                within: self.within.clone(),
            },
            Shape::Channel {
                hops,
                data,
                back,
                layout,
            } => self.channel(b, hops, *data, *back, layout)?,
            _ => return None,
        })
    }

    /// An `Arc` or `Rc`: its counts, read from the shared block, and its value there.
    fn counted(&mut self, shape: &Shape, b: &[u8], depth: usize) -> Option<Value> {
        let Shape::Counted {
            kind,
            ptr,
            strong,
            weak,
            data,
            to,
        } = *shape
        else {
            return None;
        };
        let p = word(b, ptr)?;
        let (s, w) = match self
            .bytes
            .get(self.needs, p, strong.max(weak).saturating_add(8))
        {
            Ok(c) => (word(c, strong)?, word(c, weak)?),
            Err(later) => return Some(pending(later)),
        };
        let to = self.value(to, p.wrapping_add(u64::from(data)), depth + 1);
        Some(match self.sketching() {
            true => Value::Cut,
            false => pointer(kind, p, Some((s, w)), to),
        })
    }

    /// A semaphore acquire's semaphore: its free permits, whether it is closed, how many wait in its
    /// list (at most [`MAX_QUEUE`] counted) and where this acquire is among them, counted from the
    /// tail, which tokio serves first. The list is followed once per dump, however many wait in it.
    fn semaphore(&mut self, shape: &Shape, b: &[u8], addr: u64) -> Option<Value> {
        let Shape::Semaphore {
            ptr,
            permits,
            tail,
            node,
            prev,
        } = *shape
        else {
            return None;
        };
        let sem = word(b, ptr)?;
        let p = match self.word_beside(sem, permits, tail) {
            Ok(p) => p,
            Err(v) => return v,
        };
        // With room for the queue's three (`place_in_list`): one allocation per waiter.
        let mut fields = Vec::with_capacity(6);
        fields.extend([
            field("addr", Value::Address(sem)),
            field("available", Value::Uint(p >> 1)),
            field("closed", Value::Bool(p & 1 == 1)),
        ]);
        let me = addr.wrapping_add(u64::from(node));
        if let Err(pending) =
            self.place_in_list(sem.wrapping_add(u64::from(tail)), prev, me, &mut fields)
        {
            return pending;
        }
        Some(Value::Struct {
            type_name: named("Semaphore"),
            fields,
        })
    }

    /// A `Notified`'s `Notify`: its state (`empty`, `waiting`, `notified`), its wait list as a
    /// semaphore's, and whether this waiter was notified (and not polled since).
    fn notify(&mut self, shape: &Shape, b: &[u8], addr: u64) -> Option<Value> {
        let Shape::Notify {
            ptr,
            state,
            tail,
            node,
            prev,
            notification,
        } = *shape
        else {
            return None;
        };
        let notify = word(b, ptr)?;
        let s = match self.word_beside(notify, state, tail) {
            Ok(s) => s,
            Err(v) => return v,
        };
        let state = match s & 3 {
            0 => "empty",
            1 => "waiting",
            2 => "notified",
            _ => return None,
        };
        let mut fields = Vec::with_capacity(6);
        fields.extend([
            field("addr", Value::Address(notify)),
            field("state", Value::text(state)),
            field("notified", Value::Bool(word(b, notification)? != 0)),
        ]);
        let me = addr.wrapping_add(u64::from(node));
        if let Err(pending) =
            self.place_in_list(notify.wrapping_add(u64::from(tail)), prev, me, &mut fields)
        {
            return pending;
        }
        Some(Value::Struct {
            type_name: named("Notify"),
            fields,
        })
    }

    /// The word `at` bytes past `base`, read with the one `also` bytes past it where they lie
    /// close: a lock's state word with its wait list's tail, which the list is then followed from
    /// among the bytes read ([`Queues::follow_all`]). `Err` holds what the value stands as
    /// meanwhile (`None`: unreadable).
    fn word_beside(&mut self, base: u64, at: u32, also: u32) -> Result<u64, Option<Value>> {
        let (lo, hi) = (at.min(also), at.max(also).saturating_add(8));
        let (from, len) = if hi - lo <= MAX_BESIDE {
            (lo, hi - lo)
        } else {
            (at, 8)
        };
        match self
            .bytes
            .get(self.needs, base.wrapping_add(u64::from(from)), len)
        {
            Ok(w) => word(w, at - from).ok_or(None),
            Err(later) => Err(Some(pending(later))),
        }
    }

    /// A tokio wait list's length (at most [`MAX_QUEUE`] counted) and where `me` is in it, counted
    /// from the tail, which tokio serves first, as fields. The list is followed once per dump,
    /// however many wait in it: until it is, `Err` holds what the value stands as meanwhile.
    fn place_in_list(
        &mut self,
        tail: u64,
        prev: u32,
        me: u64,
        fields: &mut Vec<Field>,
    ) -> Result<(), Option<Value>> {
        let bytes = self.bytes;
        let queue = (self.queues.lists.entry((tail, prev)))
            .or_insert_with(|| Queue::new(bytes, tail, prev));
        match (queue.done, queue.failed) {
            (false, _) => {
                self.queues.asked += 1;
                return Err(Some(Value::Cut));
            }
            (true, true) => return Err(None),
            (true, false) => {}
        }
        let position = queue.position(me);
        fields.push(field("queued", Value::Uint(queue.nodes.len() as u64)));
        fields.push(field("more", Value::Bool(queue.more)));
        if let Some(pos) = position {
            fields.push(field("position", Value::Uint(pos as u64 + 1)));
        }
        Ok(())
    }

    /// Chosen words through pointers (see [`Shape::Words`]), as a structure of unsigned integers
    /// (and addresses, for a word of size 0), named `name`.
    fn words(&mut self, name: &Arc<str>, words: &[Word], b: &[u8]) -> Option<Value> {
        let mut fields = Vec::with_capacity(words.len());
        // Every word not read yet is asked for in the same round: a value of several words
        // through one pointer takes as many rounds as the pointer has hops, not as it has words
        // (a `broadcast` receive's seven were cut short of them).
        let mut waiting = false;
        for w in words {
            let p = match w.hops.is_empty() {
                true => None,
                false => match self.follow(b, &w.hops) {
                    Ok(p) => Some(p),
                    Err(Some(Value::Cut)) => {
                        waiting = true;
                        continue;
                    }
                    Err(stands) => return stands,
                },
            };
            let value = match (p, w.size) {
                (Some(p), 0) => Value::Address(p.checked_add(u64::from(w.at))?),
                (None, 0) => return None,
                (None, size) => Value::Uint(uint(b, w.at, size)?),
                (Some(p), size @ (1 | 2 | 4 | 8)) => {
                    match self.bytes.get(
                        self.needs,
                        p.checked_add(u64::from(w.at))?,
                        u32::from(size),
                    ) {
                        Ok(bytes) => Value::Uint(uint(bytes, 0, size)?),
                        Err(true) => {
                            waiting = true;
                            continue;
                        }
                        Err(false) => return Some(Value::Unreadable),
                    }
                }
                (Some(_), _) => return None,
            };
            fields.push(Field {
                name: w.name.clone(),
                value,
            });
        }
        if waiting {
            return Some(Value::Cut);
        }
        Some(Value::Struct {
            type_name: name.clone(),
            fields,
        })
    }

    /// Where `hops` lead from the value's bytes `b`: the pointer `hops[0]` bytes in, then the pointer
    /// that many bytes into what each points at (see [`Shape::Channel`], [`Word`]). `Err` holds what
    /// the value stands as instead: pending while a pointer on the way is not read yet, `None`
    /// (unreadable) where one cannot be, or where there are no hops.
    fn follow(&mut self, b: &[u8], hops: &[u32]) -> Result<u64, Option<Value>> {
        let (first, rest) = hops.split_first().ok_or(None)?;
        let mut p = word(b, *first).ok_or(None)?;
        for &hop in rest {
            match self
                .bytes
                .get(self.needs, p.wrapping_add(u64::from(hop)), 8)
            {
                Ok(w) => p = word(w, 0).ok_or(None)?,
                Err(later) => return Err(Some(pending(later))),
            }
        }
        Ok(p)
    }

    /// A channel, through `hops` pointers from the leaf's bytes `b` (see [`Shape::Channel`]): its
    /// capacity, messages queued, senders alive and whether its receiver is.
    fn channel(
        &mut self,
        b: &[u8],
        hops: &[u32],
        data: u32,
        back: u32,
        layout: &ChanLayout,
    ) -> Option<Value> {
        let p = match self.follow(b, hops) {
            Ok(p) => p,
            Err(stands) => return stands,
        };
        let chan = p
            .wrapping_add(u64::from(data))
            .checked_sub(u64::from(back))?;
        // A channel's parts lie within its first few hundred bytes; more is a damaged plan.
        let span = Some(layout.span()).filter(|&s| s <= MAX_INLINE)?;
        let c = match self.bytes.get(self.needs, chan, span) {
            Ok(c) => c,
            Err(later) => return Some(pending(later)),
        };
        let permits = word(c, layout.permits)?;
        let mut fields = vec![field("addr", Value::Address(chan))];
        match layout.bound {
            Some(at) => {
                let bound = word(c, at)?;
                let queued = bound.checked_sub(permits >> 1)?;
                fields.push(field("capacity", Value::Uint(bound)));
                fields.push(field("queued", Value::Uint(queued)));
            }
            None => fields.push(field("queued", Value::Uint(permits >> 1))),
        }
        fields.push(field("senders", Value::Uint(word(c, layout.tx_count)?)));
        let closed = match *c.get(layout.rx_closed as usize)? {
            0 => false,
            1 => true,
            _ => return None,
        };
        fields.push(field("receiver_alive", Value::Bool(!closed)));
        Some(Value::Struct {
            type_name: named("Channel"),
            fields,
        })
    }

    /// An enum's variant, by its discriminant (or the one there is), with its fields.
    fn variant(&mut self, shape: &Shape, b: &[u8], addr: u64, depth: usize) -> Option<Value> {
        let Shape::Enum {
            discr,
            variants,
            bare,
        } = shape
        else {
            return None;
        };
        let d = match discr {
            Some(d) => Some(uint(b, d.offset, d.size)?),
            None => None,
        };
        let v = (variants.iter().find(|v| d.is_some() && v.value == d))
            .or_else(|| variants.iter().find(|v| v.value.is_none()))?;
        let outermost = self.within.is_none() && v.at.is_some();
        if outermost {
            self.within = Some(Box::new(Within {
                addr,
                stopped_at: v.at.clone(),
            }));
        }
        let mut fields = self.fields(&v.fields, addr, depth);
        if outermost {
            self.within = None;
        }
        for (name, at) in &v.acquired {
            if let Some(Field {
                value: Value::Guard { acquired_at, .. },
                ..
            }) = fields.iter_mut().find(|f| f.name == *name)
            {
                *acquired_at = Some(Box::new(at.clone()));
            }
        }
        Some(match (bare, fields.len()) {
            (true, 1) => fields.into_iter().next()?.value,
            _ => Value::Variant {
                name: v.name.clone(),
                fields,
            },
        })
    }

    fn fields(&mut self, fields: &[FieldShape], addr: u64, depth: usize) -> Vec<Field> {
        let mut out = Vec::with_capacity(if self.sketching() { 0 } else { fields.len() });
        for f in fields {
            let value = self.value(f.ty, addr.wrapping_add(u64::from(f.offset)), depth + 1);
            if !self.sketching() {
                out.push(Field {
                    name: f.name.clone(),
                    value,
                });
            }
        }
        out
    }

    /// UTF-8 text of stated length `len` at `p`: at most [`MAX_TEXT`] bytes of it, cut at a whole
    /// character.
    fn text(&mut self, p: u64, len: u64) -> Value {
        let n = len.min(MAX_TEXT as u64) as u32;
        if n == 0 {
            return Value::Str {
                text: String::new(),
                len,
            };
        }
        match self.bytes.get(self.needs, p, n) {
            Ok(_) if self.sketching() => Value::Cut,
            Ok(b) => {
                let text = match std::str::from_utf8(b) {
                    Ok(s) => s.to_owned(),
                    // Cut inside a character: up to it; anything else is no string.
                    Err(e) if e.error_len().is_none() => {
                        String::from_utf8_lossy(&b[..e.valid_up_to()]).into_owned()
                    }
                    Err(_) => return Value::Unreadable,
                };
                Value::Str { text, len }
            }
            Err(later) => pending(later),
        }
    }

    fn items(&mut self, p: u64, len: u64, elem: u32, stride: u32, depth: usize) -> Value {
        let shown = if stride == 0 {
            0
        } else {
            len.min(MAX_ITEMS as u64)
        };
        let mut items = Vec::new();
        for i in 0..shown {
            let item = self.value(elem, p.wrapping_add(i * u64::from(stride)), depth + 1);
            if !self.sketching() {
                items.push(item);
            }
        }
        Value::Seq { len, items }
    }

    fn instant(&self, secs: i64, nanos: u64) -> Option<Value> {
        let monotonic_ns = u64::try_from(secs)
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(nanos)?;
        let age_ns = self.now_ns.map(|now| now as i64 - monotonic_ns as i64);
        Some(Value::Instant {
            monotonic_ns,
            age_ns,
        })
    }
}

/// The name `s` as a shared string, made once per thread: every waiter's semaphore and channel
/// value has the same few field names, and copying each would be an allocation per field. The
/// names are the decoder's own literals, a dozen or so: found by where they lie, a look through
/// them costs less than hashing one.
fn named(s: &'static str) -> Arc<str> {
    thread_local! {
        static NAMES: std::cell::RefCell<Vec<(&'static str, Arc<str>)>> = Default::default();
    }
    NAMES.with(|names| {
        let mut names = names.borrow_mut();
        // By where it lies first, a compare a name; by its text only where no name lies there (a
        // literal may have more than one copy in the binary).
        let found = (names.iter().find(|(k, _)| std::ptr::eq(*k, s)))
            .or_else(|| names.iter().find(|(k, _)| *k == s));
        if let Some((_, name)) = found {
            return name.clone();
        }
        names.push((s, s.into()));
        names[names.len() - 1].1.clone()
    })
}

/// A zero-sized value: a unit struct by its name, `()` as an empty tuple.
fn unit(t: &ValueType) -> Value {
    let type_name = match &*t.name {
        "()" => Arc::from(""),
        _ => t.name.clone(),
    };
    Value::Struct {
        type_name,
        fields: Vec::new(),
    }
}

/// A value whose bytes are asked for (cut until they come, or for good past the last round), or
/// could not be read.
fn pending(later: bool) -> Value {
    match later {
        true => Value::Cut,
        false => Value::Unreadable,
    }
}

fn pointer(kind: PointerKind, addr: u64, counts: Option<(u64, u64)>, to: Value) -> Value {
    Value::Pointer {
        kind,
        addr,
        strong: counts.map(|c| c.0),
        weak: counts.map(|c| c.1),
        to: Box::new(to),
    }
}

/// The pointer-sized word at `at` in `b`, if `b` holds it whole.
fn word(b: &[u8], at: u32) -> Option<u64> {
    uint(b, at, 8)
}

fn int(b: &[u8], signed: bool) -> Option<Value> {
    let size = b.len();
    if size == 16 {
        // A 128-bit integer shows when it fits in 64 bits.
        let (lo, hi) = (word(b, 0)?, word(b, 8)?);
        return match (signed, hi) {
            (_, 0) if !signed || lo <= i64::MAX as u64 => Some(if signed {
                Value::Int(lo as i64)
            } else {
                Value::Uint(lo)
            }),
            (true, u64::MAX) if lo > i64::MAX as u64 => Some(Value::Int(lo as i64)),
            _ => None,
        };
    }
    let v = uint(b, 0, u8::try_from(size).ok()?)?;
    Some(match signed {
        false => Value::Uint(v),
        true => {
            let shift = 64 - 8 * size as u32;
            Value::Int(((v << shift) as i64) >> shift)
        }
    })
}

pub(super) fn socket(b: &[u8], v6: bool, ip: u32, port: u32) -> Option<Value> {
    let port = uint(b, port, 2)? as u16;
    let text = if v6 {
        let o: [u8; 16] = b.get(ip as usize..ip as usize + 16)?.try_into().ok()?;
        format!("[{}]:{port}", Ipv6Addr::from(o))
    } else {
        // As `Ipv4Addr`'s `Display` writes it, which costs ten times as much: a dump may hold one
        // per task.
        let o: [u8; 4] = b.get(ip as usize..ip as usize + 4)?.try_into().ok()?;
        let mut text = String::with_capacity(21);
        for (i, octet) in o.iter().enumerate() {
            if i > 0 {
                text.push('.');
            }
            text.push_str(itoa::Buffer::new().format(*octet));
        }
        text.push(':');
        text.push_str(itoa::Buffer::new().format(port));
        text
    };
    Some(Value::SocketAddr(text))
}

/// A field named by one of the few names the decoder gives.
fn field(name: &'static str, value: Value) -> Field {
    Field {
        name: named(name),
        value,
    }
}

/// What names a request, from the fields of one part of its head, read (see [`Shape::Http`]).
pub(super) fn http(part: HttpPart, fields: &[Field]) -> Value {
    let get = |name: &str| fields.iter().find(|f| &*f.name == name).map(|f| &f.value);
    let of = |name: &str| match get(name) {
        Some(Value::Http { method, target }) => (method.clone(), target.clone()),
        _ => (None, None),
    };
    let (method, target) = match part {
        HttpPart::Request => of("head"),
        HttpPart::Parts => (of("method").0, of("uri").1),
        HttpPart::Uri => (None, of("path_and_query").1),
        HttpPart::PathAndQuery => {
            let target = match get("data") {
                // An empty path is the root's (`http://host` asks for `/`).
                Some(Value::Str { text, .. }) if text.is_empty() => Some("/".to_owned()),
                Some(Value::Str { text, len }) if (text.len() as u64) < *len => {
                    Some(format!("{text}…"))
                }
                Some(Value::Str { text, .. }) => Some(text.clone()),
                _ => None,
            };
            (None, target)
        }
        HttpPart::Method => {
            let method = match get("0") {
                Some(Value::Variant { name, .. }) => Some(method_name(name)),
                _ => None,
            };
            (method, None)
        }
    };
    Value::Http { method, target }
}

/// A method as HTTP spells it, from the name of its variant in the `http` crate (`Post`: `POST`);
/// one of its own (an extension) is not read.
fn method_name(variant: &str) -> String {
    match variant {
        "ExtensionInline" | "ExtensionAllocated" => "(extension method)".to_owned(),
        standard => standard.to_ascii_uppercase(),
    }
}
