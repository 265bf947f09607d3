//! Checking a plan before anything follows it: every type number names a type, every field lies
//! within its type, every list the walker searches is sorted, and every count is within
//! [`crate::bounds`]. The walker never trusts a plan anyway (a wrong one gives faults, never a
//! panic), but a plan that is not even self-consistent can only come from damage or malice, and
//! its work is refused before it starts instead of cut short after it.

use super::{EdgeTarget, RuntimePlan, TypePlan, WalkPlan};
use crate::bounds::{
    MAX_LAYOUT_BYTES, MAX_LAYOUT_OFFSET, MAX_PLAN_ENTRIES, MAX_PLAN_TYPES, MAX_RUNTIME_LAYOUTS,
    MAX_TYPE_CASES, MAX_TYPE_EDGES, MAX_WALK_BYTES,
};

/// Why a plan was refused, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

/// `Err(what())` unless `ok`.
fn require(ok: bool, what: impl FnOnce() -> String) -> Result<(), PlanError> {
    if ok { Ok(()) } else { Err(PlanError(what())) }
}

impl WalkPlan {
    /// Whether this plan may be followed: see the module's documentation.
    pub fn validate(&self) -> Result<(), PlanError> {
        let n = self.types.len();
        require(n <= MAX_PLAN_TYPES, || {
            format!("{n} types, over {MAX_PLAN_TYPES}")
        })?;
        for (what, list) in [("roots", &self.roots), ("vtables", &self.vtables)] {
            require(list.len() <= MAX_PLAN_ENTRIES, || {
                format!("{} {what}, over {MAX_PLAN_ENTRIES}", list.len())
            })?;
            if let Some(&(at, ty)) = list.iter().find(|(_, ty)| *ty as usize >= n) {
                return Err(PlanError(format!(
                    "{what} entry {at:#x} names type {ty} of {n}"
                )));
            }
        }
        require(self.vtables.is_sorted_by_key(|v| v.0), || {
            "vtables are not sorted by address".into()
        })?;
        for (i, tp) in self.types.iter().enumerate() {
            validate_type(tp, &self.types).map_err(|e| PlanError(format!("type {i}: {e}")))?;
        }
        match &self.runtime {
            Some(rp) => rp
                .validate(n)
                .map_err(|e| PlanError(format!("runtime plan: {e}"))),
            None => Ok(()),
        }
    }
}

fn validate_type(tp: &TypePlan, types: &[TypePlan]) -> Result<(), PlanError> {
    let size = tp.size;
    require(size <= MAX_WALK_BYTES, || {
        format!("{size} bytes, over {MAX_WALK_BYTES}")
    })?;
    let within = |offset: u32, len: u32| offset.checked_add(len).is_some_and(|end| end <= size);
    if let Some(d) = tp.discr {
        require(matches!(d.size, 1 | 2 | 4 | 8), || {
            format!("a discriminant of {} bytes", d.size)
        })?;
        require(within(d.offset, u32::from(d.size)), || {
            format!(
                "its discriminant at {} runs past its {size} bytes",
                d.offset
            )
        })?;
    }
    let cases = tp.cases.len();
    require(cases <= MAX_TYPE_CASES, || {
        format!("{cases} cases, over {MAX_TYPE_CASES}")
    })?;
    let edges = tp.always.len() + tp.cases.iter().map(|c| c.edges.len()).sum::<usize>();
    require(edges <= MAX_TYPE_EDGES, || {
        format!("{edges} edges, over {MAX_TYPE_EDGES}")
    })?;
    let type_size = |ty: u32| types.get(ty as usize).map(|t| t.size);
    let all = tp
        .always
        .iter()
        .chain(tp.cases.iter().flat_map(|c| &c.edges));
    for e in all {
        let fits = match e.to {
            EdgeTarget::Inline(ty) => type_size(ty).map(|len| within(e.offset, len)),
            EdgeTarget::Pointer(ty) => type_size(ty).map(|_| within(e.offset, 8)),
            EdgeTarget::Dyn { vtable_offset } => {
                Some(within(e.offset, 8) && within(vtable_offset, 8))
            }
            EdgeTarget::Slice {
                len_offset,
                elem,
                stride,
            } => type_size(elem)
                .map(|_| within(e.offset, 8) && within(len_offset, 8) && stride <= MAX_WALK_BYTES),
        };
        match fits {
            None => {
                return Err(PlanError(format!(
                    "an edge names a type of {}",
                    types.len()
                )));
            }
            Some(false) => {
                return Err(PlanError(format!(
                    "its edge at {} runs past its {size} bytes",
                    e.offset
                )));
            }
            Some(true) => {}
        }
    }
    Ok(())
}

impl RuntimePlan {
    /// Whether this runtime plan may be followed with a walk plan of `types` types.
    pub fn validate(&self, types: usize) -> Result<(), PlanError> {
        for (what, len) in [
            ("flavors", self.flavors.len()),
            ("task layouts", self.tasks.len()),
            ("waker layouts", self.set_wakers.len()),
        ] {
            require(len <= MAX_RUNTIME_LAYOUTS, || {
                format!("{len} {what}, over {MAX_RUNTIME_LAYOUTS}")
            })?;
        }
        require(self.tasks.is_sorted_by_key(|t| t.poll_fn), || {
            "task layouts are not sorted by poll fn".into()
        })?;
        if let Some(t) = self.tasks.iter().find(|t| t.stage_ty as usize >= types) {
            return Err(PlanError(format!(
                "a task layout names type {} of {types}",
                t.stage_ty
            )));
        }
        for (what, size) in [("header", self.header.size), ("trailer", self.trailer.size)] {
            require((1..=MAX_LAYOUT_BYTES).contains(&size), || {
                format!("a task {what} of {size} bytes, not 1 to {MAX_LAYOUT_BYTES}")
            })?;
        }
        let far = self.offsets().find(|&o| o > MAX_LAYOUT_OFFSET);
        require(far.is_none(), || {
            format!(
                "an offset of {} bytes, over {MAX_LAYOUT_OFFSET}",
                far.unwrap_or_default()
            )
        })?;
        match &self.census {
            Some(c) => validate_census(c),
            None => Ok(()),
        }
    }

    /// Every offset into one of tokio's structures the plan names.
    fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        let owned = |o: &super::OwnedLayout| {
            let shards = match o.shards {
                super::Shards::Boxed {
                    ptr,
                    len,
                    stride,
                    head,
                } => vec![ptr, len, stride, head],
                super::Shards::Inline { head } => vec![head],
            };
            [o.id].into_iter().chain(o.count).chain(shards)
        };
        let h = &self.header;
        let (v, t) = (&self.vtable, &self.trailer);
        let fixed = [
            h.state,
            h.vtable,
            h.owner_id,
            v.size,
            v.poll,
            v.trailer_offset,
        ];
        let fixed = fixed
            .into_iter()
            .chain([v.id_offset, t.next, t.waker_data, t.waker_vtable]);
        let discr = self.handle_discr.map(|d| d.offset);
        let flavors = self
            .flavors
            .iter()
            .flat_map(|f| [f.arc_offset, f.owned_offset]);
        let wakers =
            (self.set_wakers.iter()).flat_map(|w| [w.parent, w.waker_data, w.waker_vtable]);
        let set = self.local_set.iter().flat_map(move |l| {
            [l.context, l.shared, l.owned_offset]
                .into_iter()
                .chain(owned(&l.owned))
        });
        let stages = self.tasks.iter().flat_map(|t| {
            [t.stage_offset]
                .into_iter()
                .chain(t.scheduler.map(|s| s.offset))
        });
        (fixed
            .chain(discr)
            .chain(flavors)
            .chain(wakers)
            .chain(stages))
        .chain(owned(&self.owned))
        .chain(set)
    }
}

fn validate_census(c: &super::CensusLayout) -> Result<(), PlanError> {
    require(
        c.align.is_power_of_two() && (8..=MAX_LAYOUT_BYTES).contains(&c.align),
        || {
            format!(
                "a census alignment of {}, not a power of two from 8 to {MAX_LAYOUT_BYTES}",
                c.align
            )
        },
    )?;
    require(c.ref_one > 0, || "a census reference unit of 0".into())?;
    let n = c.vtables.len();
    require(n <= MAX_PLAN_ENTRIES, || {
        format!("{n} census vtables, over {MAX_PLAN_ENTRIES}")
    })?;
    require(c.vtables.is_sorted_by_key(|v| v.addr), || {
        "census vtables are not sorted by address".into()
    })?;
    let n = c.blocking.len();
    require(n <= MAX_PLAN_ENTRIES, || {
        format!("{n} blocking vtables, over {MAX_PLAN_ENTRIES}")
    })?;
    require(c.blocking.is_sorted_by_key(|v| v.addr), || {
        "blocking vtables are not sorted by address".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Case, Discr, Edge, FlavorLayout, HeaderLayout, OwnedLayout, RuntimeFlavor};
    use crate::plan::{
        CensusLayout, SchedulerField, Shards, TaskLayout, TaskVtable, TrailerLayout,
    };

    /// Two types: a 16-byte state machine whose state 3 boxes the second, a 1-byte leaf.
    fn good() -> WalkPlan {
        let edge = Edge {
            offset: 8,
            to: EdgeTarget::Pointer(1),
        };
        let machine = TypePlan {
            size: 16,
            discr: Some(Discr { offset: 0, size: 1 }),
            always: vec![],
            cases: vec![Case {
                value: Some(3),
                edges: vec![edge],
            }],
        };
        let leaf = TypePlan {
            size: 1,
            ..TypePlan::default()
        };
        WalkPlan {
            types: vec![machine, leaf],
            roots: vec![(0x10, 0)],
            vtables: vec![(0x20, 1), (0x30, 0)],
            ..WalkPlan::default()
        }
    }

    fn runtime() -> RuntimePlan {
        RuntimePlan {
            handle_discr: None,
            flavors: vec![FlavorLayout {
                value: None,
                flavor: RuntimeFlavor::CurrentThread,
                arc_offset: 8,
                owned_offset: 64,
            }],
            owned: OwnedLayout {
                id: 0,
                count: Some(8),
                shards: Shards::Inline { head: 16 },
            },
            header: HeaderLayout {
                size: 64,
                ..HeaderLayout::default()
            },
            vtable: Default::default(),
            trailer: TrailerLayout {
                size: 32,
                ..TrailerLayout::default()
            },
            state_bits: Default::default(),
            tasks: vec![TaskLayout {
                poll_fn: 0x100,
                stage_offset: 40,
                stage_ty: 0,
                scheduler: Some(SchedulerField {
                    offset: 64,
                    flavor: RuntimeFlavor::CurrentThread,
                }),
            }],
            set_wakers: vec![],
            local_set: None,
            census: Some(CensusLayout {
                align: 128,
                ref_one: 64,
                vtables: vec![TaskVtable {
                    addr: 0x300,
                    poll_fn: 0x100,
                }],
                blocking: vec![],
            }),
            max_tasks: 10,
        }
    }

    /// Each rule: how a good plan is spoilt, and what the refusal says.
    #[allow(clippy::type_complexity)]
    const RULES: &[(&str, fn(&mut WalkPlan))] = &[
        ("roots entry 0x10 names type 9 of 2", |p| p.roots[0].1 = 9),
        ("vtables entry 0x20 names type 2 of 2", |p| {
            p.vtables[0].1 = 2
        }),
        ("vtables are not sorted", |p| p.vtables.reverse()),
        ("type 0: a discriminant of 3 bytes", |p| {
            p.types[0].discr = Some(Discr { offset: 0, size: 3 });
        }),
        (
            "type 0: its discriminant at 12 runs past its 16 bytes",
            |p| {
                p.types[0].discr = Some(Discr {
                    offset: 12,
                    size: 8,
                });
            },
        ),
        ("type 0: its edge at 12 runs past its 16 bytes", |p| {
            p.types[0].cases[0].edges[0].offset = 12;
        }),
        ("type 0: its edge at 4294967295 runs past", |p| {
            p.types[0].cases[0].edges[0].offset = u32::MAX;
        }),
        ("type 0: an edge names a type of 2", |p| {
            p.types[0].cases[0].edges[0].to = EdgeTarget::Inline(7);
        }),
        ("type 0: its edge at 8 runs past its 16 bytes", |p| {
            // The inline future is the whole 16-byte type again, from byte 8.
            p.types[0].cases[0].edges[0].to = EdgeTarget::Inline(0);
        }),
        ("type 0: 4097 edges, over 4096", |p| {
            let e = p.types[0].cases[0].edges[0];
            p.types[0].always = vec![e; 4096];
        }),
        ("type 0: 4097 cases, over 4096", |p| {
            let c = p.types[0].cases[0].clone();
            p.types[0].cases = vec![c; 4097];
            p.types[0].cases.iter_mut().for_each(|c| c.edges.clear());
        }),
        ("type 1: 1048577 bytes, over 1048576", |p| {
            p.types[1].size = (1 << 20) + 1
        }),
        ("65537 types, over 65536", |p| {
            p.types.resize(65537, TypePlan::default());
        }),
        ("runtime plan: a task layout names type 5 of 2", |p| {
            let mut rp = runtime();
            rp.tasks[0].stage_ty = 5;
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: task layouts are not sorted", |p| {
            let mut rp = runtime();
            let t = rp.tasks[0];
            rp.tasks.insert(
                0,
                TaskLayout {
                    poll_fn: 0x200,
                    ..t
                },
            );
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: a task trailer of 0 bytes", |p| {
            let mut rp = runtime();
            rp.trailer.size = 0;
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: an offset of 4294967295 bytes", |p| {
            let mut rp = runtime();
            rp.flavors[0].arc_offset = u32::MAX;
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: an offset of 70000 bytes", |p| {
            let mut rp = runtime();
            rp.tasks[0].scheduler.as_mut().unwrap().offset = 70_000;
            p.runtime = Some(Box::new(rp));
        }),
        (
            "runtime plan: a census alignment of 96, not a power of two",
            |p| {
                let mut rp = runtime();
                rp.census.as_mut().unwrap().align = 96;
                p.runtime = Some(Box::new(rp));
            },
        ),
        ("runtime plan: a census alignment of 4, not a power", |p| {
            let mut rp = runtime();
            rp.census.as_mut().unwrap().align = 4;
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: a census reference unit of 0", |p| {
            let mut rp = runtime();
            rp.census.as_mut().unwrap().ref_one = 0;
            p.runtime = Some(Box::new(rp));
        }),
        ("runtime plan: census vtables are not sorted", |p| {
            let mut rp = runtime();
            let c = rp.census.as_mut().unwrap();
            c.vtables.insert(
                0,
                TaskVtable {
                    addr: 0x400,
                    poll_fn: 0x100,
                },
            );
            p.runtime = Some(Box::new(rp));
        }),
    ];

    #[test]
    fn a_plan_that_holds_together_passes() {
        let mut p = good();
        assert_eq!(p.validate(), Ok(()));
        p.runtime = Some(Box::new(runtime()));
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn each_way_a_plan_can_fail_to_hold_together_is_refused_and_named() {
        for (says, spoil) in RULES {
            let mut p = good();
            spoil(&mut p);
            let err = p.validate().expect_err(says).to_string();
            assert!(err.contains(says), "expected {says:?}, got {err:?}");
        }
    }
}
