//! The agent's socket server: started by [`init`] / [`Builder::start`], served from its own std threads.
//!
//! - `start`: [`init`], [`Builder`], [`InitError`]; binds the socket and starts the listener thread.
//! - `socket`: where the socket goes and how it is bound so that nobody else can take it over.
//! - `listener`: accepts connections, admits them to a slot (see `slots`; at most [`MAX_CLIENTS`] at
//!   once), and serves each on a short-lived thread.
//! - `connection`: one connection: SO_PEERCRED (same uid or root), the handshake, then requests.
//!
//! Nothing here runs on the application's runtime, so a process whose every worker is wedged still
//! answers. Replies go out through `wire`; answers come from `capture` and `subscription`.
//!
//! [`MAX_CLIENTS`]: crate::MAX_CLIENTS

mod connection;
mod listener;
mod socket;
mod start;

use std::io;
use std::path::PathBuf;

pub use start::{Agent, Builder, COMPLETED_ENV, DISABLE_ENV, init};

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
    #[error(
        "refusing to serve at {}: a live agent listens there already (is one ASYNCDUMP_SOCKET given to two processes?); give each process its own path",
        path.display()
    )]
    Taken { path: PathBuf },
    #[error(
        "refusing socket path {}: it is relative, so where it lands depends on the working directory; give an absolute path (an empty ASYNCDUMP_SOCKET means the default)",
        path.display()
    )]
    RelativeSocket { path: PathBuf },
    #[error("cannot create asyncdump socket at {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("asyncdump agent disabled by {DISABLE_ENV}")]
    Disabled,
}
