//! `dump --stats`: the overview of a dump ([`crate::model::Stats`]), as text after the dump's
//! header (what is stuck for good first), or as a JSON document of its own.

use std::fmt::Write;

use serde::Serialize;

use super::{Dur, no_breaks};
use crate::model::{
    AgeBucket, CensusView, Count, DecodingInfo, Dump, Process, RuntimeView, SnapshotInfo, Stats,
    Stuck,
};

/// The header, then each count, biggest first.
pub fn write<W: Write + ?Sized>(out: &mut W, dump: &Dump, st: &Stats) {
    super::text::header(out, dump, true);
    let mut named: Vec<u64> = dump.threads.iter().filter_map(|t| t.polling).collect();
    for c in &dump.causes {
        named.extend(c.end);
        named.extend(c.what.mentions());
    }
    let labels = super::labels::labels_for(dump, &named);
    super::verdicts::causes(out, dump, &labels, usize::MAX);
    super::threads::starved(out, dump, &labels, super::Style::default());
    let tasks = |n: usize| if n == 1 { "task" } else { "tasks" };
    stuck(out, &st.stuck);
    let _ = writeln!(
        out,
        "{} suspended {}, by what each waits on (the leaf that matters):",
        st.suspended,
        tasks(st.suspended)
    );
    counts(out, &st.by_leaf);
    let _ = writeln!(out, "\nby root future:");
    counts(out, &st.by_root);
    let _ = writeln!(out, "\nby the await in the program's own code:");
    counts(out, &st.by_await);
    if !st.by_route.is_empty() {
        let _ = writeln!(out, "\nby the HTTP request served (method and path):");
        counts(out, &st.by_route);
    }
    let _ = writeln!(out, "\nsuspended for:");
    for b in &st.ages {
        let _ = write!(out, "  {:<16} {:>7}", bucket(b), b.tasks);
        if b.at_least > 0 {
            let _ = write!(
                out,
                "  ({} of them at least: not timed by the agent)",
                b.at_least
            );
        }
        let _ = writeln!(out);
    }
    let threads: usize = st.threads_by_leaf.iter().map(|c| c.tasks).sum();
    if threads > 0 {
        let whose = match threads {
            1 => "thread's own future (its block_on's)",
            _ => "threads' own futures (their block_on's)",
        };
        let _ = writeln!(out, "\n{threads} {whose}, by what each waits on:");
        counts(out, &st.threads_by_leaf);
    }
}

/// What no task can end, first: the deadlocks and futurelocks `dump` tells one by one.
fn stuck<W: Write + ?Sized>(out: &mut W, s: &Stuck) {
    let counted = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    if s.deadlocks > 0 {
        let cycles = counted(s.deadlocks, "wait cycle", "wait cycles");
        let kinds = counted(s.deadlock_kinds, "kind", "kinds");
        let tasks = counted(s.tasks_in_deadlocks, "task", "tasks");
        let _ = writeln!(out, "DEADLOCK: {cycles} of {kinds}, {tasks} in them");
    }
    if s.futurelocks > 0 {
        let waits = counted(s.futurelocks, "wait", "waits");
        let _ = writeln!(
            out,
            "FUTURELOCK: {waits} for a lock held in a future nobody polls"
        );
    }
    if s.deadlocks == 0 && s.futurelocks == 0 {
        let _ = writeln!(out, "no deadlock or futurelock found");
    }
    let _ = writeln!(out);
}

fn counts<W: Write + ?Sized>(out: &mut W, counts: &[Count]) {
    for c in counts {
        let _ = writeln!(out, "  {:>7}  {}", c.tasks, no_breaks(&c.key));
    }
}

/// `< 1.00ms`, `1.00s – 10.00s`, `≥ 10m00s`, `unknown`.
fn bucket(b: &AgeBucket) -> String {
    match (b.from_ns, b.to_ns) {
        (u64::MAX, None) => crate::model::stats::NO_AGE.to_owned(),
        (0, Some(to)) => format!("< {}", Dur(to)),
        (from, Some(to)) => format!("{} – {}", Dur(from), Dur(to)),
        (from, None) => format!("≥ {}", Dur(from)),
    }
}

/// The `--stats --json` document: the dump's header fields and the stats, no tasks.
#[derive(Serialize)]
struct Document<'a> {
    format: &'a str,
    version: u32,
    process: &'a Process,
    snapshot: &'a SnapshotInfo,
    runtimes: &'a [RuntimeView],
    #[serde(skip_serializing_if = "Option::is_none")]
    census: &'a Option<CensusView>,
    decoding: &'a DecodingInfo,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    causes: &'a [crate::model::causes::Cause],
    stats: &'a Stats,
}

/// The `--stats --json` document, with its closing line break.
pub fn json(dump: &Dump, st: &Stats) -> String {
    let doc = Document {
        format: &dump.format,
        version: dump.version,
        process: &dump.process,
        snapshot: &dump.snapshot,
        runtimes: &dump.runtimes,
        census: &dump.census,
        decoding: &dump.decoding,
        causes: &dump.causes,
        stats: st,
    };
    // The model always serialises.
    let mut text = serde_json::to_string(&doc).unwrap_or_default();
    text.push('\n');
    text
}
