//! Is it stuck, and why: a [`Verdict`] for every waiting task, from evidence the dump already read,
//! each naming its evidence. [`judge`] gives them once the wait graph and the threads are read;
//! [`super::causes`] groups them by what, in the end, holds each task up.
//!
//! The rules, the first that holds wins (a test each, below):
//!
//! | verdict              | when                                                               |
//! |----------------------|--------------------------------------------------------------------|
//! | `deadlocked`         | the task is in a wait cycle (through tasks, and threads' locks)    |
//! | `lost_wake_up`       | idle, and what a leaf waits for is ready ([`Ready`]): a deadline   |
//! |                      | long passed; else read at one moment with the state (`--stop`, a   |
//! |                      | core) or ready in every sample (`--samples`)                       |
//! | `woken_not_polled`   | scheduled; or ready in a runtime with none of its workers free, or |
//! |                      | with other tasks woken and not polled                              |
//! | `blocked_behind`     | a wait-graph edge leads on: followed to its [`End`]                |
//! | `nothing_can_wake`   | idle, and no waker of it exists ([`NoWaker`])                      |
//! | `outside`            | a sleep, a socket, a listener, a child process, a signal           |
//! | `unknown`            | none of these: why ([`UnknownWhy`])                                 |
//!
//! A waker's keeper is evidence here, never the chain: a verdict that needs it says so, and one
//! without it falls to the next rule. What is ready counts only once the task has waited
//! [`GRACE_NS`] where the agent times it, and only where it was read at one moment with the
//! task's state (held stopped, a core), or stayed so in every sample, or is a deadline long
//! passed: a wake-up in flight, or one that came between two reads, is not a lost one.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::threads::{Blocking, Doing};
use super::values::{Value, WaitKind, WaitOn};
use super::waits::WaitEdge;
use super::{Dump, FastMap, FrameNode, State, TaskView};

/// How long a task must have waited, where its age is known, before what it waits for being ready
/// says its wake-up was lost, and how far past its deadline a sleep must be: a wake in flight
/// takes microseconds, a busy worker's timer a millisecond or so.
pub const GRACE_NS: u64 = 100_000_000;
/// The most tasks a [`Verdict::BlockedBehind`] names between the task and its end.
pub const MAX_THROUGH: usize = 16;

/// Why a waiting task waits, and the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "snake_case")]
pub enum Verdict {
    /// In a wait cycle: no task of it can go on before another of it does.
    Deadlocked { cycle: Vec<u64> },
    /// Behind another task (a lock it holds, a `JoinHandle` awaited, a channel's other end):
    /// followed through `through` (at most [`MAX_THROUGH`]; `hops` in all) to `end`.
    BlockedBehind {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        through: Vec<u64>,
        hops: usize,
        end: End,
    },
    /// Idle, though what it waits for is ready: whoever made it ready did not wake it, or woke
    /// another waker.
    LostWakeUp { ready: Ready },
    /// Woken (or ready) and not polled: `woken_ago_ns` where known (`at_least`: a lower bound),
    /// whether its runtime's workers are all blocked or busy, and how many others of its runtime
    /// wait for a worker too.
    WokenNotPolled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ready: Option<Ready>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        woken_ago_ns: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        at_least: bool,
        starved: bool,
        /// Other tasks of its runtime woken and not polled either.
        #[serde(default)]
        others_queued: usize,
    },
    /// Idle, and no waker of it exists: a future returned `Pending` without keeping one.
    NothingCanWake { by: NoWaker },
    /// Waits on something outside the process's tasks, `waited_ns` so far where known.
    Outside {
        on: Outside,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waited_ns: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        at_least: bool,
    },
    /// Not waiting: inside a poll, on `thread` where known, blocked in what it says. Only as the
    /// end of a [`Verdict::BlockedBehind`].
    Running {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocked: Option<Blocking>,
    },
    /// None of the above holds: why, and what it waits in.
    Unknown {
        why: UnknownWhy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leaf: Option<String>,
        /// For [`UnknownWhy::AnyOf`]: the tasks any of which can end the wait.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tasks: Vec<u64>,
        /// What was read ready, where that is why no other verdict holds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ready: Option<Ready>,
    },
}

/// Where a chain of tasks blocked behind each other ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum End {
    /// A task that waits on no other: what it does ([`Verdict`]s but blocked and deadlocked).
    /// Shared by every task blocked behind it.
    Task { task: u64, doing: Arc<Verdict> },
    /// A wait cycle the chain leads into.
    Deadlock { cycle: Vec<u64> },
    /// A thread that holds the lock or channel end in a local on its stack, and what it does.
    Thread {
        tid: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        function: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        doing: Option<Doing>,
    },
    /// A static that holds it: nothing the dump shows lets it go.
    Static { name: Arc<str> },
}

/// What a leaf waits for, ready.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ready {
    DeadlinePassed {
        ago_ns: u64,
    },
    /// A lock, a semaphore or a channel's slots with permits free: `free` of `wanted`.
    PermitsFree {
        lock: Arc<str>,
        free: u64,
        wanted: u64,
    },
    MessagesQueued {
        queued: u64,
    },
    /// The other side is gone (senders dropped, a receiver dropped, a semaphore closed): the wait
    /// ends with an error.
    Closed {
        what: Arc<str>,
    },
    Notified,
    VersionChanged {
        seen: u64,
        now: u64,
    },
    Unread {
        unread: u64,
    },
    ValueSent,
    BytesQueued {
        fd: i64,
        bytes: u64,
    },
    ConnectionsWaiting {
        fd: i64,
        connections: u64,
    },
}

/// The evidence that no waker of a task exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoWaker {
    /// tokio's state word counts no reference to the task beyond its list's and its
    /// `JoinHandle`'s: no waker, no `AbortHandle`.
    TokioRefs,
    /// The agent counts no live clone of the task's waker: no leaf kept it.
    AgentClones,
    /// A `oneshot` receiver pending with no waker registered.
    Unregistered { leaf: String },
}

/// What outside the tasks a task waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outside {
    /// A timer: how long until its deadline, where a clock places it (a core's has none).
    Sleep {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        left_ns: Option<u64>,
    },
    Socket {
        fd: i64,
        write: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        local: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    Accept {
        fd: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        local: Option<String>,
    },
    ChildProcess {
        leaf: String,
    },
    Signal {
        leaf: String,
    },
}

/// Why no other verdict holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownWhy {
    /// Its chain was not decoded: nothing says what it waits on.
    NoChain,
    /// Its leaf's wait is not one the dump reads, and nothing says no waker of it exists.
    NotRead,
    /// It waits for a lock or a channel's end nobody the dump shows holds.
    HolderNotFound,
    /// Any of several tasks can end its wait (a receive with several senders).
    AnyOf,
    /// What it waits for is read and not ready, and who will make it so is not something memory
    /// says (a `Notify`, a `watch`, a barrier's other parties, a `oneshot` whose sender no task
    /// holds across an await).
    SignallerUnknown,
    /// What it waits for looks ready, too recently to say its wake-up was lost.
    JustReady,
    /// What it waits for was read ready after its state was, from a process that ran on between
    /// the two reads: a wake-up may have come between. Held stopped (`--stop`), from a core, or
    /// stuck in every sample (`--samples`), the same is a lost wake-up.
    ReadyUnconfirmed,
}

impl Verdict {
    /// The tasks it names (not threads).
    pub fn mentions(&self) -> Vec<u64> {
        let mut ids = Vec::new();
        match self {
            Verdict::Deadlocked { cycle } => ids.extend(cycle),
            Verdict::BlockedBehind { through, end, .. } => {
                ids.extend(through);
                match end {
                    End::Task { task, doing } => {
                        ids.push(*task);
                        ids.extend(doing.mentions());
                    }
                    End::Deadlock { cycle } => ids.extend(cycle),
                    End::Thread { .. } | End::Static { .. } => {}
                }
            }
            Verdict::Unknown { tasks, .. } => ids.extend(tasks),
            _ => {}
        }
        ids
    }
}

/// Gives every task of `dump` its verdict: none for a running or completed one, but a running one
/// in a wait cycle.
pub fn judge(dump: &mut Dump) {
    let verdicts: Vec<Option<Box<Verdict>>> = {
        let judge = Judge::new(dump);
        dump.tasks
            .iter()
            .map(|t| judge.verdict(t).map(Box::new))
            .collect()
    };
    for (t, v) in dump.tasks.iter_mut().zip(verdicts) {
        t.verdict = v;
    }
}

/// What every verdict looks up.
struct Judge<'a> {
    dump: &'a Dump,
    cycle_of: FastMap<u64, usize>,
    /// The wait graph's edges that bind (not a receive any of several can end), by waiter.
    binding: FastMap<u64, Vec<&'a WaitEdge>>,
    /// Those that do not, by waiter: the tasks any of which can end its wait.
    any_of: FastMap<u64, Vec<u64>>,
    /// How many tasks each runtime (by its place in the dump's) has woken and not polled.
    queued: FastMap<u32, usize>,
    /// The ends found, by task: ten thousand tasks queued behind one holder share its end.
    ends: std::cell::RefCell<FastMap<u64, End>>,
    /// The tasks' states and what they wait for were read at one moment: held stopped, or from a
    /// core.
    one_moment: bool,
}

impl<'a> Judge<'a> {
    fn new(dump: &'a Dump) -> Judge<'a> {
        let mut cycle_of = FastMap::default();
        for (i, c) in dump.deadlocks.iter().enumerate() {
            for &t in c {
                cycle_of.entry(t).or_insert(i);
            }
        }
        let (mut binding, mut any_of) = (FastMap::default(), FastMap::default());
        for e in &dump.waits {
            match e.any_of {
                false => binding.entry(e.from).or_insert_with(Vec::new).push(e),
                true => any_of.entry(e.from).or_insert_with(Vec::new).push(e.to),
            }
        }
        let mut queued = FastMap::default();
        for t in dump.tasks.iter().filter(|t| t.state == State::Scheduled) {
            if let Some(k) = t.tokio_task {
                *queued.entry(k.runtime).or_default() += 1;
            }
        }
        Judge {
            dump,
            cycle_of,
            binding,
            any_of,
            queued,
            ends: Default::default(),
            one_moment: dump.snapshot.stopped.is_some()
                || dump.process.read_from == super::ReadFrom::Core,
        }
    }

    /// The verdict of `t`, for a waiting task, or a running one in a wait cycle (its thread
    /// blocked on a lock inside its poll).
    fn verdict(&self, t: &TaskView) -> Option<Verdict> {
        if let Some(&c) = self
            .cycle_of
            .get(&t.id)
            .filter(|_| t.state != State::Completed)
        {
            return Some(Verdict::Deadlocked {
                cycle: self.dump.deadlocks[c].clone(),
            });
        }
        if !t.state.suspended() {
            return None;
        }
        if let Some(v) = self.woken_or_ready(t) {
            return Some(v);
        }
        if let Some(v) = self.blocked(t) {
            return Some(v);
        }
        Some(self.own_wait(t))
    }

    /// What a task that waits on no other does: the end of a chain of tasks blocked behind it.
    fn doing(&self, t: &TaskView) -> Verdict {
        match t.state {
            State::Running | State::Completed => Verdict::Running {
                thread: t.thread.as_ref().map(|th| th.tid),
                blocked: self.blocked_in(t.id),
            },
            _ => (self.woken_or_ready(t)).unwrap_or_else(|| self.own_wait(t)),
        }
    }

    /// What the thread polling task `id` is blocked in, where its stack was read.
    fn blocked_in(&self, id: u64) -> Option<Blocking> {
        let th = self.dump.threads.iter().find(|th| th.polling == Some(id))?;
        match &th.doing {
            Doing::Blocked { on } => Some(on.clone()),
            _ => None,
        }
    }

    /// Lost wake-up, or woken and not polled: what the task's state and what it waits for say.
    /// What is ready in a runtime whose workers are not free (starved, or with other tasks woken
    /// and waiting for one) is only not polled yet: its wake may not have been sent (a timer
    /// fires when a worker comes to the driver).
    fn woken_or_ready(&self, t: &TaskView) -> Option<Verdict> {
        let starved = self.dump.starved.iter().any(|s| s.holds(self.dump, t));
        let runtime = t.tokio_task.map(|k| k.runtime);
        let queued = runtime
            .and_then(|r| self.queued.get(&r))
            .copied()
            .unwrap_or(0);
        if t.state == State::Scheduled {
            let (woken_ago_ns, at_least) = match (t.last_wake_ago_ns, t.unchanged_ns) {
                (Some(ns), _) => (Some(ns), false),
                (None, ns) => (ns, ns.is_some()),
            };
            return Some(Verdict::WokenNotPolled {
                ready: None,
                woken_ago_ns,
                at_least,
                starved,
                others_queued: queued.saturating_sub(1),
            });
        }
        let ready = ready_of(t)?;
        // Only an exact age (the agent's) says the task went idle a moment ago: a lower bound
        // that is short says nothing.
        let recent = !matches!(ready, Ready::DeadlinePassed { .. })
            && t.waiting_ns()
                .is_some_and(|(ns, at_least)| !at_least && ns < GRACE_NS);
        if starved || queued > 0 {
            return Some(Verdict::WokenNotPolled {
                ready: Some(ready),
                woken_ago_ns: None,
                at_least: false,
                starved,
                others_queued: queued,
            });
        }
        if recent {
            return None;
        }
        // A deadline passed well before the snapshot says so whenever it was read; anything else
        // read after the task's state says so only of a moment the state does not describe.
        let stuck = t
            .progress
            .is_some_and(|p| p.verdict == super::progress::Verdict::Stuck);
        let timer = matches!(ready, Ready::DeadlinePassed { .. });
        if !(timer || stuck || self.one_moment) {
            return Some(Verdict::Unknown {
                why: UnknownWhy::ReadyUnconfirmed,
                leaf: super::leaf_frame(&t.frames).map(leaf_name),
                tasks: Vec::new(),
                ready: Some(ready),
            });
        }
        Some(Verdict::LostWakeUp { ready })
    }

    /// Blocked behind another task, a thread or a static: the wait graph followed to its end.
    fn blocked(&self, t: &TaskView) -> Option<Verdict> {
        let Some(first) = self.next(t.id) else {
            return held_elsewhere(self.dump, t);
        };
        let (mut through, mut hops, mut at) = (Vec::new(), 1, first);
        let mut seen = super::FastSet::default();
        seen.insert(t.id);
        loop {
            if let Some(&c) = self.cycle_of.get(&at) {
                let cycle = self.dump.deadlocks[c].clone();
                return Some(blocked(through, hops, End::Deadlock { cycle }));
            }
            // A thread's own future (its `block_on`'s) is a task of the dump; any other thread
            // is an end of its own.
            let task = self.dump.task(at);
            if task.is_none() && at & super::THREAD != 0 {
                return Some(blocked(through, hops, self.thread_end(at)));
            }
            let task = task?;
            match self.next(at).filter(|n| !seen.contains(n)) {
                Some(n) if task.state.suspended() => {
                    seen.insert(at);
                    if through.len() < MAX_THROUGH {
                        through.push(at);
                    }
                    (hops, at) = (hops + 1, n);
                }
                _ => return Some(blocked(through, hops, self.end_at(task))),
            }
        }
    }

    /// The end a chain of blocked tasks reaches at `task`, which waits on no other task: the
    /// thread or static that holds what it waits for, else itself and what it does.
    fn end_at(&self, task: &TaskView) -> End {
        if let Some(end) = self.ends.borrow().get(&task.id) {
            return end.clone();
        }
        let end = match held_elsewhere(self.dump, task) {
            Some(Verdict::BlockedBehind { end, .. }) => end,
            _ => End::Task {
                task: task.id,
                doing: Arc::new(self.doing(task)),
            },
        };
        self.ends.borrow_mut().insert(task.id, end.clone());
        end
    }

    /// The task (or thread) the first binding edge from `id` leads to.
    fn next(&self, id: u64) -> Option<u64> {
        self.binding.get(&id).and_then(|e| e.first()).map(|e| e.to)
    }

    /// A thread of the wait graph (keyed [`super::THREAD`]) as an end.
    fn thread_end(&self, key: u64) -> End {
        let tid = (key & !super::THREAD) as u32;
        let th = self.dump.threads.iter().find(|th| th.tid == tid);
        let function = (th.and_then(|th| th.frames.iter().find(|f| f.own)))
            .map_or_else(String::new, |f| f.function.to_string());
        End::Thread {
            tid,
            name: th.and_then(|th| th.name.clone()),
            function,
            doing: th.map(|th| th.doing.clone()),
        }
    }

    /// What the task waits on itself: no waker, outside, or unknown.
    fn own_wait(&self, t: &TaskView) -> Verdict {
        if t.state == State::Idle
            && let Some(by) = no_waker(t)
        {
            return Verdict::NothingCanWake { by };
        }
        let (waited_ns, at_least) = t.waiting_ns().unzip();
        if let Some(on) = outside(t) {
            return Verdict::Outside {
                on,
                waited_ns,
                at_least: at_least.unwrap_or(false),
            };
        }
        let leaf = super::leaf_frame(&t.frames).map(leaf_name);
        let unknown = |why| Verdict::Unknown {
            why,
            leaf: leaf.clone(),
            tasks: Vec::new(),
            ready: None,
        };
        if let Some(tasks) = self.any_of.get(&t.id) {
            return Verdict::Unknown {
                why: UnknownWhy::AnyOf,
                leaf,
                tasks: tasks.clone(),
                ready: None,
            };
        }
        if t.frames.is_empty() {
            return unknown(UnknownWhy::NoChain);
        }
        let any_wait = find_wait(&t.frames, |_| Some(())).is_some();
        if let Some(ready) = ready_of(t) {
            Verdict::Unknown {
                why: UnknownWhy::JustReady,
                leaf,
                tasks: Vec::new(),
                ready: Some(ready),
            }
        } else if find_wait(&t.frames, |w| w.kind.may_be_held().then_some(())).is_some() {
            unknown(UnknownWhy::HolderNotFound)
        } else if !any_wait && t.decoded_delegates.is_empty() {
            unknown(UnknownWhy::NotRead)
        } else {
            unknown(UnknownWhy::SignallerUnknown)
        }
    }
}

fn blocked(through: Vec<u64>, hops: usize, end: End) -> Verdict {
    Verdict::BlockedBehind { through, hops, end }
}

/// A lock or channel end `t` waits for that no task holds, and a thread or a static does.
fn held_elsewhere(dump: &Dump, t: &TaskView) -> Option<Verdict> {
    if let Some(h) = find_wait(&t.frames, |w| w.threads.first()) {
        let th = dump.threads.iter().find(|th| th.tid == h.tid);
        let end = End::Thread {
            tid: h.tid,
            name: h.thread.clone(),
            function: h.function.clone(),
            doing: th.map(|th| th.doing.clone()),
        };
        return Some(blocked(Vec::new(), 1, end));
    }
    let st = find_wait(&t.frames, |w| w.statics.first())?;
    let end = End::Static {
        name: st.name.clone(),
    };
    Some(blocked(Vec::new(), 1, end))
}

/// The first of a chain's decoded waits, first branch first, that `f` makes something of.
/// Allocates only where the chain branches: every waiting task's chain is looked at a few times.
fn find_wait<'a, T>(frames: &'a [FrameNode], f: impl Fn(&'a WaitOn) -> Option<T>) -> Option<T> {
    // Siblings still to visit, one slice per branch point above the current frame.
    let mut later: Vec<&'a [FrameNode]> = Vec::new();
    let mut cur = frames;
    loop {
        let Some((node, rest)) = cur.split_first() else {
            cur = later.pop()?;
            continue;
        };
        if let Some(v) = node.waits_on.as_deref().and_then(&f) {
            return Some(v);
        }
        if !rest.is_empty() {
            later.push(rest);
        }
        cur = &node.children;
    }
}

/// The leaf's name as a verdict names it: the type it awaits where an annotation hides it.
fn leaf_name(f: &FrameNode) -> String {
    f.meta
        .awaits_type
        .clone()
        .unwrap_or_else(|| f.meta.name.clone())
}

/// What the task waits for that is ready, the first found: a decoded leaf's wait, or a `oneshot`
/// the walk read.
fn ready_of(t: &TaskView) -> Option<Ready> {
    let from_leaf = find_wait(&t.frames, ready);
    from_leaf.or_else(|| {
        t.decoded_delegates.iter().find_map(|d| match d {
            d if d.value_sent => Some(Ready::ValueSent),
            d if d.closed => Some(Ready::Closed {
                what: "its sender is gone".into(),
            }),
            _ => None,
        })
    })
}

/// What in `w` says it is ready, if anything does.
pub fn ready(w: &WaitOn) -> Option<Ready> {
    let field = |part: &str, name: &str| w.part(part)?.field(name);
    let uint = |part: &str, name: &str| match field(part, name)? {
        Value::Uint(u) | Value::Address(u) => Some(*u),
        _ => None,
    };
    let yes = |part: &str, name: &str| matches!(field(part, name), Some(Value::Bool(true)));
    let fd = || match w.part("fd") {
        Some(Value::Int(fd)) => Some(*fd),
        _ => None,
    };
    let closed = |what: &str| Some(Ready::Closed { what: what.into() });
    match &w.kind {
        WaitKind::Sleep => match w.part("deadline")?.instant()? {
            Value::Instant {
                age_ns: Some(a), ..
            } if *a > 0 && a.unsigned_abs() >= GRACE_NS => Some(Ready::DeadlinePassed {
                ago_ns: a.unsigned_abs(),
            }),
            _ => None,
        },
        WaitKind::Permits { lock } => {
            if matches!(field("channel", "receiver_alive"), Some(Value::Bool(false))) {
                return closed("its receiver is gone");
            }
            if yes("semaphore", "closed") {
                return closed("the semaphore is closed");
            }
            let free = uint("semaphore", "available")?;
            let wanted = match w.part("wanted") {
                Some(Value::Uint(n)) => *n,
                _ => 1,
            };
            (free >= wanted.max(1)).then(|| Ready::PermitsFree {
                lock: lock.clone(),
                free,
                wanted,
            })
        }
        WaitKind::Receive => match (uint("channel", "queued"), uint("channel", "senders")) {
            (Some(q), _) if q > 0 => Some(Ready::MessagesQueued { queued: q }),
            (Some(0), Some(0)) => closed("its senders are gone"),
            _ => None,
        },
        WaitKind::Notify => yes("notify", "notified").then_some(Ready::Notified),
        WaitKind::Watch => {
            let (state, seen) = (uint("watch", "state")?, uint("watch", "seen")?);
            match (state & 1 == 1, state >> 1 != seen >> 1) {
                (true, _) => closed("its senders are gone"),
                (false, true) => Some(Ready::VersionChanged {
                    seen: seen >> 1,
                    now: state >> 1,
                }),
                _ => None,
            }
        }
        WaitKind::Broadcast => {
            if uint("broadcast", "closed").is_some_and(|c| c != 0) {
                return closed("its senders are gone");
            }
            let unread = uint("broadcast", "tail")?.checked_sub(uint("broadcast", "next")?)?;
            (unread > 0).then_some(Ready::Unread { unread })
        }
        WaitKind::Barrier => None,
        WaitKind::Io { write: false } => match uint("socket", "to_read") {
            Some(bytes) if bytes > 0 => Some(Ready::BytesQueued { fd: fd()?, bytes }),
            _ => None,
        },
        WaitKind::Io { write: true } => None,
        WaitKind::Accept => match uint("socket", "to_read") {
            Some(connections) if connections > 0 => Some(Ready::ConnectionsWaiting {
                fd: fd()?,
                connections,
            }),
            _ => None,
        },
    }
}

/// The evidence that no waker of idle task `t` exists, if any says so: the agent's count of its
/// waker's clones for a task it runs, tokio's reference count for one it does not, a `oneshot`
/// receiver that registered none.
pub(crate) fn no_waker(t: &TaskView) -> Option<NoWaker> {
    if let Some(d) = t.decoded_delegates.iter().find(|d| !d.registered) {
        return Some(NoWaker::Unregistered {
            leaf: d.leaf.clone(),
        });
    }
    match (t.agent_id, t.tokio_task) {
        (Some(_), _) if t.delegate.is_none() => Some(NoWaker::AgentClones),
        (None, Some(k)) if k.other_refs == Some(0) => Some(NoWaker::TokioRefs),
        _ => None,
    }
}

/// What outside the tasks `t` waits on, from its leaves' decoded waits, then the sockets it is
/// registered for, then its leaf's type.
fn outside(t: &TaskView) -> Option<Outside> {
    let on_leaf = find_wait(&t.frames, outside_of);
    if on_leaf.is_some() {
        return on_leaf;
    }
    if let Some(s) = t.sockets.first() {
        let (local, peer) = match s.socket.split_once(" ↔ ") {
            Some((l, p)) => (l.rsplit(' ').next().map(str::to_owned), Some(p.to_owned())),
            None => (None, None),
        };
        return Some(Outside::Socket {
            fd: s.fd,
            write: s.write && !s.read,
            local,
            peer: s.peer.clone().or(peer),
        });
    }
    let leaf = leaf_name(super::leaf_frame(&t.frames)?);
    let rule = OUTSIDE_LEAVES.iter().find(|(p, _)| leaf.starts_with(p))?;
    Some((rule.1)(leaf))
}

/// What outside the tasks a decoded wait is on: a timer still to fire (its deadline ahead, or
/// one no clock places: a core's), a socket, a listener.
fn outside_of(w: &WaitOn) -> Option<Outside> {
    let text = |v: Option<&Value>| match v? {
        Value::SocketAddr(a) => Some(a.clone()),
        Value::Str { text, .. } => Some(text.clone()),
        _ => None,
    };
    let socket = |name: &str| text(w.part("socket")?.field(name));
    let fd = match w.part("fd") {
        Some(Value::Int(fd)) => Some(*fd),
        _ => None,
    };
    match (&w.kind, fd) {
        (WaitKind::Sleep, _) => match w.part("deadline").and_then(Value::instant) {
            Some(Value::Instant { age_ns, .. }) if age_ns.is_none_or(|a| a <= 0) => {
                Some(Outside::Sleep {
                    left_ns: age_ns.map(i64::unsigned_abs),
                })
            }
            _ => None,
        },
        (WaitKind::Io { write }, Some(fd)) => Some(Outside::Socket {
            fd,
            write: *write,
            local: socket("local"),
            peer: socket("peer"),
        }),
        (WaitKind::Accept, Some(fd)) => Some(Outside::Accept {
            fd,
            local: socket("local"),
        }),
        _ => None,
    }
}

/// A leaf type's path prefix, and what outside the tasks a leaf of it waits on.
type OutsideLeaf = (&'static str, fn(String) -> Outside);

/// Leaves by type that wait on something outside the process's tasks, though nothing of them is
/// read.
const OUTSIDE_LEAVES: &[OutsideLeaf] = &[
    ("tokio::process::", |leaf| Outside::ChildProcess { leaf }),
    ("tokio::signal::", |leaf| Outside::Signal { leaf }),
];

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
