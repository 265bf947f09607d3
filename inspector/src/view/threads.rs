//! The threads as the text dump says them: a starved runtime in one line atop, what the thread of
//! a running task is blocked in under that task's title, and with `--threads` a section listing
//! every thread, its stack trimmed to what matters (the program's own frames, and the blocking
//! call they made).

use std::fmt::Write;

use crate::model::threads::{
    Blocking, Doing, NativeFrame, StarvedBy, StarvedSince, ThreadRole, ThreadView,
};
use crate::model::waits::{Holder, WaitsFor};
use crate::model::{Dump, THREAD, TaskView};
use crate::view::labels::{Labels, labels_for};
use crate::view::{Dur, Style, no_breaks};

/// `runtime multi_thread: 3 of 3 workers blocked inside a poll; 5 tasks ready and not polled`, and
/// under it each worker: the task it polls, and what it is blocked in.
pub(crate) fn starved<W: Write + ?Sized>(
    out: &mut W,
    dump: &Dump,
    labels: &Labels<'_>,
    style: Style,
) {
    for s in &dump.starved {
        let workers = match s.workers {
            1 => "its one thread".to_owned(),
            n => format!("{} of {n} workers", s.blocked),
        };
        let tasks = if s.ready == 1 { "task" } else { "tasks" };
        let _ = writeln!(
            out,
            "STARVED runtime {}: {workers} blocked or busy inside a poll{}; {} {tasks} ready and not polled",
            s.flavor,
            since(s.since),
            s.ready,
        );
        for t in dump.threads.iter().filter(|t| s.threads.contains(&t.tid)) {
            let _ = write!(out, "  thread {} ", t.tid);
            if let Some(task) = t.polling {
                let _ = write!(out, "polls {}, ", labels.of(task));
            }
            blocked_line(out, t, style);
            held_by(out, dump, t, labels);
            let _ = out.write_char('\n');
        }
    }
    if !dump.starved.is_empty() {
        let _ = out.write_char('\n');
    }
}

/// ` for ≥ 2.30s (a timer that long overdue)`: how long at least, and what says so.
pub(crate) fn since(since: Option<StarvedSince>) -> String {
    let Some(StarvedSince { ns, by }) = since else {
        return String::new();
    };
    let d = Dur(ns);
    match by {
        StarvedBy::Polls => format!(" for ≥ {d} (each in its poll that long)"),
        StarvedBy::Woken => format!(" for ≥ {d} (a task woken that long ago, not polled)"),
        StarvedBy::Timer => format!(" for ≥ {d} (a timer that long overdue)"),
    }
}

/// For a running task whose thread was read (the title names it): `  blocked in std::thread::sleep
/// (asked for 1h) ← reports::render_pdf at src/reports.rs:41`.
pub(crate) fn task_thread<W: Write + ?Sized>(
    out: &mut W,
    dump: &Dump,
    task: &TaskView,
    style: Style,
) {
    let Some(t) = (dump.threads.iter()).find(|t| t.polling == Some(task.id)) else {
        return;
    };
    let _ = out.write_str("  ");
    blocked_line(out, t, style);
    let holders: Vec<u64> = lock_waits(dump, t).map(|(to, _)| to).collect();
    held_by(out, dump, t, &labels_for(dump, &holders));
    let _ = out.write_char('\n');
}

/// The edges of the wait graph from the lock thread `t` is blocked on (or its own future waits
/// for) to their holders.
fn lock_waits<'d>(dump: &'d Dump, t: &ThreadView) -> impl Iterator<Item = (u64, &'d Holder)> {
    let node = t.polling.unwrap_or(THREAD | u64::from(t.tid));
    let blocked = matches!(t.doing, Doing::Blocked { .. });
    (dump.waits.iter())
        .filter(move |e| blocked && e.from == node)
        .filter_map(|e| match &e.on {
            WaitsFor::Lock { holder } => Some((e.to, holder)),
            _ => None,
        })
}

/// ` · held by thread 8505 "config-writer" (`config` in app::config::write)`: who holds the lock
/// `t` is blocked on, where the wait graph found them (at most three named).
fn held_by<W: Write + ?Sized>(out: &mut W, dump: &Dump, t: &ThreadView, labels: &Labels<'_>) {
    const NAMED: usize = 3;
    let mut text = String::new();
    let mut more = 0;
    for (i, (to, holder)) in lock_waits(dump, t).enumerate() {
        if i >= NAMED {
            more += 1;
            continue;
        }
        text.push_str(if i == 0 { " · held by " } else { ", and by " });
        let _ = labels.of(to).write_to(&mut text);
        text.push_str(" (");
        super::values::how_held_into(&mut text, &holder.held, Some(&holder.frame));
        text.push(')');
    }
    if more > 0 {
        let _ = write!(text, ", and {more} more");
    }
    let _ = out.write_str(&text);
}

/// What `t` is doing, and from where in the program: `blocked in std::sync::Mutex ORDERS @ 0x…
/// ← cache::refresh at src/cache.rs:37`.
fn blocked_line<W: Write + ?Sized>(out: &mut W, t: &ThreadView, style: Style) {
    match &t.doing {
        Doing::Blocked { on } => {
            let _ = out.write_str("blocked in ");
            blocking(out, on);
        }
        Doing::Parked => {
            let _ = out.write_str("parked, waiting for work");
        }
        Doing::Running => {
            let _ = out.write_str("running (its stack was not read: run with --stop)");
        }
        Doing::Stopped => {
            let _ = out.write_str("running its own code (held stopped outside any system call)");
        }
    }
    if let Some(f) = t.frames.iter().find(|f| f.own) {
        let _ = out.write_str(" ← ");
        frame(out, f, style);
    }
}

pub(crate) fn blocking<W: Write + ?Sized>(out: &mut W, on: &Blocking) {
    let _ = match on {
        Blocking::Lock {
            kind,
            addr,
            static_name,
        } => match static_name {
            Some(name) => write!(out, "{kind} {} @ {addr:#x}", no_breaks(name)),
            None if *addr == 0 => write!(out, "{kind} (which one could not be read)"),
            None => write!(out, "{kind} @ {addr:#x}"),
        },
        Blocking::Sleep { asked_ns: Some(ns) } => {
            write!(out, "std::thread::sleep (asked for {})", Dur(*ns))
        }
        Blocking::Sleep { asked_ns: None } => {
            out.write_str("std::thread::sleep (what is left of it is the kernel's)")
        }
        Blocking::Io { call, fd, target } => match target {
            Some(target) => write!(out, "{call} on fd {fd} ({})", no_breaks(target)),
            None => write!(out, "{call} on fd {fd}"),
        },
        Blocking::BlockOn { api } => {
            write!(out, "{api}, waiting for its future (shown as its thread's)")
        }
        Blocking::Child { call } => write!(out, "{call}, waiting for a child process"),
        Blocking::Syscall { call } => write!(out, "{call}"),
    };
}

fn frame<W: Write + ?Sized>(out: &mut W, f: &NativeFrame, style: Style) {
    let _ = out.write_str(&no_breaks(&crate::names::short(&f.function)));
    if let Some(file) = &f.file {
        let _ = write!(out, " at {}", style.path(file));
        if f.line > 0 {
            let _ = write!(out, ":{}", f.line);
        }
    }
    if let Some(lib) = &f.library {
        let _ = write!(out, " in {}", no_breaks(lib));
    }
}

/// The `--threads` section: every thread, blocked ones with their own frames.
pub(crate) fn section<W: Write + ?Sized>(
    out: &mut W,
    dump: &Dump,
    labels: &Labels<'_>,
    style: Style,
) {
    if dump.threads.is_empty() {
        return;
    }
    let _ = writeln!(out, "threads: {}", dump.threads.len());
    for t in &dump.threads {
        let _ = write!(out, "thread {}", t.tid);
        if let Some(name) = &t.name {
            let _ = write!(out, " \"{}\"", no_breaks(name));
        }
        let role = match t.role {
            ThreadRole::Worker => " · runtime worker",
            ThreadRole::BlockOn => " · block_on",
            ThreadRole::BlockingPool => " · blocking pool",
            ThreadRole::Other => "",
        };
        let _ = write!(out, "{role} · ");
        blocked_line(out, t, style);
        held_by(out, dump, t, labels);
        if let Some(task) = t.polling {
            let _ = write!(out, " · polls {}", labels.of(task));
        }
        let own = crate::model::THREAD | u64::from(t.tid);
        if t.role == ThreadRole::BlockOn && !t.frames.is_empty() && dump.task(own).is_none() {
            let _ = out.write_str(
                " · its block_on's future not found: no place for it in the DWARF here (optimised out?), or its frame lies below the stack's top read",
            );
        }
        let _ = out.write_char('\n');
        stack(out, t, style);
    }
    let _ = out.write_char('\n');
}

/// A blocked thread's stack trimmed: the blocking call and the program's own frames, each on a
/// line, then how many others there are.
fn stack<W: Write + ?Sized>(out: &mut W, t: &ThreadView, style: Style) {
    if !matches!(t.doing, Doing::Blocked { .. } | Doing::Stopped) || t.frames.is_empty() {
        return;
    }
    // The outermost frame below the program's first: the call it blocked in.
    let first_own = t.frames.iter().position(|f| f.own);
    let call = first_own.and_then(|i| i.checked_sub(1));
    let mut shown = 0;
    for (i, f) in t.frames.iter().enumerate() {
        if f.own || Some(i) == call {
            let _ = out.write_str("    ");
            frame(out, f, style);
            let _ = out.write_char('\n');
            shown += 1;
        }
    }
    if first_own.is_none() {
        for f in t.frames.iter().take(3) {
            let _ = out.write_str("    ");
            frame(out, f, style);
            let _ = out.write_char('\n');
            shown += 1;
        }
    }
    let rest = t.frames.len() - shown;
    if rest > 0 {
        let _ = writeln!(
            out,
            "    ({rest} frames more of libraries, the standard library and the runtime: --json has them all)"
        );
    }
    if let Some(why) = &t.unwind_stopped {
        let _ = writeln!(out, "    the walk {}", no_breaks(why));
    }
}
