//! Running the installed `asyncdump` inspector on this process's own agent socket, its text into the
//! chosen output. The inspector decodes the chains from the binary's DWARF, which the agent never
//! parses; it reads the process through the agent's server thread, which answers whatever the
//! runtime's workers are doing.
//!
//! The inspector is a program the environment names, so nothing it does may hold the host up: it
//! runs in a process group of its own, which is killed whole past [`DUMP_TIMEOUT`] (or [`DUMP_TIMEOUT_ENV`]; a child it left
//! behind included), and it dies with the thread that started it (a host killed with SIGKILL leaves
//! no inspector behind); its text is copied into the output by this thread, at most
//! [`MAX_DUMP_BYTES`] of it. The dump file is opened as `-o` opens one: never through a symlink,
//! only a regular file of this process's user, never a FIFO or a device (opening one can block, or
//! act).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::containment;

/// The environment variable naming the inspector to run (else `asyncdump` on `PATH`).
pub const INSPECTOR_ENV: &str = "ASYNCDUMP_INSPECTOR";

/// Longest a dump may take before the inspector is stopped, unless [`DUMP_TIMEOUT_ENV`] says: a dump
/// of 100,000 tasks takes seconds.
const DUMP_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment variable that sets how long a dump may take (`30s`, `2m`).
pub const DUMP_TIMEOUT_ENV: &str = "ASYNCDUMP_DUMP_TIMEOUT";

fn dump_timeout() -> Duration {
    let set = std::env::var(DUMP_TIMEOUT_ENV).ok();
    set.and_then(|v| super::parse_period(&v))
        .unwrap_or(DUMP_TIMEOUT)
}

/// Most bytes of one dump copied into the output: 100,000 tasks print about 60 MB.
const MAX_DUMP_BYTES: u64 = 256 << 20;

/// Where a dump goes: the process's stderr, or a file it is appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    Stderr,
    File(PathBuf),
}

/// Writes one dump, headed by `why`, of the process whose agent serves at `socket`. A failure is one
/// line on stderr; the program goes on.
pub(crate) fn dump(why: &str, socket: &Path, output: &Output) {
    let Some(inspector) = find() else {
        containment::log(&format!(
            "{why}: no dump: the `asyncdump` inspector is not on PATH; install it (`cargo install --locked --path inspector` in asyncdump's source) or set {INSPECTOR_ENV} to its path"
        ));
        return;
    };
    let out = match open(output) {
        Ok(out) => out,
        Err(e) => {
            containment::log(&format!("{why}: no dump: {e}; the program goes on"));
            return;
        }
    };
    let header = format!(
        "asyncdump agent: {why}: every task's chain, as `asyncdump dump --all {}` prints it\n",
        std::process::id()
    );
    let _ = (&out).write_all(header.as_bytes());
    // Every task, the running ones too: a task stuck inside its poll is what a hang is about.
    let mut command = Command::new(&inspector);
    command
        .args(["dump", "--all"])
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    match crate::sys::spawn_tied(&mut command) {
        Ok(child) => copy_and_wait(child, &out, why, &inspector),
        Err(e) => containment::log(&format!(
            "{why}: no dump: cannot run {}: {e}",
            inspector.display()
        )),
    }
}

/// The inspector: `$ASYNCDUMP_INSPECTOR`, else `asyncdump` on `PATH`.
fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(INSPECTOR_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("asyncdump"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The dump's destination, as a file the child writes to: a copy of stderr, or the file opened to
/// append (made 0600: a dump shows what the program holds).
fn open(output: &Output) -> Result<std::fs::File, String> {
    match output {
        Output::Stderr => (std::io::stderr().as_fd().try_clone_to_owned())
            .map(std::fs::File::from)
            .map_err(|e| format!("cannot write to stderr: {e}")),
        Output::File(path) => {
            open_file(path).map_err(|e| format!("cannot write the dump to {}: {e}", path.display()))
        }
    }
}

/// The dump file, opened to append (made 0600 when new: a dump shows what the program holds): not
/// through a symlink, not without blocking (a FIFO nobody reads), and only a regular file of this
/// process's user (another user's file, say one planted in `/tmp`, is theirs to read).
fn open_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::other("it is a symlink, which is never followed"),
            Some(libc::ENXIO) => std::io::Error::other("it is a FIFO nobody reads"),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "it is not a regular file (a FIFO, a device or a socket)",
        ));
    }
    if meta.uid() != crate::sys::euid() {
        return Err(std::io::Error::other(format!(
            "it belongs to uid {}, not to this process's uid {}",
            meta.uid(),
            crate::sys::euid()
        )));
    }
    Ok(file)
}

/// Copies the inspector's text into `out`, at most [`MAX_DUMP_BYTES`], and waits for it, at most
/// [`dump_timeout`]; one that fails, hangs or floods is stopped (its whole process group) and said on
/// stderr.
fn copy_and_wait(mut child: std::process::Child, out: &std::fs::File, why: &str, inspector: &Path) {
    let (start, timeout) = (Instant::now(), dump_timeout());
    let mut stdout = child.stdout.take();
    let mut copied = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    let stop = |child: &mut std::process::Child, what: String| {
        crate::sys::kill_group(child.id());
        let _ = child.wait();
        containment::log(&format!("{why}: {} {what}", inspector.display()));
    };
    loop {
        // Until the inspector closes its end (it ended, or gave its output up).
        let chunk = match stdout.as_mut() {
            Some(pipe) => crate::sys::read_within(pipe, &mut buf, Duration::from_millis(20)),
            None => Ok(None),
        };
        match chunk {
            Ok(None) => {}
            // Closed: the rest is waiting for it to end.
            Ok(Some(0)) | Err(_) => stdout = None,
            Ok(Some(n)) => {
                let room = MAX_DUMP_BYTES - copied;
                let _ = std::io::Write::write_all(&mut &*out, &buf[..n.min(room as usize)]);
                copied += n as u64;
                if copied >= MAX_DUMP_BYTES {
                    let mb = MAX_DUMP_BYTES >> 20;
                    return stop(
                        &mut child,
                        format!("wrote over {mb} MB and was stopped; the dump is cut there"),
                    );
                }
                continue;
            }
        }
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                containment::log(&format!(
                    "{why}: {} failed ({status}); its message is above",
                    inspector.display()
                ));
                return;
            }
            Ok(None) if start.elapsed() > timeout => {
                let secs = timeout.as_secs_f64();
                return stop(&mut child, format!("took over {secs:.1}s and was stopped"));
            }
            Ok(None) => {
                if stdout.is_none() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Err(e) => {
                containment::log(&format!("{why}: cannot wait for the inspector: {e}"));
                return;
            }
        }
    }
}
