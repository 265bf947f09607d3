//! Every task of every tokio runtime and `LocalSet` of the process, including those spawned with
//! plain `tokio::spawn` or `spawn_local`, registered or not.
//!
//! **Census** (`asyncdump_walker::tasks::census`). Runtimes and `LocalSet`s nobody registered (made
//! on other threads, by libraries such as actix-rt, after `init`) are found from their tasks: a scan
//! of this process's heap for task headers, each naming its task list, kept only when the list checks
//! out. It runs on the agent's thread, within [`CENSUS_BUDGET`], at request time only; the lists it
//! finds serve every request for [`CENSUS_MAX_AGE`] (`asyncdump_walker::tasks::Discovery`).
//!
//! **Registration** (`registry`), the fast path. [`register_runtime`] (and [`crate::init`], for the runtime it is
//! called in) keeps a clone of the runtime's `Handle` for the life of the process, at a stable address
//! the agent reports to the inspector; [`register_local_set`] lists a `LocalSet` while it is borrowed.
//! Nothing is added to any poll path: the runtime does not know it is watched.
//!
//! **Ages.** Each listing remembers when it first saw each task looking as it does (its state and
//! chain), for how long a plain task has been stuck: at request time only, nothing on a poll path.
//!
//! **Listing and chains** (`asyncdump_walker::tasks`). The inspector sends a `RuntimePlan` built
//! from the binary's DWARF (the agent knows nothing of tokio's private layout): from the handle to the
//! runtime's sharded owned-task list, per task header where its state, vtable, id, list link and join
//! waker are, and where each task type's future is. The walker follows it over this process's own
//! memory (`process_vm_readv` on its own pid, which fails on a bad address instead of faulting), never
//! taking tokio's locks, so a runtime whose every worker is blocked is still listed; it validates every
//! header and walks idle tasks' futures with the same [`Walker`] as annotated tasks.

mod registry;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use asyncdump_protocol::{CensusReport, RuntimeFlavor, RuntimePlan, RuntimeReport, WalkPlan};
use asyncdump_walker::tasks::{self, Ages, Discovery};
use asyncdump_walker::{ProcessMemory, Walker};

#[cfg(feature = "tokio")]
pub use registry::{LocalSetRegistration, register_local_set};

/// Most runtimes registered at once; later registrations are refused.
pub const MAX_RUNTIMES: usize = 16;

/// Longest a census of this process may take in one request; past it, the census says how much of
/// the memory it covered, and the next request's census goes on from there.
pub const CENSUS_BUDGET: Duration = Duration::from_millis(500);

/// Lists the tasks of `handle`'s runtime from now on, in every snapshot. Returns `false` if
/// [`MAX_RUNTIMES`] runtimes are registered already. Registering a runtime twice is harmless.
/// [`crate::init`] registers the runtime it is called in; call this for others (or when `init` runs
/// outside a runtime).
#[cfg(feature = "tokio")]
pub fn register_runtime(handle: &tokio::runtime::Handle) -> bool {
    registry::register(handle)
}

/// The registered runtimes' handles, in the order they were registered.
#[cfg(feature = "tokio")]
pub(crate) fn registered() -> Vec<&'static tokio::runtime::Handle> {
    registry::handles()
}

/// Where each registered runtime's handle lives, for the inspector's plan.
pub(crate) fn handles() -> Vec<u64> {
    registry::runtimes().into_iter().map(|(h, _)| h).collect()
}

/// The task lists of one request: one report per registered runtime, then per registered
/// `LocalSet`, then per list a census found; tasks listed only when the plan carries a runtime plan.
pub(crate) struct Listing {
    pub(crate) reports: Vec<RuntimeReport>,
    /// What the census covered, when the plan asked for one.
    pub(crate) census: Option<CensusReport>,
}

/// Lists every runtime and `LocalSet` (see [`Listing`]) and walks their idle tasks.
pub(crate) fn list_all(plan: Option<&WalkPlan>, walker: &mut Walker) -> Listing {
    let mem = ProcessMemory::own();
    let rp = plan.and_then(|p| p.runtime.as_deref());
    let mut reports = Vec::new();
    // Lists already listed, so that a census does not list a registered runtime twice.
    let mut lists = Vec::new();
    let registered = registry::runtimes()
        .into_iter()
        .map(|(handle, alive)| (handle, alive, None));
    let local_sets = registry::local_sets()
        .into_iter()
        .map(|set| (set, None, Some(RuntimeFlavor::LocalSet)));
    for (handle, alive, flavor) in registered.chain(local_sets) {
        let mut report = RuntimeReport {
            handle,
            flavor,
            alive,
            ..RuntimeReport::default()
        };
        if let Some(rp) = rp {
            let listed = match flavor {
                Some(RuntimeFlavor::LocalSet) => {
                    tasks::list_local_set(&mem, rp, handle, &mut report)
                }
                _ => tasks::list_runtime(&mem, rp, handle, &mut report),
            };
            match listed {
                Ok(owned) => lists.push(owned),
                Err(e) => report.error = Some(e),
            }
        }
        reports.push(report);
    }
    let census = rp
        .filter(|rp| rp.census.is_some())
        .map(|rp| found_by_census(&mem, rp, walker, &lists, &mut reports));
    if let (Some(plan), Some(rp)) = (plan, rp) {
        // All together, so that the walker reads them in address order whichever list they are in.
        let mut all: Vec<_> = reports.iter_mut().flat_map(|r| &mut r.tasks).collect();
        tasks::walk_tasks(&mem, plan, rp, &mut all, walker);
        let mut ages = lock(&AGES);
        let ages = ages.get_or_insert_with(Ages::default);
        ages.observe(crate::sys::now_ns(), &rp.state_bits, all);
    }
    Listing { reports, census }
}

/// When each listed task was first seen looking as it does, across this process's listings (see
/// `asyncdump_walker::tasks::Ages`): one small entry per task of the last listing.
static AGES: Mutex<Option<Ages>> = Mutex::new(None);

/// The lists discovery knows that are not in `listed`, each listed into a report when it still
/// checks out and holds a task (see `asyncdump_walker::tasks::Discovery`); what the census covered.
fn found_by_census(
    mem: &ProcessMemory,
    rp: &RuntimePlan,
    walker: &Walker,
    listed: &[u64],
    reports: &mut Vec<RuntimeReport>,
) -> CensusReport {
    let budget = Instant::now() + CENSUS_BUDGET;
    let deadline = walker.deadline().map_or(budget, |d| d.min(budget));
    let regions = || mem.heap_regions().unwrap_or_default();
    let known = lock(&DISCOVERY).known(mem, rp, regions, Some(deadline));
    // Listed without the lock: another connection's listing need not wait for this one.
    let (report, stale) = tasks::list_known(mem, rp, known, listed, reports);
    let mut discovery = lock(&DISCOVERY);
    for list in stale {
        discovery.forget(list);
    }
    report
}

/// What this process's censuses found, process-wide: a scan serves every connection for
/// [`CENSUS_MAX_AGE`].
static DISCOVERY: Mutex<Discovery> = Mutex::new(Discovery::new(CENSUS_MAX_AGE));

/// How long the lists of one scan serve before the next scan.
pub const CENSUS_MAX_AGE: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
