//! Executes a [`WalkPlan`] on idle tasks' futures: the agent's half of zero-annotation chains.
//!
//! The plan comes from the inspector, which read the binary's DWARF; this module knows no DWARF. It starts
//! at each task's pinned root future and, per node, copies the type's bytes (inline fields of that type,
//! such as an awaited state machine stored inside its parent, come from the same copy), reads the
//! discriminant, and follows the plan's edges: inline fields, thin pointers (`Pin<Box<T>>`), `dyn Future`
//! pointers whose vtable the plan names, and boxed slices of futures (`join_all`).
//!
//! **Batched.** A read costs a syscall (some 1.6 µs here), far more than the copy, so [`Walker::walk_many`]
//! walks many tasks level by level: every node of every task waiting for bytes at one depth is read in one
//! `process_vm_readv` call with many iovecs. Nodes therefore come out breadth-first: each after its parent,
//! siblings in the plan's order.
//!
//! **Why it cannot hurt the host.** Every read of target memory goes through `process_vm_readv` on our own
//! pid, which returns `EFAULT` for an unmapped address instead of raising a signal; a plan that is wrong,
//! malicious or stale yields `Fault` nodes, never a crash. The caller holds each task's lock in reader
//! mode, so the tasks are not being polled or dropped and their own memory (their state machines, the
//! boxes they own) holds still. Work is bounded by the plan's node and byte limits, capped again here, and
//! nothing panics: every index into the plan is checked.

use asyncdump_protocol::{
    Case, Edge, MAX_SLICE_ELEMS, NO_PARENT, NodeStatus, Target, TypePlan, UNKNOWN_TYPE, Walk,
    WalkNode, WalkPlan,
};

use crate::sys;

/// Upper bounds applied whatever the plan asks for.
pub use asyncdump_protocol::{
    MAX_WALK_BYTES as MAX_BYTES_PER_TASK, MAX_WALK_NODES as MAX_NODES_PER_TASK,
};

/// Reusable buffers for walking many tasks in one snapshot.
#[derive(Default)]
pub(crate) struct Walker {
    tasks: Vec<TaskWalk>,
    /// Each read of the current level, task by task in order.
    owners: Vec<Owner>,
    /// Whether each of those reads faulted.
    failed: Vec<bool>,
}

/// One read of a level: for the node at `index` of task `task`'s frontier, `len` bytes at `addr`.
struct Owner {
    task: usize,
    index: usize,
    addr: usize,
    len: usize,
}

/// One task's walk in progress.
#[derive(Default)]
struct TaskWalk {
    nodes: Vec<WalkNode>,
    /// Copies of the objects read; a node's bytes are `bytes[start..start + size]`.
    bytes: Vec<u8>,
    /// Nodes to visit at the current depth, and at the next.
    frontier: Vec<Pending>,
    next: Vec<Pending>,
    truncated: bool,
    /// Where the bytes of the current level's reads begin: they follow each other from here, in order.
    level_start: usize,
}

/// A node still to visit.
struct Pending {
    parent: u32,
    ty: u32,
    addr: usize,
    /// Where its bytes already are, when it is an inline field of an object already copied: its start,
    /// and the end of the enclosing copy, which it must not run past.
    copied: Option<(usize, usize)>,
    /// Known without reading (null pointer, unknown vtable), or the outcome of its read.
    status: Option<NodeStatus>,
    /// Where its bytes are once copied.
    start: Option<usize>,
}

impl Walker {
    /// Walks the future at `addr`, of plan type `ty`. The caller holds the task's read lock.
    #[cfg(test)]
    pub(crate) fn walk(&mut self, plan: &WalkPlan, ty: u32, addr: usize) -> Walk {
        self.walk_many(plan, &[(ty, addr)])
            .pop()
            .expect("one walk per start")
    }

    /// Walks each `(type, address)` root future; one [`Walk`] per start, in order. The caller holds every
    /// one of these tasks' read locks.
    pub(crate) fn walk_many(&mut self, plan: &WalkPlan, starts: &[(u32, usize)]) -> Vec<Walk> {
        let max_nodes = plan.max_nodes.min(MAX_NODES_PER_TASK) as usize;
        let max_bytes = plan.max_bytes.min(MAX_BYTES_PER_TASK) as usize;
        self.tasks.resize_with(starts.len(), TaskWalk::default);
        for (t, &(ty, addr)) in self.tasks.iter_mut().zip(starts) {
            t.nodes = Vec::new();
            t.bytes.clear();
            t.frontier.clear();
            t.next.clear();
            t.truncated = false;
            t.frontier.push(Pending {
                parent: NO_PARENT,
                ty,
                addr,
                copied: None,
                status: None,
                start: None,
            });
        }
        let mut unsupported = None;
        while self.tasks.iter().any(|t| !t.frontier.is_empty()) {
            self.plan_level(plan, max_bytes);
            if let Err(errno) = self.read_level() {
                unsupported = Some(errno);
                break;
            }
            for (&failed, o) in self.failed.iter().zip(&self.owners) {
                if failed {
                    self.tasks[o.task].frontier[o.index].status = Some(NodeStatus::Fault);
                }
            }
            for t in &mut self.tasks {
                t.visit_level(plan, max_nodes);
            }
        }
        self.tasks
            .iter_mut()
            .map(|t| match unsupported {
                Some(errno) => Walk::Unsupported { errno },
                None => Walk::Nodes {
                    nodes: std::mem::take(&mut t.nodes),
                    truncated: t.truncated,
                },
            })
            .collect()
    }

    /// Lists the reads the current depth needs, allocating their bytes.
    fn plan_level(&mut self, plan: &WalkPlan, max_bytes: usize) {
        self.owners.clear();
        for (ti, t) in self.tasks.iter_mut().enumerate() {
            t.level_start = t.bytes.len();
            for (i, p) in t.frontier.iter_mut().enumerate() {
                let size = match plan.types.get(p.ty as usize) {
                    Some(tp) if p.status.is_none() && tp.size > 0 => tp.size as usize,
                    _ => continue,
                };
                if let Some((start, end)) = p.copied
                    && start + size <= end
                {
                    p.start = Some(start);
                    continue;
                }
                if t.bytes.len() + size > max_bytes {
                    t.truncated = true;
                    continue;
                }
                let start = t.bytes.len();
                t.bytes.resize(start + size, 0);
                p.start = Some(start);
                self.owners.push(Owner {
                    task: ti,
                    index: i,
                    addr: p.addr,
                    len: size,
                });
            }
        }
    }

    /// Performs the level's reads into the bytes [`Walker::plan_level`] allocated, noting which faulted.
    fn read_level(&mut self) -> Result<(), i32> {
        let mut reads = Vec::with_capacity(self.owners.len());
        let mut owners = self.owners.iter().peekable();
        for (ti, t) in self.tasks.iter_mut().enumerate() {
            let mut rest = t.bytes.get_mut(t.level_start..).unwrap_or_default();
            while let Some(o) = owners.next_if(|o| o.task == ti) {
                // Always splits: the level's reads were allocated back to back from `level_start`.
                // Were it not so, the read would count as a fault, never a panic.
                match std::mem::take(&mut rest).split_at_mut_checked(o.len) {
                    Some((dst, tail)) => {
                        reads.push(sys::Read::new(o.addr, dst));
                        rest = tail;
                    }
                    None => reads.push(sys::Read::fault()),
                }
            }
        }
        let result = sys::read_own_many(&mut reads);
        self.failed.clear();
        self.failed.extend(reads.iter().map(|r| r.failed));
        result
    }
}

impl TaskWalk {
    /// Turns the current depth into nodes, queueing their children for the next.
    fn visit_level(&mut self, plan: &WalkPlan, max_nodes: usize) {
        let frontier = std::mem::take(&mut self.frontier);
        for p in &frontier {
            if self.nodes.len() >= max_nodes {
                self.truncated = true;
                self.next.clear();
                break;
            }
            let index = self.nodes.len() as u32;
            let mut node = WalkNode {
                parent: p.parent,
                ty: p.ty,
                addr: p.addr as u64,
                discr: None,
                status: p.status.unwrap_or(NodeStatus::Read),
            };
            let Some(tp) = plan.types.get(p.ty as usize) else {
                node.ty = UNKNOWN_TYPE;
                node.status = NodeStatus::Leaf;
                self.nodes.push(node);
                continue;
            };
            if p.status.is_some() {
                self.nodes.push(node);
                continue;
            }
            if tp.size == 0 {
                node.status = NodeStatus::Leaf;
                self.nodes.push(node);
                continue;
            }
            // No bytes: over the byte budget (already marked truncated).
            let Some(start) = p.start else { continue };
            let obj = &self.bytes[start..start + tp.size as usize];
            node.discr = tp.discr.and_then(|d| read_uint(obj, d.offset, d.size));
            self.nodes.push(node);
            for edge in tp.always.iter().chain(case_edges(tp, node.discr)) {
                follow(plan, edge, obj, p.addr, start, index, &mut self.next);
            }
        }
        self.frontier = frontier;
        self.frontier.clear();
        std::mem::swap(&mut self.frontier, &mut self.next);
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
    out: &mut Vec<Pending>,
) {
    let offset = edge.offset as usize;
    let at = |ty, addr, status| Pending {
        parent,
        ty,
        addr,
        copied: None,
        status,
        start: None,
    };
    let word = |off: usize| read_uint(obj, off as u32, std::mem::size_of::<usize>() as u8);
    let next = match edge.to {
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
        Target::Slice {
            len_offset,
            elem,
            stride,
        } => match (word(offset), word(len_offset as usize)) {
            (Some(data), Some(len)) => {
                // Element addresses come from the target's own pointer and length: a wrong pair gives
                // faults, and no more than MAX_SLICE_ELEMS of them.
                for i in 0..len.min(MAX_SLICE_ELEMS) as usize {
                    let at_i = (data as usize).wrapping_add(i.wrapping_mul(stride as usize));
                    out.push(at(elem, at_i, None));
                }
                return;
            }
            _ => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Fault)),
        },
    };
    out.push(next);
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
    fn a_fault_in_the_middle_of_a_batch_spoils_only_its_own_walk() {
        let inner = Box::new(Inner { state: 9 });
        let good = Outer {
            state: 3,
            boxed: &*inner,
        };
        let wild = Outer {
            state: 3,
            boxed: 0x18 as *const Inner,
        };
        let (g, w) = (&good as *const _ as usize, &wild as *const _ as usize);
        // More starts than one syscall takes (1,024 iovecs), with faults spread through them.
        let starts: Vec<(u32, usize)> = (0..1500)
            .map(|i| match i % 3 {
                0 => (0, g),
                1 => (0, w),
                _ => (0, 0x28),
            })
            .collect();
        let walks = Walker::default().walk_many(&plan(), &starts);
        assert_eq!(walks.len(), starts.len());
        for (i, walk) in walks.into_iter().enumerate() {
            let n = nodes(walk);
            match i % 3 {
                0 => {
                    assert_eq!(n.len(), 2);
                    assert_eq!((n[1].discr, n[1].status), (Some(9), NodeStatus::Read));
                }
                1 => assert_eq!(
                    (n[0].status, n[1].status),
                    (NodeStatus::Read, NodeStatus::Fault)
                ),
                _ => assert_eq!((n.len(), n[0].status), (1, NodeStatus::Fault)),
            }
        }
    }

    #[test]
    fn a_boxed_slice_gives_one_child_per_element_up_to_the_cap() {
        let elems: Box<[Inner]> = (0..3).map(|state| Inner { state }).collect();
        #[repr(C)]
        struct Slice {
            data: *const Inner,
            len: usize,
        }
        let mut p = plan();
        p.max_nodes = MAX_NODES_PER_TASK;
        p.types[0] = TypePlan {
            size: size_of::<Slice>() as u32,
            always: vec![Edge {
                offset: 0,
                to: Target::Slice {
                    len_offset: 8,
                    elem: 1,
                    stride: size_of::<Inner>() as u32,
                },
            }],
            ..TypePlan::default()
        };
        let mut slice = Slice {
            data: elems.as_ptr(),
            len: elems.len(),
        };
        let n = nodes(Walker::default().walk(&p, 0, &slice as *const _ as usize));
        let states: Vec<_> = n[1..].iter().map(|n| (n.parent, n.discr)).collect();
        assert_eq!(states, [(0, Some(0)), (0, Some(1)), (0, Some(2))]);
        // A lying length is capped, and reads past the allocation fault or read junk, never crash.
        slice.len = usize::MAX;
        let n = nodes(Walker::default().walk(&p, 0, &slice as *const _ as usize));
        assert_eq!(n.len(), 1 + MAX_SLICE_ELEMS as usize);
    }

    #[test]
    fn a_cycle_stops_at_the_node_limit_and_bad_type_numbers_are_leaves() {
        let mut p = plan();
        // Breadth-first: the bad type number is visited at depth 1, long before the limit.
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
