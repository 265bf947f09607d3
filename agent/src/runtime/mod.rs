//! Every task of a registered tokio runtime or `LocalSet`, including those spawned with plain
//! `tokio::spawn` or `spawn_local`.
//!
//! **Registration** (`registry`). [`register_runtime`] (and [`crate::init`], for the runtime it is
//! called in) keeps a clone of the runtime's `Handle` for the life of the process, at a stable address
//! the agent reports to the inspector; [`register_local_set`] lists a `LocalSet` while it is borrowed.
//! Nothing is added to any poll path: the runtime does not know it is watched.
//!
//! **Listing** (`list`). The inspector sends a [`RuntimePlan`] built from the binary's DWARF (this module knows
//! nothing of tokio's private layout): from the handle to the runtime's sharded owned-task list, and
//! per task header where its state, vtable, id, list link and join waker are. The agent follows the
//! lists with `process_vm_readv` on its own pid, never taking tokio's locks, so a runtime whose every
//! worker is blocked (or whose list lock is held) is still listed. A list read while tokio changes it
//! may lead into a task being freed: every header must name this runtime's list as its owner and point
//! at a vtable whose poll function the plan knows, a shard's walk stops at the first header that does
//! not, and such stops are counted as skipped. The lists are bounded by [`RuntimePlan::max_tasks`] and
//! every header is visited once.
//!
//! **Chains** (`stages`). An idle task's future (its stage) is walked with the same [`Walker`] as annotated
//! tasks. tokio may start polling it during the walk: the state word is read again afterwards, and a
//! walk across a change of the running, complete or notified bits is dropped ([`Walk::Busy`]).

mod list;
mod registry;
mod stages;

use asyncdump_protocol::{RuntimeFlavor, RuntimeReport, WalkPlan};

#[cfg(feature = "tokio")]
pub use registry::{LocalSetRegistration, register_local_set};

use crate::sys;
use crate::walk::Walker;

/// Most runtimes registered at once; later registrations are refused.
pub const MAX_RUNTIMES: usize = 16;
/// Most tasks listed per runtime, whatever the plan asks for.
pub const MAX_RUNTIME_TASKS: u32 = 1_000_000;
/// Most shards of one owned-task list (tokio uses a few per worker thread).
const MAX_SHARDS: u64 = 1 << 16;
/// Tasks whose futures are walked together, sharing read syscalls (as for annotated tasks).
const WALK_BATCH: usize = 64;

/// Lists the tasks of `handle`'s runtime from now on, in every snapshot. Returns `false` if
/// [`MAX_RUNTIMES`] runtimes are registered already. Registering a runtime twice is harmless.
/// [`crate::init`] registers the runtime it is called in; call this for others (or when `init` runs
/// outside a runtime).
#[cfg(feature = "tokio")]
pub fn register_runtime(handle: &tokio::runtime::Handle) -> bool {
    registry::register(handle)
}

/// Where each registered runtime's handle lives, for the inspector's plan.
pub(crate) fn handles() -> Vec<u64> {
    registry::runtimes().into_iter().map(|(h, _)| h).collect()
}

/// One report per registered runtime, then per registered `LocalSet`; tasks listed only when `plan`
/// carries a runtime plan.
pub(crate) fn list_all(plan: Option<&WalkPlan>, walker: &mut Walker) -> Vec<RuntimeReport> {
    let runtimes = registry::runtimes()
        .into_iter()
        .map(|(handle, alive)| (handle, alive, None));
    let local_sets = registry::local_sets()
        .into_iter()
        .map(|set| (set, None, Some(RuntimeFlavor::LocalSet)));
    runtimes
        .chain(local_sets)
        .map(|(handle, alive, flavor)| {
            let mut report = RuntimeReport {
                handle,
                flavor,
                alive,
                tasks: Vec::new(),
                skipped: 0,
                error: None,
            };
            if let Some((plan, rp)) = plan.and_then(|p| Some((p, p.runtime.as_deref()?))) {
                let listed = match flavor {
                    Some(RuntimeFlavor::LocalSet) => list::list_local_set(rp, handle, &mut report),
                    _ => list::list_runtime(rp, handle as usize, &mut report),
                };
                if let Err(e) = listed {
                    report.error = Some(e);
                }
                stages::walk_tasks(plan, rp, &mut report.tasks, walker);
            }
            report
        })
        .collect()
}

/// Reads `len` bytes at `addr`, or `None` if any of them is not mapped.
fn read(addr: usize, len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let mut r = [sys::Read::new(addr, &mut out)];
    let read = sys::read_own_many(&mut r).is_ok() && !r[0].failed;
    read.then_some(out)
}

/// The native-endian `u64` at `offset` in `bytes` (0 past the end: a plan that lies reads zeros).
fn word(bytes: &[u8], offset: u32) -> u64 {
    sized(bytes, offset, 8)
}

/// The native-endian value of `size` (at most 8) bytes at `offset` in `bytes`; 0 past the end.
fn sized(bytes: &[u8], offset: u32, size: u8) -> u64 {
    let at = offset as usize;
    match bytes.get(at..at + size as usize) {
        Some(b) => {
            let mut w = [0u8; 8];
            let n = b.len().min(8);
            w[..n].copy_from_slice(&b[..n]);
            u64::from_ne_bytes(w)
        }
        None => 0,
    }
}
