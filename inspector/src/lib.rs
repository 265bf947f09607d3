//! The asyncdump inspector as a library: attach to a live Rust process that links asyncdump-agent, take
//! snapshots of its suspended async chains, and render them. The `asyncdump` binary is a thin
//! command-line front over it.
//!
//! Stages, in the order a snapshot passes through them (data flows one way; ARCHITECTURE.md at the
//! top of the repository has the map):
//! - [`attach`]: `target` resolves `PID|SOCKET`, `client` speaks the protocol, `procfs` reads `/proc`;
//!   [`agentless`] reads a process without an agent from outside, into the same protocol snapshot;
//! - [`plan`]: [`dwarf`] reads a binary's debug info, and the plan stage turns it into walk plans (with
//!   the plan cache and the planner that chooses between them);
//! - [`decode`]: walks merged with annotated frames into frame trees, by what the plan says;
//! - [`assemble`]: a protocol snapshot and its decoded chains into a [`model::Dump`];
//! - [`values`]: the locals of decoded frames (`-v`), read by the plan's value shapes;
//! - [`waits`]: who holds the locks leaves wait for, and the wait graph's edges and cycles;
//! - [`model`]: what a dump shows, and its queries (filter, search, coalesce, cycles);
//! - [`view`] renders a dump as text, JSON or folded stacks, and [`watch`] is the live view.
//!
//! [`session`] drives the stages for one attached target across snapshots. Beside them: [`names`]
//! (every name shortening), [`file`](mod@file) (snapshot and recording files), [`output`] (writing
//! files whole) and [`input`] (opening named files only when they are regular files). Every error the library gives is an [`Error`], whose [`Error::exit_code`] is the status
//! the command line exits with; errors about the target are typed ([`error::TargetError`]).

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

pub mod agentless;
pub mod assemble;
pub mod attach;
pub mod decode;
pub mod dwarf;
pub mod error;
pub mod file;
pub mod input;
pub mod model;
pub mod names;
pub mod output;
pub mod plan;
pub mod session;
pub mod threads;
pub mod values;
pub mod view;
pub mod waits;
pub mod watch;

#[cfg(test)]
mod hostile_input;
#[cfg(test)]
mod testing;

/// Every error the library gives, by the stage it comes from. Each message is one line that says what
/// to do next; [`Error::exit_code`] is the status the command line exits with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The target process or its agent (no such process, no agent, refused, version mismatch).
    #[error(transparent)]
    Target(#[from] error::TargetError),
    /// A snapshot file or recording, read or written.
    #[error(transparent)]
    File(#[from] file::FileError),
    /// A binary's debug info (`index`).
    #[error(transparent)]
    Dwarf(#[from] dwarf::DwarfError),
    #[error(transparent)]
    Watch(#[from] watch::WatchError),
    /// Output that could not be written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Anything else on this side (an unbuilt demo fixture).
    #[error("{0}")]
    Local(String),
}

impl Error {
    /// The exit status for this error: 1 a target problem (5 and 6 for two of them, see
    /// [`error`]), 3 a problem on this side, 4 a file that cannot be read back (damaged, another
    /// format or version, written with `--coalesce`). Usage errors (2) are mostly clap's.
    pub fn exit_code(&self) -> u8 {
        use error::{EXIT_FILE, EXIT_LOCAL};
        let file = |f: &file::FileError| match f {
            file::FileError::Write { .. } => EXIT_LOCAL,
            _ => EXIT_FILE,
        };
        match self {
            Error::Target(t) | Error::Watch(watch::WatchError::Target(t)) => t.exit_code(),
            Error::File(f) | Error::Watch(watch::WatchError::File(f)) => file(f),
            Error::Dwarf(_) | Error::Watch(_) | Error::Io(_) | Error::Local(_) => EXIT_LOCAL,
        }
    }

    /// Whether the output's reader left (`asyncdump dump 1 | head`): nothing to report.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
