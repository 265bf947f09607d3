//! `--json`: the model serialised as is (see `model` and the README for the documented shape).

use serde::Serialize;

use crate::model::{Dump, Group, Process, SnapshotInfo};

/// With `--coalesce`, `groups` replaces `tasks`.
#[derive(Serialize)]
struct Coalesced<'a> {
    format: &'a str,
    version: u32,
    process: &'a Process,
    snapshot: &'a SnapshotInfo,
    deadlocks: &'a [Vec<u64>],
    groups: &'a [Group],
}

pub fn render(dump: &Dump, groups: Option<&[Group]>) -> String {
    // Compact: a dump of 100,000 tasks is twice as big, and twice as slow to write, when pretty-printed;
    // pipe it through `jq` to read it.
    let mut out = match groups {
        None => serde_json::to_string(dump),
        Some(groups) => serde_json::to_string(&Coalesced {
            format: &dump.format,
            version: dump.version,
            process: &dump.process,
            snapshot: &dump.snapshot,
            deadlocks: &dump.deadlocks,
            groups,
        }),
    }
    .expect("the dump model serialises");
    out.push('\n');
    out
}
