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
