//! Snapshot files and recordings: dumps kept on disk and read back as if live.
//!
//! A **snapshot file** is the `--json` document of one dump (`dump -o FILE`, `s` in watch). A
//! **recording** (`watch --record FILE`) is JSON lines: a header naming the format and the process,
//! then one line per update with only the tasks that changed (see [`recording`]). [`open`] tells them
//! apart by their first line, and refuses anything else with one line saying what it found: another
//! format or version, a `--coalesce` document (its tasks are grouped away), or a damaged file (where).
//! Files are written under a temporary name and renamed into place, so a reader never sees half a file.

pub mod json;
pub mod recording;

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::model::{Dump, FORMAT, JSON_VERSION, OLDEST_JSON_VERSION};
use crate::output::{self, Existing};
pub use recording::{RECORDING_FORMAT, RECORDING_VERSION, Recorder, Replay};

/// Largest file read: a snapshot of a few hundred thousand tasks fits; `/dev/zero` does not.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{} is over {} MiB; not a snapshot or recording asyncdump wrote", path.display(), MAX_FILE_BYTES >> 20)]
    TooBig { path: PathBuf },
    #[error("{} is damaged or not an asyncdump file: {detail}", path.display())]
    Damaged { path: PathBuf, detail: String },
    #[error("{} is {format} version {found}; this asyncdump reads version {supported}", path.display())]
    Version {
        path: PathBuf,
        format: String,
        found: u64,
        supported: u32,
    },
    #[error("{} was written with --coalesce: its tasks are grouped away; save a dump without it", path.display())]
    Coalesced { path: PathBuf },
    #[error("{} was written with --stats: it holds counts, not tasks; save a dump without it", path.display())]
    StatsOnly { path: PathBuf },
}

/// What a file holds.
pub enum Opened {
    Snapshot(Box<Dump>),
    Recording(Box<Replay>),
}

/// Reads a snapshot file or a recording.
pub fn open(path: &Path) -> Result<Opened, FileError> {
    let text = read_bounded(path)?;
    json::on_deep_stack(|| parse(path, &text))
}

/// Reads the `text` of the file at `path` (named in errors) as a snapshot or a recording. Its chains
/// may nest deep: call it on [`json::on_deep_stack`].
pub fn parse(path: &Path, text: &str) -> Result<Opened, FileError> {
    // A recording's first line is its header; a snapshot is one document, on one line as asyncdump
    // writes it, or on many once pretty-printed.
    let first = text.lines().next().unwrap_or_default();
    let head: serde_json::Value = match json::from_str(first) {
        Ok(v) => v,
        Err(_) => json::from_str(text).map_err(|e| damaged(path, &e))?,
    };
    let format = head["format"].as_str().unwrap_or_default().to_owned();
    let version = head["version"].as_u64().unwrap_or(0);
    let (oldest, expect) = match format.as_str() {
        FORMAT => (OLDEST_JSON_VERSION, JSON_VERSION),
        RECORDING_FORMAT => (RECORDING_VERSION, RECORDING_VERSION),
        _ => {
            return Err(FileError::Damaged {
                path: path.to_owned(),
                detail: format!(
                    "it starts with format {format:?}, not {FORMAT:?} or {RECORDING_FORMAT:?}"
                ),
            });
        }
    };
    if !(u64::from(oldest)..=u64::from(expect)).contains(&version) {
        return Err(FileError::Version {
            path: path.to_owned(),
            format,
            found: version,
            supported: expect,
        });
    }
    if format == RECORDING_FORMAT {
        return Replay::read(path, head, text.lines().skip(1))
            .map(|r| Opened::Recording(Box::new(r)));
    }
    if head.get("groups").is_some() {
        return Err(FileError::Coalesced {
            path: path.to_owned(),
        });
    }
    if head.get("stats").is_some() {
        return Err(FileError::StatsOnly {
            path: path.to_owned(),
        });
    }
    let dump = Dump::from_value(head).map_err(|e| damaged(path, &e))?;
    Ok(Opened::Snapshot(Box::new(dump)))
}

/// The whole file as text, refusing one over [`MAX_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<String, FileError> {
    let read_err = |source| FileError::Read {
        path: path.to_owned(),
        source,
    };
    let (file, len) = crate::input::open_regular(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => FileError::Damaged {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        _ => read_err(e),
    })?;
    if len > MAX_FILE_BYTES {
        return Err(FileError::TooBig {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooBig {
            path: path.to_owned(),
        });
    }
    String::from_utf8(bytes).map_err(|e| FileError::Damaged {
        path: path.to_owned(),
        detail: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
    })
}

fn damaged(path: &Path, e: &serde_json::Error) -> FileError {
    FileError::Damaged {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// The mode of a new snapshot file: it holds what the process's memory held (names, paths, values),
/// so it is its owner's alone until they share it. A file it replaces keeps its own mode.
pub const SNAPSHOT_MODE: u32 = 0o600;

/// Writes `text` to `path` whole or not at all (see [`crate::output`]), replacing the regular file
/// there (which keeps its mode) or making one of `mode`.
pub fn write_atomically(path: &Path, text: &[u8], mode: u32) -> Result<(), FileError> {
    output::write_whole(path, text, mode, Existing::Replace).map_err(|source| FileError::Write {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Dump;
    use crate::testing::{edge_snapshot, handshake, sample};

    /// The temporary file beside an output used to be `.NAME.tmp-PID`, a name anyone could plant a
    /// symlink at beforehand (root then wrote through it). It is now unpredictable and created
    /// exclusively: a link planted at the old name is never followed.
    #[test]
    fn a_symlink_planted_at_the_old_temporary_name_is_never_written_through() {
        let scratch = crate::testing::scratch();
        let victim = scratch.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let out = scratch.path().join("snap.json");
        let planted = (scratch.path()).join(format!(".snap.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_atomically(&out, b"{}", SNAPSHOT_MODE).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read(&out).unwrap(), b"{}");
        assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
    }

    fn json(dump: &Dump) -> String {
        crate::view::json::render(dump, None)
    }

    #[test]
    fn a_snapshot_file_reads_back_as_the_same_dump() {
        let scratch = crate::testing::scratch();
        let dir = scratch.path();
        let path = dir.join("s.json");
        for snap in [sample(), edge_snapshot(&[(3, 4), (4, 3)])] {
            let dump = Dump::build(&handshake(), &snap, 7);
            write_atomically(&path, json(&dump).as_bytes(), SNAPSHOT_MODE).unwrap();
            let Opened::Snapshot(back) = open(&path).unwrap() else {
                panic!("a snapshot")
            };
            assert_eq!(json(&back), json(&dump), "the same document");
            assert_eq!(back.tasks, dump.tasks, "frame ids computed again");
            assert_eq!(back.deadlocks, dump.deadlocks);
        }
    }

    #[test]
    fn a_pretty_printed_snapshot_reads_too() {
        let scratch = crate::testing::scratch();
        let dir = scratch.path();
        let path = dir.join("p.json");
        let dump = Dump::build(&handshake(), &sample(), 0);
        std::fs::write(&path, serde_json::to_string_pretty(&dump).unwrap()).unwrap();
        assert!(matches!(open(&path), Ok(Opened::Snapshot(_))));
    }

    /// Version 3 wrote `null` for what only the agent knows, where 4 leaves it out.
    #[test]
    fn a_version_3_snapshot_with_nulls_reads_as_one_read_through_the_agent() {
        let scratch = crate::testing::scratch();
        let path = scratch.path().join("v3.json");
        let mut doc: serde_json::Value =
            serde_json::to_value(Dump::build(&handshake(), &sample(), 0)).unwrap();
        doc["version"] = 3.into();
        doc["process"].as_object_mut().unwrap().remove("read_from");
        for t in doc["tasks"].as_array_mut().unwrap() {
            for key in ["agent_id", "name", "polls", "spawned_at", "delegate"] {
                t[key].take();
            }
        }
        std::fs::write(&path, doc.to_string()).unwrap();
        let Ok(Opened::Snapshot(read)) = open(&path) else {
            panic!("a version 3 snapshot opens");
        };
        assert_eq!(read.process.read_from, crate::model::ReadFrom::Agent);
        assert!(
            read.tasks
                .iter()
                .all(|t| t.agent_id.is_none() && t.polls.is_none())
        );
    }

    fn error_of(name: &str, content: &[u8]) -> String {
        let scratch = crate::testing::scratch();
        let dir = scratch.path();
        let path = dir.join("f");
        std::fs::write(&path, content).unwrap();
        match open(&path) {
            Ok(_) => panic!("{name} opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn damaged_and_foreign_files_get_one_line_saying_what_is_wrong() {
        let doc = json(&Dump::build(&handshake(), &sample(), 0));
        let cut = error_of("cut", &doc.as_bytes()[..doc.len() / 2]);
        assert!(cut.contains("damaged or not an asyncdump file"), "{cut}");
        let other = error_of("other", br#"{"format": "something-else", "version": 1}"#);
        assert!(other.contains("\"something-else\""), "{other}");
        let newer = doc.replacen("\"version\":4", "\"version\":99", 1);
        let newer = error_of("newer", newer.as_bytes());
        assert!(
            newer.contains("version 99; this asyncdump reads version 4"),
            "{newer}"
        );
        let groups = Dump::build(&handshake(), &sample(), 0);
        let coalesced =
            crate::view::json::render(&groups, Some(&crate::model::coalesce(&groups.tasks)));
        let coalesced = error_of("coalesced", coalesced.as_bytes());
        assert!(coalesced.contains("--coalesce"), "{coalesced}");
        let binary = error_of("binary", &[0xff, 0xfe, 0, 1, 2]);
        assert!(binary.contains("not UTF-8"), "{binary}");
        for e in [cut, other, newer, coalesced, binary] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
        let dev = open(Path::new("/dev/zero")).err().unwrap().to_string();
        assert!(dev.contains("not a regular file"), "{dev}");
    }
}
