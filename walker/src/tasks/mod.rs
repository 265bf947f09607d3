//! Every task of a tokio runtime or `LocalSet`, from its handle, by following a [`crate::RuntimePlan`].
//!
//! **Listing** (`list`). From the handle to the runtime's sharded owned-task list, then shard by shard
//! through the task headers, never taking tokio's locks: a runtime whose every worker is blocked (or
//! whose list lock is held) is still listed. A list read while tokio changes it may lead into a task
//! being freed: every header must name this runtime's list as its owner and point at a vtable whose
//! poll function the plan knows, a shard's walk stops at the first header that does not, and such stops
//! are counted as skipped. The lists are bounded by [`crate::RuntimePlan::max_tasks`] and
//! [`crate::MAX_RUNTIME_TASKS`], and every header is visited once.
//!
//! **Chains** (`stages`). An idle task's future (its stage) is walked with the [`crate::Walker`]. tokio may
//! start polling it during the walk: the state word is read again afterwards, and a walk across a
//! change of the running, complete or notified bits is dropped ([`crate::Walk::Busy`]).

mod list;
mod stages;

pub use list::{list_local_set, list_runtime};
pub use stages::walk_tasks;

/// Tasks whose futures are walked together, sharing reads.
const WALK_BATCH: usize = 64;
