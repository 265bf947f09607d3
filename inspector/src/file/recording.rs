//! Recordings: every update of a live view, kept compact, and replayed step by step.
//!
//! The file is JSON lines. The first is the header: `{"format": "asyncdump-recording", "version": 1,
//! "json_version": 3, "process": {…}, "started_unix_ms": …}`. Each later line is one update:
//! `{"at_ms", "now_ns", "uptime_ns", "snapshot", "runtimes", "deadlocks", "waits"?, "decoding"?, "tasks",
//! "gone"}` (`waits`: the wait graph's edges, where wait targets were read),
//! where `tasks` holds only the tasks (as in the `--json` document) that are new or differ from the
//! previous update once their ages have grown by the time between the two (`now_ns` is the agent's
//! clock), `gone` the ids of tasks no longer there, and `decoding` appears when it changed. So a task
//! that sits suspended costs nothing after its first line, and ten minutes of the demo take a few
//! hundred kilobytes.
//!
//! A recording cut short (the recorder killed mid-line) is read up to its last whole update, and the
//! replay says so; a line damaged anywhere else is an error naming it.

use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::FileError;
use crate::model::{
    DecodingInfo, Dump, FORMAT, FastMap, JSON_VERSION, Process, RuntimeView, SnapshotInfo, TaskView,
};

pub const RECORDING_FORMAT: &str = "asyncdump-recording";
pub const RECORDING_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    /// The version of the `--json` document whose task shape the updates use.
    json_version: u32,
    process: Process,
    started_unix_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    /// Time since the recording started.
    at_ms: u64,
    /// The agent's clock when the update was taken.
    now_ns: u64,
    uptime_ns: u64,
    snapshot: SnapshotInfo,
    runtimes: Vec<RuntimeView>,
    deadlocks: Vec<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    waits: Vec<crate::model::waits::WaitEdge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decoding: Option<DecodingInfo>,
    tasks: Vec<TaskView>,
    gone: Vec<u64>,
}

/// Appends a live view's updates to a recording.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<std::fs::File>,
    /// When the first update was recorded: time 0 of the recording.
    started: Option<Instant>,
    /// The previous update's agent clock and tasks.
    prev: Option<(u64, FastMap<u64, TaskView>)>,
    decoding: Option<String>,
}

impl Recorder {
    /// Creates the recording at `path`; an existing file is never replaced.
    pub fn create(path: &Path) -> Result<Recorder, FileError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(super::SNAPSHOT_MODE)
            .open(path)
            .map_err(|source| FileError::Write {
                path: path.to_owned(),
                source,
            })?;
        Ok(Recorder {
            path: path.to_owned(),
            out: BufWriter::new(file),
            started: None,
            prev: None,
            decoding: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `dump` as the next update (the header first, with the first one).
    pub fn record(&mut self, dump: &Dump) -> Result<(), FileError> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let now = dump.snapshot.now_ns;
        let mut line = String::new();
        if self.prev.is_none() {
            let header = Header {
                format: RECORDING_FORMAT.to_owned(),
                version: RECORDING_VERSION,
                json_version: JSON_VERSION,
                process: dump.process.clone(),
                started_unix_ms: unix_ms(),
            };
            line = serde_json::to_string(&header).expect("the header serialises") + "\n";
        }
        let (tasks, gone) = self.changes(dump);
        let decoding = serde_json::to_string(&dump.decoding).expect("decoding serialises");
        let record = Record {
            at_ms: started.elapsed().as_millis() as u64,
            now_ns: now,
            uptime_ns: dump.process.uptime_ns,
            snapshot: dump.snapshot.clone(),
            runtimes: dump.runtimes.clone(),
            deadlocks: dump.deadlocks.clone(),
            waits: dump.waits.clone(),
            decoding: (self.decoding.as_ref() != Some(&decoding)).then(|| dump.decoding.clone()),
            tasks,
            gone,
        };
        self.decoding = Some(decoding);
        line += &serde_json::to_string(&record).expect("the record serialises");
        line.push('\n');
        self.prev = Some((now, dump.tasks.iter().map(|t| (t.id, t.clone())).collect()));
        let write_err = |source| FileError::Write {
            path: self.path.clone(),
            source,
        };
        self.out.write_all(line.as_bytes()).map_err(write_err)?;
        self.out.flush().map_err(write_err)
    }

    /// The tasks of `dump` that the previous update, aged, does not predict, and the ids it had that
    /// `dump` has not.
    fn changes(&self, dump: &Dump) -> (Vec<TaskView>, Vec<u64>) {
        let Some((then, prev)) = &self.prev else {
            return (dump.tasks.clone(), Vec::new());
        };
        let dt = dump.snapshot.now_ns.saturating_sub(*then);
        let tasks = dump
            .tasks
            .iter()
            .filter(|t| prev.get(&t.id).is_none_or(|p| p.aged(dt) != **t))
            .cloned()
            .collect();
        let here: rustc_hash::FxHashSet<u64> = dump.tasks.iter().map(|t| t.id).collect();
        let mut gone: Vec<u64> = prev
            .keys()
            .filter(|id| !here.contains(id))
            .copied()
            .collect();
        gone.sort_unstable();
        (tasks, gone)
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A recording read back, positioned at one of its updates.
pub struct Replay {
    header: Header,
    records: Vec<Record>,
    /// The update shown, and the tasks as of it, sorted by id.
    pos: usize,
    tasks: Vec<TaskView>,
    decoding: DecodingInfo,
    /// What reading it noticed (a cut-short end), for the status bar.
    pub note: Option<String>,
}

impl Replay {
    pub(super) fn read<'a>(
        path: &Path,
        head: serde_json::Value,
        lines: impl Iterator<Item = &'a str>,
    ) -> Result<Replay, FileError> {
        let damaged = |line: usize, e: serde_json::Error| FileError::Damaged {
            path: path.to_owned(),
            detail: format!("line {line}: {e}"),
        };
        let header: Header = serde_json::from_value(head).map_err(|e| damaged(1, e))?;
        let lines: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
        let mut records = Vec::with_capacity(lines.len());
        let mut note = None;
        for (i, line) in lines.iter().enumerate() {
            match super::json::from_str::<Record>(line) {
                Ok(r) => records.push(r),
                // The recorder was stopped mid-line: what came before is whole.
                Err(e) if i + 1 == lines.len() && e.is_eof() => {
                    note = Some(format!("its last update (line {}) was cut short", i + 2));
                }
                Err(e) => return Err(damaged(i + 2, e)),
            }
        }
        if records.is_empty() {
            return Err(FileError::Damaged {
                path: path.to_owned(),
                detail: "the recording has a header and no update".into(),
            });
        }
        let mut replay = Replay {
            header,
            records,
            pos: 0,
            tasks: Vec::new(),
            decoding: DecodingInfo::default(),
            note,
        };
        replay.rewind();
        Ok(replay)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Time since the recording started, at the update shown and at the last one.
    pub fn at_ms(&self) -> (u64, u64) {
        let last = self.records.last().map_or(0, |r| r.at_ms);
        (self.records[self.pos].at_ms, last)
    }

    /// When the recording started (Unix time, ms).
    pub fn started_unix_ms(&self) -> u64 {
        self.header.started_unix_ms
    }

    /// Moves to update `to` (clamped) and returns the state as of it.
    pub fn seek(&mut self, to: usize) -> Dump {
        let to = to.min(self.records.len() - 1);
        if to < self.pos {
            self.rewind();
        }
        while self.pos < to {
            self.pos += 1;
            self.apply(self.pos);
        }
        self.dump()
    }

    fn rewind(&mut self) {
        self.pos = 0;
        self.tasks.clear();
        self.apply(0);
    }

    fn apply(&mut self, at: usize) {
        let r = &self.records[at];
        let dt = at
            .checked_sub(1)
            .map_or(0, |p| r.now_ns.saturating_sub(self.records[p].now_ns));
        let gone: rustc_hash::FxHashSet<u64> = r.gone.iter().copied().collect();
        let mut next: FastMap<u64, TaskView> = self
            .tasks
            .drain(..)
            .filter(|t| !gone.contains(&t.id))
            .map(|t| (t.id, t.aged(dt)))
            .collect();
        for t in &r.tasks {
            next.insert(t.id, t.clone());
        }
        self.tasks = next.into_values().collect();
        self.tasks.sort_unstable_by_key(|t| t.id);
        if let Some(d) = &r.decoding {
            self.decoding = d.clone();
        }
    }

    fn dump(&self) -> Dump {
        let r = &self.records[self.pos];
        let mut dump = Dump {
            format: FORMAT.to_owned(),
            version: JSON_VERSION,
            process: Process {
                uptime_ns: r.uptime_ns,
                ..self.header.process.clone()
            },
            snapshot: r.snapshot.clone(),
            runtimes: r.runtimes.clone(),
            deadlocks: r.deadlocks.clone(),
            waits: r.waits.clone(),
            decoding: self.decoding.clone(),
            tasks: self.tasks.clone(),
            ..Dump::default()
        };
        dump.restore_frame_ids();
        dump
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{Opened, open};
    use crate::testing::{handshake, sample};
    use std::os::unix::fs::PermissionsExt;

    /// Three updates of `sample()`: the clock moves on, then a task is polled, then one goes away.
    fn updates() -> Vec<Dump> {
        let mut snap = sample();
        let mut out = vec![Dump::build(&handshake(), &snap, 0)];
        snap.now_ns += 250_000_000;
        out.push(Dump::build(&handshake(), &snap, 0));
        // The wait graph of the second: one task awaits another's JoinHandle.
        out[1].waits = vec![crate::model::waits::WaitEdge {
            from: snap.tasks[0].id,
            to: snap.tasks[0].id + 1,
            waits_in: Some("app::run".into()),
            waits_at: None,
            any_of: false,
            on: crate::model::waits::WaitsFor::Join,
        }];
        snap.now_ns += 250_000_000;
        snap.tasks[0].polls += 1;
        snap.tasks[0].last_poll_end_ns = Some(snap.now_ns - 1_000);
        out.push(Dump::build(&handshake(), &snap, 0));
        snap.now_ns += 250_000_000;
        snap.tasks.pop();
        out.push(Dump::build(&handshake(), &snap, 0));
        out
    }

    fn json(d: &Dump) -> String {
        crate::view::json::render(d, None)
    }

    /// Records `dumps` in a new file in a scratch directory: the directory (removed when it is
    /// dropped) and the file's path.
    fn recorded(dumps: &[Dump]) -> (tempfile::TempDir, std::path::PathBuf) {
        let scratch = crate::testing::scratch();
        let path = scratch.path().join("r.jsonl");
        let mut rec = Recorder::create(&path).unwrap();
        for d in dumps {
            rec.record(d).unwrap();
        }
        (scratch, path)
    }

    #[test]
    fn a_replay_shows_every_recorded_update_as_it_was() {
        let dumps = updates();
        let (_dir, path) = recorded(&dumps);
        let Opened::Recording(mut replay) = open(&path).unwrap() else {
            panic!("a recording")
        };
        assert_eq!(replay.len(), dumps.len());
        for k in [0, 3, 1, 2, 0, 3] {
            let back = replay.seek(k);
            assert_eq!(json(&back), json(&dumps[k]), "update {k}");
            assert_eq!(back.tasks, dumps[k].tasks);
        }
        assert!(replay.note.is_none());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            mode, 0o600,
            "a recording holds what memory held: its owner's alone"
        );
    }

    /// A crafted recording whose ages would overflow as they grow between updates: they stop at the
    /// largest age, never a panic or an age wrapped around to nothing.
    #[test]
    fn ages_that_would_overflow_as_they_grow_stop_at_the_largest() {
        let (_dir, path) = recorded(&updates());
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines[1]["tasks"][0]["state_age_ns"] = serde_json::json!(u64::MAX);
        let crafted: String = lines.iter().map(|l| l.to_string() + "\n").collect();
        std::fs::write(&path, crafted).unwrap();
        let Opened::Recording(mut replay) = open(&path).unwrap() else {
            panic!("a recording")
        };
        let later = replay.seek(1);
        assert_eq!(later.tasks[0].state_age_ns, Some(u64::MAX));
    }

    #[test]
    fn an_update_carries_only_the_tasks_that_changed() {
        let (_dir, path) = recorded(&updates());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["format"], RECORDING_FORMAT);
        let carried = |i: usize| lines[i]["tasks"].as_array().unwrap().len();
        let total = updates()[0].tasks.len();
        assert_eq!(carried(1), total, "the first update is every task");
        assert_eq!(carried(2), 0, "time passing changes nothing but ages");
        assert_eq!(carried(3), 1, "one task was polled");
        assert_eq!(lines[4]["gone"].as_array().unwrap().len(), 1);
        assert!(lines[2].get("decoding").is_none(), "decoding unchanged");
    }

    #[test]
    fn a_recording_cut_short_replays_up_to_its_last_whole_update() {
        let (_dir, path) = recorded(&updates());
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 20]).unwrap();
        let Opened::Recording(replay) = open(&path).unwrap() else {
            panic!("a recording")
        };
        assert_eq!(replay.len(), 3);
        assert!(replay.note.as_deref().unwrap().contains("cut short"));
        // Damaged in the middle: an error naming the line.
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "{\"at_ms\": oops}";
        std::fs::write(&path, lines.join("\n")).unwrap();
        let e = open(&path).err().unwrap().to_string();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn an_existing_file_is_never_recorded_over() {
        let scratch = crate::testing::scratch();
        let path = scratch.path().join("r.jsonl");
        std::fs::write(&path, "keep").unwrap();
        assert!(Recorder::create(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
    }
}
