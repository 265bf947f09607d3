//! Walk plans: how to read async state machines for chains nobody annotated.
//!
//! The inspector reads the target binary's DWARF and writes a [`WalkPlan`]: for each future type it may
//! meet, where the discriminant is and which fields to follow in each case ([`TypePlan`]). The
//! [`crate::Walker`] knows nothing about DWARF; it follows the plan per idle task, starting at the task's
//! pinned root future, reading through a [`crate::Memory`] source whose reads fail instead of faulting,
//! and gives what it visited as a [`Walk`]: nodes each after its parent (breadth-first, many tasks at
//! once, to share reads), siblings in the plan's order, each with its type and the discriminant it read.
//! The inspector turns the nodes back into named frames with source lines. The work is bounded by
//! [`WalkPlan::max_nodes`] and [`WalkPlan::max_bytes`] per task, and by [`crate::bounds`] whatever the
//! plan asks for.

use serde::{Deserialize, Serialize};

/// Marks a [`WalkNode::ty`] that the plan does not describe (an unknown `dyn Future` vtable).
pub const UNKNOWN_TYPE: u32 = u32::MAX;
/// Marks a [`WalkNode::parent`] of a node that is the task's root future.
pub const NO_PARENT: u32 = u32::MAX;

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WalkPlan {
    /// Indexed by type number: every `u32` type reference below is an index into this.
    pub types: Vec<TypePlan>,
    /// Root future type of each task root anchor (`Task::root_anchor`, as the agent reports it).
    pub roots: Vec<(u64, u32)>,
    /// `dyn Future` vtable addresses in the target (load bias applied) and the concrete type behind each;
    /// sorted by address.
    pub vtables: Vec<(u64, u32)>,
    /// Most nodes returned per task.
    pub max_nodes: u32,
    /// Most bytes read per task.
    pub max_bytes: u32,
    /// How to list the tasks of the registered tokio runtimes; their futures are walked with this plan.
    pub runtime: Option<Box<crate::RuntimePlan>>,
}

/// What to read of one type and which fields lead further.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypePlan {
    /// Bytes of the type; 0 for a leaf that is not read at all.
    pub size: u32,
    /// Where the discriminant is, for state machines and enums.
    pub discr: Option<Discr>,
    /// Followed whatever the discriminant is.
    pub always: Vec<Edge>,
    /// Followed when the discriminant matches `value`; a case with `value: None` is taken when no other
    /// case matches (Rust's niche-encoded dataful variant).
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Discr {
    pub offset: u32,
    /// 1, 2, 4 or 8 bytes, native byte order.
    pub size: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Case {
    pub value: Option<u64>,
    pub edges: Vec<Edge>,
}

/// A field leading to another future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Edge {
    /// Byte offset of the field within the type.
    pub offset: u32,
    pub to: EdgeTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeTarget {
    /// The field is the future, of this type.
    Inline(u32),
    /// The field is a thin pointer to a future of this type (`Pin<Box<T>>`, `Pin<&mut T>`).
    Pointer(u32),
    /// The field is a `dyn Future` data pointer; the vtable pointer is at `vtable_offset` within the same
    /// type, and [`WalkPlan::vtables`] names the concrete type.
    Dyn { vtable_offset: u32 },
    /// The field is a slice's data pointer (`Box<[T]>`); its length is at `len_offset` within the same
    /// type; each of the first [`crate::MAX_SLICE_ELEMS`] elements, `stride` bytes apart, is a future of type
    /// `elem`.
    Slice {
        len_offset: u32,
        elem: u32,
        stride: u32,
    },
}

/// What a walk found in one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Walk {
    /// Nodes, each after its parent, siblings in the plan's order; the first is the root future.
    Nodes {
        nodes: Vec<WalkNode>,
        /// Set when the walk was cut by [`WalkPlan::max_nodes`] or [`WalkPlan::max_bytes`].
        truncated: bool,
    },
    /// The task has not been polled yet, so its future has no fixed address to read.
    NotStarted,
    /// The plan has no root type for this task's root anchor.
    UnknownRoot,
    /// The task was being polled (or completed), so its future could not be read.
    Busy,
    /// The memory could not be read at all (`process_vm_readv` refused: permission, seccomp, or not
    /// Linux).
    Unsupported { errno: i32 },
    /// Read from outside while the process ran: each of `tries` walks was torn by a poll (the task's
    /// state moved during it), so none is shown as if it were consistent.
    Torn { tries: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkNode {
    /// Index of the node (in this walk) whose field this is; [`NO_PARENT`] for the root.
    pub parent: u32,
    /// Type number in the plan, or [`UNKNOWN_TYPE`].
    pub ty: u32,
    /// Address of the future in the target.
    pub addr: u64,
    /// The discriminant read, for types that have one.
    pub discr: Option<u64>,
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeStatus {
    Read,
    /// Not read: the type is a leaf (size 0 in the plan).
    Leaf,
    /// Reading it failed: the address was not mapped (a stale or wrong pointer).
    Fault,
    /// A `dyn Future` whose vtable is not in the plan; `vtable` is its address.
    UnknownVtable {
        vtable: u64,
    },
    /// A null pointer.
    Null,
}
