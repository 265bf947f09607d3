//! The dump's first section, what is stuck for good: the wait cycles (deadlocks), each edge with its
//! reason where it is a lock or a channel, then the futurelocks (waits for a lock held in a future
//! nobody polls).
//!
//! Cycles alike ([`CycleEdges::alike`]) are written in full once, then a line each: a service where
//! a thousand requests deadlocked the same way has one story to tell, and the tasks it happened to.
//! Futurelocks alike ([`waits_alike`]: queued behind the same unpolled future from the same place)
//! are one line, then their tasks.

use std::fmt::Write;

use crate::model::Dump;
use crate::model::waits::{CycleEdges, WaitEdge, WaitsFor, waits_alike};
use crate::view::labels::Labels;
use crate::view::{TaskId, id_ranges, no_breaks};

/// Writes the cycles and futurelocks of `dump`, and a blank line after them if there are any.
pub(super) fn write<W: Write + ?Sized>(out: &mut W, dump: &Dump, labels: &Labels<'_>) {
    let between = CycleEdges::new(&dump.waits);
    for group in between.alike(&dump.deadlocks) {
        let (first, more) = group.split_first().expect("a group has a cycle");
        cycle(out, first, &between.of(first), labels);
        if more.is_empty() {
            continue;
        }
        let n = more.len();
        let s = if n == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "  {n} more cycle{s} alike: the same waits for what is held, at the same places"
        );
        for other in more {
            let _ = out.write_str("    ");
            let _ = path(out, other);
            let _ = out.write_char('\n');
        }
    }
    // A futurelock in a cycle was told with it.
    let mut shown: Vec<(u64, u64)> = (dump.deadlocks.iter())
        .flat_map(|c| c.iter().copied().zip(c.iter().copied().cycle().skip(1)))
        .collect();
    shown.sort_unstable();
    let futurelocks: Vec<&WaitEdge> = (dump.waits.iter())
        .filter(|e| e.is_futurelock() && shown.binary_search(&(e.from, e.to)).is_err())
        .collect();
    // Those queued behind one unpolled future, from one place, are one line and their tasks.
    for group in waits_alike(futurelocks.iter().copied()) {
        let (first, more) = group.split_first().expect("a group has a wait");
        let _ = writeln!(out, "FUTURELOCK: {}", edge_text(first, labels));
        if !more.is_empty() {
            let ids: Vec<u64> = more.iter().map(|e| e.from).collect();
            let tasks = if ids.len() == 1 { "task" } else { "tasks" };
            let n = ids.len();
            let _ = writeln!(out, "  {n} more {tasks} wait alike: {}", id_ranges(&ids));
        }
    }
    if !dump.deadlocks.is_empty() || !futurelocks.is_empty() {
        let _ = out.write_char('\n');
    }
}

/// One cycle in full: its tasks, then each edge in words (or, where every edge is a `JoinHandle`,
/// who awaits whom).
fn cycle<W: Write + ?Sized>(
    out: &mut W,
    cycle: &[u64],
    edges: &[Option<&WaitEdge>],
    labels: &Labels<'_>,
) {
    let futurelock = edges.iter().flatten().any(|e| e.is_futurelock());
    let what = if futurelock { " (a futurelock)" } else { "" };
    let _ = out.write_str("DEADLOCK cycle: ");
    let _ = path(out, cycle);
    let _ = writeln!(out, "{what}");
    if edges
        .iter()
        .flatten()
        .all(|e| matches!(e.on, WaitsFor::Join))
    {
        let named: Vec<String> = cycle
            .iter()
            .chain(cycle.first())
            .map(|&id| labels.of(id).to_string())
            .collect();
        let _ = writeln!(out, "  {}", named.join(" awaits "));
        return;
    }
    for e in edges.iter().flatten() {
        let _ = writeln!(out, "  {}", edge_text(e, labels));
    }
}

/// `task 3 → task 4 → task 3`, written as it goes: a dump of thousands of cycles alike has a line
/// like this for each.
fn path<W: Write + ?Sized>(out: &mut W, cycle: &[u64]) -> std::fmt::Result {
    for (i, &id) in cycle.iter().chain(cycle.first()).enumerate() {
        if i > 0 {
            out.write_str(" → ")?;
        }
        TaskId(id).write_to(out)?;
    }
    Ok(())
}

/// One edge of the wait graph in words: `task 1 "a" waits in app::transfer at app.rs:31 for Mutex
/// @ 0x… held by task 2 "b" (`guard` in app::transfer, acquired at app.rs:29)`.
fn edge_text(e: &WaitEdge, labels: &Labels<'_>) -> String {
    let mut s = String::with_capacity(256);
    // Pieces pushed, not formatted: a dump may have a line like this per task.
    let _ = labels.of(e.from).write_to(&mut s);
    let wait = match &e.on {
        WaitsFor::Join => "awaits",
        WaitsFor::Lock { .. } | WaitsFor::Channel { .. } | WaitsFor::Oneshot => "waits",
    };
    s.push(' ');
    s.push_str(wait);
    if let Some(f) = &e.waits_in {
        s.push_str(" in ");
        s.push_str(&no_breaks(f));
    }
    if let Some(at) = &e.waits_at {
        s.push_str(" at ");
        super::values::loc_into(&mut s, at);
    }
    match &e.on {
        WaitsFor::Join => {
            let _ = write!(s, " for {} to finish", labels.of(e.to));
        }
        WaitsFor::Oneshot => {
            let _ = write!(
                s,
                " for a value on a oneshot whose sender {} holds",
                labels.of(e.to)
            );
        }
        WaitsFor::Lock { holder } => {
            s.push_str(" for ");
            super::values::lock_into(&mut s, &holder.held);
            s.push_str(", held by ");
            let _ = labels.of(e.to).write_to(&mut s);
            s.push_str(" (");
            super::values::how_held_into(&mut s, &holder.held, Some(&holder.frame));
            s.push(')');
        }
        WaitsFor::Channel { holder } => {
            let h = &holder.held;
            let (what, end) = match h.lock.ends_with("receiver") {
                true => ("room in", "its receiver"),
                false => ("a message on", "a sender of it"),
            };
            let _ = write!(s, " for {what} channel @ {:#x}, {end} held by ", h.addr);
            let _ = write!(s, "{} (", labels.of(e.to));
            let frame = no_breaks(&holder.frame);
            super::values::how_held_into(&mut s, h, Some(&frame));
            s.push(')');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FastMap;
    use crate::testing::{handshake, lock_edge as lock, sample};

    fn report(waits: Vec<WaitEdge>, deadlocks: Vec<Vec<u64>>) -> String {
        let mut dump = Dump::build(&handshake(), &sample(), 0);
        dump.waits = waits;
        dump.deadlocks = deadlocks;
        let mut out = String::new();
        write(&mut out, &dump, &Labels(FastMap::default()));
        out
    }

    #[test]
    fn cycles_alike_are_written_in_full_once_then_a_line_each() {
        let waits = vec![lock(1, 2, 15, 13), lock(2, 1, 15, 13), lock(3, 4, 15, 13)];
        let waits = [
            waits,
            vec![lock(4, 3, 15, 13), lock(5, 6, 15, 13), lock(6, 5, 15, 13)],
        ];
        let text = report(waits.concat(), vec![vec![1, 2], vec![3, 4], vec![5, 6]]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "DEADLOCK cycle: task 1 → task 2 → task 1");
        assert!(
            lines[1].starts_with("  task 1 waits in bank::transfer at src/bank.rs:15 for Mutex")
        );
        assert!(
            lines[2].starts_with("  task 2 waits in bank::transfer at src/bank.rs:15 for Mutex")
        );
        assert_eq!(
            &lines[3..],
            [
                "  2 more cycles alike: the same waits for what is held, at the same places",
                "    task 3 → task 4 → task 3",
                "    task 5 → task 6 → task 5",
                "",
            ],
            "the section ends with a blank line"
        );
    }

    #[test]
    fn a_lock_taken_elsewhere_makes_a_cycle_of_its_own() {
        let waits = vec![
            lock(1, 2, 15, 13),
            lock(2, 1, 15, 13),
            lock(3, 4, 15, 13),
            lock(4, 3, 15, 40),
        ];
        let text = report(waits, vec![vec![1, 2], vec![3, 4]]);
        let heads: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.is_empty())
            .collect();
        assert_eq!(
            heads,
            [
                "DEADLOCK cycle: task 1 → task 2 → task 1",
                "DEADLOCK cycle: task 3 → task 4 → task 3"
            ]
        );
        assert!(!text.contains("alike"), "{text}");
        assert!(text.contains("task 4 waits in bank::transfer at src/bank.rs:15 for Mutex @ 0x4000, held by task 3 (`source` in bank::transfer, acquired at src/bank.rs:40)"), "{text}");
    }

    #[test]
    fn cycles_alike_match_whichever_task_of_them_is_lowest() {
        // Three tasks taking three locks in turn, at lines 1, 2, 3; the second cycle's lowest task is
        // the one that waits at line 2.
        let first = vec![lock(1, 2, 1, 1), lock(2, 3, 2, 2), lock(3, 1, 3, 3)];
        let second = vec![lock(4, 5, 2, 2), lock(5, 6, 3, 3), lock(6, 4, 1, 1)];
        let text = report([first, second].concat(), vec![vec![1, 2, 3], vec![4, 5, 6]]);
        assert!(
            text.ends_with("  1 more cycle alike: the same waits for what is held, at the same places\n    task 4 → task 5 → task 6 → task 4\n\n"),
            "{text}"
        );
    }

    #[test]
    fn futurelocks_alike_are_one_line_then_their_tasks() {
        let unpolled = |from: u64, waits: u32| {
            let mut e = lock(from, 3, waits, 13);
            if let WaitsFor::Lock { holder } = &mut e.on {
                (holder.held.polled, holder.held.addr) = (false, 0x3000);
            }
            e
        };
        let edges = vec![
            unpolled(7, 30),
            unpolled(8, 30),
            unpolled(9, 30),
            unpolled(10, 31),
        ];
        let text = report(edges, Vec::new());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("FUTURELOCK: task 7 waits in bank::transfer at src/bank.rs:30 for Mutex @ 0x3000, held by task 3"), "{text}");
        assert_eq!(lines[1], "  2 more tasks wait alike: 8–9");
        assert!(
            lines[2].starts_with("FUTURELOCK: task 10 waits in bank::transfer at src/bank.rs:31"),
            "{text}"
        );
        assert_eq!(lines[3], "");
    }

    #[test]
    fn a_futurelock_inside_cycles_alike_is_not_written_again() {
        let mut edges = vec![
            lock(1, 2, 15, 13),
            lock(2, 1, 15, 13),
            lock(3, 4, 15, 13),
            lock(4, 3, 15, 13),
        ];
        for e in &mut edges {
            if let WaitsFor::Lock { holder } = &mut e.on {
                holder.held.polled = false;
            }
        }
        let mut alone = lock(7, 8, 20, 21);
        if let WaitsFor::Lock { holder } = &mut alone.on {
            holder.held.polled = false;
        }
        edges.push(alone);
        let text = report(edges, vec![vec![1, 2], vec![3, 4]]);
        assert!(
            text.starts_with("DEADLOCK cycle: task 1 → task 2 → task 1 (a futurelock)\n"),
            "{text}"
        );
        let futurelocks: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("FUTURELOCK"))
            .collect();
        assert_eq!(futurelocks.len(), 1, "{text}");
        assert!(
            futurelocks[0].starts_with("FUTURELOCK: task 7 waits"),
            "{text}"
        );
    }
}
