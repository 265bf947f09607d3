//! Every file the tool reads that a user, a target, a core or a debug link names (a core, an
//! executable, a debug file, a snapshot, a mapped file): opened only when it is a regular file, and
//! never in a way that blocks or acts.
//!
//! Opening a FIFO for reading waits for a writer, and opening a device can act (a watchdog arms on
//! open): so the path is first opened with `O_PATH`, which opens nothing, the kind of file checked on
//! that descriptor, and only a regular file is opened for reading, through the descriptor itself
//! (`/proc/self/fd/N`), so that a file swapped in at the path meanwhile is never the one read.
//! Without `/proc`, it is opened with `O_NONBLOCK` and checked again.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A regular file opened for reading, and its length.
pub fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)?;
    let meta = handle.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    use std::os::fd::AsRawFd;
    let through = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let file = match open_nonblocking(Path::new(&through)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => open_nonblocking(path)?,
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta.len()))
}

fn open_nonblocking(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

fn not_regular(meta: &std::fs::Metadata) -> io::Error {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_char_device() || t.is_block_device() => "a device",
        _ => "neither",
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({kind}): never opened for reading"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_opens_with_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"four").unwrap();
        let (mut file, len) = open_regular(&path).unwrap();
        assert_eq!(len, 4);
        let mut text = String::new();
        io::Read::read_to_string(&mut file, &mut text).unwrap();
        assert_eq!(text, "four");
    }

    #[test]
    fn a_fifo_a_directory_and_a_device_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Nobody writes to it: opening it for reading would wait forever.
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = open_regular(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
    }

    #[test]
    fn a_symlink_to_a_fifo_is_refused_too() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(open_regular(&link).is_err());
    }
}
