//! Executes a [`WalkPlan`] on one idle task's future: the agent's half of zero-annotation chains.
//!
//! The plan comes from the inspector, which read the binary's DWARF; this module knows no DWARF. It starts
//! at the task's pinned root future and, per node, copies the type's bytes with one [`read_own`] call
//! (inline fields of that type, such as an awaited state machine stored inside its parent, come from the
//! same copy), reads the discriminant, and follows the plan's edges: inline fields, thin pointers
//! (`Pin<Box<T>>`) and `dyn Future` pointers whose vtable the plan names.
//!
//! **Why it cannot hurt the host.** Every read of target memory goes through `process_vm_readv` on our own
//! pid, which returns `EFAULT` for an unmapped address instead of raising a signal; a plan that is wrong,
//! malicious or stale yields `Fault` nodes, never a crash. The caller holds the task's lock in reader mode,
//! so the task is not being polled or dropped and its own memory (its state machines, the boxes it owns)
//! holds still. Work is bounded by the plan's node and byte limits, capped again here, and nothing panics:
//! every index into the plan is checked.

use asyncdump_protocol::{
    Case, Edge, NO_PARENT, NodeStatus, Target, TypePlan, UNKNOWN_TYPE, Walk, WalkNode, WalkPlan,
};

use crate::sys;

/// Upper bounds applied whatever the plan asks for.
pub use asyncdump_protocol::{
    MAX_WALK_BYTES as MAX_BYTES_PER_TASK, MAX_WALK_NODES as MAX_NODES_PER_TASK,
};

/// Reusable buffers for walking many tasks in one snapshot.
#[derive(Default)]
pub(crate) struct Walker {
    /// Copies of the objects read for the current task; a node's bytes are `bytes[start..start + len]`.
    bytes: Vec<u8>,
    stack: Vec<Pending>,
}

/// A node still to visit.
struct Pending {
    parent: u32,
    ty: u32,
    addr: usize,
    /// Where its bytes already are, when it is an inline field of an object already copied: its start,
    /// and the end of the enclosing copy, which it must not run past.
    copied: Option<(usize, usize)>,
    status: Option<NodeStatus>,
}

impl Walker {
    /// Walks the future at `addr`, of plan type `ty`. The caller holds the task's read lock.
    pub(crate) fn walk(&mut self, plan: &WalkPlan, ty: u32, addr: usize) -> Walk {
        let max_nodes = plan.max_nodes.min(MAX_NODES_PER_TASK) as usize;
        let max_bytes = plan.max_bytes.min(MAX_BYTES_PER_TASK) as usize;
        self.bytes.clear();
        self.stack.clear();
        self.stack.push(Pending {
            parent: NO_PARENT,
            ty,
            addr,
            copied: None,
            status: None,
        });
        let mut nodes: Vec<WalkNode> = Vec::new();
        let mut truncated = false;
        while let Some(p) = self.stack.pop() {
            if nodes.len() >= max_nodes {
                truncated = true;
                break;
            }
            let index = nodes.len() as u32;
            let mut node = WalkNode {
                parent: p.parent,
                ty: p.ty,
                addr: p.addr as u64,
                discr: None,
                status: NodeStatus::Read,
            };
            if let Some(status) = p.status {
                node.status = status;
                nodes.push(node);
                continue;
            }
            let Some(tp) = plan.types.get(p.ty as usize) else {
                node.ty = UNKNOWN_TYPE;
                node.status = NodeStatus::Leaf;
                nodes.push(node);
                continue;
            };
            let size = tp.size as usize;
            if size == 0 {
                node.status = NodeStatus::Leaf;
                nodes.push(node);
                continue;
            }
            let start = match p.copied {
                Some((start, end)) if start + size <= end => start,
                _ => {
                    if self.bytes.len() + size > max_bytes {
                        truncated = true;
                        break;
                    }
                    let start = self.bytes.len();
                    self.bytes.resize(start + size, 0);
                    if let Err(errno) = sys::read_own(p.addr, &mut self.bytes[start..]) {
                        self.bytes.truncate(start);
                        if errno != libc::EFAULT && nodes.is_empty() {
                            return Walk::Unsupported { errno };
                        }
                        node.status = NodeStatus::Fault;
                        nodes.push(node);
                        continue;
                    }
                    start
                }
            };
            let obj = &self.bytes[start..start + size];
            node.discr = tp.discr.and_then(|d| read_uint(obj, d.offset, d.size));
            nodes.push(node);
            // Push in reverse so that children come out in the plan's order (pre-order).
            let edges = tp.always.iter().chain(case_edges(tp, node.discr));
            let from = self.stack.len();
            for edge in edges {
                self.stack
                    .push(follow(plan, edge, obj, p.addr, start, index));
            }
            self.stack[from..].reverse();
        }
        Walk::Nodes { nodes, truncated }
    }
}

/// The edges of the case the discriminant selects (the default case when no value matches).
fn case_edges(tp: &TypePlan, discr: Option<u64>) -> impl Iterator<Item = &Edge> {
    let chosen: Option<&Case> = discr.and_then(|d| {
        tp.cases
            .iter()
            .find(|c| c.value == Some(d))
            .or_else(|| tp.cases.iter().find(|c| c.value.is_none()))
    });
    chosen.into_iter().flat_map(|c| c.edges.iter())
}

/// Where an edge of the object at `addr` (copied at `start`, bytes `obj`) leads.
fn follow(
    plan: &WalkPlan,
    edge: &Edge,
    obj: &[u8],
    addr: usize,
    start: usize,
    parent: u32,
) -> Pending {
    let offset = edge.offset as usize;
    let at = |ty, addr, status| Pending {
        parent,
        ty,
        addr,
        copied: None,
        status,
    };
    let word = |off: usize| read_uint(obj, off as u32, std::mem::size_of::<usize>() as u8);
    match edge.to {
        Target::Inline(ty) => Pending {
            copied: Some((start + offset, start + obj.len())),
            ..at(ty, addr.wrapping_add(offset), None)
        },
        Target::Pointer(ty) => match word(offset) {
            Some(0) => at(ty, 0, Some(NodeStatus::Null)),
            Some(ptr) => at(ty, ptr as usize, None),
            None => at(ty, 0, Some(NodeStatus::Fault)),
        },
        Target::Dyn { vtable_offset } => match (word(offset), word(vtable_offset as usize)) {
            (Some(0), _) => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Null)),
            (Some(data), Some(vtable)) => {
                match plan.vtables.binary_search_by_key(&vtable, |v| v.0) {
                    Ok(i) => at(plan.vtables[i].1, data as usize, None),
                    Err(_) => at(
                        UNKNOWN_TYPE,
                        data as usize,
                        Some(NodeStatus::UnknownVtable { vtable }),
                    ),
                }
            }
            _ => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Fault)),
        },
    }
}

/// An unsigned integer of `size` bytes at `offset` in `obj`, native byte order; `None` if out of range.
fn read_uint(obj: &[u8], offset: u32, size: u8) -> Option<u64> {
    let bytes = obj.get(offset as usize..offset as usize + size as usize)?;
    let mut buf = [0u8; 8];
    match size {
        1 | 2 | 4 | 8 => {
            if cfg!(target_endian = "little") {
                buf[..bytes.len()].copy_from_slice(bytes);
                Some(u64::from_le_bytes(buf))
            } else {
                buf[8 - bytes.len()..].copy_from_slice(bytes);
                Some(u64::from_be_bytes(buf))
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::Discr;

    /// A hand-made two-level structure: a "state machine" whose state 3 holds a box to a leaf.
    #[repr(C)]
    struct Outer {
        state: u8,
        boxed: *const Inner,
    }
    #[repr(C)]
    struct Inner {
        state: u8,
    }

    fn plan() -> WalkPlan {
        WalkPlan {
            types: vec![
                TypePlan {
                    size: size_of::<Outer>() as u32,
                    discr: Some(Discr { offset: 0, size: 1 }),
                    always: vec![],
                    cases: vec![Case {
                        value: Some(3),
                        edges: vec![Edge {
                            offset: std::mem::offset_of!(Outer, boxed) as u32,
                            to: Target::Pointer(1),
                        }],
                    }],
                },
                TypePlan {
                    size: 1,
                    discr: Some(Discr { offset: 0, size: 1 }),
                    ..TypePlan::default()
                },
            ],
            max_nodes: 64,
            max_bytes: 4096,
            ..WalkPlan::default()
        }
    }

    fn nodes(walk: Walk) -> Vec<WalkNode> {
        match walk {
            Walk::Nodes { nodes, .. } => nodes,
            other => panic!("not a walk: {other:?}"),
        }
    }

    #[test]
    fn follows_the_edge_of_the_current_state_through_a_box() {
        let inner = Box::new(Inner { state: 7 });
        let outer = Outer {
            state: 3,
            boxed: &*inner,
        };
        let n = nodes(Walker::default().walk(&plan(), 0, &outer as *const _ as usize));
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].discr, n[1].discr, n[1].parent), (Some(3), Some(7), 0));
        assert_eq!(n[1].addr, &*inner as *const Inner as u64);
    }

    #[test]
    fn another_state_has_no_edge() {
        let outer = Outer {
            state: 4,
            boxed: std::ptr::null(),
        };
        let n = nodes(Walker::default().walk(&plan(), 0, &outer as *const _ as usize));
        assert_eq!(n.len(), 1);
    }

    #[test]
    fn a_wild_pointer_is_a_fault_not_a_crash() {
        let outer = Outer {
            state: 3,
            boxed: 0x10 as *const Inner,
        };
        let n = nodes(Walker::default().walk(&plan(), 0, &outer as *const _ as usize));
        assert_eq!(n[1].status, NodeStatus::Fault);
        let n = nodes(Walker::default().walk(&plan(), 0, 0x8));
        assert_eq!(n[0].status, NodeStatus::Fault, "even the root");
    }

    #[test]
    fn a_cycle_stops_at_the_node_limit_and_bad_type_numbers_are_leaves() {
        let mut p = plan();
        // Pre-order: the bad type number is visited before the self-loop runs to the limit.
        p.types[0].cases[0].edges.push(Edge {
            offset: 0,
            to: Target::Inline(99),
        });
        p.types[0].cases[0].edges.push(Edge {
            offset: 0,
            to: Target::Inline(0),
        });
        let outer = Outer {
            state: 3,
            boxed: 0x10 as *const Inner,
        };
        match Walker::default().walk(&p, 0, &outer as *const _ as usize) {
            Walk::Nodes { nodes, truncated } => {
                assert!(truncated);
                assert_eq!(nodes.len(), 64);
                assert!(nodes.iter().any(|n| n.ty == UNKNOWN_TYPE));
            }
            other => panic!("{other:?}"),
        }
    }
}
