//! Writing the files the tool makes (snapshots from `-o` and watch's `s`, flame graphs, cached plans)
//! whole or not at all: the bytes go to a new temporary file beside the target, created exclusively
//! under an unpredictable name, are synced, and the file is then renamed to the target. A reader never
//! sees half a file, and a crash leaves at most a stray temporary file, never a torn one.
//!
//! Only a regular file is ever replaced, and it keeps its mode (and, where we may, its owner). A
//! symlink, a directory, a device, a FIFO or a socket at the target is refused, never replaced and
//! never opened: opening a device can do things (a watchdog arms on open), and renaming over a
//! symlink would silently turn a link the user keeps into a file. Standard output is `-o -`.

use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// What happens to what is at the target already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// A regular file is replaced; anything else is refused.
    Replace,
    /// Anything there is left, and the write fails.
    Keep,
    /// Whatever is there is replaced (never followed): for a store of the tool's own, such as the
    /// plan cache, where anything but a regular file is damage to repair.
    Take,
}

/// Writes `bytes` to `path` whole: over the regular file there (with its mode), or as a new file of
/// `mode` (less the umask). Anything else at `path` is refused with an error that says what it is.
pub fn write_whole(path: &Path, bytes: &[u8], mode: u32, existing: Existing) -> io::Result<()> {
    let old = match std::fs::symlink_metadata(path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let old = old.filter(|_| existing != Existing::Take);
    if let Some(meta) = &old {
        if let Some(what) = not_a_file(&meta.file_type()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "it is {what}; asyncdump writes only a regular file or a new path, never through or over anything else (standard output is `-o -`)"
                ),
            ));
        }
        if existing == Existing::Keep {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", file_name(path)))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir_of(path))?;
    if let Some(meta) = &old {
        keep_owner_and_mode(tmp.as_file(), meta)?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    let placed = match existing {
        Existing::Replace | Existing::Take => tmp.persist(path),
        Existing::Keep => tmp.persist_noclobber(path),
    };
    placed.map(drop).map_err(|e| e.error)
}

/// What a target that is not a regular file is, in words; `None` for a regular file.
fn not_a_file(t: &std::fs::FileType) -> Option<&'static str> {
    match () {
        _ if t.is_file() => None,
        _ if t.is_symlink() => Some("a symbolic link"),
        _ if t.is_dir() => Some("a directory"),
        _ if t.is_char_device() => Some("a character device"),
        _ if t.is_block_device() => Some("a block device"),
        _ if t.is_fifo() => Some("a FIFO"),
        _ if t.is_socket() => Some("a socket"),
        _ => Some("not a regular file"),
    }
}

/// The replaced file's owner (where we may: root may, others only keep their own) and mode, on the
/// file that replaces it.
fn keep_owner_and_mode(file: &std::fs::File, old: &std::fs::Metadata) -> io::Result<()> {
    if std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).is_err() {
        // Not ours to give away: the new file stays ours, and so the mode must not widen to a
        // group that is not the old file's.
        let mode = old.mode() & 0o7777 & !0o070;
        return file.set_permissions(std::fs::Permissions::from_mode(mode));
    }
    file.set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

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
        assert_eq!(mode_of(&path), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the file itself: {names:?}");
    }

    /// `-o` onto a file the user made readable to others keeps it so; a new one is as asked.
    #[test]
    fn a_replaced_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.json");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_whole(&path, b"new", 0o600, Existing::Replace).unwrap();
        assert_eq!(
            (std::fs::read(&path).unwrap(), mode_of(&path)),
            (b"new".to_vec(), 0o640)
        );
    }

    /// A symlink, a FIFO or a directory at the target is refused, left as it was, and nothing is
    /// written where it points (before, `-o` replaced a link or a FIFO with a 0644 file). Devices
    /// take the same path; none is tried here, where a bug would replace one.
    #[test]
    fn anything_but_a_regular_file_at_the_target_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for (path, what) in [
            (link.as_path(), "a symbolic link"),
            (fifo.as_path(), "a FIFO"),
            (sub.as_path(), "a directory"),
        ] {
            let before = std::fs::symlink_metadata(path).unwrap();
            let err = write_whole(path, b"x", 0o600, Existing::Replace).unwrap_err();
            assert!(err.to_string().contains(&format!("it is {what};")), "{err}");
            let after = std::fs::symlink_metadata(path).unwrap();
            assert_eq!(
                (before.ino(), before.file_type()),
                (after.ino(), after.file_type())
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 4, "no temporary file: {left:?}");
    }
}
