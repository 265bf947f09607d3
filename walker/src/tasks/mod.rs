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
//! **Finding lists nobody registered** (`census`). Task headers found in the process's writable
//! memory name their task lists; the lists that check out are listed as above.
//!
//! **Discovery** (`discovery`). What the censuses of one target found, kept from listing to listing
//! and listed into reports: the agent, the inspector reading another process and a core file share it.
//!
//! **Ages** (`ages`). How long each listed task has looked as it does, from listing to listing.
//!
//! **Chains** (`stages`). An idle task's future (its stage) is walked with the [`crate::Walker`]. tokio may
//! start polling it during the walk: the state word is read again afterwards, and a walk across a
//! change of the running, complete or notified bits is dropped ([`crate::Walk::Busy`]).

mod ages;
mod census;
mod discovery;
mod list;
mod stages;

pub use ages::Ages;
pub use census::{CENSUS_CHUNK, Census, FoundList, MAX_BLOCKING, census, from};
pub use discovery::{Discovery, Known, list_known};
pub use list::{list_found, list_local_set, list_runtime, read_blocking};
pub use stages::{walk_tasks, walk_tasks_retrying};

/// Tasks whose futures are walked together, sharing reads.
const WALK_BATCH: usize = 64;

#[cfg(test)]
pub(crate) mod tests {
    use crate::memory::ImageMemory;
    use crate::plan::{
        FlavorLayout, HeaderLayout, OwnedLayout, RuntimeFlavor, RuntimePlan, RuntimeReport, Shards,
        StateBits, TrailerLayout, VtableLayout,
    };

    /// A runtime whose handle at 0x1000 points (at its offset 0) to a task list at 0x2000: id 7, one
    /// inline list whose head, at 8, is a task header at 0x3000.
    fn memory() -> ImageMemory {
        let mut m = ImageMemory::new();
        assert!(m.insert(0x1000, 0x2000u64.to_ne_bytes().to_vec()));
        let owned = [7u64.to_ne_bytes(), 0x3000u64.to_ne_bytes()].concat();
        assert!(m.insert(0x2000, owned));
        assert!(m.insert(0x3000, vec![0; 64]));
        m
    }

    pub(crate) fn plan(header: HeaderLayout, trailer: TrailerLayout) -> RuntimePlan {
        RuntimePlan {
            handle_discr: None,
            flavors: vec![FlavorLayout {
                value: None,
                flavor: RuntimeFlavor::MultiThread,
                arc_offset: 0,
                owned_offset: 0,
            }],
            owned: OwnedLayout {
                id: 0,
                count: None,
                shards: Shards::Inline { head: 8 },
            },
            header,
            vtable: VtableLayout::default(),
            trailer,
            state_bits: StateBits::default(),
            tasks: Vec::new(),
            set_wakers: Vec::new(),
            local_set: None,
            census: None,
            max_tasks: 10,
        }
    }

    fn report() -> RuntimeReport {
        RuntimeReport {
            handle: 0x1000,
            flavor: None,
            alive: None,
            tasks: Vec::new(),
            skipped: 0,
            error: None,
            source: Default::default(),
        }
    }

    /// A hostile or broken plan: a task header or trailer of no size is refused, not a panic.
    #[test]
    fn a_plan_with_sizeless_headers_or_trailers_is_refused() {
        let header = HeaderLayout {
            size: 24,
            ..HeaderLayout::default()
        };
        let trailer = TrailerLayout {
            size: 16,
            ..TrailerLayout::default()
        };
        let huge = HeaderLayout {
            size: u32::MAX,
            ..HeaderLayout::default()
        };
        for (h, t) in [
            (HeaderLayout::default(), trailer),
            (header, TrailerLayout::default()),
            (huge, trailer),
        ] {
            let mut r = report();
            let listed = super::list_runtime(&memory(), &plan(h, t), 0x1000, &mut r);
            let why = listed.expect_err("refused");
            assert!(why.contains("no size"), "{why}");
        }
        let mut r = report();
        let listed = super::list_runtime(&memory(), &plan(header, trailer), 0x1000, &mut r);
        assert!(listed.is_ok(), "{listed:?}");
        assert_eq!(
            r.skipped, 1,
            "a header that does not name this list is skipped"
        );
    }
}
