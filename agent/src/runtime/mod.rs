//! Every task of a registered tokio runtime or `LocalSet`, including those spawned with plain
//! `tokio::spawn` or `spawn_local`.
//!
//! **Registration** (`registry`). [`register_runtime`] (and [`crate::init`], for the runtime it is
//! called in) keeps a clone of the runtime's `Handle` for the life of the process, at a stable address
//! the agent reports to the inspector; [`register_local_set`] lists a `LocalSet` while it is borrowed.
//! Nothing is added to any poll path: the runtime does not know it is watched.
//!
//! **Listing and chains** (`asyncdump_walker::tasks`). The inspector sends a `RuntimePlan` built
//! from the binary's DWARF (the agent knows nothing of tokio's private layout): from the handle to the
//! runtime's sharded owned-task list, per task header where its state, vtable, id, list link and join
//! waker are, and where each task type's future is. The walker follows it over this process's own
//! memory (`process_vm_readv` on its own pid, which fails on a bad address instead of faulting), never
//! taking tokio's locks, so a runtime whose every worker is blocked is still listed; it validates every
//! header and walks idle tasks' futures with the same [`Walker`] as annotated tasks.

mod registry;

use asyncdump_protocol::{RuntimeFlavor, RuntimeReport, WalkPlan};
use asyncdump_walker::{ProcessMemory, Walker, tasks};

#[cfg(feature = "tokio")]
pub use registry::{LocalSetRegistration, register_local_set};

/// Most runtimes registered at once; later registrations are refused.
pub const MAX_RUNTIMES: usize = 16;

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
                let mem = ProcessMemory::own();
                let listed = match flavor {
                    Some(RuntimeFlavor::LocalSet) => {
                        tasks::list_local_set(&mem, rp, handle, &mut report)
                    }
                    _ => tasks::list_runtime(&mem, rp, handle, &mut report),
                };
                if let Err(e) = listed {
                    report.error = Some(e);
                }
                tasks::walk_tasks(&mem, plan, rp, &mut report.tasks, walker);
            }
            report
        })
        .collect()
}
