//! The verdicts as the text says them: one line under a waiting task's title (`  verdict:
//! blocked behind tokio task 4 (shop::reserve), which sleeps 59m more`), and the root causes atop
//! the dump and `--stats`, worst first, each with the code to look at.

use std::fmt::Write;

use crate::model::causes::Cause;
use crate::model::threads::Doing;
use crate::model::verdicts::{End, NoWaker, Outside, Ready, UnknownWhy, Verdict};
use crate::model::wakers::Keeper;
use crate::model::{Dump, Loc, TaskView};
use crate::view::labels::Labels;
use crate::view::{Dur, no_breaks};

/// How many causes the dump lists atop (`--stats` lists every one).
pub const CAUSES_SHOWN: usize = 5;

/// `  verdict: …`, for a task that has one.
pub(crate) fn line<W: Write + ?Sized>(out: &mut W, dump: &Dump, t: &TaskView, labels: &Labels) {
    let Some(v) = t.verdict.as_deref() else {
        return;
    };
    let mut text = String::from("  verdict: ");
    verdict(&mut text, dump, v, labels);
    text.push('\n');
    let _ = out.write_str(&text);
}

/// The root causes, at most `max`, and a blank line after them if there are any.
pub(crate) fn causes<W: Write + ?Sized>(out: &mut W, dump: &Dump, labels: &Labels, max: usize) {
    if dump.causes.is_empty() {
        return;
    }
    let mut text =
        String::from("ROOT CAUSES, worst first (each task's own line says why it waits):\n");
    for (i, c) in dump.causes.iter().take(max).enumerate() {
        let _ = write!(text, "  {}. ", i + 1);
        cause(&mut text, dump, c, labels);
        text.push('\n');
    }
    if dump.causes.len() > max {
        let more = dump.causes.len() - max;
        let s = if more == 1 { "" } else { "s" };
        let _ = writeln!(text, "  … {more} more cause{s} (--stats lists every one)");
    }
    text.push('\n');
    let _ = out.write_str(&text);
}

/// A task as a verdict names it: its label, and the name its chain gives it.
fn named(out: &mut String, dump: &Dump, id: u64, labels: &Labels) {
    let _ = labels.of(id).write_to(out);
    if let Some(d) = dump.task(id).and_then(|t| t.derived_name.as_deref()) {
        let _ = write!(out, " ({})", crate::names::short(&no_breaks(d)));
    }
}

fn list(out: &mut String, dump: &Dump, ids: &[u64], labels: &Labels) {
    for (i, &id) in ids.iter().enumerate() {
        out.push_str(if i == 0 { "" } else { ", " });
        named(out, dump, id, labels);
    }
}

/// One verdict, as its line says it.
pub(crate) fn verdict(out: &mut String, dump: &Dump, v: &Verdict, labels: &Labels) {
    match v {
        Verdict::Deadlocked { cycle } => {
            out.push_str("deadlocked: in a wait cycle of ");
            list(out, dump, cycle, labels);
        }
        Verdict::BlockedBehind { through, hops, end } => {
            out.push_str("blocked behind ");
            end_into(out, dump, end, labels);
            if *hops > 1 {
                let _ = write!(out, " (through ");
                list(out, dump, through, labels);
                if *hops - 1 > through.len() {
                    let _ = write!(out, " and {} more", *hops - 1 - through.len());
                }
                out.push(')');
            }
            end_doing(out, dump, end, labels);
        }
        Verdict::LostWakeUp { ready: r } => {
            out.push_str("lost wake-up: ");
            ready(out, r);
            out.push_str(", and the task is idle, not scheduled to run");
        }
        Verdict::WokenNotPolled { .. } => woken(out, v),
        Verdict::NothingCanWake { by } => {
            out.push_str("nothing can wake it: ");
            no_waker(out, by);
        }
        Verdict::Outside { .. } => {
            out.push_str("waiting on outside: ");
            outside(out, v);
        }
        Verdict::Running { .. } => {
            out.push_str("running");
            running(out, v);
        }
        Verdict::Unknown { .. } => {
            out.push_str("unknown: waits ");
            unknown(out, dump, v, labels);
        }
    }
}

/// The end of a chain of blocked tasks, named.
fn end_into(out: &mut String, dump: &Dump, end: &End, labels: &Labels) {
    match end {
        End::Task { task, .. } => named(out, dump, *task, labels),
        End::Deadlock { cycle } => {
            out.push_str("a wait cycle of ");
            list(out, dump, cycle, labels);
        }
        End::Thread {
            tid,
            name,
            function,
            ..
        } => {
            let _ = write!(out, "thread {tid}");
            if let Some(n) = name {
                let _ = write!(out, " ({})", no_breaks(n));
            }
            if !function.is_empty() {
                let _ = write!(out, ", which holds it in {}", no_breaks(function));
            }
        }
        End::Static { name } => {
            let _ = write!(out, "static {}", no_breaks(name));
        }
    }
}

/// `, which sleeps 59m more`: what the end does.
fn end_doing(out: &mut String, dump: &Dump, end: &End, labels: &Labels) {
    match end {
        End::Task { doing, .. } => {
            out.push_str(", which ");
            doing_into(out, dump, doing, labels);
        }
        End::Deadlock { .. } => {}
        End::Thread { doing, .. } => match doing {
            Some(Doing::Blocked { on }) => {
                out.push_str(", and is blocked in ");
                super::threads::blocking(out, on);
            }
            Some(Doing::Parked) => out.push_str(", and is parked"),
            Some(Doing::Running | Doing::Stopped) => out.push_str(", and runs"),
            None => {}
        },
        End::Static { .. } => out.push_str(", which no task or thread lets go"),
    }
}

/// What an end does, after `which`.
fn doing_into(out: &mut String, dump: &Dump, v: &Verdict, labels: &Labels) {
    match v {
        Verdict::Outside {
            on: Outside::Sleep { left_ns },
            ..
        } => match left_ns {
            Some(ns) => {
                let _ = write!(out, "sleeps {} more", Dur(*ns));
            }
            None => out.push_str("sleeps, until a deadline no clock here places"),
        },
        Verdict::Outside { .. } => {
            out.push_str("waits on outside: ");
            outside(out, v);
        }
        Verdict::Running { .. } => {
            out.push_str("is running");
            running(out, v);
        }
        Verdict::Deadlocked { .. } | Verdict::BlockedBehind { .. } => {
            out.push_str("is ");
            verdict(out, dump, v, labels);
        }
        Verdict::LostWakeUp { ready: r } => {
            out.push_str("lost a wake-up: ");
            ready(out, r);
        }
        Verdict::WokenNotPolled { .. } => {
            out.push_str("is ");
            woken(out, v);
        }
        Verdict::NothingCanWake { by } => {
            out.push_str("nothing can wake: ");
            no_waker(out, by);
        }
        Verdict::Unknown { .. } => {
            out.push_str("waits ");
            unknown(out, dump, v, labels);
        }
    }
}

fn running(out: &mut String, v: &Verdict) {
    let Verdict::Running { thread, blocked } = v else {
        return;
    };
    if let Some(tid) = thread {
        let _ = write!(out, " on thread {tid}");
    }
    match blocked {
        Some(on) => {
            out.push_str(", blocked in ");
            super::threads::blocking(out, on);
        }
        None => out.push_str(" (inside its poll)"),
    }
}

fn woken(out: &mut String, v: &Verdict) {
    let Verdict::WokenNotPolled {
        ready: r,
        woken_ago_ns,
        at_least,
        starved,
        others_queued,
    } = v
    else {
        return;
    };
    match r {
        Some(r) => {
            out.push_str("ready, not polled: ");
            ready(out, r);
        }
        None => {
            out.push_str("woken, not polled");
            if let Some(ns) = woken_ago_ns {
                let _ = write!(
                    out,
                    " for {}{}",
                    if *at_least { "≥ " } else { "" },
                    Dur(*ns)
                );
            }
        }
    }
    if *starved {
        out.push_str("; every worker of its runtime is blocked or busy inside a poll");
    } else if *others_queued > 0 {
        let n = *others_queued;
        let _ = write!(
            out,
            "; {n} other task{} of its runtime {} woken and not polled either",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        );
    }
}

fn ready(out: &mut String, r: &Ready) {
    let _ = match r {
        Ready::DeadlinePassed { ago_ns } => write!(out, "its deadline passed {} ago", Dur(*ago_ns)),
        Ready::PermitsFree { lock, free, .. } if &**lock == "Mutex" => {
            write!(out, "the Mutex is free ({free} permit)")
        }
        Ready::PermitsFree { lock, free, .. } if &**lock == "channel" => {
            write!(out, "the channel has {free} free slot{}", plural(*free))
        }
        Ready::PermitsFree { lock, free, wanted } => {
            write!(out, "the {lock} has {free} permits free, {wanted} wanted")
        }
        Ready::MessagesQueued { queued } => {
            write!(out, "{queued} message{} queued", plural(*queued))
        }
        Ready::Closed { what } => write!(out, "{what}"),
        Ready::Notified => write!(out, "it was notified"),
        Ready::VersionChanged { seen, now } => {
            write!(out, "the value changed to version {now} (seen {seen})")
        }
        Ready::Unread { unread } => write!(out, "{unread} message{} unread", plural(*unread)),
        Ready::ValueSent => write!(out, "the value was sent"),
        Ready::BytesQueued { fd, bytes } => write!(out, "{bytes} bytes wait to be read on fd {fd}"),
        Ready::ConnectionsWaiting { fd, connections } => write!(
            out,
            "{connections} connection{} wait to be accepted on fd {fd}",
            plural(*connections)
        ),
    };
}

fn no_waker(out: &mut String, by: &NoWaker) {
    let _ = match by {
        NoWaker::TokioRefs => {
            out.write_str("tokio counts no reference to it but its list's and its JoinHandle's")
        }
        NoWaker::AgentClones => out.write_str("the agent counts no live clone of its waker"),
        NoWaker::Unregistered { leaf } => write!(
            out,
            "{} is pending with no waker registered",
            crate::names::short(&no_breaks(leaf))
        ),
    };
}

/// `reading fd 9 from 127.0.0.1:7001, silent for 31s`.
fn outside(out: &mut String, v: &Verdict) {
    let Verdict::Outside {
        on,
        waited_ns,
        at_least,
    } = v
    else {
        return;
    };
    let _ = match on {
        Outside::Sleep { left_ns: Some(ns) } => write!(out, "a sleep, {} more", Dur(*ns)),
        Outside::Sleep { left_ns: None } => write!(out, "a sleep"),
        Outside::Socket {
            fd,
            write: w,
            local,
            peer,
        } => {
            let verb = if *w { "writing to" } else { "reading from" };
            match (peer, local) {
                (Some(p), _) => write!(out, "{verb} {} (fd {fd})", no_breaks(p)),
                (None, Some(l)) => write!(out, "{verb} fd {fd} ({})", no_breaks(l)),
                (None, None) => write!(out, "{verb} fd {fd}"),
            }
        }
        Outside::Accept { fd, local } => match local {
            Some(l) => write!(out, "accepting on {} (fd {fd})", no_breaks(l)),
            None => write!(out, "accepting on fd {fd}"),
        },
        Outside::ChildProcess { leaf } => {
            write!(out, "a child process ({})", crate::names::short(leaf))
        }
        Outside::Signal { leaf } => write!(out, "a signal ({})", crate::names::short(leaf)),
    };
    let silent = matches!(on, Outside::Socket { write: false, .. });
    if let Some(ns) = waited_ns.filter(|_| !matches!(on, Outside::Sleep { .. })) {
        let word = if silent { "silent" } else { "waiting" };
        let _ = write!(
            out,
            ", {word} for {}{}",
            if *at_least { "≥ " } else { "" },
            Dur(ns)
        );
    }
}

fn unknown(out: &mut String, dump: &Dump, v: &Verdict, labels: &Labels) {
    let Verdict::Unknown {
        why,
        leaf,
        tasks,
        ready: is_ready,
    } = v
    else {
        return;
    };
    let leaf = leaf
        .as_deref()
        .map(|l| crate::names::short(&no_breaks(l)).into_owned());
    let leaf = leaf.as_deref().unwrap_or("its leaf");
    let _ = match why {
        UnknownWhy::NoChain => out.write_str("on what its chain would say: it was not decoded"),
        UnknownWhy::NotRead => write!(out, "on {leaf}, whose wait asyncdump does not read"),
        UnknownWhy::HolderNotFound => write!(
            out,
            "on {leaf}; what holds it (a lock's guard, a channel's other end) is nowhere the dump looks"
        ),
        UnknownWhy::AnyOf => {
            out.push_str("on any of ");
            list(out, dump, tasks, labels);
            Ok(())
        }
        UnknownWhy::SignallerUnknown => write!(
            out,
            "on {leaf}, not ready; nothing read names what will make it ready"
        ),
        UnknownWhy::JustReady => write!(
            out,
            "on {leaf}, ready less than {} ago (its wake-up may be on its way)",
            Dur(crate::model::verdicts::GRACE_NS)
        ),
        UnknownWhy::ReadyUnconfirmed => {
            let _ = write!(out, "on {leaf}, read ready (");
            if let Some(r) = is_ready {
                ready(out, r);
            }
            out.write_str(
                ") after its state was: a wake-up may have come between (--stop or --samples tell)",
            )
        }
    };
}

/// One root cause: how many tasks, what holds them, where to look.
fn cause(out: &mut String, dump: &Dump, c: &Cause, labels: &Labels) {
    let n = c.tasks.len();
    let end_counted = c.end.is_some_and(|e| c.tasks.contains(&e));
    let held = if end_counted { n - 1 } else { n };
    let tasks = |n: usize| format!("{n} task{}", if n == 1 { "" } else { "s" });
    match (&*c.kind, &c.what) {
        ("deadlocked", Verdict::Deadlocked { cycle }) => {
            let _ = write!(out, "{} deadlocked: a wait cycle of ", tasks(n));
            for (i, &id) in cycle.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { ", " });
                cause_named(out, dump, c, id, labels);
            }
        }
        ("blocked_behind", what) => {
            let _ = write!(out, "{} blocked behind ", tasks(held));
            behind(out, dump, c, what, labels);
        }
        ("woken_not_polled", _) if c.starved.is_some() => {
            let _ = write!(out, "{} woken or ready, not polled: ", tasks(n));
            starved(out, c.starved.and_then(|i| dump.starved.get(i)));
        }
        (_, Verdict::Outside { .. }) => {
            let _ = write!(out, "{} waiting on outside: ", tasks(n));
            outside(out, &c.what);
        }
        (_, Verdict::WokenNotPolled { .. }) => {
            let _ = write!(out, "{} woken or ready, not polled", tasks(n));
        }
        (_, Verdict::LostWakeUp { ready: r }) => {
            let _ = write!(out, "{} lost a wake-up: ", tasks(n));
            ready(out, r);
        }
        (_, Verdict::NothingCanWake { by }) => {
            let _ = write!(out, "{} nothing can wake: ", tasks(n));
            no_waker(out, by);
        }
        (_, what @ Verdict::Unknown { .. }) => {
            let _ = write!(
                out,
                "{} {} ",
                tasks(n),
                if n == 1 { "waits" } else { "wait" }
            );
            unknown(out, dump, what, labels);
        }
        (_, what) => {
            let _ = write!(out, "{}, ", tasks(n));
            verdict(out, dump, what, labels);
        }
    }
    look_at(out, &c.look_at);
}

/// What a blocked-behind cause's end is and does.
fn behind(out: &mut String, dump: &Dump, c: &Cause, what: &Verdict, labels: &Labels) {
    match (what, c.end) {
        // A thread or a static at the end: what it is, and what it does.
        (Verdict::BlockedBehind { end, .. }, _) => {
            end_into(out, dump, end, labels);
            end_doing(out, dump, end, labels);
        }
        (_, Some(e)) => {
            cause_named(out, dump, c, e, labels);
            out.push_str(", which ");
            doing_into(out, dump, what, labels);
        }
        (v, None) => doing_into(out, dump, v, labels),
    }
}

/// Why a starved runtime polls nothing.
fn starved(out: &mut String, s: Option<&crate::model::threads::Starved>) {
    let _ = match s {
        Some(s) if s.workers == 1 => write!(
            out,
            "the one thread of runtime {} is blocked or busy inside a poll",
            s.flavor
        ),
        Some(s) => write!(
            out,
            "every worker of runtime {} ({}) is blocked or busy inside a poll",
            s.flavor, s.workers
        ),
        None => write!(out, "their runtime's workers are blocked or busy"),
    };
}

/// A task a cause names: as the dump names it, else by the name the cause kept for it (a running
/// task a filtered dump leaves out).
fn cause_named(out: &mut String, dump: &Dump, c: &Cause, id: u64, labels: &Labels) {
    if dump.task(id).is_some() {
        return named(out, dump, id, labels);
    }
    let _ = labels.of(id).write_to(out);
    if let Some(n) = c.names.iter().find(|n| n.id == id) {
        let _ = write!(out, " ({})", crate::names::short(&no_breaks(&n.name)));
    }
}

fn look_at(out: &mut String, at: &[Loc]) {
    for (i, l) in at.iter().enumerate() {
        out.push_str(if i == 0 { " · look at " } else { ", " });
        let file = crate::names::short_path(&l.file);
        let _ = write!(out, "{}:{}", no_breaks(file), l.line);
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The waiting tasks by who keeps their waker, a group each: its keeper and count, then a line a
/// task (its label, and what it awaits).
pub(crate) fn waker_groups<W: Write + ?Sized>(out: &mut W, dump: &Dump, labels: &Labels) {
    let mut text = String::new();
    for g in &dump.waker_groups {
        let n = g.tasks.len();
        let _ = match &g.kept_by {
            Keeper::Nobody => write!(text, "kept by nobody, nothing can wake them"),
            Keeper::Waited { what } => write!(text, "kept by {}", no_breaks(what)),
            Keeper::Joined { task } => {
                text.push_str("kept by the JoinHandle slot of ");
                named(&mut text, dump, *task, labels);
                Ok(())
            }
            Keeper::Oneshot { leaf } => write!(
                text,
                "kept by the oneshot channels they receive from ({})",
                crate::names::short(&no_breaks(leaf))
            ),
            Keeper::Elsewhere { refs: Some(r) } => write!(
                text,
                "kept where the dump does not name ({r} reference{} counted)",
                plural(*r)
            ),
            Keeper::Elsewhere { refs: None } => write!(text, "kept where the dump does not say"),
        };
        let _ = writeln!(text, ": {n} task{}", if n == 1 { "" } else { "s" });
        for &id in &g.tasks {
            text.push_str("  ");
            named(&mut text, dump, id, labels);
            if let Some(leaf) = dump
                .task(id)
                .and_then(|t| crate::model::leaf_frame(&t.frames))
            {
                let name = leaf.meta.awaits_type.as_deref().unwrap_or(&leaf.meta.name);
                let _ = write!(
                    text,
                    " · awaiting {}",
                    crate::names::short(&no_breaks(name))
                );
            }
            text.push('\n');
        }
        text.push('\n');
    }
    let _ = out.write_str(&text);
}
