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

use crate::model::threads::{
    Blocking, Doing, PARKING_LOT_MUTEX, PARKING_LOT_RWLOCK, STD_MUTEX, STD_RWLOCK, ThreadView,
};
use crate::model::values::{Local, Reading, ThreadLocal, Value, WaitKind, WaitOn};
use crate::model::waits::{Held, Holder, StaticHolder, ThreadHolder, WaitEdge, WaitsFor, cycles};
use crate::model::{Dump, FastMap, FrameInfo, FrameNode, Loc, THREAD, TaskView, any_frame};

/// Finds holders and waits in `dump` (whose values are read) and sets its wait graph and deadlocks.
/// The frames of `tasks` (by place in the dump, in order: those with a local, or a leaf waiting for
/// what a frame may hold, as reading the values found them) are walked once each, for what they
/// hold and what they wait for; the waits are given their holders after, when every holder is
/// known.
pub fn resolve(dump: &mut Dump, reading: &Reading, tasks: &[usize]) {
    let others = Others {
        statics: static_holders(&std::mem::take(&mut dump.statics)),
        threads: thread_holders(&std::mem::take(&mut dump.on_threads)),
    };
    // One pass over the tasks: each is a cache miss at 10,000 of them.
    let (mut edges, mut oneshots) = (Vec::new(), Vec::new());
    let mut found = Found::default();
    let mut tasks = tasks.iter().peekable();
    for (i, t) in dump.tasks.iter_mut().enumerate() {
        edges.extend(joined_by(t));
        oneshots.extend(oneshot_waits(t));
        if tasks.next_if_eq(&&i).is_some() {
            found.task(t, reading);
        }
    }
    let Found { held, waits, .. } = found;
    for w in waits {
        edges.extend(w.settle(&held, &others));
    }
    edges.extend(thread_waits(&dump.threads, &held, &others));
    // Sorted stably: a task's waits before its `oneshot` receives, as they were found.
    edges.extend(oneshots);
    edges.sort_by_key(|e| (e.from, e.to));
    // A receive any of several senders can end is no deadlock for one of them being stuck.
    let binding = edges.iter().filter(|e| !e.any_of);
    dump.deadlocks = cycles(binding.map(|e| (e.from, e.to)));
    dump.waits = edges;
}

/// Whether any task waits where a holder can be named (a lock or semaphore, a channel's send or
/// receive): where none does, no static or thread need be looked at for one.
pub fn any_holdable_wait(dump: &Dump) -> bool {
    let holdable = |n: &FrameNode| n.waits_on.as_ref().is_some_and(|w| w.kind.may_be_held());
    dump.threads.iter().any(|t| lock_wait(t).is_some())
        || dump.tasks.iter().any(|t| any_frame(&t.frames, &holdable))
}

/// The lock thread `t` is blocked on, if it is one whose holders are found: the addresses a
/// guard of it may hold it by. A std `Mutex` is its futex word; a std `RwLock` has two, its state
/// (readers wait on it) and a writers' notification word (writers do), side by side; parking_lot
/// parks a thread under the raw lock's address, or one past it (a writer waiting for readers to
/// leave).
fn lock_wait(t: &ThreadView) -> Option<[u64; 2]> {
    let Doing::Blocked {
        on: Blocking::Lock { kind, addr, .. },
    } = &t.doing
    else {
        return None;
    };
    let is = |lock: &str| {
        kind.strip_prefix(lock)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
    };
    let a = *addr;
    if a == 0 {
        None
    } else if is(STD_MUTEX) || is(PARKING_LOT_MUTEX) {
        Some([a, a])
    } else if is(STD_RWLOCK) {
        Some([a, a.wrapping_sub(4)])
    } else if is(PARKING_LOT_RWLOCK) {
        Some([a, a.wrapping_sub(1)])
    } else {
        None
    }
}

/// Where a thread is in the wait graph: as the task whose poll it is blocked in, else as itself.
fn thread_node(t: &ThreadView) -> u64 {
    t.polling.unwrap_or(THREAD | u64::from(t.tid))
}

/// The edges from the threads blocked on a lock whose holders are found ([`lock_wait`]) to whoever
/// holds it: a task's frame, or a
/// local of a function on a thread's stack (that thread as the task it polls, if it polls one).
/// A holder that is the waiter itself (a leftover of a guard let go) is no edge.
fn thread_waits(
    threads: &[ThreadView],
    held: &FastMap<(Role, u64), Vec<Holder>>,
    others: &Others,
) -> Vec<WaitEdge> {
    let node_of: FastMap<u32, u64> = threads.iter().map(|t| (t.tid, thread_node(t))).collect();
    let mut out = Vec::new();
    for t in threads {
        let Some(addrs) = lock_wait(t) else {
            continue;
        };
        // A lock known by one word is looked up once.
        let words = if addrs[0] == addrs[1] { 1 } else { 2 };
        let from = thread_node(t);
        let own = t.frames.iter().find(|f| f.own);
        let waits_in = own.map(|f| f.function.clone());
        let waits_at = own.and_then(|f| {
            Some(Loc {
                file: f.file.clone()?,
                line: f.line,
                column: 0,
            })
        });
        let keys: Vec<(Role, u64)> = addrs[..words].iter().map(|&a| (Role::Lock, a)).collect();
        let from_threads = (keys.iter())
            .filter_map(|k| others.threads.get(k))
            .flatten()
            .map(|h| Holder {
                task: node_of
                    .get(&h.tid)
                    .copied()
                    .unwrap_or(THREAD | u64::from(h.tid)),
                frame: h.function.as_str().into(),
                at: h.declared.clone(),
                held: h.held.clone(),
            });
        let holders =
            (keys.iter().filter_map(|k| held.get(k)).flatten().cloned()).chain(from_threads);
        for holder in holders.filter(|h| h.task != from) {
            out.push(WaitEdge {
                from,
                to: holder.task,
                waits_in: waits_in.clone(),
                waits_at: waits_at.clone(),
                any_of: false,
                on: WaitsFor::Lock { holder },
            });
        }
    }
    out
}

/// What a frame can hold that a wait is for: a lock, or a channel's sender or receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Lock,
    Sender,
    Receiver,
}

/// What the walk of the tasks' frames finds: what each frame holds (set on it, and gathered by
/// what it holds), and the leaves that wait for something a frame may hold, to be given holders.
#[derive(Default)]
struct Found<'a> {
    held: FastMap<(Role, u64), Vec<Holder>>,
    waits: Vec<Wait<'a>>,
    /// Frames' names as shared text, by their shared description: one holder is named in each of
    /// its waiters, and many waiters wait in one function.
    names: FastMap<*const FrameInfo, Arc<str>>,
}

/// The locks a task's `frames` hold twice, once where they are polled and once in a future they
/// keep unpolled, where only one can hold it (a mutex, a lock held to write): the unpolled one is
/// what a move left behind (an argument of an async fn moved into the future it awaits keeps its
/// bytes in the state machine), and is not told. Their addresses.
fn moved_from(frames: &[FrameNode]) -> Vec<u64> {
    let (mut polled, mut unpolled) = (Vec::new(), Vec::new());
    let mut stack: Vec<&FrameNode> = frames.iter().collect();
    while let Some(f) = stack.pop() {
        if !f.locals.is_empty() {
            let exclusive = |h: &Held| role(h) == Role::Lock && (&*h.lock == "Mutex" || h.write);
            for h in holds_in(&f.locals, &f.walked_within)
                .iter()
                .filter(|h| exclusive(h))
            {
                match h.polled {
                    true => polled.push(h.addr),
                    false => unpolled.push(h.addr),
                }
            }
        }
        stack.extend(f.children.iter());
    }
    unpolled.retain(|a| polled.contains(a));
    unpolled
}

/// A leaf's wait for what a frame may hold, until every holder is known.
struct Wait<'a> {
    task: u64,
    on: &'a mut WaitOn,
    role: Role,
    addr: u64,
    /// For a receive, how many senders are alive.
    alive: Option<u64>,
    /// The innermost frame of the program's own code above the leaf: its name and where it is.
    own: Option<(Arc<str>, Option<Loc>)>,
}

impl<'a> Found<'a> {
    /// Task `t`'s frames; the locals read only for their guards are dropped.
    fn task(&mut self, t: &'a mut TaskView, reading: &Reading) {
        let task = t.id;
        t.request = crate::model::values::request_of(&t.frames);
        let stale = moved_from(&t.frames);
        let frames = Arc::make_mut(&mut t.frames).as_mut_slice();
        self.frames(frames, None, (task, &stale), reading);
    }

    /// `nodes` and the frames below them, in pre-order; `own` is the innermost frame of the
    /// program's own code above them.
    fn frames(
        &mut self,
        nodes: &'a mut [FrameNode],
        own: Option<&'a FrameInfo>,
        (task, stale): (u64, &[u64]),
        reading: &Reading,
    ) {
        for n in nodes {
            let FrameNode {
                meta,
                locals,
                waits_on,
                holds,
                walked_within,
                children,
                ..
            } = n;
            let meta: &'a FrameInfo = meta;
            if !locals.is_empty() {
                *holds = holds_in(locals, walked_within);
                holds.retain(|h| h.polled || !stale.contains(&h.addr));
                for h in holds.iter() {
                    let holder = Holder {
                        task,
                        frame: self.name(meta),
                        at: meta.at().cloned(),
                        held: h.clone(),
                    };
                    self.held.entry((role(h), h.addr)).or_default().push(holder);
                }
                locals.retain(|l| reading.locals.wants(l.name()));
            }
            if let Some(on) = waits_on.as_deref_mut()
                && let Some((role, addr, alive)) = waited(on)
            {
                let own = own.map(|f| (self.name(f), f.at().cloned()));
                let wait = Wait {
                    task,
                    on,
                    role,
                    addr,
                    alive,
                    own,
                };
                self.waits.push(wait);
            }
            let own = if meta.is_own_code() { Some(meta) } else { own };
            self.frames(children, own, (task, stale), reading);
        }
    }

    fn name(&mut self, f: &FrameInfo) -> Arc<str> {
        let name = self.names.entry(std::ptr::from_ref(f));
        name.or_insert_with(|| Arc::from(f.name.as_str())).clone()
    }
}

impl Wait<'_> {
    /// Tells the leaf its holders, and gives the edges to the tasks among them.
    fn settle(self, held: &FastMap<(Role, u64), Vec<Holder>>, others: &Others) -> Vec<WaitEdge> {
        let key = (self.role, self.addr);
        let holders = held.get(&key).cloned().unwrap_or_default();
        let (waits_in, waits_at) = self.own.unzip();
        let edges = (holders.iter())
            .map(|h| WaitEdge {
                from: self.task,
                to: h.task,
                waits_in: waits_in.clone(),
                waits_at: waits_at.clone().flatten(),
                any_of: self.role == Role::Sender && self.alive != Some(1),
                on: match self.role {
                    Role::Lock => WaitsFor::Lock { holder: h.clone() },
                    _ => WaitsFor::Channel { holder: h.clone() },
                },
            })
            .collect();
        self.on.holders = holders;
        self.on.statics = others.statics.get(&key).cloned().unwrap_or_default();
        self.on.threads = others.threads.get(&key).cloned().unwrap_or_default();
        edges
    }
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

/// The edge from the task that awaits `t`'s `JoinHandle`, if one does.
fn joined_by(t: &TaskView) -> Option<WaitEdge> {
    let a = t.awaited_by.as_ref()?;
    Some(WaitEdge {
        from: a.task,
        to: t.id,
        waits_in: a.path.last().map(|p| Arc::from(p.as_str())),
        waits_at: None,
        any_of: false,
        on: WaitsFor::Join,
    })
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
        preorder_with_path(&t.frames, &mut |n, path| {
            if own.is_none() && n.meta.name == d.leaf {
                let f = path.iter().rev().find(|f| f.meta.is_own_code());
                own = f.map(|f| (Arc::<str>::from(f.meta.name.as_str()), f.meta.at().cloned()));
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

/// What a leaf waits for that a frame may hold, by its address, and for a receive how many
/// senders are alive: a lock's semaphore (held by guards); a send's channel, whose receiver can
/// make room; a receive's channel, whose senders can send.
fn waited(w: &WaitOn) -> Option<(Role, u64, Option<u64>)> {
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

/// Calls `f` on every frame in pre-order, with its ancestors (root first).
fn preorder_with_path<'a>(
    nodes: &'a [FrameNode],
    f: &mut dyn FnMut(&'a FrameNode, &[&'a FrameNode]),
) {
    fn visit<'a>(
        nodes: &'a [FrameNode],
        path: &mut Vec<&'a FrameNode>,
        f: &mut dyn FnMut(&'a FrameNode, &[&'a FrameNode]),
    ) {
        for n in nodes {
            f(n, path);
            path.push(n);
            visit(&n.children, path, f);
            path.pop();
        }
    }
    visit(nodes, &mut Vec::new(), f)
}
