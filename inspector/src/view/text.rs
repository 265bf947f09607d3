//! The dumpasync-style text dump: a header, deadlocks, then every chain root first, one frame per line,
//! indented by depth down to the leaf, with cross-task edges and the delegate.
//!
//! Everything is written straight into one buffer (no `String` per line or per value): a dump of 100,000
//! tasks is some 700,000 lines.

use std::fmt::Write;

use crate::model::progress::{Evidence, Verdict};
use crate::model::{
    CaptureView, CensusView, DecodingInfo, Dump, FoundBy, FrameInfo, FrameNode, Group, Loc,
    ReadFrom, RuntimeView, Source, State, TaskView,
};
use crate::names::display_name;
use crate::names::{base_name, short, short_path};
use crate::view::labels::{Labels, labels_for, labels_of};
use crate::view::{Dur, id_ranges, no_breaks, write_number};

pub use crate::view::labels::task_label;

pub use crate::view::Style;

/// One task's section of a dump (header, spawn line, chain, edges, delegates), as `dump` prints it:
/// the live view's detail pane says the same things in the same words.
pub fn write_task<W: Write + ?Sized>(out: &mut W, dump: &Dump, t: &TaskView, style: Style) {
    let mut ids = vec![t.id];
    ids.extend(t.awaited_by.as_ref().map(|a| a.task));
    ids.extend(t.decoded_delegates.iter().filter_map(|d| d.waker_of));
    ids.extend(t.decoded_delegates.iter().filter_map(|d| d.sender_held_by));
    ids.extend(t.stream.as_ref().and_then(|s| s.connection_task));
    ids.extend(t.serves.iter().map(|s| s.task));
    ids.extend(t.verdict.iter().flat_map(|v| v.mentions()));
    mentioned(&t.frames, &t.awaits_tasks, &mut ids);
    task(
        out,
        dump,
        t,
        &labels_for(dump, &ids),
        style,
        &mut String::new(),
    );
    if t.state == State::Running {
        super::threads::task_thread(out, dump, t, style);
    }
}

/// Adds the tasks `frames` and `root` await to `ids`. Iterative: chains may be deep.
fn mentioned(frames: &[FrameNode], root: &[u64], ids: &mut Vec<u64>) {
    ids.extend_from_slice(root);
    let mut stack: Vec<&FrameNode> = frames.iter().collect();
    while let Some(f) = stack.pop() {
        ids.extend_from_slice(&f.awaits_tasks);
        stack.extend(&f.children);
    }
}

/// One group of identical chains, as `dump --coalesce` prints it.
pub fn write_group<W: Write + ?Sized>(out: &mut W, dump: &Dump, g: &Group, style: Style) {
    let mut ids = Vec::new();
    for (frames, _) in &g.variants {
        mentioned(frames, &g.awaits_tasks, &mut ids);
    }
    group(out, g, &labels_for(dump, &ids), style, &mut String::new());
}

/// `scratch` is a buffer for the lines of its frames, shared by every group of a dump.
fn group<W: Write + ?Sized>(
    out: &mut W,
    g: &Group,
    labels: &Labels<'_>,
    style: Style,
    scratch: &mut String,
) {
    let tasks = if g.count == 1 { "task" } else { "tasks" };
    let _ = write!(
        out,
        "×{} {tasks} {} · {}",
        g.count,
        id_ranges(&g.task_ids),
        state_word(g.state),
    );
    if let (Some(min), Some(max)) = (g.min_age_ns, g.max_age_ns) {
        let (min, max) = (Dur(min).to_string(), Dur(max).to_string());
        let _ = write!(out, " · {} {min}", age_word(g.state));
        // Ages that read the same are one value, not a range (`4.10s–4.10s`).
        if min != max {
            let _ = write!(out, "–{max}");
        }
    }
    let _ = out.write_char('\n');
    let root = Root {
        ty: &g.root_type,
        defined_at: None,
        run_by: None,
    };
    spawned(out, g.spawned_at.as_deref(), None, root, None, style);
    let variants: Vec<(&[FrameNode], usize)> = match &g.variants[..] {
        [] | [_] => Vec::new(),
        many => many.iter().map(|(v, n)| (&v[..], *n)).collect(),
    };
    chain(
        out,
        &g.frames,
        &variants,
        &g.awaits_tasks,
        labels,
        style,
        scratch,
    );
}

/// The dump as text, in a `String` (see [`write()`]).
pub fn render(dump: &Dump, groups: Option<&[Group]>, style: Style) -> String {
    let mut out = String::with_capacity(256 * dump.tasks.len().max(1));
    write(&mut out, dump, groups, style);
    out
}

/// Writes the dump as text to `out` as it goes: the header, the wait cycles, then each task (or each
/// group of identical chains, with `groups`). Errors of `out` are for its owner to keep (see
/// [`crate::view::IoWriter`]); writing stops mattering after the first.
pub fn write<W: Write + ?Sized>(out: &mut W, dump: &Dump, groups: Option<&[Group]>, style: Style) {
    header(out, dump, style.detail);
    let labels = labels_of(dump);
    super::verdicts::causes(out, dump, &labels, super::verdicts::CAUSES_SHOWN);
    super::threads::starved(out, dump, &labels, style);
    super::deadlocks::write(out, dump, &labels);
    // Each section is written into a buffer, then passed on whole: one write of a few hundred bytes
    // instead of dozens of small ones through `out` (which escapes and buffers each).
    let mut section = String::with_capacity(4096);
    // A line's buffer, shared by every task's frames: one allocation for the dump, not one a task.
    let mut scratch = String::new();
    let mut pass_on = |section: &mut String| {
        section.push('\n');
        let _ = out.write_str(section);
        section.clear();
    };
    match groups {
        Some(groups) => {
            for g in groups {
                group(&mut section, g, &labels, style, &mut scratch);
                pass_on(&mut section);
            }
        }
        None => {
            for t in &dump.tasks {
                task(&mut section, dump, t, &labels, style, &mut scratch);
                if t.state == State::Running {
                    super::threads::task_thread(&mut section, dump, t, style);
                }
                pass_on(&mut section);
            }
        }
    }
    if style.threads {
        super::threads::section(out, dump, &labels, style);
    }
    if dump.tasks.is_empty() {
        let _ = out.write_str(
            "no task matches (suspended tasks only by default; --all shows running and completed ones)\n",
        );
    }
}

/// `dump --group waker`: the header, the root causes, then the waiting tasks by who keeps their
/// waker.
pub fn write_waker_groups<W: Write + ?Sized>(out: &mut W, dump: &Dump) {
    header(out, dump, false);
    let labels = labels_of(dump);
    super::verdicts::causes(out, dump, &labels, super::verdicts::CAUSES_SHOWN);
    super::verdicts::waker_groups(out, dump, &labels);
}

/// The dump's header: the process, the counts, the runtimes, where chains were read from; with
/// `detail`, what the census skipped.
pub(crate) fn header<W: Write + ?Sized>(out: &mut W, d: &Dump, detail: bool) {
    let (p, s) = (&d.process, &d.snapshot);
    let _ = write!(out, "pid {} ({}) · ", p.pid, no_breaks(&p.program));
    let _ = match (&p.agent_version, p.protocol_version) {
        (Some(agent), Some(protocol)) => {
            write!(out, "agent {} · protocol {protocol}", no_breaks(agent))
        }
        _ => write!(out, "read from {}, no agent", p.read_from.describe()),
    };
    // A core does not say when its process started.
    let _ = match p.read_from {
        ReadFrom::Core => writeln!(out),
        _ => writeln!(out, " · up {}", Dur(p.uptime_ns)),
    };
    let _ = write!(
        out,
        "{} {}: {} idle, ",
        s.tasks_total,
        if s.tasks_total == 1 { "task" } else { "tasks" },
        s.idle,
    );
    if s.scheduled > 0 {
        let _ = write!(out, "{} scheduled, ", s.scheduled);
    }
    let _ = write!(
        out,
        "{} running, {} completed · snapshot in {}",
        s.running,
        s.completed,
        Dur(s.capture_ns),
    );
    // A subscription's updates come unasked: they have no round trip.
    if s.round_trip_ns > 0 {
        let _ = write!(out, " (round trip {})", Dur(s.round_trip_ns));
    }
    if let Some(st) = &s.stopped {
        let _ = write!(
            out,
            " · {} threads stopped for {}",
            st.threads,
            Dur(st.held_ns)
        );
        if st.unstopped > 0 {
            let _ = write!(
                out,
                " ({} did not stop in time: read running)",
                st.unstopped
            );
        }
    }
    let _ = writeln!(out);
    runtimes(out, &d.runtimes);
    // The JSON document always has it.
    if let Some(c) = &d.census {
        census(out, c, detail);
    }
    decoding(out, &d.decoding);
    showing(out, d);
    if let Some(sampling) = &s.sampling {
        sampled(out, sampling);
    }
    // What a task without the agent's record lacks, said once rather than on each.
    let plain = d.tasks.iter().filter(|t| t.agent_id.is_none()).count();
    if p.read_from != ReadFrom::Agent {
        let timings = match p.read_from {
            ReadFrom::Core => "no timings or ages",
            _ => "no timings (`unchanged for ≥` is a lower bound)",
        };
        let _ = writeln!(
            out,
            "without the agent: no given names (in parentheses, a name from the chain), {timings}, \
             no spawn sites (`defined at` is where the root future is written); link \
             asyncdump-agent for them"
        );
    } else if plain > 0 {
        let _ = writeln!(
            out,
            "{plain} of them not spawned through the agent: no given name (in parentheses, a name from \
             the chain), no timings (`unchanged for ≥` is a lower bound), no spawn site (`defined at` \
             is where the root future is written)"
        );
    }
    let _ = out.write_char('\n');
}

/// One line per runtime: how many tasks it has and how many were listed, or why none were.
fn runtimes<W: Write + ?Sized>(out: &mut W, runtimes: &[RuntimeView]) {
    for r in runtimes {
        let found = match r.found_by {
            FoundBy::Registration => "",
            FoundBy::Census => " (found by census)",
        };
        let _ = match r.flavor.as_deref() {
            Some("local_set") => write!(out, "LocalSet{found}: "),
            Some("blocking") => write!(out, "blocking pool{found}: "),
            flavor => write!(
                out,
                "runtime {}{found}: ",
                no_breaks(flavor.unwrap_or("tokio"))
            ),
        };
        if let Some(alive) = r.alive {
            let _ = write!(out, "{alive} alive, ");
        }
        match &r.not_listed {
            Some(why) => {
                let _ = writeln!(out, "not listed: {}", no_breaks(why));
            }
            None => {
                let _ = write!(out, "{} listed", r.listed);
                if r.skipped > 0 {
                    let _ = write!(
                        out,
                        ", {} skipped (changing while read, or over the limit)",
                        r.skipped
                    );
                }
                let _ = out.write_char('\n');
            }
        }
    }
}

/// What the census for unregistered runtimes covered: one line, and what it may have missed.
fn census<W: Write + ?Sized>(out: &mut W, c: &CensusView, detail: bool) {
    // Said when it found or missed something: lists claimed by stale task headers are no loss,
    // only detail.
    let missed = c.cut || c.unreadable_bytes > 0 || (detail && c.rejected_lists > 0);
    if !(c.found > 0 || c.blocking > 0 || missed) {
        return;
    }
    let mb = |b: u64| b as f64 / 1e6;
    let covered = match c.scanned_bytes == c.total_bytes {
        true => format!("{:.1}", mb(c.total_bytes)),
        false => format!("{:.1} of {:.1}", mb(c.scanned_bytes), mb(c.total_bytes)),
    };
    let _ = write!(
        out,
        "census: {covered} MB of in-use writable memory scanned in {}, {} unregistered {} found",
        Dur(c.elapsed_ns),
        c.found,
        if c.found == 1 {
            "task list"
        } else {
            "task lists"
        },
    );
    if c.blocking > 0 {
        let _ = write!(out, ", {} blocking-pool tasks", c.blocking);
    }
    if c.age_ns > 0 {
        let _ = write!(out, " (scanned {} ago)", Dur(c.age_ns));
    }
    if c.unreadable_bytes > 0 {
        let _ = write!(out, ", {:.1} MB unreadable", mb(c.unreadable_bytes));
    }
    if detail && c.rejected_lists > 0 {
        let _ = write!(
            out,
            ", {} claimed by stale task headers skipped",
            c.rejected_lists
        );
    }
    if c.cut {
        let _ = write!(
            out,
            " · cut at its deadline: runtimes whose tasks lie beyond are missing until the next scan goes on from there"
        );
    }
    let _ = out.write_char('\n');
}

/// Where chains were decoded from, and the notes on decoding.
fn decoding<W: Write + ?Sized>(out: &mut W, dec: &DecodingInfo) {
    if dec.enabled {
        let _ = write!(
            out,
            "chains decoded from DWARF in {}",
            no_breaks(dec.debug_file.as_deref().unwrap_or("?"))
        );
        if let Some(id) = &dec.build_id {
            let id: String = id.chars().take(12).collect();
            let _ = write!(out, " (build-id {})", no_breaks(&id));
        }
        let _ = writeln!(
            out,
            " · {} future types planned in {}{}",
            dec.plan_types,
            Dur(dec.plan_ns),
            if dec.plan_cached { " (plan cache)" } else { "" }
        );
    }
    for note in [&dec.note, &dec.cache_note].into_iter().flatten() {
        let _ = writeln!(out, "note: {}", no_breaks(note));
    }
    if dec.unknown_dyn + dec.unreadable > 0 {
        let _ = writeln!(
            out,
            "not decoded (each shown where it was met): {} dyn Future{} of a type the DWARF does not name, {} unreadable future{}",
            dec.unknown_dyn,
            if dec.unknown_dyn == 1 { "" } else { "s" },
            dec.unreadable,
            if dec.unreadable == 1 { "" } else { "s" },
        );
    }
}

/// `showing 3 of 5 tasks`, and the threads' own futures (their `block_on`'s) shown.
fn showing<W: Write + ?Sized>(out: &mut W, d: &Dump) {
    let threads = d.tasks.iter().filter(|t| t.block_on.is_some()).count();
    let _ = write!(
        out,
        "showing {} of {} tasks",
        d.tasks.len() - threads,
        d.snapshot.tasks_total
    );
    let _ = match threads {
        0 => writeln!(out),
        1 => writeln!(out, ", and 1 thread's future (its block_on's)"),
        n => writeln!(out, ", and {n} threads' futures (their block_on's)"),
    };
}

/// `sampled 3 times over 2.00s: 5 stuck (…), 2 progressing`, and why sampling ended early.
fn sampled<W: Write + ?Sized>(out: &mut W, s: &crate::model::progress::Sampling) {
    let _ = write!(
        out,
        "sampled {} times over {}: {} stuck (not polled in any later sample, or, where polls are not \
         counted, looking the same in each), {} progressing",
        s.samples,
        Dur(s.over_ns),
        s.stuck,
        s.progressing
    );
    if let Some(why) = &s.ended {
        let _ = write!(
            out,
            " · sampling ended after {} of {}: {}",
            s.samples,
            s.asked,
            no_breaks(why)
        );
    }
    let _ = writeln!(out);
}

/// A task's state in the words `dump` prints it with (also the live view's).
pub fn state_word(s: State) -> &'static str {
    match s {
        State::Idle => "idle",
        State::Scheduled => "scheduled",
        State::Running => "running",
        State::Completed => "completed",
    }
}

fn age_word(s: State) -> &'static str {
    match s {
        State::Idle | State::Scheduled => "suspended",
        State::Running => "for",
        State::Completed => "ago",
    }
}

/// `scratch` is a buffer for the lines of its frames, shared by every task of a dump.
fn task<W: Write + ?Sized>(
    out: &mut W,
    dump: &Dump,
    t: &TaskView,
    labels: &Labels<'_>,
    style: Style,
    scratch: &mut String,
) {
    title(out, t, labels);
    super::verdicts::line(out, dump, t, labels);
    let root = Root {
        ty: &t.root_type,
        defined_at: t.spawned_at.is_none().then(|| defined_at(t)).flatten(),
        run_by: t.block_on.as_deref(),
    };
    spawned(
        out,
        t.spawned_at.as_deref(),
        t.tokio_id.filter(|_| t.agent_id.is_some()),
        root,
        t.age_ns,
        style,
    );
    context(out, t, labels);
    sockets(out, t);
    streams(out, t, labels);
    frames(out, &t.frames, &t.awaits_tasks, labels, style, scratch);
    delegate(out, t);
    decoded_delegates(out, t, labels);
}

/// `  socket fd 12: tcp 127.0.0.1:7001 ↔ 127.0.0.1:51234 · it waits to read`: the sockets the
/// task waits on through tokio's I/O driver (a connection's, whose future is not decoded).
fn sockets<W: Write + ?Sized>(out: &mut W, t: &TaskView) {
    for s in &t.sockets {
        let waits = match (s.read, s.write) {
            (true, true) => "to read and to write",
            (false, true) => "to write",
            _ => "to read",
        };
        let _ = writeln!(
            out,
            "  socket fd {}: {} · it waits {waits}",
            s.fd,
            no_breaks(&s.socket)
        );
    }
}

/// How many of the streams a connection's task drives its line names (JSON has them all).
const SERVED_SHOWN: usize = 8;

/// The HTTP/2 stream a task serves and the connection it is on (`  HTTP/2 stream 3 of the
/// connection tokio task 9 drives · socket fd 11: tcp …`), or the streams a connection's task
/// drives (`  drives 2 HTTP/2 streams: 1 (tokio task 4), 3 (tokio task 5)`).
fn streams<W: Write + ?Sized>(out: &mut W, t: &TaskView, labels: &Labels<'_>) {
    if let Some(s) = &t.stream {
        let _ = write!(out, "  HTTP/2 stream {}", s.id);
        match s.connection_task {
            Some(c) => {
                let _ = write!(out, " of the connection {} drives", labels.of(c));
            }
            None if s.connection != 0 => {
                let _ = write!(out, " of the connection @ {:#x}", s.connection);
            }
            None => {}
        }
        if let Some(socket) = &s.socket {
            let _ = write!(
                out,
                " · socket fd {}: {}",
                socket.fd,
                no_breaks(&socket.socket)
            );
        }
        let _ = writeln!(out);
    }
    if !t.serves.is_empty() {
        let n = t.serves.len();
        let _ = write!(
            out,
            "  drives {n} HTTP/2 stream{}:",
            if n == 1 { "" } else { "s" }
        );
        for (i, s) in t.serves.iter().take(SERVED_SHOWN).enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            let _ = write!(out, "{sep}{} ({})", s.id, labels.of(s.task));
        }
        if n > SERVED_SHOWN {
            let _ = write!(out, ", … {} more", n - SERVED_SHOWN);
        }
        let _ = writeln!(out);
    }
}

/// `task 3 "name" · idle · suspended 2s · polls 4 · busy 1ms · woken 3 times (last 2s ago)`.
fn title<W: Write + ?Sized>(out: &mut W, t: &TaskView, labels: &Labels<'_>) {
    // The header and spawn lines are written piece by piece, as every task has them: through the
    // formatting machinery they were a quarter of a text dump's instructions at 100,000 tasks.
    let _ = labels.of(t.id).write_to(out);
    if t.block_on.is_some() {
        let _ = out.write_str(" · block_on");
    }
    if let Some(derived) = t.derived_name.as_deref() {
        let _ = out.write_str(" (");
        let _ = out.write_str(&short(&no_breaks(derived)));
        let _ = out.write_char(')');
    }
    if let Some(r) = &t.request {
        let mut line = String::new();
        super::values::request_line_into(&mut line, r.method.as_deref(), r.target.as_deref());
        let _ = out.write_str(" · ");
        let _ = out.write_str(&line);
        // The client it came from: the peer of the one connection the task was accepted on, or
        // of the connection its HTTP/2 stream is on.
        let stream_peer = t
            .stream
            .as_ref()
            .and_then(|s| s.socket.as_ref()?.peer.as_deref());
        let peers: Vec<&str> = t.sockets.iter().filter_map(|s| s.peer.as_deref()).collect();
        let peer = match peers[..] {
            [peer] => Some(peer),
            [] => stream_peer,
            _ => None,
        };
        if let Some(peer) = peer {
            let _ = out.write_str(" from ");
            let _ = out.write_str(&no_breaks(peer));
        }
    }
    let _ = out.write_str(" · ");
    let _ = out.write_str(state_word(t.state));
    if let Some(p) = t.progress {
        let _ = out.write_str(match (p.verdict, p.by) {
            (Verdict::Stuck, Evidence::Polls) => " · STUCK (not polled)",
            (Verdict::Stuck, Evidence::Looks) => " · STUCK (looked the same)",
            (Verdict::Progressing, _) => " · progressing",
        });
    }
    if let Some(th) = &t.thread {
        let _ = match &th.name {
            Some(name) => write!(out, " on thread {} (tid {})", no_breaks(name), th.tid),
            // A core keeps no thread names.
            None => write!(out, " on thread {}", th.tid),
        };
    }
    match (t.state_age_ns, t.polls, t.busy_ns, t.wakes) {
        (Some(age), Some(polls), Some(busy), Some(wakes)) => {
            let _ = out.write_str(" · ");
            let _ = out.write_str(age_word(t.state));
            let _ = out.write_char(' ');
            let _ = Dur(age).write_to(out);
            let _ = out.write_str(" · polls ");
            let _ = write_number(out, polls);
            let _ = out.write_str(" · busy ");
            let _ = Dur(busy).write_to(out);
            let _ = out.write_str(" · woken ");
            let _ = write_number(out, wakes);
            let _ = out.write_str(if wakes == 1 { " time" } else { " times" });
            if let Some(ago) = t.last_wake_ago_ns {
                let _ = out.write_str(" (last ");
                let _ = Dur(ago).write_to(out);
                let _ = out.write_str(" ago)");
            }
        }
        _ => {
            if let Some(at_least) = t.unchanged_ns {
                let _ = out.write_str(" · unchanged for ≥ ");
                let _ = Dur(at_least).write_to(out);
            }
        }
    }
    let _ = out.write_char('\n');
}

/// Who awaits the task, how fresh its frames are, and why it was not decoded.
fn context<W: Write + ?Sized>(out: &mut W, t: &TaskView, labels: &Labels<'_>) {
    if let Some(by) = &t.awaited_by {
        let _ = write!(out, "  awaited by {}", labels.of(by.task));
        if !by.path.is_empty() {
            // Each step as frame lines spell it, long generic arguments shortened.
            let steps: Vec<_> = by.path.iter().map(|p| short(p)).collect();
            let _ = write!(out, " at {}", no_breaks(&steps.join(" → ")));
        }
        let _ = out.write_char('\n');
    }
    match t.capture {
        CaptureView::Fresh => {}
        CaptureView::Stale { age_ns } => {
            let _ = writeln!(
                out,
                "  frames from {} ago (the task was running during this snapshot)",
                Dur(age_ns)
            );
        }
        CaptureView::Unavailable => {
            let _ = out
                .write_str("  frames unavailable: the task was running throughout this snapshot\n");
        }
    }
    if let Some(note) = &t.decode_note {
        let _ = writeln!(out, "  {note}");
    }
}

/// The waker the agent saw a leaf keep.
fn delegate<W: Write + ?Sized>(out: &mut W, t: &TaskView) {
    match &t.delegate {
        None if t.agent_id.is_none() => {} // only the agent sees the waker
        None => {
            let _ = out.write_str("  delegate: none\n");
        }
        Some(d) => {
            let s = if d.clones == 1 { "" } else { "s" };
            let _ = writeln!(
                out,
                "  delegate: waker kept by a leaf ({} clone{s}) for {}",
                d.clones,
                Dur(d.held_ns)
            );
        }
    }
}

/// What the chain's oneshot receivers say of the waker, identical receivers (the branches of a join)
/// one line with a count.
fn decoded_delegates<W: Write + ?Sized>(out: &mut W, t: &TaskView, labels: &Labels<'_>) {
    let mut shown: Vec<(&crate::model::DecodedDelegate, usize)> = Vec::new();
    for d in t.decoded_delegates.iter() {
        match shown.iter_mut().find(|(s, _)| *s == d) {
            Some((_, n)) => *n += 1,
            None => shown.push((d, 1)),
        }
    }
    for (d, n) in shown {
        let _ = write!(out, "  delegate (decoded): {} ", d.leaf);
        if n > 1 {
            let _ = write!(out, "×{n} ");
        }
        match (d.registered, d.waker_of, d.foreign_vtable) {
            (false, _, _) => {
                let _ = out.write_str("has no waker registered: nothing wakes the task through it");
            }
            (true, Some(id), _) if id == t.id => {
                let _ = out.write_str("holds this task's waker");
            }
            (true, Some(id), _) => {
                let _ = write!(
                    out,
                    "holds the waker of {}, not of this task",
                    labels.of(id)
                );
            }
            (true, None, Some(vt)) => match &d.foreign_waker {
                Some(clone) => {
                    let from = no_breaks(waker_maker(clone));
                    let _ = write!(out, "holds a waker made by {from} (vtable {vt:#x})");
                }
                None => {
                    let _ = write!(
                        out,
                        "holds a waker that is neither the agent's nor tokio's (vtable {vt:#x})"
                    );
                }
            },
            (true, None, None) => {
                let _ = out.write_str("holds a waker");
            }
        }
        if d.value_sent {
            let _ = out.write_str(" · a value was already sent");
        }
        if d.closed {
            let _ = out.write_str(" · its sender is gone");
        }
        if let Some(id) = d.sender_held_by {
            let _ = write!(out, " · its sender is held by {}", labels.of(id));
        }
        let _ = out.write_char('\n');
    }
}

/// Who makes a waker, from its clone function's path: the module that defines it
/// (`futures_util::stream::futures_unordered::task::waker_ref`).
fn waker_maker(clone: &str) -> &str {
    clone.rsplit_once("::").map_or(clone, |(module, _)| module)
}

/// `spawned 2s ago at FILE:LINE:COL · tokio task 5 · root TYPE`, with what is known of each.
/// A task's root future: its type, and where it is written when that is what is known of a task.
#[derive(Clone, Copy)]
struct Root<'a> {
    ty: &'a str,
    defined_at: Option<&'a Loc>,
    /// The `block_on` a thread's own future is run by.
    run_by: Option<&'a str>,
}

/// Where a task without a spawn site has its root future written: its first frame's own location,
/// when that frame is the root future (not a wrapper's inner future).
fn defined_at(t: &TaskView) -> Option<&Loc> {
    let first = t.frames.first()?;
    let same = base_name(&first.meta.name) == base_name(&display_name(&t.root_type));
    (same && first.meta.source == Source::Decoded)
        .then_some(first.meta.location.as_ref())
        .flatten()
}

fn spawned<W: Write + ?Sized>(
    out: &mut W,
    at: Option<&Loc>,
    tokio_id: Option<u64>,
    root: Root<'_>,
    age_ns: Option<u64>,
    style: Style,
) {
    match at {
        Some(at) => {
            let _ = out.write_str("  spawned");
            if let Some(age) = age_ns {
                let _ = out.write_char(' ');
                let _ = Dur(age).write_to(out);
                let _ = out.write_str(" ago");
            }
            at_line(out, &style.path(&at.file), at.line);
            let _ = out.write_char(':');
            let _ = write_number(out, u64::from(at.column));
            let _ = out.write_str(" · ");
        }
        None => {
            let _ = out.write_str("  ");
        }
    }
    if let Some(id) = tokio_id {
        let _ = out.write_str("tokio task ");
        let _ = write_number(out, id);
        let _ = out.write_str(" · ");
    }
    if let Some(by) = root.run_by {
        let _ = out.write_str("run by ");
        let _ = out.write_str(&no_breaks(by));
        let _ = out.write_str(" · ");
    }
    // Spelled as the frames spell state machines (`f`, `f::{async block#1}`), not as DWARF does.
    let _ = out.write_str("root ");
    let _ = out.write_str(&short(&no_breaks(&display_name(root.ty))));
    if let Some(d) = root.defined_at {
        let _ = out.write_str(" · defined");
        at_line(out, &style.path(&d.file), d.line);
    }
    let _ = out.write_char('\n');
}

fn frames<W: Write + ?Sized>(
    out: &mut W,
    nodes: &[FrameNode],
    root_awaits: &[u64],
    labels: &Labels<'_>,
    style: Style,
    scratch: &mut String,
) {
    chain(out, nodes, &[], root_awaits, labels, style, scratch);
}

/// A chain's lines: `nodes`', and where a group's tasks read it differently (`variants`, each of
/// `nodes`' shape, with how many tasks it is; empty for one task), what varies among them merged
/// into each line (see [`super::spread`]).
fn chain<W: Write + ?Sized>(
    out: &mut W,
    nodes: &[FrameNode],
    variants: &[(&[FrameNode], usize)],
    root_awaits: &[u64],
    labels: &Labels<'_>,
    style: Style,
    scratch: &mut String,
) {
    for &id in root_awaits {
        let _ = writeln!(out, "  → awaits {}", labels.of(id));
    }
    // A line is at most about `MAX_LINE` characters: one allocation for the dump's lines.
    if scratch.capacity() < 4 * super::values::MAX_LINE {
        scratch.reserve(4 * super::values::MAX_LINE);
    }
    // Iterative, so that a very deep chain cannot overflow the stack. `alike` goes with `stack`
    // where there are variants: the frame's counterpart in each.
    let mut stack: Vec<(Line<'_>, usize)> =
        nodes.iter().rev().map(|n| (Line::Frame(n), 1)).collect();
    let mut alike: Vec<Vec<(&FrameNode, usize)>> = Vec::new();
    // The long values shown so far in this chain (see `local_line`).
    let mut shown = Vec::new();
    if !variants.is_empty() {
        let at = |i: usize| variants.iter().map(|&(v, n)| (&v[i], n)).collect();
        alike = (0..nodes.len()).rev().map(at).collect();
    }
    while let Some((line, depth)) = stack.pop() {
        let those = alike.pop().unwrap_or_default();
        let pad = 2 * depth.min(MAX_INDENT);
        indent(out, pad);
        if depth > MAX_INDENT {
            // Deeper lines stay at one indentation, so a deep chain's text grows with its depth, not
            // with its square; each says how deep it is instead.
            let _ = write!(out, "[{depth}] ");
        }
        let n = match line {
            Line::Frame(n) => n,
            Line::More { shown, all } => {
                let _ = writeln!(out, "… {} more branches ({all} in all)", all - shown);
                continue;
            }
        };
        frame_line(out, &n.meta, style);
        let _ = out.write_char('\n');
        if those.is_empty() {
            frame_parts(out, n, (pad, style), labels, scratch, &mut shown);
        } else {
            varied_parts(out, &those, pad, labels);
        }
        let all = n.children.len();
        let shown = all.min(MAX_BRANCHES);
        if all > MAX_BRANCHES {
            let more = Line::More {
                shown: MAX_BRANCHES,
                all,
            };
            stack.push((more, depth + 1));
            if !those.is_empty() {
                alike.push(Vec::new());
            }
        }
        for i in (0..shown).rev() {
            stack.push((Line::Frame(&n.children[i]), depth + 1));
            if !those.is_empty() {
                alike.push(those.iter().map(|&(v, k)| (&v.children[i], k)).collect());
            }
        }
    }
}

/// What one task's frame `n` waits on, holds, keeps and awaits, each on a line of its own under
/// it: the chain's lines stay what they are, whatever the leaf's state.
fn frame_parts<W: Write + ?Sized>(
    out: &mut W,
    n: &FrameNode,
    (pad, style): (usize, Style),
    labels: &Labels<'_>,
    scratch: &mut String,
    shown: &mut Vec<(String, std::sync::Arc<str>)>,
) {
    if let Some(w) = n.waits_on.as_deref() {
        scratch.clear();
        if super::values::wait_into(scratch, w) {
            indent(out, pad + 2);
            let _ = out.write_str("↳ ");
            let _ = out.write_str(scratch);
            let _ = out.write_char('\n');
        }
    }
    for h in super::spread::shown_holds(n) {
        indent(out, pad + 2);
        let _ = out.write_str("↳ holds ");
        scratch.clear();
        super::values::held_into(scratch, h);
        let _ = out.write_str(scratch);
        let _ = out.write_char('\n');
    }
    for l in &n.locals {
        indent(out, pad + 4);
        local_line(scratch, l, pad + 4, style, shown);
        let _ = out.write_str(scratch);
        let _ = out.write_char('\n');
    }
    for &id in &n.awaits_tasks {
        let _ = writeln!(out, "{:pad$}  → awaits {}", "", labels.of(id));
    }
}

/// Values shorter than this are shown again where repeated: a back-reference would be no shorter.
const MIN_REFERRED: usize = 32;

/// Local `l`'s line, into `scratch`, indented by `pad`: a value the task's chain already showed
/// (the same type and value, at the same address or under the same name, in an outer frame: an
/// `Arc` of a service handed down, a request moved into the future awaited) refers to the first
/// local that showed it; in a terminal, cut to its width (`--json` has every value whole).
fn local_line(
    scratch: &mut String,
    l: &crate::model::values::Local,
    pad: usize,
    style: Style,
    shown: &mut Vec<(String, std::sync::Arc<str>)>,
) {
    super::values::local_into(scratch, l);
    // `name: Type = value`: what is compared is all after the name.
    let key = scratch.get(l.name().len() + 2..).unwrap_or("");
    if key.len() >= MIN_REFERRED {
        // The same value: at the same address, or under the same name (a request handed down).
        let same = |(k, first): &&(String, std::sync::Arc<str>)| {
            k == key && (key.contains("@ 0x") || **first == *l.name())
        };
        match shown.iter().find(same) {
            Some((_, first)) => {
                let first = first.clone();
                scratch.clear();
                let _ = write!(
                    scratch,
                    "{}: {} = same as `{first}` above",
                    l.name(),
                    short(l.type_name())
                );
            }
            None => shown.push((key.to_owned(), l.info.name.clone())),
        }
    }
    if let Some(width) = style.width {
        let room = width.saturating_sub(pad).max(MIN_REFERRED);
        if let Some((cut, _)) = scratch.char_indices().nth(room - 1) {
            scratch.truncate(cut);
            scratch.push('…');
        }
    }
}

/// [`frame_parts`] of one frame as a group's variants read it (`those`: the frame in each, with
/// its count of tasks): each kind of line merged across them, `×N` before a line that only some
/// of the group's tasks print.
fn varied_parts<W: Write + ?Sized>(
    out: &mut W,
    those: &[(&FrameNode, usize)],
    pad: usize,
    labels: &Labels<'_>,
) {
    let total: usize = those.iter().map(|&(_, k)| k).sum();
    let parts = super::spread::parts(those);
    let mut put = |lines: &[super::spread::Merged], lead: &str, pad: usize| {
        for m in lines {
            indent(out, pad);
            let _ = out.write_str(lead);
            if m.tasks != total {
                let _ = write!(out, "×{} ", m.tasks);
            }
            let _ = out.write_str(&m.text);
            let _ = out.write_char('\n');
        }
    };
    put(&parts.waits_on, "↳ ", pad + 2);
    put(&parts.holds, "↳ holds ", pad + 2);
    for local in &parts.locals {
        put(local, "", pad + 4);
    }
    for &id in &parts.awaits_tasks {
        let _ = write!(out, "{:pad$}  → ", "");
        let k: usize = (those.iter())
            .filter(|(n, _)| n.awaits_tasks.contains(&id))
            .map(|&(_, k)| k)
            .sum();
        if k != total {
            let _ = write!(out, "×{k} ");
        }
        let _ = writeln!(out, "awaits {}", labels.of(id));
    }
}

/// A line of a chain: a frame, or the marker for the branches of a frame past [`MAX_BRANCHES`].
enum Line<'a> {
    Frame(&'a FrameNode),
    More { shown: usize, all: usize },
}

/// Most branches of one frame shown in text (a `join_all` of 1,000 futures); `--json` has them all.
const MAX_BRANCHES: usize = 16;

/// The deepest level a frame line is indented to; deeper lines are numbered instead.
const MAX_INDENT: usize = 32;

/// `n` spaces.
fn indent<W: Write + ?Sized>(out: &mut W, mut n: usize) {
    const SPACES: &str = "                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        let _ = out.write_str(&SPACES[..k]);
        n -= k;
    }
}

/// ` at FILE:LINE`, written piece by piece: the formatting machinery was a third of a text dump's
/// `text`, one of frame `m`'s, with its line breaks escaped if it has any (known with the frame: the
/// frames of 100,000 tasks are printed, and share a few metas).
fn frame_text<'a>(m: &FrameInfo, text: &'a str) -> std::borrow::Cow<'a, str> {
    if m.has_breaks() {
        no_breaks(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// time at 100,000 tasks.
pub(crate) fn at_line<W: Write + ?Sized>(out: &mut W, file: &str, line: u32) {
    let _ = out.write_str(" at ");
    let _ = out.write_str(file);
    let _ = out.write_char(':');
    let _ = write_number(out, u64::from(line));
}

/// One frame: `name at file:line:column` for annotated frames (with the await they are suspended at,
/// when decoding saw it); `name at file:line [decoded]` for decoded ones, at the await; `awaiting TYPE`
/// for the leaf a chain ends in.
fn frame_line<W: Write + ?Sized>(out: &mut W, m: &FrameInfo, style: Style) {
    let path = |file| style.path(file);
    match m.source {
        Source::Cut => {
            let _ = out.write_str(&frame_text(m, &m.name));
        }
        Source::Awaitee => {
            let _ = out.write_str("awaiting ");
            let _ = out.write_str(&short(&frame_text(m, &m.name)));
        }
        Source::Decoded => {
            let _ = out.write_str(&short(&frame_text(m, &m.name)));
            match (&m.suspended_at, &m.location) {
                // An await a macro generated (`join!`, `select!`): DWARF gives the macro's own source
                // line, so lead with the fn, in the user's file.
                (Some(at), Some(l)) if at.file != l.file => {
                    let _ = write!(
                        out,
                        " at {}:{} · await inside a macro, at {}:{}",
                        path(&l.file),
                        l.line,
                        no_breaks(short_path(&at.file)),
                        at.line
                    );
                }
                (Some(at), _) => at_line(out, &path(&at.file), at.line),
                // A state machine that was never resumed, or a combinator.
                (None, Some(l)) => {
                    let _ = write!(
                        out,
                        " (not started; defined at {}:{})",
                        path(&l.file),
                        l.line
                    );
                }
                (None, None) => {}
            }
            let _ = out.write_str(" [decoded]");
        }
        Source::AnnotatedFn | Source::Labelled => {
            let _ = out.write_str(&short(&frame_text(m, &m.name)));
            if let Some(l) = &m.location {
                at_line(out, &path(&l.file), l.line);
                let _ = out.write_char(':');
                let _ = write_number(out, u64::from(l.column));
            }
            match (&m.suspended_at, &m.location) {
                (Some(at), Some(l)) if at.file == l.file => {
                    let _ = out.write_str(" · await at line ");
                    let _ = write_number(out, u64::from(at.line));
                }
                (Some(at), _) => {
                    let _ = write!(out, " · await at {}:{}", path(&at.file), at.line);
                }
                (None, _) => {}
            }
            if let Some(ty) = &m.awaits_type {
                let _ = write!(out, " · awaiting {}", short(&frame_text(m, ty)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Dump, FastMap, coalesce};
    use crate::testing::{handshake, sample};

    #[test]
    fn a_long_value_shown_again_refers_to_the_first_where_it_is_the_same_value() {
        use crate::model::values::{Local, PointerKind, Value};
        let arc = |addr| Value::Pointer {
            kind: PointerKind::Arc,
            addr,
            strong: Some(9),
            weak: Some(1),
            to: Box::new(Value::Opaque {
                type_name: "Shop".into(),
                addr,
            }),
        };
        let long = || Value::Str {
            text: "a long text, long enough to refer to".into(),
            len: 36,
        };
        let mut shown = Vec::new();
        let mut line = String::new();
        let mut say = |l: &Local, style: Style| {
            local_line(&mut line, l, 4, style, &mut shown);
            line.clone()
        };
        let plain = Style::default();
        say(&Local::new("inner", "Arc<Shop>", arc(0x50)), plain);
        // The same `Arc`, under another name: the same value.
        let again = say(&Local::new("svc", "Arc<Shop>", arc(0x50)), plain);
        assert_eq!(again, "svc: Arc<Shop> = same as `inner` above");
        // Another `Arc`: itself.
        assert!(say(&Local::new("other", "Arc<Shop>", arc(0x60)), plain).contains("0x60"));
        // Equal text without an address is the same value under the same name only.
        say(&Local::new("a", "String", long()), plain);
        assert!(say(&Local::new("b", "String", long()), plain).contains("a long text"));
        assert_eq!(
            say(&Local::new("a", "String", long()), plain),
            "a: String = same as `a` above"
        );
        // In a terminal of 40 columns, at 4 in: 36 characters.
        let narrow = Style {
            width: Some(40),
            ..plain
        };
        let cut = say(&Local::new("c", "String", long()), narrow);
        assert_eq!(
            (cut.chars().count(), cut.ends_with('…')),
            (36, true),
            "{cut}"
        );
    }

    #[test]
    fn lists_claimed_by_stale_task_headers_are_detail_for_values_and_stats_only() {
        let mut dump = Dump::build(&handshake(), &sample(), 0);
        let stale = CensusView {
            rejected_lists: 1,
            ..CensusView::default()
        };
        let header = |dump: &Dump, detail: bool| {
            let mut out = String::new();
            super::header(&mut out, dump, detail);
            out
        };
        dump.census = Some(stale);
        assert!(
            !header(&dump, false).contains("census:"),
            "nothing lost, nothing said"
        );
        assert!(header(&dump, true).contains(", 1 claimed by stale task headers skipped"));
        // Beside what was found, still detail.
        dump.census = Some(CensusView { found: 2, ..stale });
        let plain = header(&dump, false);
        assert!(plain.contains("2 unregistered task lists found") && !plain.contains("stale"));
    }

    #[test]
    fn a_chain_prints_root_first_indented_to_the_leaf() {
        let text = render(
            &Dump::build(&handshake(), &sample(), 0),
            None,
            Style::default(),
        );
        let body: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("task 1"))
            .collect();
        assert_eq!(
            body[0], "task 1 (recv) · idle · suspended 2.00s · polls 1 · busy 10ns · woken 0 times",
            "unnamed, it is named by its innermost frame of the program's own code"
        );
        assert_eq!(
            &body[2..6],
            [
                "  handler at src/main.rs:1:1",
                "    read_frame at src/main.rs:5:1",
                "      recv at src/main.rs:9:1",
                "    timer at src/main.rs:12:1",
            ]
        );
        assert_eq!(body[6], "  delegate: none");
    }

    #[test]
    fn a_group_whose_ages_read_the_same_shows_one_age_not_a_range() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let mut groups = coalesce(&dump.tasks);
        let header = |g: &Group| {
            let mut out = String::new();
            group(
                &mut out,
                g,
                &Labels(FastMap::default()),
                Style::default(),
                &mut String::new(),
            );
            out.lines().next().unwrap().to_owned()
        };
        let g = &mut groups[0];
        (g.min_age_ns, g.max_age_ns) = (Some(4_100_000_000), Some(4_101_000_000));
        assert!(header(g).ends_with(" 4.10s"), "{}", header(g));
        g.max_age_ns = Some(4_200_000_000);
        assert!(header(g).ends_with(" 4.10s–4.20s"), "{}", header(g));
    }

    #[test]
    fn coalesced_groups_show_their_count() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let text = render(&dump, Some(&coalesce(&dump.tasks)), Style::default());
        assert!(
            text.contains("×1 task 1 · idle · suspended 2.00s"),
            "{text}"
        );
    }
}
