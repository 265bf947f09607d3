//! `asyncdump diff`: two dumps compared, as text (tasks alike in each part told once, with their
//! count and ids, as `--coalesce` does) or as JSON (every task).

use std::fmt::Write;

use crate::model::diff::{Diff, Entry, Place};
use crate::names::{short, short_path};
use crate::view::labels::task_label_parts;
use crate::view::{Dur, id_ranges, no_breaks};

use super::text::state_word;

/// The comparison as text: a header, then the new, gone, moved and unchanged tasks.
pub fn write<W: Write + ?Sized>(out: &mut W, d: &Diff, (a, b): (&str, &str)) {
    let between = match d.between_ns {
        ns if ns >= 0 => format!("{} later", Dur(ns as u64)),
        ns => format!("{} earlier", Dur(ns.unsigned_abs())),
    };
    let _ = writeln!(
        out,
        "pid {}: {} → {} ({between}): {} new, {} gone, {} moved, {} again at their await, {} unchanged",
        d.pid,
        no_breaks(a),
        no_breaks(b),
        d.new.len(),
        d.gone.len(),
        d.moved.len(),
        d.again.len(),
        d.unchanged.len()
    );
    part(out, "new", &d.new);
    part(out, "gone", &d.gone);
    if !d.moved.is_empty() {
        let _ = writeln!(out, "\nmoved");
        for m in &d.moved {
            let _ = write!(out, "  {} · ", label(&m.to));
            let _ = writeln!(out, "{}\n    now {}", where_is(&m.from), where_is(&m.to));
        }
    }
    part(
        out,
        "again at the same await, waiting for something else",
        &d.again,
    );
    let unchanged = match d.between_ns {
        ns if ns > 0 => format!("unchanged for ≥ {}", Dur(ns as u64)),
        _ => "unchanged".into(),
    };
    part(out, &unchanged, &d.unchanged);
}

/// One part: its tasks grouped by how they look, each group once (`×3 tokio tasks 4–6 · …`).
fn part<W: Write + ?Sized>(out: &mut W, title: &str, entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let mut groups: Vec<(&Entry, Vec<u64>)> = Vec::new();
    for e in entries {
        let alike =
            |g: &(&Entry, Vec<u64>)| g.0.at == e.at && g.0.state == e.state && g.0.name == e.name;
        match groups.iter_mut().find(|g| alike(g)) {
            Some(g) => g.1.push(e.id),
            None => groups.push((e, vec![e.id])),
        }
    }
    for (e, ids) in groups {
        let who = match ids.len() {
            1 => label(e),
            n => {
                let mut who = format!("×{n} tasks {}", id_ranges(&ids));
                if let Some(name) = &e.name {
                    let _ = write!(who, " \"{}\"", no_breaks(name));
                }
                who
            }
        };
        let _ = writeln!(out, "  {who} · {}", where_is(e));
    }
}

/// `tokio task 7 (app::wait)` or `task 3 "name"`.
fn label(e: &Entry) -> String {
    let mut out = task_label_parts(e.id, e.name.as_deref());
    if let (None, Some(d)) = (&e.name, &e.derived_name) {
        let _ = write!(out, " ({})", short(&no_breaks(d)));
    }
    out
}

/// `idle · app::wait at src/main.rs:12 → tokio::sync::oneshot::Receiver<u64>`.
fn where_is(e: &Entry) -> String {
    let mut out = state_word(e.state).to_owned();
    let Place { own, own_at, leaf } = &e.at;
    if let Some(own) = own {
        let _ = write!(out, " · {}", short(&no_breaks(own)));
        if let Some(at) = own_at {
            let _ = write!(out, " at {}:{}", short_path(&at.file), at.line);
        }
    }
    if let Some(leaf) = leaf {
        let sep = if own.is_some() { " →" } else { " ·" };
        let _ = write!(out, "{sep} {}", short(&no_breaks(leaf)));
    }
    out
}
