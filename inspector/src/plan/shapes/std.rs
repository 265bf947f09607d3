//! Shapes the compiler and the standard library give: async fn and block state machines, pointers,
//! `Pin`, `dyn Future` trait objects, boxed slices, and tuples.

use std::sync::Arc;

use asyncdump_protocol::{Case, Discr, Edge, EdgeTarget, TypePlan};
use gimli::constants;

use super::{Rule, Ty, Verdict, inline, plan, pointer};
use crate::dwarf::StateMachine;
use crate::model::{FastMap, FrameInfo, Source};
use crate::names::display_name;
use crate::plan::builder::{Builder, loc};
use crate::plan::{Kind, StateView};

/// An async fn's or block's state machine: per suspend state, its `__awaitee` (and the oneshot
/// senders it holds across the await, read to say who can wake whom).
pub(super) const STATE_MACHINE: Rule = Rule {
    name: "async state machine",
    matches: |t| t.machine.is_some(),
    plan: |b, t| match &t.machine {
        Some(m) => {
            let (plan, kind) = b.coroutine(m);
            Verdict::Plan(plan, kind)
        }
        None => Verdict::Decline,
    },
};

/// `Box<T>`, `&mut T`: a thin pointer to the future.
pub(super) const POINTER: Rule = Rule {
    name: "pointer",
    matches: |t| {
        matches!(
            t.tag,
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type
        )
    },
    plan: |b, t| {
        let Some(pointee) = t.pointee else {
            return Verdict::Leaf;
        };
        let edge = pointer(0, b.ty(pointee));
        let size = if t.size == 0 { 8 } else { t.size };
        Verdict::Plan(plan(size, vec![edge]), Kind::Transparent)
    },
};

/// Base types, enums of plain values, unions: nothing to follow.
pub(super) const NOT_A_STRUCTURE: Rule = Rule {
    name: "not a structure",
    matches: |t| t.tag != constants::DW_TAG_structure_type,
    plan: |_, _| Verdict::Leaf,
};

/// `Pin<P>`: the pointer it wraps.
pub(super) const PIN: Rule = Rule {
    name: "Pin",
    matches: |t| t.name.starts_with("core::pin::Pin<"),
    plan: |b, t| match member(t, &["pointer", "__pointer"]) {
        Some((off, ty)) => {
            let to = b.ty(ty);
            Verdict::Plan(plan(t.size, vec![inline(off, to)]), Kind::Transparent)
        }
        None => Verdict::Leaf,
    },
};

/// `Box<dyn Future>` / `*const dyn Future`: a data pointer whose vtable names the concrete type.
pub(super) const DYN_FUTURE: Rule = Rule {
    name: "dyn Future",
    matches: |t| t.members.len() == 2 && points_at_dyn_future(&t.name),
    plan: |_, t| match (member(t, &["pointer"]), member(t, &["vtable"])) {
        (Some((data, _)), Some((vtable, _))) => {
            let edge = Edge {
                offset: data as u32,
                to: EdgeTarget::Dyn {
                    vtable_offset: vtable as u32,
                },
            };
            Verdict::Plan(plan(t.size, vec![edge]), Kind::Transparent)
        }
        _ => Verdict::Decline,
    },
};

/// Whether a fat pointer's type (`Box<(dyn Future<…> + Send)>`, `&mut dyn Future<…>`) points at a
/// `dyn Future` itself, not at another trait object whose name mentions one (a boxed tower
/// `Service` whose `Future` is a boxed future).
fn points_at_dyn_future(name: &str) -> bool {
    let pointee = ["alloc::boxed::Box<", "*mut ", "*const ", "&mut ", "&"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    let pointee = pointee.strip_prefix('(').unwrap_or(pointee);
    pointee.starts_with("dyn core::future::future::Future")
}

/// `Box<[T]>` / `*const [T]`: a data pointer and a length; each element a future of type `T`.
pub(super) const BOXED_SLICE: Rule = Rule {
    name: "boxed slice",
    matches: |t| t.members.len() == 2 && t.name.contains('['),
    plan: |b, t| {
        let (Some((data, ptr)), Some((len, _))) =
            (member(t, &["data_ptr"]), member(t, &["length"]))
        else {
            return Verdict::Decline;
        };
        let Some(elem) = b.debug.node(b.strip(ptr)).and_then(|p| p.type_ref) else {
            return Verdict::Decline;
        };
        elements(b, t.size, data, len, elem)
    },
};

/// A `Vec<T>` a future owns (`select_all`'s futures): each of its elements, as a boxed slice's, by
/// its element type `T`.
pub(super) const VEC: Rule = Rule {
    name: "Vec",
    matches: |t| t.name.starts_with("alloc::vec::Vec<"),
    plan: |b, t| {
        let (Some((data, _)), Some((len, _)), Some(elem)) = (
            b.vec_data(t.die),
            member(t, &["len"]),
            b.debug.type_param_of(t.die, "T"),
        ) else {
            return Verdict::Decline;
        };
        elements(b, t.size, data, len, elem)
    },
};

/// The plan of a type holding a slice: its data pointer at `data`, its length at `len`, each element
/// of type `elem`, as far apart as that type's size.
fn elements(b: &mut Builder<'_>, size: u32, data: u64, len: u64, elem: u64) -> Verdict {
    let elem = b.strip(elem);
    let stride = b.debug.node(elem).and_then(|e| e.byte_size).unwrap_or(0);
    let edge = Edge {
        offset: data as u32,
        to: EdgeTarget::Slice {
            len_offset: len as u32,
            elem: b.ty(elem),
            stride: stride as u32,
        },
    };
    Verdict::Plan(plan(size, vec![edge]), Kind::Transparent)
}

/// A tuple of join/select branches, in branch order (`__0`, `__1`, ...).
pub(super) const TUPLE: Rule = Rule {
    name: "tuple",
    matches: |t| t.name.starts_with('('),
    plan: |b, t| {
        let mut fields: Vec<(u64, u64, u64)> = t
            .members
            .iter()
            .filter_map(|(n, off, ty)| Some((n.strip_prefix("__")?.parse().ok()?, *off, *ty)))
            .collect();
        fields.sort_unstable();
        let edges = fields
            .into_iter()
            .map(|(_, off, ty)| inline(off, b.ty(ty)))
            .collect();
        Verdict::Plan(plan(t.size, edges), Kind::Tuple)
    },
};

/// The offset and type of `t`'s first member named one of `names`.
pub(super) fn member(t: &Ty, names: &[&str]) -> Option<(u64, u64)> {
    t.members
        .iter()
        .find(|(n, _, _)| names.contains(&n.as_str()))
        .map(|&(_, off, ty)| (off, ty))
}

impl Builder<'_> {
    /// Where a `Vec`'s data pointer is (`buf.inner.ptr`, through `Unique` and `NonNull`), and the
    /// pointer's type.
    pub(in crate::plan) fn vec_data(&self, vec: u64) -> Option<(u64, u64)> {
        let (mut off, mut ty) = (0, vec);
        for _ in 0..8 {
            let node = self.debug.node(ty)?;
            if node.tag == constants::DW_TAG_pointer_type {
                return Some((off, ty));
            }
            let (o, t) = self.member(ty, &["buf", "inner", "ptr", "pointer", "__0"])?;
            off += o;
            ty = self.strip(t);
        }
        None
    }

    /// A state machine's plan: its `__state` as the discriminant, and per state what it shows and
    /// which fields it follows.
    fn coroutine(&mut self, m: &StateMachine) -> (TypePlan, Kind) {
        let name = display_name(&m.name);
        let header = m
            .states
            .iter()
            .find(|s| s.name == "Unresumed")
            .map(|s| loc(&s.file, s.line));
        let mut states = FastMap::default();
        let mut cases = Vec::new();
        for s in &m.states {
            let mut info = FrameInfo::new(name.clone(), header.clone(), Source::Decoded);
            if s.name.starts_with("Suspend") {
                info = info.with_suspended_at(Some(loc(&s.file, s.line)));
            }
            let done = matches!(s.name.as_str(), "Returned" | "Panicked");
            let info = Arc::new(info);
            let locals = match s.name.starts_with("Suspend") {
                true => self.locals(m, s),
                false => Arc::from([]),
            };
            let target = match s.name.starts_with("Suspend") {
                true => self.frame_target(m, &name, s),
                false => None,
            };
            states.insert(
                s.discr,
                StateView {
                    info,
                    done,
                    locals,
                    target,
                },
            );
            if let Some(a) = &s.awaitee {
                let mut edges = vec![inline(a.offset, self.ty(a.type_die))];
                for &(offset, die) in &s.senders {
                    if let Some(t) = self.sender(die) {
                        edges.push(inline(offset, t));
                    }
                }
                let value = Some(s.discr);
                cases.push(Case { value, edges });
            }
        }
        let discr = Discr {
            offset: m.state_offset as u32,
            size: m.state_size as u8,
        };
        let plan = TypePlan {
            size: m.size as u32,
            discr: Some(discr),
            always: Vec::new(),
            cases,
        };
        (plan, Kind::Coroutine(states))
    }
}
