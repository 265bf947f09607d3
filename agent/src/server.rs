//! The agent's socket server: started by [`init`] / [`Builder::start`], served from its own std threads.
//!
//! The listener thread accepts connections and hands each to a short-lived connection thread (at most
//! [`MAX_CLIENTS`] at once; more are told `Busy`, unless one of those served is greedy: see `slots`). Nothing here runs on the application's runtime, so a
//! process whose every worker is wedged still answers. Each connection is checked with SO_PEERCRED (same
//! uid or root), gets the agent's handshake, must answer with a client hello of the same protocol version,
//! and may then send requests. Any malformed, oversized or truncated frame is answered with an error reply
//! and the connection is closed; the host program never notices.
//!
//! The socket is bound under a temporary name, made 0600 and renamed into place, inside a 0700 directory
//! owned by this uid; it is removed at process exit (an `atexit` hook) if it is still ours.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use asyncdump_protocol::{
    ClientHello, ErrorKind, ErrorReply, FrameError, Handshake, HandshakeError, MAX_REQUEST_BYTES,
    PROTOCOL_VERSION, Reply, Request, decode, encode, paths, read_frame_by, write_frame,
};

use crate::capture::Capturer;
use crate::slots::{self, Lease};
use crate::sys;
use crate::{access, containment};

/// Most connections served at once.
pub const MAX_CLIENTS: usize = 4;
/// A client must send its whole hello within this long of connecting.
const HELLO_TIMEOUT: Duration = Duration::from_millis(500);
/// A client that sends nothing for this long, or takes longer to send one whole request, is
/// disconnected.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the agent could not start. The host program should log it and carry on.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("asyncdump agent already started, listening on {}", .0.display())]
    AlreadyStarted(PathBuf),
    #[error(
        "refusing socket directory {}: {reason}; remove it or set ASYNCDUMP_SOCKET to another path",
        path.display()
    )]
    InsecureDir { path: PathBuf, reason: String },
    #[error(
        "refusing to serve at {}: {what} is there already; remove it if it is not someone else's",
        path.display()
    )]
    InsecureSocket { path: PathBuf, what: String },
    #[error("cannot create asyncdump socket at {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("asyncdump agent disabled by {DISABLE_ENV}")]
    Disabled,
}

/// Set (to anything but empty or `0`), the agent does not start: no socket, no thread, no runtime
/// registered, whatever the program calls.
pub const DISABLE_ENV: &str = "ASYNCDUMP_DISABLE";

fn disabled() -> bool {
    std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Options for starting the agent.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    socket_path: Option<PathBuf>,
    completed_retained: Option<usize>,
}

/// The environment variable that sets how many ended tasks the agent keeps (see
/// [`Builder::completed_retained`]).
pub const COMPLETED_ENV: &str = "ASYNCDUMP_COMPLETED_KEPT";

/// A running agent. The server lives until the process exits; dropping this handle does not stop it.
#[derive(Debug, Clone)]
pub struct Agent {
    socket_path: PathBuf,
}

impl Agent {
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }
}

/// Starts the agent with default options (see [`Builder`]); inside a tokio runtime, registers it.
pub fn init() -> Result<Agent, InitError> {
    Builder::new().start()
}

/// Which process started the agent, and where it serves.
static STARTED: Mutex<Option<(u32, PathBuf)>> = Mutex::new(None);
static START_MONO_NS: OnceLock<u64> = OnceLock::new();

/// The monotonic clock at process start, approximated by the agent's first use of it.
pub(crate) fn process_start_mono_ns() -> u64 {
    *START_MONO_NS.get_or_init(|| {
        // Convert the wall-clock process start into the monotonic clock.
        let wall_now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let age_ns = (wall_now_ms as u64).saturating_sub(sys::process_start_unix_ms()) * 1_000_000;
        sys::now_ns().saturating_sub(age_ns)
    })
}

impl Builder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds exactly this path instead of the default (which is also overridden by `$ASYNCDUMP_SOCKET`).
    pub fn socket_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket_path = Some(path.into());
        self
    }

    /// Keeps the last `n` ended tasks for `dump --all` and `watch --all` (default
    /// [`COMPLETED_RETAINED`](crate::COMPLETED_RETAINED), at most
    /// [`MAX_COMPLETED_RETAINED`](crate::MAX_COMPLETED_RETAINED)); `$ASYNCDUMP_COMPLETED_KEPT` sets it
    /// when this is not called. Each costs the task's record, about 300 bytes and its name.
    pub fn completed_retained(mut self, n: usize) -> Self {
        self.completed_retained = Some(n);
        self
    }

    /// Binds the socket and starts the server thread. Called inside a tokio runtime, also registers that
    /// runtime, so that every task of it is listed (see `register_runtime`).
    pub fn start(self) -> Result<Agent, InitError> {
        if disabled() {
            return Err(InitError::Disabled);
        }
        #[cfg(feature = "tokio")]
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            crate::runtime::register_runtime(&handle);
        }
        static START_LOCK: Mutex<()> = Mutex::new(());
        let _guard = START_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        // A forked child inherits the record but not the server thread: it starts its own agent.
        let mut started = STARTED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((pid, path)) = started.as_ref()
            && *pid == std::process::id()
        {
            return Err(InitError::AlreadyStarted(path.clone()));
        }
        process_start_mono_ns();
        let retained = self.completed_retained.or_else(|| {
            let n = std::env::var(COMPLETED_ENV).ok()?;
            let parsed = n.trim().parse().ok();
            if parsed.is_none() {
                containment::log(&format!(
                    "{COMPLETED_ENV}={n:?} is not a number of tasks; keeping {}",
                    crate::COMPLETED_RETAINED
                ));
            }
            parsed
        });
        if let Some(n) = retained {
            crate::task::set_completed_retained(n);
        }
        let pid = std::process::id();
        let explicit = self
            .socket_path
            .or_else(|| std::env::var_os(paths::SOCKET_ENV).map(PathBuf::from));
        let path = match explicit {
            Some(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)
                        .map_err(|source| InitError::Io {
                            path: parent.to_owned(),
                            source,
                        })?;
                    ensure_safe_parent(parent)?;
                }
                path
            }
            None => {
                let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
                let dir = paths::default_dir(xdg.as_deref(), sys::euid());
                ensure_private_dir(&dir)?;
                dir.join(paths::socket_file_name(pid))
            }
        };
        ensure_replaceable(&path)?;
        let listener = bind_atomically(&path)?;
        let inode = fs::metadata(&path).map(|m| m.ino()).unwrap_or(0);
        *SOCKET_TO_REMOVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((path.clone(), inode, pid));
        // Once per address space: a forked child inherits the hook, which reads the record above.
        static HOOKED: std::sync::Once = std::sync::Once::new();
        // SAFETY: `remove_socket_at_exit` is an `extern "C" fn()` that does not unwind (it catches panics).
        HOOKED.call_once(|| unsafe {
            libc::atexit(remove_socket_at_exit);
        });
        let handshake = Handshake {
            protocol_version: PROTOCOL_VERSION,
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            pid,
            program: sys::program_name(),
            start_time_unix_ms: sys::process_start_unix_ms(),
        };
        std::thread::Builder::new()
            .name("asyncdump-agent".into())
            .spawn(move || supervise(listener, handshake))
            .map_err(|source| InitError::Io {
                path: path.clone(),
                source,
            })?;
        *started = Some((pid, path.clone()));
        Ok(Agent { socket_path: path })
    }
}

/// The directory of an explicitly named socket: it may be shared (`/tmp`, `/run/app`), but no one but
/// this uid or root may replace what is in it, so it must be theirs, and writable by others only with
/// the sticky bit (which keeps them from removing or renaming our socket).
fn ensure_safe_parent(dir: &Path) -> Result<(), InitError> {
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

fn ensure_private_dir(dir: &Path) -> Result<(), InitError> {
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
/// user's socket or any other file is someone else's, and serving there would take it over.
fn ensure_replaceable(path: &Path) -> Result<(), InitError> {
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
    } else {
        return Ok(()); // our own, left by an earlier process of this pid: replaced
    };
    Err(InitError::InsecureSocket {
        path: path.to_owned(),
        what,
    })
}

/// Binds under a temporary name, restricts it to 0600, then renames it over `path`, so the socket never
/// appears at its final name with wider permissions, and a stale socket there is replaced atomically.
fn bind_atomically(path: &Path) -> Result<UnixListener, InitError> {
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

/// Runs `f` on the one capturer, which keeps walk buffers and interned names between requests. A
/// capturer left poisoned by a contained panic is replaced by a fresh one: its caches may be half made.
pub(crate) fn with_capturer<T>(f: impl FnOnce(&mut Capturer) -> T) -> T {
    static CAPTURER: OnceLock<Mutex<Capturer>> = OnceLock::new();
    let capturer = CAPTURER.get_or_init(Default::default);
    let mut guard = capturer.lock().unwrap_or_else(|poisoned| {
        let mut guard = poisoned.into_inner();
        *guard = Capturer::default();
        capturer.clear_poison();
        guard
    });
    f(&mut guard)
}

/// How often the listener may fail before the agent disables itself.
const MAX_LISTENER_FAILURES: u32 = 3;

/// Serves `listener` until the process ends. A panic in the listener (a bug) is contained and the
/// listener restarted; after [`MAX_LISTENER_FAILURES`] of them the agent is disabled and tells each
/// client so, on the next connection, rather than vanish.
fn supervise(listener: UnixListener, handshake: Handshake) {
    sys::lower_thread_priority();
    for failures in 1..=MAX_LISTENER_FAILURES {
        if containment::contain("the agent's listener", || serve(&listener, &handshake)).is_some() {
            return;
        }
        if failures < MAX_LISTENER_FAILURES {
            containment::log("listener restarted");
        }
    }
    containment::log(&format!(
        "disabled after {MAX_LISTENER_FAILURES} listener failures; clients are told so"
    ));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        refuse(
            &mut stream,
            ErrorKind::Internal,
            format!(
                "the agent in process {} is disabled: its listener failed {MAX_LISTENER_FAILURES} times (see the process's stderr); the process itself is unaffected; restart it to re-enable the agent",
                handshake.pid
            ),
        );
    }
}

fn serve(listener: &UnixListener, handshake: &Handshake) {
    for stream in listener.incoming() {
        containment::inject(containment::Site::Accept);
        let stream = match stream {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Asked once, here: the pid decides the slot, the uid whether the client is served at all.
        let peer = sys::peer(&stream);
        let lease = match slots::admit(peer.as_ref().map_or(0, |&(pid, _)| pid)) {
            Ok(lease) => lease,
            Err(busy) => {
                let mut stream = stream;
                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                refuse(&mut stream, ErrorKind::Busy, busy);
                continue;
            }
        };
        let handshake = handshake.clone();
        // A thread that cannot start drops the stream and gives the lease back at once.
        let _ = std::thread::Builder::new()
            .name("asyncdump-conn".into())
            .spawn(move || {
                sys::lower_thread_priority();
                containment::contain("a connection", move || {
                    connection(stream, peer, &handshake, &lease)
                });
            });
    }
}

pub(crate) fn send(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let bytes = encode(reply).map_err(io::Error::other)?;
    write_frame(stream, &bytes)
}

/// Sends an error reply and closes the connection.
pub(crate) fn refuse(stream: &mut UnixStream, kind: ErrorKind, message: String) {
    let _ = send(stream, &Reply::Error(ErrorReply { kind, message }));
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn frame_error(stream: &mut UnixStream, err: FrameError) {
    let (kind, message) = match err {
        FrameError::TooLarge { len, max } => (
            ErrorKind::TooLarge,
            format!("request of {len} bytes exceeds the agent's limit of {max} bytes"),
        ),
        FrameError::Truncated { expected, got } => (
            ErrorKind::Truncated,
            format!("request truncated: expected {expected} bytes, got {got}"),
        ),
        // A closed or timed-out connection has nobody left to tell.
        FrameError::Closed | FrameError::Io(_) => return,
    };
    refuse(stream, kind, message);
}

/// Serves one connection, whose client is `peer` (its pid and uid, by SO_PEERCRED).
fn connection(
    mut stream: UnixStream,
    peer: io::Result<(u32, u32)>,
    handshake: &Handshake,
    lease: &Lease,
) -> io::Result<()> {
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let me = sys::euid();
    let peer = match peer {
        Ok((pid, uid)) if uid == me || uid == 0 => pid,
        Ok((_, uid)) => {
            refuse(
                &mut stream,
                ErrorKind::PermissionDenied,
                format!(
                    "permission denied: this process runs as uid {me}, you are uid {uid}; run asyncdump as uid {me} or root"
                ),
            );
            return Ok(());
        }
        Err(e) => {
            refuse(
                &mut stream,
                ErrorKind::PermissionDenied,
                format!("cannot check peer credentials: {e}"),
            );
            return Ok(());
        }
    };
    let walks = access::may_walk(peer);
    write_frame(&mut stream, &handshake.to_bytes())?;
    // A client sends its hello as soon as it has read ours: one that does not is holding a slot.
    let hello_by = std::time::Instant::now() + HELLO_TIMEOUT;
    let hello = match read_frame_by(&stream, MAX_REQUEST_BYTES, hello_by) {
        Ok(bytes) => bytes,
        Err(e) => {
            frame_error(&mut stream, e);
            return Ok(());
        }
    };
    match ClientHello::from_bytes(&hello) {
        Ok(_) => {}
        Err(HandshakeError::VersionMismatch { peer, ours }) => {
            refuse(
                &mut stream,
                ErrorKind::VersionMismatch,
                format!(
                    "protocol version mismatch: this agent ({}) speaks protocol {ours}, the client speaks {peer}; use an asyncdump that speaks protocol {ours}",
                    handshake.agent_version
                ),
            );
            return Ok(());
        }
        Err(e) => {
            refuse(
                &mut stream,
                ErrorKind::Malformed,
                format!("bad client hello: {e}"),
            );
            return Ok(());
        }
    }
    loop {
        // Each request must arrive whole within `IO_TIMEOUT` of starting to wait for it: a client
        // sending a byte at a time cannot keep a connection slot for longer.
        let by = std::time::Instant::now() + IO_TIMEOUT;
        let bytes = match read_frame_by(&stream, MAX_REQUEST_BYTES, by) {
            Ok(bytes) => bytes,
            Err(e) => {
                frame_error(&mut stream, e);
                return Ok(());
            }
        };
        if let Some(why) = lease.evicted() {
            refuse(&mut stream, ErrorKind::Busy, why);
            return Ok(());
        }
        let request = match decode::<Request>(&bytes) {
            Ok(r) => r,
            Err(e) => {
                refuse(
                    &mut stream,
                    ErrorKind::Malformed,
                    format!("malformed request: {e}"),
                );
                return Ok(());
            }
        };
        if let (Err(why), Some(_)) = (&walks, request.walk_plan()) {
            let why = format!("walk plan refused: {why}");
            refuse(&mut stream, ErrorKind::PermissionDenied, why);
            return Ok(());
        }
        if let Request::Subscribe(req) = &request {
            let subscribed = match lease.subscribe() {
                Ok(subscribed) => subscribed,
                Err(busy) => {
                    refuse(&mut stream, ErrorKind::Busy, busy);
                    return Ok(());
                }
            };
            match crate::subscription::serve(&mut stream, req, lease) {
                crate::subscription::End::Spoke => {
                    drop(subscribed);
                    continue;
                }
                crate::subscription::End::Closed => return Ok(()),
            }
        }
        let answered =
            lease.work(|| containment::contain("a request", || encode(&answer(&request, &walks))));
        let answered = match answered {
            Ok(answered) => answered,
            Err(evicted) => {
                refuse(&mut stream, ErrorKind::Busy, evicted);
                return Ok(());
            }
        };
        let bytes = answered.and_then(Result::ok).unwrap_or_else(|| {
            let failed = Reply::Error(ErrorReply {
                kind: ErrorKind::Internal,
                message: "the agent failed while answering (a bug, logged on the process's stderr); the process is unaffected; try again".into(),
            });
            encode(&failed).unwrap_or_default()
        });
        write_answer(&mut stream, bytes)?;
    }
}

/// Answers bigger than this are followed by handing the memory they took back to the OS.
const BIG_ANSWER: usize = 1 << 20;

/// Writes one encoded answer; after a big one, hands the memory it took back to the OS.
pub(crate) fn write_answer(stream: &mut UnixStream, bytes: Vec<u8>) -> io::Result<()> {
    let written = write_frame(stream, &bytes);
    if bytes.len() > BIG_ANSWER {
        drop(bytes);
        sys::give_back_memory();
    }
    written
}

fn answer(request: &Request, walks: &Result<(), String>) -> Reply {
    match request {
        Request::Stats => Reply::Stats(crate::task::registry().stats()),
        Request::WalkInfo => Reply::WalkInfo(asyncdump_protocol::WalkInfo {
            root_anchors: crate::task::registry().root_anchors(),
            build_id: sys::own_build_id(),
            runtimes: crate::runtime::handles(),
            walks_refused: walks.clone().err(),
        }),
        // Served by the connection loop itself: it answers with many replies.
        Request::Subscribe(_) => Reply::Error(ErrorReply {
            kind: ErrorKind::Internal,
            message: "subscriptions are served by the connection loop".into(),
        }),
        Request::Snapshot(req) => Reply::Snapshot(with_capturer(|c| {
            let snapshot = c.capture(req);
            containment::inject(containment::Site::Snapshot);
            snapshot
        })),
    }
}
