//! The [`Walker`]: follows a [`WalkPlan`] from tasks' root futures over a [`Memory`] source.
//!
//! Per node it copies the type's bytes (inline fields of that type, such as an awaited state machine
//! stored inside its parent, come from the same copy), reads the discriminant, and follows the plan's
//! edges: inline fields, thin pointers (`Pin<Box<T>>`), `dyn Future` pointers whose vtable the plan
//! names, and boxed slices of futures (`join_all`).
//!
//! **Batched.** A read of a live process costs a syscall (some 1.6 µs here), far more than the copy,
//! so [`Walker::walk_many`] walks many tasks level by level: every node of every task waiting for bytes
//! at one depth is one read of one batch ([`Memory::read_many`]). Nodes therefore come out
//! breadth-first: each after its parent, siblings in the plan's order.
//!
//! **Why it cannot hurt anyone.** Every read goes through the source, whose reads fail rather than
//! fault; a plan that is wrong, malicious or stale yields `Fault` nodes, never a crash. Work is bounded
//! by the plan's node and byte limits, capped again by [`crate::bounds`], and nothing panics: every
//! index into the plan is checked. That the memory holds still during a walk is the caller's to
//! arrange (the agent holds each task's lock in reader mode; a stopped process or a core holds still).

use crate::bounds::{MAX_SLICE_ELEMS, MAX_WALK_BYTES, MAX_WALK_NODES};
use crate::bytes::uint;
use crate::memory::{Memory, Read};
use crate::plan::{
    Case, Edge, EdgeTarget, NO_PARENT, NodeStatus, TypePlan, UNKNOWN_TYPE, Walk, WalkNode, WalkPlan,
};

/// Reusable buffers for walking many tasks in one snapshot.
#[derive(Default)]
pub struct Walker {
    tasks: Vec<TaskWalk>,
    /// Each read of the current level, task by task in order.
    owners: Vec<Owner>,
    /// Whether each of those reads faulted.
    failed: Vec<bool>,
    /// When walks stop where they are, cut, whatever is left (see [`Walker::set_deadline`]).
    deadline: Option<std::time::Instant>,
    /// Nodes all walks may still return together (see [`Walker::set_node_budget`]).
    budget: Option<usize>,
}

/// One read of a level: for the node at `index` of task `task`'s frontier, `len` bytes at `addr`.
struct Owner {
    task: usize,
    index: usize,
    addr: u64,
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
    addr: u64,
    /// Where its bytes already are, when it is an inline field of an object already copied: its start,
    /// and the end of the enclosing copy, which it must not run past.
    copied: Option<(usize, usize)>,
    /// Known without reading (null pointer, unknown vtable), or the outcome of its read.
    status: Option<NodeStatus>,
    /// Where its bytes are once copied.
    start: Option<usize>,
}

impl Walker {
    /// From `at` on, walks stop after the level they are at, marked truncated: a request's work ends
    /// at its deadline whatever its plan asks for. `None`: no deadline.
    pub fn set_deadline(&mut self, at: Option<std::time::Instant>) {
        self.deadline = at;
    }

    /// The deadline set with [`Walker::set_deadline`]: other work of the same request keeps to it.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.deadline
    }

    /// From now on, all walks together return at most `nodes` more nodes; then they stop after the
    /// level they are at, marked truncated. `None`: only each walk's own bound.
    pub fn set_node_budget(&mut self, nodes: Option<usize>) {
        self.budget = nodes;
    }

    /// Walks the future at `addr`, of plan type `ty`.
    pub fn walk(&mut self, mem: &impl Memory, plan: &WalkPlan, ty: u32, addr: u64) -> Walk {
        // `walk_many` gives one walk per start.
        let mut walks = self.walk_many(mem, plan, &[(ty, addr)]).into_iter();
        walks.next().unwrap_or(Walk::Busy)
    }

    /// Walks each `(type, address)` root future; one [`Walk`] per start, in order. The memory of every
    /// one of these futures must hold still meanwhile.
    pub fn walk_many(
        &mut self,
        mem: &impl Memory,
        plan: &WalkPlan,
        starts: &[(u32, u64)],
    ) -> Vec<Walk> {
        let max_nodes = plan.max_nodes.min(MAX_WALK_NODES) as usize;
        let max_bytes = plan.max_bytes.min(MAX_WALK_BYTES) as usize;
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
            if let Err(e) = self.read_level(mem) {
                unsupported = Some(e.errno);
                break;
            }
            for (&failed, o) in self.failed.iter().zip(&self.owners) {
                if failed {
                    self.tasks[o.task].frontier[o.index].status = Some(NodeStatus::Fault);
                }
            }
            let before: usize = self.tasks.iter().map(|t| t.nodes.len()).sum();
            for t in &mut self.tasks {
                t.visit_level(plan, max_nodes);
            }
            let added = self.tasks.iter().map(|t| t.nodes.len()).sum::<usize>() - before;
            self.budget = self.budget.map(|left| left.saturating_sub(added));
            let late = self
                .deadline
                .is_some_and(|at| std::time::Instant::now() >= at);
            if late || self.budget == Some(0) {
                for t in self.tasks.iter_mut().filter(|t| !t.frontier.is_empty()) {
                    t.frontier.clear();
                    t.truncated = true;
                }
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
    fn read_level(&mut self, mem: &impl Memory) -> Result<(), crate::Unreadable> {
        let mut reads = Vec::with_capacity(self.owners.len());
        let mut owners = self.owners.iter().peekable();
        for (ti, t) in self.tasks.iter_mut().enumerate() {
            let mut rest = t.bytes.get_mut(t.level_start..).unwrap_or_default();
            while let Some(o) = owners.next_if(|o| o.task == ti) {
                // Always splits: the level's reads were allocated back to back from `level_start`.
                // Were it not so, the read would count as a fault, never a panic.
                match std::mem::take(&mut rest).split_at_mut_checked(o.len) {
                    Some((dst, tail)) => {
                        reads.push(Read::new(o.addr, dst));
                        rest = tail;
                    }
                    None => reads.push(Read::fault()),
                }
            }
        }
        let result = mem.read_many(&mut reads);
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
                addr: p.addr,
                discr: None,
                status: p.status.unwrap_or(NodeStatus::Read),
            };
            // A status known before reading (a null pointer, an unknown vtable, a fault) is the answer,
            // whatever the type.
            if p.status.is_some() {
                self.nodes.push(node);
                continue;
            }
            let Some(tp) = plan.types.get(p.ty as usize) else {
                node.ty = UNKNOWN_TYPE;
                node.status = NodeStatus::Leaf;
                self.nodes.push(node);
                continue;
            };
            if tp.size == 0 {
                node.status = NodeStatus::Leaf;
                self.nodes.push(node);
                continue;
            }
            // No bytes: over the byte budget (already marked truncated).
            let Some(start) = p.start else { continue };
            let obj = &self.bytes[start..start + tp.size as usize];
            node.discr = tp.discr.and_then(|d| uint(obj, d.offset, d.size));
            self.nodes.push(node);
            for edge in tp.always.iter().chain(case_edges(tp, node.discr)) {
                // No more queued than can ever be visited: a type with thousands of edges to
                // itself would otherwise queue millions.
                if self.next.len() >= max_nodes {
                    self.truncated = true;
                    break;
                }
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
    addr: u64,
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
    let word = |off: usize| uint(obj, off as u32, 8);
    let next = match edge.to {
        EdgeTarget::Inline(ty) => Pending {
            copied: Some((start + offset, start + obj.len())),
            ..at(ty, addr.wrapping_add(offset as u64), None)
        },
        EdgeTarget::Pointer(ty) => match word(offset) {
            Some(0) => at(ty, 0, Some(NodeStatus::Null)),
            Some(ptr) => at(ty, ptr, None),
            None => at(ty, 0, Some(NodeStatus::Fault)),
        },
        EdgeTarget::Dyn { vtable_offset } => match (word(offset), word(vtable_offset as usize)) {
            (Some(0), _) => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Null)),
            (Some(data), Some(vtable)) => {
                match plan.vtables.binary_search_by_key(&vtable, |v| v.0) {
                    Ok(i) => at(plan.vtables[i].1, data, None),
                    Err(_) => at(
                        UNKNOWN_TYPE,
                        data,
                        Some(NodeStatus::UnknownVtable { vtable }),
                    ),
                }
            }
            _ => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Fault)),
        },
        EdgeTarget::Slice {
            len_offset,
            elem,
            stride,
        } => match (word(offset), word(len_offset as usize)) {
            (Some(data), Some(len)) => {
                // Element addresses come from the target's own pointer and length: a wrong pair gives
                // faults, and no more than MAX_SLICE_ELEMS of them.
                for i in 0..len.min(MAX_SLICE_ELEMS) {
                    let at_i = data.wrapping_add(i.wrapping_mul(stride as u64));
                    out.push(at(elem, at_i, None));
                }
                return;
            }
            _ => at(UNKNOWN_TYPE, 0, Some(NodeStatus::Fault)),
        },
    };
    out.push(next);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ImageMemory;
    use crate::plan::Discr;

    /// A "state machine" of 16 bytes: its state at 0, and in state 3 a box at 8 to an inner future of
    /// one byte, its own state.
    fn plan() -> WalkPlan {
        WalkPlan {
            types: vec![
                TypePlan {
                    size: 16,
                    discr: Some(Discr { offset: 0, size: 1 }),
                    always: vec![],
                    cases: vec![Case {
                        value: Some(3),
                        edges: vec![Edge {
                            offset: 8,
                            to: EdgeTarget::Pointer(1),
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

    fn outer(state: u8, boxed: u64) -> Vec<u8> {
        let mut b = vec![state; 8];
        b.extend_from_slice(&boxed.to_ne_bytes());
        b
    }

    /// Memory holding `regions`, each `(address, bytes)`.
    fn memory(regions: impl IntoIterator<Item = (u64, Vec<u8>)>) -> ImageMemory {
        let mut m = ImageMemory::new();
        for (at, bytes) in regions {
            assert!(m.insert(at, bytes), "regions overlap at {at:#x}");
        }
        m
    }

    fn nodes(walk: Walk) -> Vec<WalkNode> {
        match walk {
            Walk::Nodes { nodes, .. } => nodes,
            other => panic!("not a walk: {other:?}"),
        }
    }

    #[test]
    fn follows_the_edge_of_the_current_state_through_a_box() {
        let m = memory([(0x1000, outer(3, 0x2000)), (0x2000, vec![7])]);
        let n = nodes(Walker::default().walk(&m, &plan(), 0, 0x1000));
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].discr, n[1].discr, n[1].parent), (Some(3), Some(7), 0));
        assert_eq!(n[1].addr, 0x2000);
    }

    #[test]
    fn another_state_has_no_edge() {
        let m = memory([(0x1000, outer(4, 0))]);
        let n = nodes(Walker::default().walk(&m, &plan(), 0, 0x1000));
        assert_eq!(n.len(), 1);
    }

    #[test]
    fn a_null_box_is_a_null_node() {
        let m = memory([(0x1000, outer(3, 0))]);
        let n = nodes(Walker::default().walk(&m, &plan(), 0, 0x1000));
        assert_eq!((n[1].status, n[1].addr), (NodeStatus::Null, 0));
    }

    #[test]
    fn a_wild_pointer_is_a_fault_not_a_crash() {
        let m = memory([(0x1000, outer(3, 0x10))]);
        let n = nodes(Walker::default().walk(&m, &plan(), 0, 0x1000));
        assert_eq!(n[1].status, NodeStatus::Fault);
        let n = nodes(Walker::default().walk(&m, &plan(), 0, 0x8));
        assert_eq!(n[0].status, NodeStatus::Fault, "even the root");
    }

    #[test]
    fn a_fault_in_the_middle_of_a_batch_spoils_only_its_own_walk() {
        let m = memory([
            (0x1000, outer(3, 0x3000)),
            (0x2000, outer(3, 0x18)),
            (0x3000, vec![9]),
        ]);
        let starts: Vec<(u32, u64)> = (0..1500)
            .map(|i| match i % 3 {
                0 => (0, 0x1000),
                1 => (0, 0x2000),
                _ => (0, 0x28),
            })
            .collect();
        let walks = Walker::default().walk_many(&m, &plan(), &starts);
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

    /// A boxed slice of three one-byte futures: `{ data at 0, len at 8 }`.
    fn slice_plan() -> WalkPlan {
        let mut p = plan();
        p.max_nodes = MAX_WALK_NODES;
        p.types[0] = TypePlan {
            size: 16,
            always: vec![Edge {
                offset: 0,
                to: EdgeTarget::Slice {
                    len_offset: 8,
                    elem: 1,
                    stride: 1,
                },
            }],
            ..TypePlan::default()
        };
        p
    }

    #[test]
    fn a_boxed_slice_gives_one_child_per_element_up_to_the_cap() {
        let slice = |len: u64| [0x2000u64.to_ne_bytes(), len.to_ne_bytes()].concat();
        let m = memory([(0x1000, slice(3)), (0x2000, vec![0, 1, 2])]);
        let n = nodes(Walker::default().walk(&m, &slice_plan(), 0, 0x1000));
        let states: Vec<_> = n[1..].iter().map(|n| (n.parent, n.discr)).collect();
        assert_eq!(states, [(0, Some(0)), (0, Some(1)), (0, Some(2))]);
        // A lying length is capped, and reads past the allocation fault, never crash.
        let m = memory([(0x1000, slice(u64::MAX)), (0x2000, vec![0, 1, 2])]);
        let n = nodes(Walker::default().walk(&m, &slice_plan(), 0, 0x1000));
        assert_eq!(n.len(), 1 + MAX_SLICE_ELEMS as usize);
        assert_eq!(n[4].status, NodeStatus::Fault);
    }

    #[test]
    fn a_dyn_future_is_typed_by_its_vtable_and_an_unknown_vtable_is_named() {
        let mut p = plan();
        p.types[0].cases[0].edges[0].to = EdgeTarget::Dyn { vtable_offset: 0 };
        p.vtables = vec![(0x0303_0303_0303_0303, 1)];
        // The "state" bytes double as the vtable pointer: 0x0303... is known, 0x0404... is not.
        let m = memory([(0x1000, outer(3, 0x2000)), (0x2000, vec![5])]);
        let n = nodes(Walker::default().walk(&m, &p, 0, 0x1000));
        assert_eq!((n[1].ty, n[1].discr), (1, Some(5)));
        p.types[0].cases[0].value = Some(4);
        let m = memory([(0x1000, outer(4, 0x2000))]);
        let n = nodes(Walker::default().walk(&m, &p, 0, 0x1000));
        let vtable = 0x0404_0404_0404_0404;
        assert_eq!(
            (n[1].ty, n[1].status),
            (UNKNOWN_TYPE, NodeStatus::UnknownVtable { vtable })
        );
    }

    #[test]
    fn a_cycle_stops_at_the_node_limit_and_bad_type_numbers_are_leaves() {
        let mut p = plan();
        // Breadth-first: the bad type number is visited at depth 1, long before the limit.
        p.types[0].cases[0].edges.push(Edge {
            offset: 0,
            to: EdgeTarget::Inline(99),
        });
        p.types[0].cases[0].edges.push(Edge {
            offset: 0,
            to: EdgeTarget::Inline(0),
        });
        let m = memory([(0x1000, outer(3, 0x10))]);
        match Walker::default().walk(&m, &p, 0, 0x1000) {
            Walk::Nodes { nodes, truncated } => {
                assert!(truncated);
                assert_eq!(nodes.len(), 64);
                assert!(nodes.iter().any(|n| n.ty == UNKNOWN_TYPE));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_plan_asking_for_more_than_the_bounds_gets_the_bounds() {
        let mut p = plan();
        p.max_nodes = u32::MAX;
        p.types[0].cases[0].edges = vec![
            Edge {
                offset: 0,
                to: EdgeTarget::Inline(0),
            };
            2
        ];
        let m = memory([(0x1000, outer(3, 0))]);
        match Walker::default().walk(&m, &p, 0, 0x1000) {
            Walk::Nodes { nodes, truncated } => {
                assert!(truncated);
                assert_eq!(nodes.len(), MAX_WALK_NODES as usize);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Memory that counts the reads asked of it.
    struct Counting(ImageMemory, std::cell::Cell<usize>);

    impl Memory for Counting {
        fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), crate::Unreadable> {
            self.1.set(self.1.get() + reads.len());
            self.0.read_many(reads)
        }
    }

    /// A type with 4,096 pointers to itself, walked to 64 nodes: before, the walk queued all 4,096
    /// children of the root (4,096 × 4,096 of the next level with a bigger limit) and read them;
    /// now no more are queued, nor read, than the walk may visit.
    #[test]
    fn a_type_with_thousands_of_edges_to_itself_queues_no_more_than_a_walk_visits() {
        let mut p = plan();
        (p.max_nodes, p.max_bytes) = (64, u32::MAX);
        p.types[0].cases[0].edges = vec![
            Edge {
                offset: 8,
                to: EdgeTarget::Pointer(0),
            };
            4096
        ];
        let m = Counting(memory([(0x1000, outer(3, 0x1000))]), Default::default());
        let walk = Walker::default().walk(&m, &p, 0, 0x1000);
        assert_eq!(nodes(walk).len(), 64);
        assert!(m.1.get() <= 2 * 64, "{} reads", m.1.get());
    }

    /// Past its deadline, or past the nodes all walks may return, a walk ends after the level it is
    /// at, cut.
    #[test]
    fn a_walk_past_its_deadline_or_budget_stops_after_the_level_it_is_at() {
        let m = memory([(0x1000, outer(3, 0x2000)), (0x2000, vec![1])]);
        let mut walker = Walker::default();
        walker.set_deadline(Some(std::time::Instant::now()));
        match walker.walk(&m, &plan(), 0, 0x1000) {
            Walk::Nodes { nodes, truncated } => assert_eq!((nodes.len(), truncated), (1, true)),
            other => panic!("{other:?}"),
        }
        walker.set_deadline(None);
        assert_eq!(nodes(walker.walk(&m, &plan(), 0, 0x1000)).len(), 2);
        // So does a walk once all walks together have returned the nodes they were given.
        walker.set_node_budget(Some(1));
        match walker.walk(&m, &plan(), 0, 0x1000) {
            Walk::Nodes { nodes, truncated } => assert_eq!((nodes.len(), truncated), (1, true)),
            other => panic!("{other:?}"),
        }
    }

    #[cfg(feature = "process")]
    #[test]
    fn this_process_is_walked_through_its_own_memory() {
        #[repr(C)]
        struct Outer {
            state: [u8; 8],
            boxed: *const u8,
        }
        let inner = Box::new(7u8);
        let outer = Outer {
            state: [3; 8],
            boxed: &*inner,
        };
        let mem = crate::ProcessMemory::own();
        let n = nodes(Walker::default().walk(&mem, &plan(), 0, &outer as *const Outer as u64));
        assert_eq!(
            (n[1].discr, n[1].addr),
            (Some(7), &*inner as *const u8 as u64)
        );
    }
}
