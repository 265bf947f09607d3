//! Every bound on the walker's work, defined once. A plan may ask for less; whatever it asks for,
//! the walker does no more than this, so a hostile or broken plan costs a bounded amount of reading.

/// The most nodes one walk returns, whatever [`crate::WalkPlan::max_nodes`] asks for.
pub const MAX_WALK_NODES: u32 = 4096;
/// The most bytes one walk reads, whatever [`crate::WalkPlan::max_bytes`] asks for.
pub const MAX_WALK_BYTES: u32 = 1 << 20;
/// The most elements of one slice a walk visits.
pub const MAX_SLICE_ELEMS: u64 = 256;
/// The most tasks listed per runtime, whatever [`crate::RuntimePlan::max_tasks`] asks for.
pub const MAX_RUNTIME_TASKS: u32 = 1_000_000;
/// The most shards of one owned-task list (tokio uses a few per worker thread).
pub const MAX_SHARDS: u64 = 1 << 16;
/// The most bytes of one task header or trailer a runtime plan may ask to read (tokio's are well under
/// a hundred): a plan asking for more is refused, not followed.
pub const MAX_LAYOUT_BYTES: u32 = 4096;
/// The most types one walk plan may describe (a big service plans a few thousand).
pub const MAX_PLAN_TYPES: usize = 1 << 16;
/// The most root anchors, and the most `dyn Future` vtables, one walk plan may name.
pub const MAX_PLAN_ENTRIES: usize = 1 << 20;
/// The most edges one type of a walk plan may have, over all its cases (a `join!` of many futures
/// has one per branch).
pub const MAX_TYPE_EDGES: usize = 4096;
/// The most cases one type of a walk plan may have (an async fn has one per await, and a few more).
pub const MAX_TYPE_CASES: usize = 4096;
/// The most entries of each list a runtime plan holds (flavors, task layouts, waker layouts).
pub const MAX_RUNTIME_LAYOUTS: usize = 4096;
/// The farthest offset a runtime plan may name within one of tokio's structures.
pub const MAX_LAYOUT_OFFSET: u32 = 1 << 16;
