//! Where the agent serves: a socket bound so that nobody else can take it over or read through it.
//!
//! An explicitly named socket's directory may be shared, but only this uid or root may replace what is
//! in it; the default directory is private (0700, ours). The socket is bound under a temporary name,
//! made 0600 and renamed into place, and removed at process exit if it is still ours.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, PoisonError};

use super::InitError;
use crate::sys;

/// The directory of an explicitly named socket: it may be shared (`/tmp`, `/run/app`), but no one but
/// this uid or root may replace what is in it, so it must be theirs, and writable by others only with
/// the sticky bit (which keeps them from removing or renaming our socket).
pub(super) fn ensure_safe_parent(dir: &Path) -> Result<(), InitError> {
    let meta = fs::metadata(dir).map_err(|source| InitError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let insecure = |reason: String| InitError::InsecureDir {
        path: dir.to_owned(),
        reason,
    };
    if !meta.is_dir() {
        return Err(insecure("it is not a directory".into()));
    }
    if meta.uid() != sys::euid() && meta.uid() != 0 {
        return Err(insecure(format!(
            "it belongs to uid {}, not to this uid ({}) or root",
            meta.uid(),
            sys::euid()
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(insecure(format!(
            "others may write to it (mode {:o}) and it has no sticky bit, so they could replace the socket",
            mode & 0o7777
        )));
    }
    Ok(())
}

pub(super) fn ensure_private_dir(dir: &Path) -> Result<(), InitError> {
    let io_err = |source| InitError::Io {
        path: dir.to_owned(),
        source,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err)?;
    let meta = fs::symlink_metadata(dir).map_err(io_err)?;
    let insecure = |reason: String| InitError::InsecureDir {
        path: dir.to_owned(),
        reason,
    };
    if !meta.file_type().is_dir() {
        return Err(insecure("it is not a directory".into()));
    }
    if meta.uid() != sys::euid() {
        return Err(insecure(format!(
            "it is owned by uid {}, not {}",
            meta.uid(),
            sys::euid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        // Open to others before we came: something may have been planted in it meanwhile.
        return Err(insecure(format!(
            "others may use it (mode {:o}), and may have planted files in it",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// Refuses to replace what sits at `path` unless it is a stale socket of our own: a symlink, another
/// user's socket or any other file is someone else's, and a socket something still listens on is a
/// live agent's (two processes given one `ASYNCDUMP_SOCKET`): serving there would take it over.
pub(super) fn ensure_replaceable(path: &Path) -> Result<(), InitError> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(()); // nothing there
    };
    use std::os::unix::fs::FileTypeExt;
    let what = if meta.file_type().is_symlink() {
        "a symlink".to_owned()
    } else if !meta.file_type().is_socket() {
        "not a socket".to_owned()
    } else if meta.uid() != sys::euid() {
        format!("a socket of uid {}", meta.uid())
    } else if UnixStream::connect(path).is_ok() {
        return Err(InitError::Taken {
            path: path.to_owned(),
        });
    } else {
        return Ok(()); // our own, and nobody listens: left by a process that is gone; replaced
    };
    Err(InitError::InsecureSocket {
        path: path.to_owned(),
        what,
    })
}

/// Binds under a temporary name, restricts it to 0600, then renames it over `path`, so the socket never
/// appears at its final name with wider permissions, and a stale socket there is replaced atomically.
pub(super) fn bind_atomically(path: &Path) -> Result<UnixListener, InitError> {
    let io_err = |source| InitError::Io {
        path: path.to_owned(),
        source,
    };
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file}.tmp-{}", sys::now_ns()));
    let _ = fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(io_err)?;
    let done = fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(e));
    }
    Ok(listener)
}

/// The socket this process bound, its inode, and the pid that bound it.
static SOCKET_TO_REMOVE: Mutex<Option<(PathBuf, u64, u32)>> = Mutex::new(None);

extern "C" fn remove_socket_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Never waits at exit: a record being written is one we cannot trust anyway.
        let record = match SOCKET_TO_REMOVE.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if let Some((path, inode, pid)) = record.as_ref() {
            // Only the process that bound it removes it: a forked child inherits this hook, and its
            // exit must not take its parent's socket away. And only while it is still ours: a newer
            // process may have reused the pid and bound its own.
            let bound_here = std::process::id() == *pid;
            if bound_here && fs::symlink_metadata(path).is_ok_and(|m| m.ino() == *inode) {
                let _ = fs::remove_file(path);
            }
        }
    });
}

/// Removes the socket at `path`, bound by this process, when the process exits, if it is still ours.
pub(super) fn remove_at_exit(path: &Path) {
    let inode = fs::metadata(path).map(|m| m.ino()).unwrap_or(0);
    *SOCKET_TO_REMOVE
        .lock()
        .unwrap_or_else(PoisonError::into_inner) =
        Some((path.to_owned(), inode, std::process::id()));
    // Once per address space: a forked child inherits the hook, which reads the record above.
    static HOOKED: Once = Once::new();
    HOOKED.call_once(|| {
        sys::at_exit(remove_socket_at_exit);
    });
}
