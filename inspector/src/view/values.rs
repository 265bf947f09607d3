//! A frame's locals in text: `name: Type = value`, one line each, every value bounded to
//! [`MAX_LINE`] characters and every string escaped as Rust writes it (`"a\nb"`), so that no value
//! from the target can move the cursor or span lines.

use std::fmt::Write;

use crate::model::Loc;
use crate::model::values::{Field, Local, PointerKind, Value, WaitKind, WaitOn};
use crate::model::waits::{Held, Holder, ThreadHolder};

/// Longest value shown on a line; the rest is cut with `…`.
pub const MAX_LINE: usize = 200;

/// `name: Type = value`, or `name: Type @ 0x…` for a value shown by its address alone.
pub fn local(l: &Local) -> String {
    let mut out = String::new();
    local_into(&mut out, l);
    out
}

/// [`local`], into `out` (cleared first): a dump writes every local through one buffer.
pub fn local_into(out: &mut String, l: &Local) {
    out.clear();
    // Pushed, not formatted: a dump writes a line per local, and `write!` costs more than the text.
    out.push_str(l.name());
    out.push_str(": ");
    out.push_str(&crate::names::short(l.type_name()));
    if let Value::Opaque { addr, .. } = l.value {
        out.push_str(" @ ");
        hex(out, addr);
        return;
    }
    out.push_str(" = ");
    let start = out.len();
    value(out, &l.value);
    // No more bytes than characters: only a long value needs counting.
    if out.len() - start > MAX_LINE
        && let Some((cut, _)) = out[start..].char_indices().nth(MAX_LINE)
    {
        out.truncate(start + cut);
        out.push('…');
    }
}

/// What a leaf waits for, in words (`deadline in 59m59.9s`, `Mutex @ 0x…: locked, this task 2nd of
/// 3 waiting`); `None` when its parts could not be read.
pub fn wait_text(w: &WaitOn) -> Option<String> {
    let mut out = String::new();
    wait_into(&mut out, w).then_some(out)
}

/// [`wait_text`], appended to `out`; whether it could be said (where not, `out` is as it was): a
/// dump writes every leaf's through one buffer.
pub fn wait_into(out: &mut String, w: &WaitOn) -> bool {
    let start = out.len();
    let said = match &w.kind {
        WaitKind::Sleep => w.part("deadline").and_then(|d| deadline(out, d.instant()?)),
        WaitKind::Permits { lock } => permits(out, lock, w),
        WaitKind::Io { write } => io(out, *write, w),
        WaitKind::Receive => receive(out, w),
        WaitKind::Notify => notify(out, w),
        WaitKind::Watch => watch(out, w),
        WaitKind::Broadcast => broadcast(out, w),
        WaitKind::Barrier => barrier(out, w),
        WaitKind::Accept => accept(out, w),
    };
    if said.is_none() {
        out.truncate(start);
    }
    said.is_some()
}

/// `receiving from channel @ 0x…: empty, 1 sender alive: task 4 (`tx` in app::feed)`.
fn receive(out: &mut String, w: &WaitOn) -> Option<()> {
    let c = w.part("channel")?;
    let Some(Value::Address(addr)) = c.field("addr") else {
        return None;
    };
    let _ = write!(out, "receiving from channel @ {addr:#x}: ");
    let uint = |name: &str| match c.field(name) {
        Some(Value::Uint(u)) => Some(*u),
        _ => None,
    };
    match uint("queued") {
        Some(0) => out.push_str("empty"),
        Some(n) => {
            let _ = write!(out, "{n} queued");
        }
        None => out.push('?'),
    }
    let senders = uint("senders").unwrap_or(0);
    let s = if senders == 1 { "" } else { "s" };
    let _ = write!(out, ", {senders} sender{s} alive");
    ends_held(out, w, senders);
    Some(())
}

/// `: task 4 (…); task 5 (…); static app::TX; thread 12 …`, and how many of `alive` neither a
/// task's frame, a static nor a thread holds.
fn ends_held(out: &mut String, w: &WaitOn, alive: u64) {
    let holders = &w.holders;
    for (i, h) in holders.iter().enumerate() {
        out.push_str(if i == 0 { ": " } else { "; " });
        holder_into(out, h);
    }
    let others = w.statics.len() + w.threads.len();
    if others > 0 && holders.is_empty() {
        out.push_str(": ");
    }
    others_into(out, w, !holders.is_empty());
    let found = holders.len() + others;
    let outside = alive.saturating_sub(found as u64);
    if outside > 0 && found > 0 {
        let _ = write!(out, "; {outside} outside the tasks");
    } else if outside > 0 {
        out.push_str(", held outside the tasks");
    }
    more_than_can_be(out, found, alive, "alive");
}

/// ` (2 found for 1 alive: …)` where more holders were found than there can be: a local moved out
/// of keeps its old value until its place is used again, and which one is a leftover is not known.
fn more_than_can_be(out: &mut String, found: usize, can_be: u64, what: &str) {
    if found as u64 > can_be && can_be > 0 {
        let _ = write!(
            out,
            " ({found} found for {can_be} {what}: a local moved out of keeps its old value, so some may no longer hold it)"
        );
    }
}

/// `static app::PARKED; thread 12 "feeder" (…)`, each after `; ` when `after` something: holders
/// that are no task, the program's statics and its threads.
fn others_into(out: &mut String, w: &WaitOn, after: bool) {
    for (i, s) in w.statics.iter().enumerate() {
        if after || i > 0 {
            out.push_str("; ");
        }
        // A name from the binary's DWARF: a line break in it must not end the line.
        let _ = write!(out, "static {}", super::no_breaks(&s.name));
    }
    for (i, t) in w.threads.iter().enumerate() {
        if after || i > 0 || !w.statics.is_empty() {
            out.push_str("; ");
        }
        thread_into(out, t);
    }
}

/// `` thread 4242 "feeder" (`sender` in app::main::{closure#2}, declared at app.rs:63) ``: the
/// thread's name is the target's text, escaped.
fn thread_into(out: &mut String, t: &ThreadHolder) {
    let _ = write!(out, "thread {}", t.tid);
    if let Some(name) = &t.thread {
        let _ = write!(out, " {name:?}");
    }
    out.push_str(" (");
    how_held_into(out, &t.held, Some(&t.function));
    if let Some(at) = &t.declared {
        out.push_str(", declared at ");
        loc_into(out, at);
    }
    out.push(')');
}

/// A bounded channel's send: `channel @ 0x…: full, 4 of 4 queued, receiver alive: task 3 (`rx` in
/// app::drain)`.
fn send(out: &mut String, c: &Value, w: &WaitOn) {
    let uint = |name: &str| match c.field(name) {
        Some(Value::Uint(u)) => Some(*u),
        _ => None,
    };
    if let (Some(q), Some(cap)) = (uint("queued"), uint("capacity")) {
        let what = if q >= cap { "full" } else { "room" };
        let _ = write!(out, "{what}, {q} of {cap} queued");
    }
    if let Some(Value::Bool(true)) = c.field("receiver_alive") {
        out.push_str(", receiver alive");
        ends_held(out, w, 1);
    }
}

/// `reading fd 12, tcp 127.0.0.1:43210 → 127.0.0.1:5432, 0 bytes queued`: the socket's part where
/// the process's `/proc` gave it, the bytes queued in the direction waited on.
fn io(out: &mut String, write: bool, w: &WaitOn) -> Option<()> {
    let Some(Value::Int(fd)) = w.part("fd") else {
        return None;
    };
    let _ = write!(out, "{} fd {fd}", if write { "writing" } else { "reading" });
    if let Some(socket) = w.part("socket") {
        let get = |name: &str| socket.field(name);
        if let (Some(Value::Str { text: proto, .. }), Some(local), Some(peer)) =
            (get("proto"), get("local"), get("peer"))
        {
            let _ = write!(out, ", {proto} {} → {}", endpoint(local), endpoint(peer));
        }
        if let Some(Value::Uint(q)) = get(if write { "to_send" } else { "to_read" }) {
            let _ = write!(out, ", {q} bytes queued");
        }
    }
    Some(())
}

/// `accepting on fd 7, tcp 127.0.0.1:8080, 2 connections waiting`.
fn accept(out: &mut String, w: &WaitOn) -> Option<()> {
    let Some(Value::Int(fd)) = w.part("fd") else {
        return None;
    };
    let _ = write!(out, "accepting on fd {fd}");
    if let Some(socket) = w.part("socket") {
        if let (Some(Value::Str { text: proto, .. }), Some(local)) =
            (socket.field("proto"), socket.field("local"))
        {
            let _ = write!(out, ", {proto} {}", endpoint(local));
        }
        if let Some(Value::Uint(q)) = socket.field("to_read") {
            let s = if *q == 1 { "" } else { "s" };
            let _ = write!(out, ", {q} connection{s} waiting");
        }
    }
    Some(())
}

/// A socket's end: an internet address, or a Unix socket's path (escaped: it is the target's), or
/// `(unnamed)`.
fn endpoint(v: &Value) -> String {
    match v {
        Value::SocketAddr(a) => a.clone(),
        Value::Str { text, .. } if text.is_empty() => "(unnamed)".into(),
        Value::Str { text, .. } => bounded(format!("{text:?}")),
        _ => "?".into(),
    }
}

fn deadline(out: &mut String, v: &Value) -> Option<()> {
    let d = |ns: i64| super::Dur(ns.unsigned_abs());
    let _ = match *v {
        Value::Instant {
            age_ns: Some(a), ..
        } if a <= 0 => {
            out.push_str("deadline in ");
            d(a).write_to(out)
        }
        Value::Instant {
            age_ns: Some(a), ..
        } => {
            out.push_str("deadline passed ");
            let _ = d(a).write_to(out);
            out.push_str(" ago, not yet woken");
            Ok(())
        }
        Value::Instant {
            monotonic_ns,
            age_ns: None,
        } => write!(
            out,
            "deadline at monotonic {:.3?}",
            std::time::Duration::from_nanos(monotonic_ns)
        ),
        _ => return None,
    };
    Some(())
}

fn permits(out: &mut String, lock: &str, w: &WaitOn) -> Option<()> {
    let semaphore = w.part("semaphore")?;
    let get = |name: &str| semaphore.field(name);
    let uint = |name: &str| match get(name) {
        Some(Value::Uint(u)) => Some(*u),
        _ => None,
    };
    let (Some(Value::Address(addr)), Some(free)) = (get("addr"), uint("available")) else {
        return None;
    };
    // A send names its channel, as the channel's ends do.
    let channel = w.part("channel").filter(|c| c.field("addr").is_some());
    let addr = match channel.and_then(|c| c.field("addr")) {
        Some(Value::Address(chan)) => chan,
        _ => addr,
    };
    out.push_str(lock);
    out.push_str(" @ ");
    hex(out, *addr);
    out.push_str(": ");
    let wanted = match w.part("wanted") {
        Some(Value::Uint(n)) => *n,
        _ => 1,
    };
    if channel.is_some_and(|c| matches!(c.field("receiver_alive"), Some(Value::Bool(false)))) {
        // Its waiters are woken with an error: the place in the queue no longer means anything.
        out.push_str("closed, its receiver is gone");
        return Some(());
    }
    let _ = match (lock, free, channel) {
        (_, _, Some(c)) => {
            send(out, c, w);
            Ok(())
        }
        ("Mutex", 0, _) => write!(out, "locked"),
        ("Mutex", _, _) => write!(out, "unlocked, being handed over"),
        ("channel", 0, _) => write!(out, "full"),
        (_, _, _) => write!(out, "{free} permits free, wants {wanted}"),
    };
    // A channel's permits are its free slots: nobody holds them.
    if lock != "channel" {
        let none = w.holders.is_empty() && w.statics.is_empty() && w.threads.is_empty();
        match none {
            true if free < wanted => out.push_str(", held outside the tasks"),
            true => {}
            false => {
                out.push_str(", held by ");
                for (i, h) in w.holders.iter().enumerate() {
                    if i > 0 {
                        out.push_str("; ");
                    }
                    holder_into(out, h);
                }
                others_into(out, w, !w.holders.is_empty());
                // A mutex, or an `RwLock` taken to write, has one holder at most.
                let found = w.holders.len() + w.statics.len() + w.threads.len();
                let one = |h: &Held| &*h.lock == "Mutex" || (&*h.lock == "RwLock" && h.write);
                let held = (w.holders.iter().map(|h| &h.held))
                    .chain(w.statics.iter().map(|s| &s.held))
                    .chain(w.threads.iter().map(|t| &t.held));
                if held.clone().count() > 0 && held.clone().all(one) {
                    more_than_can_be(out, found, 1, "holder at most");
                }
            }
        }
    }
    place_in_queue(out, semaphore);
    if matches!(get("closed"), Some(Value::Bool(true))) {
        out.push_str(", closed");
    }
    Some(())
}

/// `, this task 2nd of 3 waiting`: from a wait list's `queued`, `more` and `position` fields.
fn place_in_queue(out: &mut String, list: &Value) {
    let uint = |name: &str| match list.field(name) {
        Some(Value::Uint(u)) => Some(*u),
        _ => None,
    };
    let more = matches!(list.field("more"), Some(Value::Bool(true)));
    let queued = uint("queued").unwrap_or(0);
    let of = |out: &mut String| {
        out.push_str(itoa::Buffer::new().format(queued));
        if more {
            out.push('+');
        }
    };
    match uint("position") {
        Some(p) => {
            out.push_str(", this task ");
            ordinal_into(out, p);
            out.push_str(" of ");
            of(out);
            out.push_str(" waiting");
        }
        None => {
            out.push_str(", ");
            of(out);
            let _ = match more {
                true => write!(out, " waiting, this task after the first {queued}"),
                false => write!(out, " waiting, this task not among them yet"),
            };
        }
    }
}

/// `Notify @ 0x…: not notified, this task 1st of 1 waiting`.
fn notify(out: &mut String, w: &WaitOn) -> Option<()> {
    let n = w.part("notify")?;
    let Some(Value::Address(addr)) = n.field("addr") else {
        return None;
    };
    let _ = write!(out, "Notify @ {addr:#x}: ");
    if let Some(Value::Bool(true)) = n.field("notified") {
        out.push_str("notified, not yet polled");
        return Some(());
    }
    out.push_str("not notified");
    place_in_queue(out, n);
    Some(())
}

/// The unsigned word `name` of part `part`.
fn word(w: &WaitOn, part: &str, name: &str) -> Option<u64> {
    match w.part(part)?.field(name)? {
        Value::Uint(u) => Some(*u),
        Value::Address(a) => Some(*a),
        _ => None,
    }
}

/// `watch @ 0x…: version 3 seen, unchanged since, 1 sender alive`; a change not yet seen; closed.
fn watch(out: &mut String, w: &WaitOn) -> Option<()> {
    let get = |name| word(w, "watch", name);
    let (addr, state, seen) = (get("addr")?, get("state")?, get("seen")?);
    // The version steps by 2 in the word, whose low bit says the senders are gone.
    let (now, seen) = (state >> 1, seen >> 1);
    let _ = write!(out, "watch @ {addr:#x}: ");
    let _ = match (state & 1 == 1, now == seen) {
        (true, _) => write!(out, "closed, its senders are gone"),
        (false, true) => {
            let senders = get("senders").unwrap_or(0);
            let s = if senders == 1 { "" } else { "s" };
            write!(
                out,
                "version {seen} seen, unchanged since, {senders} sender{s} alive"
            )
        }
        (false, false) => write!(
            out,
            "changed to version {now} (seen {seen}), not yet polled"
        ),
    };
    Some(())
}

/// `receiving from broadcast @ 0x…: lagged, 5 sent since its last read, capacity 2 (3 missed)`.
fn broadcast(out: &mut String, w: &WaitOn) -> Option<()> {
    let get = |name| word(w, "broadcast", name);
    let (addr, next, tail, mask) = (get("addr")?, get("next")?, get("tail")?, get("mask")?);
    let capacity = mask.checked_add(1)?;
    let behind = tail.checked_sub(next)?;
    let _ = write!(out, "receiving from broadcast @ {addr:#x}: ");
    if get("closed")? != 0 {
        out.push_str("closed, its senders are gone");
        return Some(());
    }
    let _ = match behind {
        0 => write!(out, "nothing new"),
        n if n > capacity => write!(
            out,
            "lagged, {n} sent since its last read, capacity {capacity} ({} missed)",
            n - capacity
        ),
        n => write!(out, "{n} unread, not yet polled"),
    };
    let (senders, receivers) = (get("senders").unwrap_or(0), get("receivers").unwrap_or(0));
    let s = if senders == 1 { "" } else { "s" };
    let r = if receivers == 1 { "" } else { "s" };
    let _ = write!(out, ", {senders} sender{s} alive, {receivers} receiver{r}");
    Some(())
}

/// `Barrier @ 0x…: 1 of 3 arrived, waiting for 2 more`.
fn barrier(out: &mut String, w: &WaitOn) -> Option<()> {
    let get = |name| word(w, "barrier", name);
    let (addr, arrived, n) = (get("addr")?, get("arrived")?, get("n")?);
    let _ = write!(
        out,
        "Barrier @ {addr:#x}: {arrived} of {n} arrived, waiting for {} more",
        n.saturating_sub(arrived)
    );
    Some(())
}

/// `task 9 (`guard` in app::transfer, acquired at app.rs:29)`.
fn holder_into(out: &mut String, h: &Holder) {
    let _ = super::TaskId(h.task).write_to(out);
    out.push_str(" (");
    how_held_into(out, &h.held, Some(&h.frame));
    out.push(')');
}

/// What a frame holds, in words: `Mutex @ 0x… in `guard`, acquired at app.rs:29`, or for a guard
/// inside a future kept but not polled, `… in `fut`, a future not polled (stopped at app.rs:22)`.
pub fn held_text(h: &Held) -> String {
    let mut out = String::new();
    held_into(&mut out, h);
    out
}

/// [`held_text`], into `out`.
pub fn held_into(out: &mut String, h: &Held) {
    lock_into(out, h);
    out.push_str(" in ");
    how_held_into(out, h, None);
}

/// `Mutex @ 0x…`, `RwLock @ 0x… (write)`.
pub fn lock_into(out: &mut String, h: &Held) {
    // Pushed, not formatted, as the other pieces of a wait graph's lines: a dump may have one per
    // task.
    out.push_str(&h.lock);
    out.push_str(" @ ");
    hex(out, h.addr);
    if &*h.lock == "RwLock" {
        out.push_str(if h.write { " (write)" } else { " (read)" });
    }
}

/// How it is held: `` `guard` in app::transfer, acquired at app.rs:29 `` (the frame where given).
pub fn how_held_into(out: &mut String, h: &Held, frame: Option<&str>) {
    // Names from the binary's DWARF: a line break in one must not end the line.
    out.push('`');
    out.push_str(&super::no_breaks(&h.local));
    out.push('`');
    if let Some(f) = frame {
        out.push_str(" in ");
        // A thread's function is named by DWARF's spelling; the frames' is the source's.
        out.push_str(&super::no_breaks(&crate::names::display_name(f)));
    }
    if !h.polled {
        out.push_str(", a future not polled");
        if let Some(at) = &h.stopped_at {
            out.push_str(" (stopped at ");
            loc_into(out, at);
            out.push(')');
        }
    }
    if let Some(at) = &h.acquired_at {
        out.push_str(", acquired at ");
        loc_into(out, at);
    }
}

/// `file.rs:12`, the file's path shortened (and its line breaks escaped), into `out`.
pub fn loc_into(out: &mut String, at: &Loc) {
    out.push_str(&super::no_breaks(crate::names::short_path(&at.file)));
    out.push(':');
    out.push_str(itoa::Buffer::new().format(at.line));
}

/// `1st`, `2nd`, `11th`, ...
fn ordinal_into(out: &mut String, n: u64) {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    out.push_str(itoa::Buffer::new().format(n));
    out.push_str(suffix);
}

/// A value as one bounded line.
pub fn one_line(v: &Value) -> String {
    let mut s = String::new();
    value(&mut s, v);
    bounded(s)
}

fn bounded(s: String) -> String {
    match s.char_indices().nth(MAX_LINE) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

fn value(out: &mut String, v: &Value) {
    // Past the line's length nothing more shows; stop building it too.
    if out.len() > 4 * MAX_LINE {
        return;
    }
    let _ = match v {
        Value::Bool(b) => write!(out, "{b}"),
        Value::Int(i) => {
            out.push_str(itoa::Buffer::new().format(*i));
            Ok(())
        }
        Value::Uint(u) => {
            out.push_str(itoa::Buffer::new().format(*u));
            Ok(())
        }
        Value::Float(f) => write!(out, "{:?}", f.get()),
        Value::Char(c) => write!(out, "{c:?}"),
        Value::Str { text, len } => {
            quoted(out, text);
            match (text.len() as u64) < *len {
                true => write!(out, "… ({len} bytes)"),
                false => Ok(()),
            }
        }
        Value::Seq { len, items } => seq(out, *len, items),
        Value::Variant { name, fields } => named(out, name, fields),
        Value::Struct { type_name, fields } => named(out, type_name, fields),
        Value::Pointer {
            kind,
            addr: _,
            strong,
            weak,
            to,
        } => pointer(out, *kind, *strong, *weak, to),
        Value::Duration { secs, nanos } => {
            write!(out, "{:?}", std::time::Duration::new(*secs, *nanos))
        }
        Value::Instant {
            monotonic_ns,
            age_ns,
        } => instant(out, *monotonic_ns, *age_ns),
        Value::SocketAddr(a) => {
            out.push_str(a);
            Ok(())
        }
        Value::Http { method, target } => {
            request_line_into(out, method.as_deref(), target.as_deref());
            Ok(())
        }
        Value::Opaque { type_name, addr } => {
            out.push_str(type_name);
            out.push_str(" @ ");
            hex(out, *addr);
            Ok(())
        }
        Value::Address(a) => {
            hex(out, *a);
            Ok(())
        }
        Value::Endpoint { sender, addr, .. } => {
            let end = if *sender { "sender" } else { "receiver" };
            write!(out, "{end} of channel @ {addr:#x}")
        }
        Value::Guard {
            lock, write, addr, ..
        } => {
            let how = match (&**lock, write) {
                ("RwLock", true) => " to write",
                ("RwLock", false) => " to read",
                _ => "",
            };
            write!(out, "holds {lock} @ {addr:#x}{how}")
        }
        Value::Unreadable => write!(out, "<unreadable>"),
        Value::Changed => write!(out, "<changed>"),
        Value::Cut | Value::Unread { .. } => write!(out, "…"),
    };
}

/// `{:#x}`, without the formatting machinery: most locals shown by address are one of many.
fn hex(out: &mut String, n: u64) {
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.push_str("0x");
    // Hex digits are ASCII.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// `text` as Rust's `{:?}` writes it: quoted, escaped.
fn quoted(out: &mut String, text: &str) {
    // Printable ASCII but `"` and `\` reads as it is; the rest goes through `Debug`'s escapes.
    if text
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        let _ = write!(out, "{text:?}");
    }
}

fn seq(out: &mut String, len: u64, items: &[Value]) -> std::fmt::Result {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        value(out, item);
    }
    let more = len.saturating_sub(items.len() as u64);
    if more > 0 {
        let _ = write!(
            out,
            "{}… {more} more",
            if items.is_empty() { "" } else { ", " }
        );
    }
    out.push(']');
    Ok(())
}

/// `Name`, `Name(a, b)` (fields numbered), `Name { x: a }`; a tuple has no name.
fn named(out: &mut String, name: &str, fields: &[Field]) -> std::fmt::Result {
    out.push_str(name);
    if fields.is_empty() {
        if name.is_empty() {
            out.push_str("()");
        }
        return Ok(());
    }
    let numbered = fields
        .iter()
        .all(|f| f.name.bytes().all(|b| b.is_ascii_digit()));
    out.push_str(if numbered { "(" } else { " { " });
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if !numbered {
            out.push_str(&f.name);
            out.push_str(": ");
        }
        value(out, &f.value);
    }
    out.push_str(if numbered { ")" } else { " }" });
    Ok(())
}

fn pointer(
    out: &mut String,
    kind: PointerKind,
    strong: Option<u64>,
    weak: Option<u64>,
    to: &Value,
) -> std::fmt::Result {
    match kind {
        PointerKind::Ref => out.push('&'),
        PointerKind::Box => out.push_str("Box("),
        PointerKind::Arc => out.push_str("Arc("),
        PointerKind::Rc => out.push_str("Rc("),
    }
    value(out, to);
    if kind != PointerKind::Ref {
        out.push(')');
    }
    if let (Some(s), Some(w)) = (strong, weak) {
        out.push_str(" [strong ");
        out.push_str(itoa::Buffer::new().format(s));
        out.push_str(", weak ");
        out.push_str(itoa::Buffer::new().format(w));
        out.push(']');
    }
    Ok(())
}

fn instant(out: &mut String, monotonic_ns: u64, age_ns: Option<i64>) -> std::fmt::Result {
    let d = |ns: i64| super::Dur(ns.unsigned_abs());
    match age_ns {
        Some(a) if a >= 0 => {
            out.push_str("Instant(");
            let _ = d(a).write_to(out);
            out.push_str(" ago)");
            Ok(())
        }
        Some(a) => {
            out.push_str("Instant(in ");
            let _ = d(a).write_to(out);
            out.push(')');
            Ok(())
        }
        None => write!(
            out,
            "Instant(monotonic {:.3?})",
            std::time::Duration::from_nanos(monotonic_ns)
        ),
    }
}

/// `POST /order?id=42`, as much of it as is known; the target's control characters escaped (it
/// is the client's text).
pub fn request_line_into(out: &mut String, method: Option<&str>, target: Option<&str>) {
    let parts = [method, target];
    for (i, part) in parts.into_iter().flatten().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&super::no_breaks(part));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::values::FloatBits;

    fn s(text: &str, len: u64) -> Value {
        Value::Str {
            text: text.into(),
            len,
        }
    }

    proptest::proptest! {
        #[test]
        fn addresses_read_as_rusts_alternate_hex(n in proptest::prelude::any::<u64>()) {
            let mut out = String::new();
            hex(&mut out, n);
            proptest::prop_assert_eq!(out, format!("{n:#x}"));
        }

        #[test]
        fn text_is_quoted_and_escaped_as_rusts_debug_does_it(text in ".*", ascii in "[ -~]*") {
            for text in [text, ascii] {
                let mut out = String::new();
                quoted(&mut out, &text);
                proptest::prop_assert_eq!(out, format!("{text:?}"));
            }
        }
    }

    #[test]
    fn each_kind_of_value_reads_as_rust_writes_it() {
        let some = Value::Variant {
            name: "Some".into(),
            fields: vec![Field {
                name: "0".into(),
                value: s("alice", 5),
            }],
        };
        assert_eq!(one_line(&some), r#"Some("alice")"#);
        let point = Value::Struct {
            type_name: "Point".into(),
            fields: vec![
                Field {
                    name: "x".into(),
                    value: Value::Int(-3),
                },
                Field {
                    name: "y".into(),
                    value: Value::Float(FloatBits(1.5f64.to_bits())),
                },
            ],
        };
        assert_eq!(one_line(&point), "Point { x: -3, y: 1.5 }");
        let arc = Value::Pointer {
            kind: PointerKind::Arc,
            addr: 0x10,
            strong: Some(2),
            weak: Some(1),
            to: Box::new(Value::Uint(7)),
        };
        assert_eq!(one_line(&arc), "Arc(7) [strong 2, weak 1]");
        let items = Value::Seq {
            len: 100,
            items: vec![Value::Uint(1), Value::Uint(2)],
        };
        assert_eq!(one_line(&items), "[1, 2, … 98 more]");
        let d = Value::Duration {
            secs: 1,
            nanos: 500_000_000,
        };
        assert_eq!(one_line(&d), "1.5s");
        let i = Value::Instant {
            monotonic_ns: 5,
            age_ns: Some(2_000_000_000),
        };
        assert_eq!(one_line(&i), "Instant(2.00s ago)");
        assert_eq!(
            one_line(&Value::Struct {
                type_name: "".into(),
                fields: vec![]
            }),
            "()"
        );
    }

    #[test]
    fn text_from_the_target_cannot_reach_the_terminal_raw_or_run_long() {
        let hostile = s("\u{1b}]0;pwned\u{7}\nnext", 1 << 20);
        let line = one_line(&hostile);
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        assert!(line.ends_with("… (1048576 bytes)"), "{line}");
        let long = s(&"x".repeat(1000), 1000);
        assert_eq!(one_line(&long).chars().count(), MAX_LINE + 1);
    }

    fn part(name: &str, value: Value) -> Local {
        Local::new(name, "", value)
    }

    fn semaphore(available: u64, queued: u64, position: Option<u64>) -> Value {
        let f = |name: &str, value| Field {
            name: name.into(),
            value,
        };
        let mut fields = vec![
            f("addr", Value::Address(0x10)),
            f("available", Value::Uint(available)),
            f("closed", Value::Bool(false)),
            f("queued", Value::Uint(queued)),
            f("more", Value::Bool(false)),
        ];
        fields.extend(position.map(|p| f("position", Value::Uint(p))));
        Value::Struct {
            type_name: "Semaphore".into(),
            fields,
        }
    }

    fn holder(task: u64, local: &str, polled: bool) -> Holder {
        let at = |line| Loc {
            file: "src/app.rs".into(),
            line,
            column: 0,
        };
        Holder {
            task,
            frame: "app::run".into(),
            at: Some(at(14)),
            held: Held {
                lock: "Semaphore".into(),
                write: false,
                addr: 0x10,
                local: local.into(),
                acquired_at: Some(at(12)),
                polled,
                stopped_at: (!polled).then(|| at(30)),
            },
        }
    }

    #[test]
    fn what_a_frame_holds_reads_as_a_phrase() {
        let mut h = holder(1, "guard", true).held;
        assert_eq!(
            held_text(&h),
            "Semaphore @ 0x10 in `guard`, acquired at src/app.rs:12"
        );
        (h.lock, h.write, h.acquired_at) = ("RwLock".into(), true, None);
        assert_eq!(held_text(&h), "RwLock @ 0x10 (write) in `guard`");
        // A name from a hostile binary's DWARF cannot end the line.
        h.local = "a\nb".into();
        assert!(!held_text(&h).contains('\n'), "{}", held_text(&h));
    }

    #[test]
    fn a_wait_target_reads_as_a_sentence() {
        let sleep = |age_ns| WaitOn {
            kind: WaitKind::Sleep,
            parts: vec![part(
                "deadline",
                Value::Instant {
                    monotonic_ns: 1,
                    age_ns,
                },
            )],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        };
        assert_eq!(
            wait_text(&sleep(Some(-90_000_000_000))).unwrap(),
            "deadline in 1m30s"
        );
        assert_eq!(
            wait_text(&sleep(Some(2_000_000_000))).unwrap(),
            "deadline passed 2.00s ago, not yet woken"
        );
        let permits = |lock: &str, sem| WaitOn {
            kind: WaitKind::Permits { lock: lock.into() },
            parts: vec![part("wanted", Value::Uint(2)), part("semaphore", sem)],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        };
        let mutex = permits("Mutex", semaphore(0, 12, Some(11)));
        assert_eq!(
            wait_text(&mutex).unwrap(),
            "Mutex @ 0x10: locked, held outside the tasks, this task 11th of 12 waiting"
        );
        let mut sem = permits("Semaphore", semaphore(1, 3, Some(2)));
        sem.holders = vec![holder(7, "guard", true), holder(9, "fut", false)];
        assert_eq!(
            wait_text(&sem).unwrap(),
            "Semaphore @ 0x10: 1 permits free, wants 2, held by task 7 (`guard` in app::run, \
             acquired at src/app.rs:12); task 9 (`fut` in app::run, a future not polled \
             (stopped at src/app.rs:30), acquired at src/app.rs:12), this task 2nd of 3 waiting"
        );
        let full = permits("channel", semaphore(0, 1, Some(1)));
        assert_eq!(
            wait_text(&full).unwrap(),
            "channel @ 0x10: full, this task 1st of 1 waiting",
            "a channel's permits are free slots: nobody holds them"
        );
        let unread = permits("Mutex", Value::Unreadable);
        assert_eq!(wait_text(&unread), None);
    }

    /// A channel's end held by `task`'s local `local`.
    fn end_holder(task: u64, local: &str) -> Holder {
        let mut h = holder(task, local, true);
        h.held.acquired_at = None;
        h
    }

    fn channel(queued: u64, senders: u64, receiver_alive: bool) -> Value {
        let f = |name: &str, value| Field {
            name: name.into(),
            value,
        };
        Value::Struct {
            type_name: "Channel".into(),
            fields: vec![
                f("addr", Value::Address(0x20)),
                f("capacity", Value::Uint(4)),
                f("queued", Value::Uint(queued)),
                f("senders", Value::Uint(senders)),
                f("receiver_alive", Value::Bool(receiver_alive)),
            ],
        }
    }

    #[test]
    fn a_channel_wait_says_how_full_it_is_and_who_holds_its_other_end() {
        let send = |c| WaitOn {
            kind: WaitKind::Permits {
                lock: "channel".into(),
            },
            parts: vec![
                part("semaphore", semaphore(0, 1, Some(1))),
                part("channel", c),
            ],
            holders: vec![end_holder(3, "rx")],
            statics: Vec::new(),
            threads: Vec::new(),
        };
        assert_eq!(
            wait_text(&send(channel(4, 1, true))).unwrap(),
            "channel @ 0x20: full, 4 of 4 queued, receiver alive: task 3 (`rx` in app::run), \
             this task 1st of 1 waiting"
        );
        assert_eq!(
            wait_text(&send(channel(4, 1, false))).unwrap(),
            "channel @ 0x20: closed, its receiver is gone"
        );
        let mut receive = WaitOn {
            kind: WaitKind::Receive,
            parts: vec![part("channel", channel(0, 2, true))],
            holders: vec![end_holder(5, "tx")],
            statics: Vec::new(),
            threads: Vec::new(),
        };
        assert_eq!(
            wait_text(&receive).unwrap(),
            "receiving from channel @ 0x20: empty, 2 senders alive: task 5 (`tx` in app::run); \
             1 outside the tasks"
        );
        receive.holders.clear();
        assert_eq!(
            wait_text(&receive).unwrap(),
            "receiving from channel @ 0x20: empty, 2 senders alive, held outside the tasks"
        );
    }

    #[test]
    fn more_holders_than_there_can_be_are_each_shown_and_said_to_be_too_many() {
        // A sender moved into another thread's closure leaves its old bits where it was.
        let receive = WaitOn {
            kind: WaitKind::Receive,
            parts: vec![part("channel", channel(0, 1, true))],
            holders: vec![end_holder(5, "tx"), end_holder(6, "sender")],
            statics: Vec::new(),
            threads: Vec::new(),
        };
        assert_eq!(
            wait_text(&receive).unwrap(),
            "receiving from channel @ 0x20: empty, 1 sender alive: task 5 (`tx` in app::run); \
             task 6 (`sender` in app::run) (2 found for 1 alive: a local moved out of keeps its \
             old value, so some may no longer hold it)"
        );
        let mut lock = holder(7, "guard", true);
        lock.held.lock = "Mutex".into();
        let mut moved = lock.clone();
        moved.task = 8;
        let mutex = |holders| WaitOn {
            kind: WaitKind::Permits {
                lock: "Mutex".into(),
            },
            parts: vec![part("semaphore", semaphore(0, 1, Some(1)))],
            holders,
            statics: Vec::new(),
            threads: Vec::new(),
        };
        let text = wait_text(&mutex(vec![lock.clone(), moved])).unwrap();
        assert!(text.contains(" (2 found for 1 holder at most: "), "{text}");
        let text = wait_text(&mutex(vec![lock])).unwrap();
        assert!(
            !text.contains("found for"),
            "one holder is as it should be: {text}"
        );
    }

    #[test]
    fn an_io_wait_names_its_descriptor_and_the_socket_where_known() {
        let fd = |write| WaitOn {
            kind: WaitKind::Io { write },
            parts: vec![part("fd", Value::Int(12))],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        };
        assert_eq!(wait_text(&fd(true)).unwrap(), "writing fd 12");
        let mut read = fd(false);
        let f = |name: &str, value| Field {
            name: name.into(),
            value,
        };
        let socket = Value::Struct {
            type_name: "socket".into(),
            fields: vec![
                f(
                    "proto",
                    Value::Str {
                        text: "tcp".into(),
                        len: 3,
                    },
                ),
                f("local", Value::SocketAddr("127.0.0.1:43210".into())),
                f("peer", Value::SocketAddr("127.0.0.1:5432".into())),
                f("to_send", Value::Uint(7)),
                f("to_read", Value::Uint(0)),
            ],
        };
        read.parts.push(part("socket", socket));
        assert_eq!(
            wait_text(&read).unwrap(),
            "reading fd 12, tcp 127.0.0.1:43210 → 127.0.0.1:5432, 0 bytes queued"
        );
    }

    /// A wait of `kind` whose one part `name` is a structure of these unsigned words.
    fn words_wait(kind: WaitKind, name: &str, words: &[(&str, u64)]) -> WaitOn {
        let fields = (words.iter())
            .map(|&(n, v)| Field {
                name: n.into(),
                value: if n == "addr" {
                    Value::Address(v)
                } else {
                    Value::Uint(v)
                },
            })
            .collect();
        let value = Value::Struct {
            type_name: name.into(),
            fields,
        };
        WaitOn {
            kind,
            parts: vec![part(name, value)],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        }
    }

    #[test]
    fn a_watch_says_the_version_seen_and_whether_it_moved_on() {
        let watch = |state, seen| {
            let words = [
                ("addr", 0x30),
                ("state", state),
                ("senders", 2),
                ("seen", seen),
            ];
            wait_text(&words_wait(WaitKind::Watch, "watch", &words)).unwrap()
        };
        // Versions step by 2 in the word; the low bit is "closed".
        assert_eq!(
            watch(6, 6),
            "watch @ 0x30: version 3 seen, unchanged since, 2 senders alive"
        );
        assert_eq!(
            watch(8, 6),
            "watch @ 0x30: changed to version 4 (seen 3), not yet polled"
        );
        assert_eq!(watch(7, 6), "watch @ 0x30: closed, its senders are gone");
    }

    #[test]
    fn a_broadcast_receive_says_how_far_behind_it_is() {
        let recv = |next, tail, closed| {
            let words = [
                ("addr", 0x40),
                ("next", next),
                ("tail", tail),
                ("receivers", 1),
                ("closed", closed),
                ("mask", 3),
                ("senders", 1),
            ];
            wait_text(&words_wait(WaitKind::Broadcast, "broadcast", &words)).unwrap()
        };
        let at = "receiving from broadcast @ 0x40: ";
        let ends = ", 1 sender alive, 1 receiver";
        assert_eq!(recv(5, 5, 0), format!("{at}nothing new{ends}"));
        assert_eq!(recv(5, 7, 0), format!("{at}2 unread, not yet polled{ends}"));
        assert_eq!(
            recv(5, 15, 0),
            format!("{at}lagged, 10 sent since its last read, capacity 4 (6 missed){ends}")
        );
        assert_eq!(recv(5, 5, 1), format!("{at}closed, its senders are gone"));
        // A position past the tail is a torn read: no sentence, not a huge lag.
        let torn = [
            ("addr", 0x40),
            ("next", 9),
            ("tail", 5),
            ("closed", 0),
            ("mask", 3),
        ];
        assert_eq!(
            wait_text(&words_wait(WaitKind::Broadcast, "broadcast", &torn)),
            None
        );
    }

    #[test]
    fn a_barrier_says_how_many_arrived() {
        let words = [("addr", 0x50), ("arrived", 1), ("n", 3)];
        assert_eq!(
            wait_text(&words_wait(WaitKind::Barrier, "barrier", &words)).unwrap(),
            "Barrier @ 0x50: 1 of 3 arrived, waiting for 2 more"
        );
    }

    #[test]
    fn a_notify_says_whether_it_was_notified_and_the_waiters_place() {
        let notify = |notified| {
            let f = |name: &str, value| Field {
                name: name.into(),
                value,
            };
            let value = Value::Struct {
                type_name: "Notify".into(),
                fields: vec![
                    f("addr", Value::Address(0x60)),
                    f("notified", Value::Bool(notified)),
                    f("queued", Value::Uint(3)),
                    f("more", Value::Bool(false)),
                    f("position", Value::Uint(2)),
                ],
            };
            let w = WaitOn {
                kind: WaitKind::Notify,
                parts: vec![part("notify", value)],
                holders: Vec::new(),
                statics: Vec::new(),
                threads: Vec::new(),
            };
            wait_text(&w).unwrap()
        };
        assert_eq!(
            notify(false),
            "Notify @ 0x60: not notified, this task 2nd of 3 waiting"
        );
        assert_eq!(notify(true), "Notify @ 0x60: notified, not yet polled");
    }

    #[test]
    fn an_accept_and_a_unix_socket_name_their_ends_escaped() {
        let f = |name: &str, value| Field {
            name: name.into(),
            value,
        };
        let text = Value::text;
        let socket = |local, peer, queued| Value::Struct {
            type_name: "socket".into(),
            fields: vec![
                f("proto", text("unix")),
                f("local", local),
                f("peer", peer),
                f("to_send", Value::Uint(0)),
                f("to_read", Value::Uint(queued)),
            ],
        };
        let wait = |kind, socket| WaitOn {
            kind,
            parts: vec![part("fd", Value::Int(9)), part("socket", socket)],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        };
        let listening = socket(text("/run/app.sock"), text(""), 2);
        assert_eq!(
            wait_text(&wait(WaitKind::Accept, listening)).unwrap(),
            "accepting on fd 9, unix \"/run/app.sock\", 2 connections waiting"
        );
        // A path with a line break in it (the target's) cannot end the line.
        let hostile = socket(text(""), text("/tmp/a\nb"), 0);
        let read = wait_text(&wait(WaitKind::Io { write: false }, hostile)).unwrap();
        assert_eq!(
            read,
            "reading fd 9, unix (unnamed) → \"/tmp/a\\nb\", 0 bytes queued"
        );
        // A peer the kernel did not say.
        let unknown = socket(text(""), Value::Unreadable, 0);
        let read = wait_text(&wait(WaitKind::Io { write: false }, unknown)).unwrap();
        assert_eq!(read, "reading fd 9, unix (unnamed) → ?, 0 bytes queued");
    }

    #[test]
    fn a_holder_that_is_a_static_is_named_as_one() {
        use crate::model::waits::StaticHolder;
        let mut mutex = WaitOn {
            kind: WaitKind::Permits {
                lock: "Mutex".into(),
            },
            parts: vec![part("semaphore", semaphore(0, 1, Some(1)))],
            holders: Vec::new(),
            statics: vec![StaticHolder {
                name: "app::PARKED".into(),
                held: holder(0, "app::PARKED", true).held,
            }],
            threads: Vec::new(),
        };
        assert_eq!(
            wait_text(&mutex).unwrap(),
            "Mutex @ 0x10: locked, held by static app::PARKED, this task 1st of 1 waiting"
        );
        mutex.holders = vec![holder(3, "guard", true)];
        assert_eq!(
            wait_text(&mutex).unwrap(),
            "Mutex @ 0x10: locked, held by task 3 (`guard` in app::run, acquired at \
             src/app.rs:12); static app::PARKED, this task 1st of 1 waiting"
        );
    }
}
