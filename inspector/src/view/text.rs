//! The dumpasync-style text dump: a header, deadlocks, then every chain root first, one frame per line,
//! indented by depth down to the leaf, with cross-task edges and the delegate.

use std::collections::HashMap;
use std::fmt::Write;

use crate::model::{CaptureView, Dump, FrameNode, Group, State, TaskView};
use crate::view::{duration, id_ranges};

pub fn render(dump: &Dump, groups: Option<&[Group]>) -> String {
    let mut out = String::new();
    header(&mut out, dump);
    let names: HashMap<u64, Option<&str>> = dump
        .tasks
        .iter()
        .map(|t| (t.id, t.name.as_deref()))
        .collect();
    let label = |id: u64| match names.get(&id) {
        Some(Some(name)) => format!("task {id} \"{name}\""),
        _ => format!("task {id}"),
    };
    for cycle in &dump.deadlocks {
        let ids: Vec<String> = cycle
            .iter()
            .chain(cycle.first())
            .map(|id| format!("task {id}"))
            .collect();
        let named: Vec<String> = cycle
            .iter()
            .chain(cycle.first())
            .map(|&id| label(id))
            .collect();
        let _ = writeln!(out, "DEADLOCK cycle: {}", ids.join(" → "));
        let _ = writeln!(out, "  {}", named.join(" awaits "));
    }
    if !dump.deadlocks.is_empty() {
        out.push('\n');
    }
    match groups {
        Some(groups) => {
            for g in groups {
                let ages = if g.min_age_ns == g.max_age_ns {
                    duration(g.min_age_ns)
                } else {
                    format!("{}–{}", duration(g.min_age_ns), duration(g.max_age_ns))
                };
                let tasks = if g.count == 1 { "task" } else { "tasks" };
                let _ = writeln!(
                    out,
                    "×{} {tasks} {} · {} · {} {ages}",
                    g.count,
                    id_ranges(&g.task_ids),
                    state_word(g.state),
                    age_word(g.state)
                );
                spawned(&mut out, &g.spawned_at, &g.root_type, None);
                frames(&mut out, &g.frames, &g.awaits_tasks, &label);
                out.push('\n');
            }
        }
        None => {
            for t in &dump.tasks {
                task(&mut out, t, &label);
                out.push('\n');
            }
        }
    }
    if dump.tasks.is_empty() {
        out.push_str("no task matches (suspended tasks only by default; --all shows running and completed ones)\n");
    }
    out
}

fn header(out: &mut String, d: &Dump) {
    let p = &d.process;
    let s = &d.snapshot;
    let _ = writeln!(
        out,
        "pid {} ({}) · agent {} · protocol {} · up {}",
        p.pid,
        p.program,
        p.agent_version,
        p.protocol_version,
        duration(p.uptime_ns)
    );
    let _ = writeln!(
        out,
        "{} {}: {} idle, {} running, {} completed · snapshot in {} (round trip {})",
        s.tasks_total,
        if s.tasks_total == 1 { "task" } else { "tasks" },
        s.idle,
        s.running,
        s.completed,
        duration(s.capture_ns),
        duration(s.round_trip_ns)
    );
    let _ = writeln!(
        out,
        "showing {} of {} tasks\n",
        d.tasks.len(),
        s.tasks_total
    );
}

fn state_word(s: State) -> &'static str {
    match s {
        State::Idle => "idle",
        State::Running => "running",
        State::Completed => "completed",
    }
}

fn age_word(s: State) -> &'static str {
    match s {
        State::Idle => "suspended",
        State::Running => "for",
        State::Completed => "ago",
    }
}

fn task(out: &mut String, t: &TaskView, label: &dyn Fn(u64) -> String) {
    let mut line = label(t.id);
    let _ = write!(line, " · {}", state_word(t.state));
    if let Some(th) = &t.thread {
        let _ = write!(
            line,
            " on thread {} (tid {})",
            th.name.as_deref().unwrap_or("?"),
            th.tid
        );
    }
    let _ = write!(
        line,
        " · {} {} · polls {} · busy {} · woken {} times",
        age_word(t.state),
        duration(t.state_age_ns),
        t.polls,
        duration(t.busy_ns),
        t.wakes
    );
    if let Some(ago) = t.last_wake_ago_ns {
        let _ = write!(line, " (last {} ago)", duration(ago));
    }
    let _ = writeln!(out, "{line}");
    spawned(out, &t.spawned_at, &t.root_type, Some(t.age_ns));
    if let Some(by) = &t.awaited_by {
        let mut at = String::new();
        if !by.path.is_empty() {
            let _ = write!(at, " at {}", by.path.join(" → "));
        }
        let _ = writeln!(out, "  awaited by {}{at}", label(by.task));
    }
    match t.capture {
        CaptureView::Fresh => {}
        CaptureView::Stale { age_ns } => {
            let _ = writeln!(
                out,
                "  frames from {} ago (the task was running during this snapshot)",
                duration(age_ns)
            );
        }
        CaptureView::Unavailable => {
            out.push_str("  frames unavailable: the task was running throughout this snapshot\n");
        }
    }
    frames(out, &t.frames, &t.awaits_tasks, label);
    match &t.delegate {
        None => out.push_str("  delegate: none\n"),
        Some(d) => {
            let clones = if d.clones == 1 {
                "1 clone"
            } else {
                &format!("{} clones", d.clones)
            };
            let _ = writeln!(
                out,
                "  delegate: waker kept by a leaf ({clones}) for {}",
                duration(d.held_ns)
            );
        }
    }
}

fn spawned(out: &mut String, at: &crate::model::Loc, root_type: &str, age_ns: Option<u64>) {
    let age = age_ns
        .map(|a| format!(" {} ago", duration(a)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  spawned{age} at {}:{}:{} · root {root_type}",
        at.file, at.line, at.column
    );
}

fn frames(
    out: &mut String,
    nodes: &[FrameNode],
    root_awaits: &[u64],
    label: &dyn Fn(u64) -> String,
) {
    for &id in root_awaits {
        let _ = writeln!(out, "  → awaits {}", label(id));
    }
    // Iterative, so that a very deep chain cannot overflow the stack.
    let mut stack: Vec<(&FrameNode, usize)> = nodes.iter().rev().map(|n| (n, 1)).collect();
    while let Some((n, depth)) = stack.pop() {
        let indent = "  ".repeat(depth);
        let l = &n.location;
        let _ = writeln!(
            out,
            "{indent}{} at {}:{}:{}",
            n.name, l.file, l.line, l.column
        );
        for &id in &n.awaits_tasks {
            let _ = writeln!(out, "{indent}  → awaits {}", label(id));
        }
        stack.extend(n.children.iter().rev().map(|c| (c, depth + 1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{handshake, sample};
    use crate::model::{Dump, coalesce};

    #[test]
    fn a_chain_prints_root_first_indented_to_the_leaf() {
        let text = render(&Dump::build(&handshake(), &sample(), 0), None);
        let body: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("task 1"))
            .collect();
        assert_eq!(
            body[0],
            "task 1 · idle · suspended 2.00s · polls 1 · busy 10ns · woken 0 times"
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
    fn coalesced_groups_show_their_count() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let text = render(&dump, Some(&coalesce(&dump.tasks)));
        assert!(
            text.contains("×1 task 1 · idle · suspended 2.00s"),
            "{text}"
        );
    }
}
