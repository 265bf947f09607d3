//! asyncdump-walker: walk plans, and the one interpreter that follows them over any source of memory.
//!
//! The inspector reads a target binary's DWARF and writes plans; this crate knows no DWARF. It follows
//! them over bytes that come from wherever the target's memory is:
//!
//! - [`plan`]: what to read. A [`WalkPlan`] says, per future type, where its discriminant is and which
//!   fields lead to further futures; a [`RuntimePlan`] says how to get from a tokio runtime's handle to
//!   its task headers and from each header to its future. Plans and what following them gives
//!   ([`Walk`], [`RuntimeReport`]) are serde types, carried on the wire by `asyncdump-protocol`.
//! - [`memory`]: where the bytes come from, through the [`Memory`] trait: batched reads that each
//!   succeed whole or fail alone. [`ProcessMemory`] reads a live process (the agent reads itself, the
//!   inspector another process), [`ImageMemory`] bytes held in memory (tests; loaded core segments).
//! - [`Walker`]: follows a walk plan from tasks' root futures, breadth-first and many tasks at once, so
//!   one batch of reads serves a whole level of every task.
//! - [`tasks`]: follows a runtime plan through tokio's task lists, validating every header, and walks
//!   the idle tasks' futures.
//! - [`bounds`]: every limit on that work, in one place.
//!
//! Nothing here trusts the plan or the bytes: every index into a plan is checked, every offset into
//! copied bytes is bounded, every pointer read from the target is only ever passed back to the
//! [`Memory`] source, and the work is bounded by [`bounds`]. A wrong plan gives faults and truncated
//! walks, never a panic. There is no `unsafe` code in this crate.

#![forbid(unsafe_code)]
// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

pub mod bounds;
pub mod bytes;
pub mod memory;
pub mod plan;
pub mod tasks;
mod walk;

pub use bounds::{
    MAX_LAYOUT_BYTES, MAX_RUNTIME_TASKS, MAX_SHARDS, MAX_SLICE_ELEMS, MAX_WALK_BYTES,
    MAX_WALK_NODES,
};
#[cfg(feature = "process")]
pub use memory::ProcessMemory;
pub use memory::{Chased, ImageMemory, Memory, Read, Region, Unreadable};
pub use plan::*;
pub use walk::Walker;
