//! Plans, and what following them gives: serde types shared by whoever writes a plan (the inspector)
//! and whoever follows it (the agent in its own process, the inspector over another process or a
//! core file).
//!
//! - [`future`]: walk plans for async state machines and the walks they give.
//! - [`runtime`]: runtime plans for tokio's task lists and the reports they give.
//! - `validate`: [`WalkPlan::validate`], whether a plan may be followed at all.

pub mod future;
pub mod runtime;
mod validate;

pub use future::{
    Case, Discr, Edge, EdgeTarget, NO_PARENT, NodeStatus, TypePlan, UNKNOWN_TYPE, Walk, WalkNode,
    WalkPlan,
};
pub use runtime::{
    CensusLayout, CensusReport, FlavorLayout, HeaderLayout, LocalSetLayout, OwnedLayout, RawWaker,
    RuntimeFlavor, RuntimePlan, RuntimeReport, RuntimeSource, RuntimeTask, SchedulerField,
    SetWakerLayout, Shards, StateBits, TaskLayout, TaskVtable, TrailerLayout, VtableLayout,
};
pub use validate::PlanError;
