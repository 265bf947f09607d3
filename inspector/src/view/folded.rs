//! Chains as folded stacks, the input of flame graph tools (`inferno-flamegraph`, `flamegraph.pl`,
//! speedscope), and as a flame graph drawn with `inferno`.
//!
//! Each line is one suspended path, root first: the frames from the task's root future down to a leaf,
//! separated by `;`, then a space and its weight. Identical paths of many tasks are one line (the
//! chains coalesced), so the widest boxes are where most tasks wait. A task suspended in a `join!` or
//! `select!` of several branches has one path per branch, each with the task's whole weight: the box of
//! the frame above them is as wide as its branches together. The weight is a count of tasks
//! ([`Weight::Tasks`]) or how long they have been suspended, in microseconds
//! ([`Weight::Suspended`]; running and completed tasks weigh nothing then).
//!
//! A frame reads as the text dump names it (generic arguments shortened, paths of dependencies from
//! their crate's directory), with the await it is suspended at; `;` inside a name, as in `[u8; 4]`,
//! becomes `:`, and control characters are escaped.

use std::collections::BTreeMap;

use crate::model::{Dump, FrameInfo, FrameNode, Source, State, TaskView};
use crate::names::short;
use crate::view::text::{Style, at_line};
use crate::view::{one_line, printable};

/// What a path weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weight {
    /// One per task.
    #[default]
    Tasks,
    /// Microseconds each task has been suspended.
    Suspended,
}

impl Weight {
    /// The unit, as the flame graph names it.
    fn unit(self) -> &'static str {
        match self {
            Weight::Tasks => "tasks",
            Weight::Suspended => "µs suspended",
        }
    }

    fn of(self, t: &TaskView) -> u64 {
        match (self, t.state) {
            (Weight::Tasks, _) => 1,
            (Weight::Suspended, State::Idle | State::Scheduled) => {
                t.waiting_ns().map_or(0, |w| w.0) / 1_000
            }
            (Weight::Suspended, _) => 0,
        }
    }
}

/// Every distinct path of `dump`'s tasks with its weight, sorted by path; paths that weigh nothing
/// are left out.
pub fn stacks(dump: &Dump, weight: Weight, style: Style) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut path = Vec::new();
    for t in &dump.tasks {
        let w = weight.of(t);
        if w == 0 {
            continue;
        }
        if t.frames.is_empty() {
            *out.entry(frame_name(&short(&t.root_type))).or_default() += w;
            continue;
        }
        for f in t.frames.iter() {
            add_paths(f, &mut path, w, style, &mut out);
        }
    }
    out
}

/// Adds the paths from `root` to each of its leaves, under `path`. Iterative: chains may be deep.
fn add_paths(
    root: &FrameNode,
    path: &mut Vec<String>,
    w: u64,
    style: Style,
    out: &mut BTreeMap<String, u64>,
) {
    let base = path.len();
    let mut stack = vec![(root, base)];
    while let Some((node, depth)) = stack.pop() {
        path.truncate(depth);
        path.push(label(&node.meta, style));
        if node.children.is_empty() {
            *out.entry(path.join(";")).or_default() += w;
        }
        stack.extend(node.children.iter().rev().map(|c| (c, depth + 1)));
    }
    path.truncate(base);
}

/// A frame as one element of a path.
fn label(m: &FrameInfo, style: Style) -> String {
    let mut s = short(&m.name).into_owned();
    let at = match m.source {
        Source::Awaitee | Source::Cut => None,
        _ => m.at(),
    };
    if let Some(at) = at {
        at_line(&mut s, &style.path(&at.file), at.line);
    }
    frame_name(&s)
}

/// `name` made safe inside a path: no separator, no control character, no line break (a folded
/// stack is one line).
fn frame_name(name: &str) -> String {
    one_line(name).replace(';', ":")
}

/// Writes the folded stacks, one per line.
pub fn write<W: std::fmt::Write + ?Sized>(out: &mut W, dump: &Dump, weight: Weight, style: Style) {
    for (path, w) in stacks(dump, weight, style) {
        let _ = writeln!(out, "{path} {w}");
    }
}

/// Draws the flame graph of `dump` as SVG.
pub fn svg<W: std::io::Write>(
    out: W,
    dump: &Dump,
    weight: Weight,
    style: Style,
) -> std::io::Result<()> {
    let lines: Vec<String> = stacks(dump, weight, style)
        .into_iter()
        .map(|(path, w)| format!("{path} {w}"))
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = printable(&format!(
        "asyncdump: pid {} ({})",
        dump.process.pid, dump.process.program
    ))
    .into_owned();
    options.subtitle = Some(format!(
        "{} tasks, suspended chains root first; weight: {}",
        dump.tasks.len(),
        weight.unit()
    ));
    options.count_name = weight.unit().to_owned();
    options.name_type = "Frame:".to_owned();
    options.deterministic = true;
    if lines.is_empty() {
        // inferno refuses an empty graph; an empty dump still gets a picture that says so.
        return write!(
            { out },
            r#"<?xml version="1.0" standalone="no"?><svg version="1.1" width="600" height="40" xmlns="http://www.w3.org/2000/svg"><text x="10" y="25">no suspended chains to draw</text></svg>"#
        );
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(std::io::Error::other)
}
