//! Writing the files the tool makes (snapshots from `-o` and watch's `s`, flame graphs, cached plans)
//! whole or not at all: the bytes go to a new temporary file beside the target, created exclusively
//! under an unpredictable name, are synced, and the file is then renamed to the target. A reader never
//! sees half a file, and a crash leaves at most a stray temporary file, never a torn one.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Whether an existing file at the target is replaced, or the write fails.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Replace,
    Keep,
}

/// Writes `bytes` to `path` whole, as a new file of `mode` (less the umask).
pub fn write_whole(path: &Path, bytes: &[u8], mode: u32, existing: Existing) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    let placed = match existing {
        Existing::Replace => tmp.persist(path),
        Existing::Keep => tmp.persist_noclobber(path),
    };
    placed.map(drop).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_whole_replaced_or_kept_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap.json");
        write_whole(&path, b"one", 0o600, Existing::Replace).unwrap();
        write_whole(&path, b"two", 0o600, Existing::Replace).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let kept = write_whole(&path, b"three", 0o600, Existing::Keep);
        assert_eq!(kept.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the file itself: {names:?}");
    }
}
