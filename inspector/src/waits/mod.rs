//! The wait graph stage, after the values stage has read the locals that may hold a lock or a
//! channel's end: which frame holds which ([`Held`], from the guards, permits, senders and
//! receivers among its locals), who holds what each leaf waits for ([`Holder`]: the lock's guard,
//! the receiver that can make room in a full channel, the senders that can end a receive), and the
//! edges between tasks ([`WaitEdge`]: a `JoinHandle` awaited, a lock or channel end held), whose
//! cycles become the dump's deadlocks. A guard found inside a future a frame keeps but does not
//! poll makes its edges futurelocks.
//!
//! Locals read only to find guards are dropped here, unless `-v` or `--fields` asked for them.

#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::model::values::{Local, Reading, ThreadLocal, Value, WaitKind};
use crate::model::waits::{Held, Holder, StaticHolder, ThreadHolder, WaitEdge, WaitsFor, cycles};
use crate::model::{Dump, FastMap, FrameNode, Loc, TaskView, any_frame, is_own_code};

/// Finds holders and waits in `dump` (whose values are read) and sets its wait graph and deadlocks.
pub fn resolve(dump: &mut Dump, reading: &Reading) {
    let held = holders(dump, reading);
    let others = Others {
        statics: static_holders(&std::mem::take(&mut dump.statics)),
        threads: thread_holders(&std::mem::take(&mut dump.on_threads)),
    };
    let mut edges: Vec<WaitEdge> = (dump.tasks.iter())
        .filter_map(|t| {
            let a = t.awaited_by.as_ref()?;
            Some(WaitEdge {
                from: a.task,
                to: t.id,
                waits_in: a.path.last().map(|p| Arc::from(p.as_str())),
                waits_at: None,
                any_of: false,
                on: WaitsFor::Join,
            })
        })
        .collect();
    let mut own_code = OwnCode::default();
    for t in &mut dump.tasks {
        edges.extend(waits_of(t, &held, &others, &mut own_code));
        edges.extend(oneshot_waits(t));
    }
    edges.sort_by_key(|e| (e.from, e.to));
    // A receive any of several senders can end is no deadlock for one of them being stuck.
    let binding = edges.iter().filter(|e| !e.any_of);
    dump.deadlocks = cycles(binding.map(|e| (e.from, e.to)));
    dump.waits = edges;
}

/// Whether any task waits where a holder can be named (a lock or semaphore, a channel's send or
/// receive): where none does, no static or thread need be looked at for one.
pub fn any_holdable_wait(dump: &Dump) -> bool {
    let holdable = |n: &FrameNode| {
        (n.waits_on.as_ref())
            .is_some_and(|w| matches!(w.kind, WaitKind::Permits { .. } | WaitKind::Receive))
    };
    dump.tasks.iter().any(|t| any_frame(&t.frames, &holdable))
}

/// [`is_own_code`] of frames, by their shared description: the frames of one function at one
/// await share theirs, so each is asked once however many tasks wait there.
#[derive(Default)]
struct OwnCode(FastMap<*const crate::model::FrameInfo, bool>);

impl OwnCode {
    fn is(&mut self, f: &FrameNode) -> bool {
        *(self.0)
            .entry(Arc::as_ptr(&f.meta))
            .or_insert_with(|| is_own_code(f))
    }
}

/// What a frame can hold that a wait is for: a lock, or a channel's sender or receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Lock,
    Sender,
    Receiver,
}

/// Every frame's holds (set on it), by what they hold; the locals read only for them dropped.
fn holders(dump: &mut Dump, reading: &Reading) -> FastMap<(Role, u64), Vec<Holder>> {
    let mut held: FastMap<(Role, u64), Vec<Holder>> = FastMap::default();
    for t in &mut dump.tasks {
        if !any_frame(&t.frames, &|n| !n.locals.is_empty()) {
            continue;
        }
        let task = t.id;
        preorder_mut(Arc::make_mut(&mut t.frames).as_mut_slice(), &mut |_, n| {
            n.holds = holds_of(n);
            for h in &n.holds {
                let holder = Holder {
                    task,
                    frame: Arc::from(n.meta.name.as_str()),
                    at: where_(n),
                    held: h.clone(),
                };
                held.entry((role(h), h.addr)).or_default().push(holder);
            }
            n.locals.retain(|l| reading.locals.wants(l.name()));
        });
    }
    held
}

/// What the program's statics hold, by what they hold.
fn static_holders(statics: &[Local]) -> FastMap<(Role, u64), Vec<StaticHolder>> {
    let mut held: FastMap<(Role, u64), Vec<StaticHolder>> = FastMap::default();
    for s in statics {
        for h in holds_in(std::slice::from_ref(s), &[]) {
            let holder = StaticHolder {
                name: s.info.name.clone(),
                held: h,
            };
            held.entry((role(&holder.held), holder.held.addr))
                .or_default()
                .push(holder);
        }
    }
    held
}

/// What the program's threads hold in their stacks' locals, by what they hold: each thing once
/// per thread (a local moved out of keeps its bits; see `crate::threads`).
fn thread_holders(locals: &[ThreadLocal]) -> FastMap<(Role, u64), Vec<ThreadHolder>> {
    let mut held: FastMap<(Role, u64), Vec<ThreadHolder>> = FastMap::default();
    for l in locals {
        for h in holds_in(std::slice::from_ref(&l.local), &[]) {
            let holders = held.entry((role(&h), h.addr)).or_default();
            if holders.iter().any(|o| o.tid == l.tid) {
                continue;
            }
            holders.push(ThreadHolder {
                tid: l.tid,
                thread: l.thread.clone(),
                function: l.function.clone(),
                declared: l.declared.clone(),
                held: h,
            });
        }
    }
    held
}

/// The holders that are no task, by what they hold.
struct Others {
    statics: FastMap<(Role, u64), Vec<StaticHolder>>,
    threads: FastMap<(Role, u64), Vec<ThreadHolder>>,
}

fn role(h: &Held) -> Role {
    match &*h.lock {
        SENDER => Role::Sender,
        RECEIVER => Role::Receiver,
        _ => Role::Lock,
    }
}

/// What [`Held::lock`] says of a channel's ends.
const SENDER: &str = "channel sender";
const RECEIVER: &str = "channel receiver";

/// The edges of task `t`'s waits to the holders of what it waits for, each leaf told its holders.
fn waits_of(
    t: &mut TaskView,
    held: &FastMap<(Role, u64), Vec<Holder>>,
    others: &Others,
    own_code: &mut OwnCode,
) -> Vec<WaitEdge> {
    let mut waits = Vec::new();
    preorder_with_path(&t.frames, &mut |i, n, path| {
        if let Some(w) = waited(n) {
            let own = path.iter().rev().find(|f| own_code.is(f));
            waits.push((
                i,
                w,
                own.map(|f| (Arc::<str>::from(f.meta.name.as_str()), where_(f))),
            ));
        }
    });
    // Most tasks wait on nothing a frame holds: their frames stay shared, not copied.
    if waits.is_empty() {
        return Vec::new();
    }
    let mut edges = Vec::new();
    let frames = Arc::make_mut(&mut t.frames).as_mut_slice();
    for (i, (role, addr, alive), own) in waits {
        let holders = held.get(&(role, addr)).cloned().unwrap_or_default();
        for h in &holders {
            let holder = h.clone();
            edges.push(WaitEdge {
                from: t.id,
                to: h.task,
                waits_in: own.as_ref().map(|o| o.0.clone()),
                waits_at: own.as_ref().and_then(|o| o.1.clone()),
                any_of: role == Role::Sender && alive != Some(1),
                on: match role {
                    Role::Lock => WaitsFor::Lock { holder },
                    _ => WaitsFor::Channel { holder },
                },
            });
        }
        let statics = others
            .statics
            .get(&(role, addr))
            .cloned()
            .unwrap_or_default();
        let threads = others
            .threads
            .get(&(role, addr))
            .cloned()
            .unwrap_or_default();
        preorder_mut(frames, &mut |j, n| {
            if let (true, Some(w)) = (j == i, n.waits_on.as_mut()) {
                w.holders = holders.clone();
                w.statics = statics.clone();
                w.threads = threads.clone();
            }
        });
    }
    edges
}

/// The edges of task `t`'s `oneshot` receives whose sender a walk found held by a task (the decoded
/// delegate's `sender_held_by`), while nothing was sent and the sender is not dropped.
fn oneshot_waits(t: &TaskView) -> Vec<WaitEdge> {
    let mut edges = Vec::new();
    for d in t
        .decoded_delegates
        .iter()
        .filter(|d| !d.value_sent && !d.closed)
    {
        let Some(sender) = d.sender_held_by else {
            continue;
        };
        // The program's own frame above the receiver's leaf.
        let mut own = None;
        preorder_with_path(&t.frames, &mut |_, n, path| {
            if own.is_none() && n.meta.name == d.leaf {
                let f = path.iter().rev().find(|f| is_own_code(f));
                own = f.map(|f| (Arc::<str>::from(f.meta.name.as_str()), where_(f)));
            }
        });
        let (waits_in, waits_at) = own.unzip();
        edges.push(WaitEdge {
            from: t.id,
            to: sender,
            waits_in,
            waits_at: waits_at.flatten(),
            any_of: false,
            on: WaitsFor::Oneshot,
        });
    }
    edges
}

/// Where a frame is: the await it is suspended at, else where it is defined.
fn where_(n: &FrameNode) -> Option<Loc> {
    (n.meta.suspended_at.as_ref())
        .or(n.meta.location.as_ref())
        .cloned()
}

/// What a leaf waits for that a frame may hold, by its address, and for a receive how many
/// senders are alive: a lock's semaphore (held by guards); a send's channel, whose receiver can
/// make room; a receive's channel, whose senders can send.
fn waited(n: &FrameNode) -> Option<(Role, u64, Option<u64>)> {
    let w = n.waits_on.as_ref()?;
    let address = |v: &Value| match v.field("addr")? {
        Value::Address(a) => Some(*a),
        _ => None,
    };
    match &w.kind {
        WaitKind::Permits { lock } if &**lock == "channel" => {
            let c = w.part("channel")?;
            let alive = matches!(c.field("receiver_alive"), Some(Value::Bool(true)));
            alive.then_some((Role::Receiver, address(c)?, None))
        }
        WaitKind::Permits { .. } => Some((Role::Lock, address(w.part("semaphore")?)?, None)),
        WaitKind::Receive => {
            let c = w.part("channel")?;
            let senders = match c.field("senders") {
                Some(Value::Uint(n)) => Some(*n),
                _ => None,
            };
            Some((Role::Sender, address(c)?, senders))
        }
        WaitKind::Sleep
        | WaitKind::Io { .. }
        | WaitKind::Notify
        | WaitKind::Watch
        | WaitKind::Broadcast
        | WaitKind::Barrier
        | WaitKind::Accept => None,
    }
}

/// The locks frame `n` holds, from the guards in its locals; a guard inside a future the walk went
/// into is that future's own frame's to show.
fn holds_of(n: &FrameNode) -> Vec<Held> {
    holds_in(&n.locals, &n.walked_within)
}

/// What `locals` hold, but inside the futures at `walked_within` (polled, their own frames show it).
fn holds_in(locals: &[Local], walked_within: &[u64]) -> Vec<Held> {
    let mut out = Vec::new();
    for l in locals {
        guards(&l.value, &mut |v| {
            let (lock, write, addr, within, acquired_at) = match v {
                Value::Guard {
                    lock,
                    write,
                    addr,
                    within,
                    acquired_at,
                } => (lock.clone(), *write, addr, within, acquired_at.as_deref()),
                Value::Endpoint {
                    sender,
                    addr,
                    within,
                } => {
                    let end = if *sender { SENDER } else { RECEIVER };
                    (Arc::from(end), false, addr, within, None)
                }
                _ => return,
            };
            if within
                .as_ref()
                .is_some_and(|w| walked_within.contains(&w.addr))
            {
                return;
            }
            out.push(Held {
                lock,
                write,
                addr: *addr,
                local: l.info.name.clone(),
                acquired_at: acquired_at.or(l.info.acquired.as_ref()).cloned(),
                polled: within.is_none(),
                stopped_at: within.as_ref().and_then(|w| w.stopped_at.clone()),
            });
        });
    }
    out.sort_by_key(|h| h.addr);
    out.dedup();
    out
}

/// Calls `f` on every guard in `v`: in fields, variants, items and boxes, not behind a shared
/// pointer (what an `&` or `Arc` leads to is not held by this value).
fn guards(v: &Value, f: &mut dyn FnMut(&Value)) {
    match v {
        Value::Guard { .. } | Value::Endpoint { .. } => f(v),
        Value::Struct { fields, .. } | Value::Variant { fields, .. } => {
            fields.iter().for_each(|x| guards(&x.value, f))
        }
        Value::Seq { items, .. } => items.iter().for_each(|x| guards(x, f)),
        Value::Pointer {
            kind: crate::model::values::PointerKind::Box,
            to,
            ..
        } => guards(to, f),
        _ => {}
    }
}

/// Calls `f` on every frame in pre-order, with its number in that order.
fn preorder_mut(nodes: &mut [FrameNode], f: &mut dyn FnMut(usize, &mut FrameNode)) {
    fn visit(nodes: &mut [FrameNode], i: &mut usize, f: &mut dyn FnMut(usize, &mut FrameNode)) {
        for n in nodes {
            f(*i, n);
            *i += 1;
            visit(&mut n.children, i, f);
        }
    }
    visit(nodes, &mut 0, f)
}

/// Like [`preorder_mut`], reading, with each frame's ancestors (root first).
fn preorder_with_path<'a>(
    nodes: &'a [FrameNode],
    f: &mut dyn FnMut(usize, &'a FrameNode, &[&'a FrameNode]),
) {
    fn visit<'a>(
        nodes: &'a [FrameNode],
        i: &mut usize,
        path: &mut Vec<&'a FrameNode>,
        f: &mut dyn FnMut(usize, &'a FrameNode, &[&'a FrameNode]),
    ) {
        for n in nodes {
            f(*i, n, path);
            *i += 1;
            path.push(n);
            visit(&n.children, i, path, f);
            path.pop();
        }
    }
    visit(nodes, &mut 0, &mut Vec::new(), f)
}
