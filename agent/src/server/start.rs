//! Starting the agent: [`init`] and [`Builder`], the errors that stop it ([`InitError`]), and the
//! environment variables that shape it.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use asyncdump_protocol::{Handshake, PROTOCOL_VERSION, paths};

use super::InitError;
use super::listener::supervise;
use super::socket;
use crate::{containment, sys};

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
    dumps: crate::self_dump::Config,
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

    /// Prints every task's chain (as `asyncdump dump` does) to stderr when the process receives
    /// `signal`, and goes on; `$ASYNCDUMP_ON_SIGNAL` (`QUIT`, `USR1`, `USR2`) sets it when this is not
    /// called. The work happens on a thread of the agent's (the handler only wakes it), so it works
    /// while every runtime worker is blocked; it runs the installed `asyncdump` inspector
    /// (`$ASYNCDUMP_INSPECTOR`, else on `PATH`), which decodes the chains. Not asked for, the signal
    /// keeps its default behaviour.
    pub fn dump_on_signal(mut self, signal: crate::DumpSignal) -> Self {
        self.dumps.signal = Some(signal);
        self
    }

    /// Appends dumps to `path` (made 0600) instead of writing them to stderr;
    /// `$ASYNCDUMP_DUMP_FILE` sets it when this is not called.
    pub fn dump_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.dumps.file = Some(path.into());
        self
    }

    /// Writes one dump when a registered runtime has run no new work for `after` (every worker
    /// stuck), and again only once it ran some and then stopped again; `$ASYNCDUMP_WATCHDOG` (`30s`,
    /// `2m`) sets it when this is not called. An idle process never fires it: see the user guide (docs/).
    pub fn watchdog(mut self, after: std::time::Duration) -> Self {
        self.dumps.watchdog = Some(after);
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
        sys::process_start_mono_ns();
        if let Some(n) = self.completed_retained.or_else(completed_retained_from_env) {
            crate::task::set_completed_retained(n);
        }
        let pid = std::process::id();
        let path = socket_path(self.socket_path, pid)?;
        socket::ensure_replaceable(&path)?;
        let listener = socket::bind_atomically(&path)?;
        socket::remove_at_exit(&path);
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
        crate::self_dump::start(self.dumps.with_env(), &path);
        Ok(Agent { socket_path: path })
    }
}

/// How many ended tasks `$ASYNCDUMP_COMPLETED_KEPT` asks to keep; a value that is not a number is
/// logged and ignored.
fn completed_retained_from_env() -> Option<usize> {
    let n = std::env::var(COMPLETED_ENV).ok()?;
    let parsed = n.trim().parse().ok();
    if parsed.is_none() {
        containment::log(&format!(
            "{COMPLETED_ENV}={n:?} is not a number of tasks; keeping {}",
            crate::COMPLETED_RETAINED
        ));
    }
    parsed
}

/// Where to bind: the builder's path, else `$ASYNCDUMP_SOCKET` (set and not empty; in a directory made
/// if missing, and checked: see `socket`), else the private default directory. A relative path is
/// refused: where it lands would depend on the working directory, and its directory goes unchecked.
fn socket_path(chosen: Option<PathBuf>, pid: u32) -> Result<PathBuf, InitError> {
    let from_env = std::env::var_os(paths::SOCKET_ENV).filter(|v| !v.is_empty());
    let explicit = chosen.or_else(|| from_env.map(PathBuf::from));
    let Some(path) = explicit else {
        let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        let dir = paths::default_dir(xdg.as_deref(), sys::euid());
        socket::ensure_private_dir(&dir)?;
        return Ok(dir.join(paths::socket_file_name(pid)));
    };
    if path.is_relative() {
        return Err(InitError::RelativeSocket { path });
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|source| InitError::Io {
                path: parent.to_owned(),
                source,
            })?;
        socket::ensure_safe_parent(parent)?;
    }
    Ok(path)
}
