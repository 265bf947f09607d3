//! The runtime plan: how the agent finds every task of a tokio runtime, read from tokio's own types in
//! the binary's DWARF.
//!
//! From `tokio::runtime::Handle` (the agent keeps one per registered runtime) the path runs through the
//! scheduler enum (current-thread or multi-thread) and its `Arc` to the runtime's `OwnedTasks`, a sharded
//! list of task headers. Each header names its vtable, whose `poll` field is the address of
//! `tokio::runtime::task::raw::poll::<T, S>`: its DWARF subprogram names `T`, the task's future type, and
//! the matching `Cell<T, S>` says where the future's stage is. Every such task type is planned, so the
//! agent's walk of a task it only has a header pointer for decodes its chain like any other.
//!
//! Everything here is found by member name, never by a fixed offset: a tokio whose layout differs
//! either still matches or gives a one-line reason why its tasks are not listed.

use asyncdump_protocol::{
    CensusLayout, Discr, FlavorLayout, HeaderLayout, LocalSetLayout, OwnedLayout, RuntimeFlavor,
    RuntimePlan, SchedulerField, SetWakerLayout, Shards, StateBits, TaskLayout, TaskVtable,
    TrailerLayout, VtableLayout,
};

use std::sync::Arc;

use super::Builder;
use crate::model::FastMap;

/// The schedulers whose tasks a census can follow to their task list, by the type an `Arc` of them
/// names.
const SCHEDULERS: &[(&str, RuntimeFlavor)] = &[
    (
        "tokio::runtime::scheduler::multi_thread::handle::Handle",
        RuntimeFlavor::MultiThread,
    ),
    (
        "tokio::runtime::scheduler::current_thread::Handle",
        RuntimeFlavor::CurrentThread,
    ),
    ("tokio::task::local::Shared", RuntimeFlavor::LocalSet),
];

/// tokio's task reference count unit in the state word (`REF_ONE`, above its six flag bits; the
/// same since tokio 1.0).
const REF_ONE: u64 = 1 << 6;

/// The future type of each task type, by the address of its `raw::poll`.
pub type TaskTypes = FastMap<u64, Arc<str>>;

/// Most tasks the agent lists per runtime.
pub const MAX_TASKS: u32 = 200_000;

/// tokio's task state bits (`runtime/task/state.rs`, the same since tokio 1.0; checked on 1.54).
const STATE_BITS: StateBits = StateBits {
    running: 0b0001,
    complete: 0b0010,
    notified: 0b0100,
    join_waker: 0b1_0000,
};

impl Builder<'_> {
    /// The runtime plan, with each task type's name by poll function, or why tokio's task lists cannot
    /// be read from this binary's DWARF.
    pub(super) fn runtime_plan(&mut self) -> Result<(RuntimePlan, TaskTypes), String> {
        let d = self.debug;
        let need = |name: &str| {
            d.find_type(name)
                .ok_or_else(|| format!("the DWARF has no type {name}"))
        };
        let handle = need("tokio::runtime::handle::Handle")?;
        let header = need("tokio::runtime::task::core::Header")?;
        let vtable = need("tokio::runtime::task::raw::Vtable")?;
        let trailer = need("tokio::runtime::task::core::Trailer")?;
        let (handle_discr, flavors, owned_ty) = self.flavors(handle)?;
        let layout = |what: &str| format!("tokio's {what} has an unknown layout");
        let mut names = TaskTypes::default();
        let (tasks, align) = self.task_layouts(&mut names);
        let vtable = self
            .vtable_layout(vtable)
            .ok_or_else(|| layout("task Vtable"))?;
        let census = self.census_layout(&tasks, &names, &vtable, align);
        let plan = RuntimePlan {
            handle_discr,
            flavors,
            owned: self
                .owned_layout(owned_ty)
                .ok_or_else(|| layout("OwnedTasks"))?,
            header: self
                .header_layout(header)
                .ok_or_else(|| layout("task Header"))?,
            vtable,
            trailer: self
                .trailer_layout(trailer)
                .ok_or_else(|| layout("task Trailer"))?,
            state_bits: STATE_BITS,
            tasks,
            set_wakers: self.set_waker_layouts(),
            local_set: d
                .find_type("tokio::task::local::LocalSet")
                .and_then(|set| self.local_set_layout(set)),
            census,
            max_tasks: MAX_TASKS,
        };
        Ok((plan, names))
    }

    /// The scheduler enum's discriminant, a layout per flavor, and the `OwnedTasks` type.
    fn flavors(&mut self, handle: u64) -> Result<(Option<Discr>, Vec<FlavorLayout>, u64), String> {
        let bad = || "tokio's runtime Handle has an unknown layout".to_owned();
        let (inner_off, sched) = self.member(handle, &["inner"]).ok_or_else(bad)?;
        let sched = self.strip(sched);
        // tokio built without `rt-multi-thread` (as actix-rt builds it) has a one-variant enum here,
        // which keeps no discriminant.
        let (discr, variants) = match self.variants(sched) {
            Some((discr, variants)) => (Some(discr), variants),
            None => (None, vec![self.sole_variant(sched).ok_or_else(bad)?]),
        };
        let mut flavors = Vec::new();
        let mut owned_ty = None;
        for (value, name, vdie, voff) in variants {
            let flavor = match name.as_str() {
                "CurrentThread" => RuntimeFlavor::CurrentThread,
                "MultiThread" => RuntimeFlavor::MultiThread,
                _ => continue,
            };
            let Some((arc_off, arc_inner)) = self.pointer_to(vdie, "__0") else {
                continue;
            };
            let Some((owned_off, ty)) = self.member_path(arc_inner, &["data", "shared", "owned"])
            else {
                continue;
            };
            owned_ty.get_or_insert(ty);
            flavors.push(FlavorLayout {
                value,
                flavor,
                arc_offset: (inner_off + voff + arc_off) as u32,
                owned_offset: owned_off as u32,
            });
        }
        let owned_ty = owned_ty.ok_or_else(bad)?;
        let discr = discr.map(|d| Discr {
            offset: inner_off as u32 + d.offset,
            size: d.size,
        });
        Ok((discr, flavors, owned_ty))
    }

    /// `OwnedTasks { list: ShardedList { lists: Box<[Mutex<LinkedList>]>, count, .. }, id, .. }` (tokio
    /// 1.35 on), or `OwnedTasks { inner: Mutex<{ list: CountedLinkedList { list, count }, .. }>, id }`.
    fn owned_layout(&self, owned: u64) -> Option<OwnedLayout> {
        let (id, _) = self.member(owned, &["id"])?;
        if let Some((list, list_ty)) = self.member(owned, &["list"]) {
            let list_ty = self.strip(list_ty);
            let (count, _) = self.member(list_ty, &["count"])?;
            let (lists, boxed) = self.member(list_ty, &["lists"])?;
            let boxed = self.strip(boxed);
            let (ptr, ptr_ty) = self.member(boxed, &["data_ptr"])?;
            let (len, _) = self.member(boxed, &["length"])?;
            let shard = self.strip(self.debug.node(self.strip(ptr_ty))?.type_ref?);
            return Some(OwnedLayout {
                id: id as u32,
                count: Some((list + count) as u32),
                shards: Shards::Boxed {
                    ptr: (list + lists + ptr) as u32,
                    len: (list + lists + len) as u32,
                    stride: self.debug.node(shard)?.byte_size? as u32,
                    head: self.find_member(shard, "head", 6)? as u32,
                },
            });
        }
        // Mutex { data: UnsafeCell { value: Inner { list: CountedLinkedList { list: LinkedList, count } } } }
        let (inner, inner_ty) = self.member(owned, &["inner"])?;
        let (counted, counted_ty) = self.find_member_typed(inner_ty, "list", 4)?;
        let counted_ty = self.strip(counted_ty);
        let (count, _) = self.member(counted_ty, &["count"])?;
        let (list, list_ty) = self.member(counted_ty, &["list"])?;
        let (head, _) = self.member(self.strip(list_ty), &["head"])?;
        Some(OwnedLayout {
            id: id as u32,
            count: Some((inner + counted + count) as u32),
            shards: Shards::Inline {
                head: (inner + counted + list + head) as u32,
            },
        })
    }

    /// `LocalSet { context: Rc<Context { shared: Arc<Shared { local_state: LocalState { owned, .. }, .. }>,
    /// .. }>, .. }`, where `owned` is a `LocalOwnedTasks { inner: { list: LinkedList, .. }, id }`.
    fn local_set_layout(&mut self, set: u64) -> Option<LocalSetLayout> {
        let (context, rc_inner) = self.pointer_to(set, "context")?;
        let (value, ctx) = self.member(rc_inner, &["value"])?;
        let (shared, arc_inner) = self.pointer_to(self.strip(ctx), "shared")?;
        let (owned_offset, owned) = self.find_member_typed(arc_inner, "owned", 4)?;
        let owned = self.strip(owned);
        let (id, _) = self.member(owned, &["id"])?;
        let (list, list_ty) = self.find_member_typed(owned, "list", 4)?;
        let (head, _) = self.member(self.strip(list_ty), &["head"])?;
        Some(LocalSetLayout {
            context: context as u32,
            shared: (value + shared) as u32,
            owned_offset: owned_offset as u32,
            owned: OwnedLayout {
                id: id as u32,
                count: None,
                shards: Shards::Inline {
                    head: (list + head) as u32,
                },
            },
        })
    }

    fn header_layout(&self, header: u64) -> Option<HeaderLayout> {
        Some(HeaderLayout {
            size: self.debug.node(header)?.byte_size? as u32,
            state: self.member(header, &["state"])?.0 as u32,
            vtable: self.member(header, &["vtable"])?.0 as u32,
            owner_id: self.member(header, &["owner_id"])?.0 as u32,
        })
    }

    fn vtable_layout(&self, vtable: u64) -> Option<VtableLayout> {
        Some(VtableLayout {
            size: self.debug.node(vtable)?.byte_size? as u32,
            poll: self.member(vtable, &["poll"])?.0 as u32,
            trailer_offset: self.member(vtable, &["trailer_offset"])?.0 as u32,
            id_offset: self.member(vtable, &["id_offset"])?.0 as u32,
        })
    }

    /// `Trailer { owned: Pointers { inner: { prev, next } }, waker: Option<Waker>, .. }`.
    fn trailer_layout(&self, trailer: u64) -> Option<TrailerLayout> {
        let (owned, owned_ty) = self.member(trailer, &["owned"])?;
        let (waker, waker_ty) = self.member(trailer, &["waker"])?;
        Some(TrailerLayout {
            size: self.debug.node(trailer)?.byte_size? as u32,
            next: (owned + self.find_member(owned_ty, "next", 4)?) as u32,
            waker_data: (waker + self.find_member(waker_ty, "data", 6)?) as u32,
            waker_vtable: (waker + self.find_member(waker_ty, "vtable", 6)?) as u32,
        })
    }

    /// Per `JoinSet` type: how a member's join waker (the set entry's) leads to the waker of the task
    /// polling the set, `ListEntry { parent: Arc<Mutex<ListsInner { .., waker: Option<Waker> }>>, .. }`.
    fn set_waker_layouts(&mut self) -> Vec<SetWakerLayout> {
        let mut out: Vec<SetWakerLayout> = self
            .debug
            .wake_clones()
            .into_iter()
            .filter_map(|(clone_fn, entry)| {
                let name = self.debug.qualified_name(entry);
                if !name.starts_with("tokio::util::idle_notified_set::ListEntry<") {
                    return None;
                }
                let (parent, lists) = self.pointer_to(self.strip(entry), "parent")?;
                let (waker, waker_ty) = self.find_member_typed(lists, "waker", 8)?;
                Some(SetWakerLayout {
                    clone_fn,
                    parent: parent as u32,
                    waker_data: (waker + self.find_member(waker_ty, "data", 6)?) as u32,
                    waker_vtable: (waker + self.find_member(waker_ty, "vtable", 6)?) as u32,
                })
            })
            .collect();
        out.sort_unstable_by_key(|s| s.clone_fn);
        out.dedup_by_key(|s| s.clone_fn);
        out
    }

    /// Where a census finds tasks: each task type's vtables, found among the binary's code pointers
    /// as the words that hold its poll function at the vtable's `poll` field. `None` when no task
    /// type has a scheduler a census can follow, or the task allocations' alignment is unknown.
    fn census_layout(
        &self,
        tasks: &[TaskLayout],
        names: &TaskTypes,
        vtable: &VtableLayout,
        align: Option<u32>,
    ) -> Option<CensusLayout> {
        let words = &self.debug.code_words;
        let vtables_of = |t: &TaskLayout| {
            let first = words.partition_point(|&(target, _)| target < t.poll_fn);
            let at = words[first..]
                .iter()
                .take_while(|&&(target, _)| target == t.poll_fn);
            at.map(|&(_, at)| TaskVtable {
                addr: at.wrapping_sub(vtable.poll as u64),
                poll_fn: t.poll_fn,
            })
            .collect::<Vec<_>>()
        };
        // The runtime's own workers run as blocking tasks too (`launch`): they are its threads, not
        // work anyone waits on, and are left out.
        let is_blocking = |t: &&TaskLayout| {
            names.get(&t.poll_fn).is_some_and(|n| {
                n.strip_prefix("tokio::runtime::blocking::task::BlockingTask<")
                    .is_some_and(|f| !f.starts_with("tokio::runtime::scheduler::"))
            })
        };
        let sorted = |mut v: Vec<TaskVtable>| {
            v.sort_unstable_by_key(|v| v.addr);
            v.dedup_by_key(|v| v.addr);
            v
        };
        let listed = tasks.iter().filter(|t| t.scheduler.is_some());
        let vtables = sorted(listed.flat_map(vtables_of).collect());
        let blocking = sorted(
            tasks
                .iter()
                .filter(is_blocking)
                .flat_map(vtables_of)
                .collect(),
        );
        (!vtables.is_empty() || !blocking.is_empty()).then_some(CensusLayout {
            align: align?,
            ref_one: REF_ONE,
            vtables,
            blocking,
        })
    }

    /// Every task type tokio can run in this binary: where its stage and scheduler are, planned for
    /// walking; with the smallest alignment of their allocations, when the DWARF gives them all.
    fn task_layouts(&mut self, names: &mut TaskTypes) -> (Vec<TaskLayout>, Option<u32>) {
        let debug = self.debug;
        let cells = debug.generic_types(&["tokio", "runtime", "task", "core"], "Cell");
        let mut out = Vec::new();
        let mut align: Option<Option<u32>> = None;
        for poll in debug.task_polls() {
            // `spawn_blocking` closures too: they run on the blocking pool, outside the owned lists,
            // where only a census finds them.
            let name = debug.qualified_name(poll.future);
            let Some(&cell) = cells.get(poll.args.as_str()) else {
                continue;
            };
            let Some((off, stage)) = self.stage_of(cell) else {
                continue;
            };
            let stage_ty = self.ty(stage);
            let poll_fn = poll.low_pc;
            names.insert(poll_fn, Arc::from(name));
            let cell_align = debug.node(cell).map_or(0, |n| n.alignment);
            let known = (cell_align >= 8).then_some(cell_align);
            align = Some(match align {
                None => known,
                Some(a) => a.zip(known).map(|(a, b)| a.min(b)),
            });
            out.push(TaskLayout {
                poll_fn,
                stage_offset: off as u32,
                stage_ty,
                scheduler: self.scheduler_of(cell),
            });
        }
        out.sort_unstable_by_key(|t| t.poll_fn);
        out.dedup_by_key(|t| t.poll_fn);
        (out, align.flatten())
    }

    /// `Cell<T, S>`'s `core.scheduler`, when `S` is an `Arc` of a scheduler that owns a task list.
    fn scheduler_of(&self, cell: u64) -> Option<SchedulerField> {
        let (offset, ty) = self.member_path(cell, &["core", "scheduler"])?;
        let name = self.debug.qualified_name(ty);
        let pointee = name.strip_prefix("alloc::sync::Arc<")?;
        let flavor = SCHEDULERS
            .iter()
            .find(|(prefix, _)| pointee.starts_with(prefix))?
            .1;
        Some(SchedulerField {
            offset: offset as u32,
            flavor,
        })
    }

    /// The offset in `Cell<T, S>` of the `Stage<T>` enum (`Running(T)`, `Finished`, `Consumed`), through
    /// `core.stage` and the cell wrappers around it.
    fn stage_of(&self, cell: u64) -> Option<(u64, u64)> {
        let (mut off, mut ty) = self.member_path(cell, &["core", "stage"])?;
        for _ in 0..4 {
            let name = self.debug.qualified_name(ty);
            if name.starts_with("tokio::runtime::task::core::Stage<") {
                return Some((off, ty));
            }
            let (o, t) = self.member(ty, &["stage", "value", "__0"])?;
            off += o;
            ty = self.strip(t);
        }
        None
    }

    /// Follows a path of member names from `die`: the total offset and the last member's type.
    fn member_path(&self, die: u64, names: &[&str]) -> Option<(u64, u64)> {
        let (mut off, mut ty) = (0, self.strip(die));
        for name in names {
            let (o, t) = self.member(ty, &[name])?;
            off += o;
            ty = self.strip(t);
        }
        Some((off, ty))
    }
}
