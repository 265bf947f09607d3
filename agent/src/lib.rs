//! asyncdump-agent: records the task graphs of an async program and serves them to the `asyncdump`
//! inspector over a Unix socket, from its own thread.
//!
//! ```no_run
//! use asyncdump_agent::{frame, FrameExt};
//!
//! #[frame]
//! async fn handle(rx: tokio::sync::oneshot::Receiver<u32>) -> u32 {
//!     rx.frame("oneshot::Receiver").await.unwrap_or(0)
//! }
//!
//! # async fn example(rx: tokio::sync::oneshot::Receiver<u32>) {
//! asyncdump_agent::init().expect("start asyncdump agent");
//! let handle = asyncdump_agent::spawn_named("handler", handle(rx));
//! # }
//! ```
//!
//! `#[frame]` keeps an `async fn`'s meaning in every edition: borrowed arguments, `self` receivers, `?` and
//! recursion through `Box::pin` work as before.
//!
//! ```edition2021
//! struct Cache(Vec<String>);
//!
//! impl Cache {
//!     #[asyncdump_agent::frame]
//!     async fn lookup(&self, key: &str) -> Result<usize, String> {
//!         let found = self.0.iter().position(|k| k == key).ok_or_else(|| format!("no {key}"))?;
//!         Ok(found)
//!     }
//! }
//!
//! #[asyncdump_agent::frame]
//! async fn countdown(n: u32) -> u32 {
//!     if n == 0 { 0 } else { Box::pin(countdown(n - 1)).await + 1 }
//! }
//!
//! let cache = Cache(vec!["a".into()]);
//! assert_eq!(futures::executor::block_on(cache.lookup("a")), Ok(0));
//! assert_eq!(futures::executor::block_on(countdown(3)), 3);
//! ```
//!
//! ## How the pieces fit
//! - A **task** is a root future wrapped in [`Instrumented`] ([`instrument`], or [`spawn`] with tokio). Its
//!   bookkeeping (a `TaskCell`: id, name, spawn site, state, poll counts and times, wakes) is allocated once,
//!   when the task is made, and registered in a sharded registry.
//! - A **frame** is a future wrapped in [`Framed`] (by `#[frame]` on an async fn, or [`FrameExt::frame`]).
//!   It holds an intrusive node that links itself, on first poll, under the frame that polls it — its
//!   continuation link. Pending `join!`/`select!` branches become siblings: a tree, not a line.
//! - A **cross-task edge** is recorded by [`JoinHandle`] while a frame awaits it.
//! - The **delegate** is the task's waker, recorded only when a leaf clones and keeps it.
//! - A **walk** reads, for the inspector, the state machines of a task nobody annotated: the inspector
//!   sends a plan built from the binary's DWARF (which the agent never parses), and the agent follows it
//!   from the task's pinned root future with `process_vm_readv` on its own pid, which fails on a bad
//!   address instead of faulting. Only idle tasks are walked, under the same lock as frames.
//! - A **runtime** registered with the agent ([`init`] registers the one it runs in; `register_runtime`
//!   adds others) has every task listed, spawned through the agent or not: the inspector plans the path
//!   through tokio's task lists from DWARF, and the agent follows it as it follows walks, without taking
//!   tokio's locks and without touching any poll path.
//! - The **server** ([`init`], [`Builder`]) answers `asyncdump` from dedicated std threads, so it answers
//!   even when every runtime worker is blocked; [`snapshot`] takes the same snapshot in-process.
//!
//! ## Costs on the poll path
//! Per task poll: one compare-and-swap to take the task's own lock, two reads of the vDSO clock, a few
//! relaxed stores (one records the pinned future's address for walks), and a borrowed waker built on the stack. Per frame poll: a thread-local read and a pointer
//! comparison (linking and unlinking happen once per frame). No heap allocation per poll, per frame or per
//! suspension, and no global lock; a leaf that keeps the waker costs one reference-count increment.
//!
//! ## Consistency
//! Frames are read only under the task's lock, never while another thread polls the task. A task being
//! polled is reported as running (OS thread, since when) with the frames of the last snapshot that caught it
//! idle, after a bounded wait ([`PER_TASK_WAIT_NS`], [`TOTAL_WAIT_NS`]).

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

/// The field names of `$v`, a `$path { .. }`, as strings, from the same tokens that destructure it
/// exhaustively: a renamed or added field fails to compile, and the strings are the names the fields
/// really have (checked against `asyncdump_protocol::agent_names`).
#[cfg(test)]
macro_rules! field_names {
    ($v:expr, $path:ident { $($field:ident),* }) => {{
        let $path { $($field: _),* } = &$v;
        [$(stringify!($field)),*]
    }};
}

mod access;
mod capture;
mod containment;
mod runtime;
mod self_dump;
mod server;
mod slots;
mod subscription;
mod sys;
mod task;
pub mod testing;
#[cfg(feature = "tokio")]
mod tokio_support;
mod wire;

pub use access::WALKS_ENV;
pub use asyncdump_agent_macros::{frame, test};
pub use asyncdump_protocol as protocol;
pub use asyncdump_walker::MAX_RUNTIME_TASKS;
/// Upper bounds on one task's walk, whatever the plan asks for.
pub use asyncdump_walker::{
    MAX_WALK_BYTES as MAX_BYTES_PER_TASK, MAX_WALK_NODES as MAX_NODES_PER_TASK,
};
pub use capture::{PER_TASK_WAIT_NS, STALE_CACHE_MAX, TOTAL_WAIT_NS, snapshot};
pub use runtime::MAX_RUNTIMES;
#[cfg(feature = "tokio")]
pub use runtime::{LocalSetRegistration, register_local_set, register_runtime};
pub use self_dump::{DUMP_FILE_ENV, DumpSignal, INSPECTOR_ENV, ON_SIGNAL_ENV, WATCHDOG_ENV};
pub use server::{Agent, Builder, COMPLETED_ENV, DISABLE_ENV, InitError, init};
pub use slots::MAX_CLIENTS;
pub use task::{
    COMPLETED_RETAINED, FrameExt, Framed, Instrumented, Label, MAX_COMPLETED_RETAINED,
    MAX_FRAMES_PER_TASK, MetaSlot, instrument, instrument_named,
};
#[cfg(feature = "tokio")]
pub use tokio_support::{JoinHandle, spawn, spawn_named};

#[doc(hidden)]
pub use task::__private;
