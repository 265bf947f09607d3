//! The planner's walk through DWARF types: each type reachable from a root future is classified once
//! (by the rules of `shapes`) into a [`TypePlan`] for the walker and a [`Kind`] for the decoder; and the
//! helpers rules read types with (members, variants, pointers through wrappers).

use std::collections::HashMap;
use std::sync::Arc;

use asyncdump_protocol::{Case, Discr, TypePlan};
use gimli::constants;

use super::Kind;
use crate::dwarf::Debug;
use crate::model::{FastMap, FastSet, FrameInfo, Loc};
use crate::names::short_type;

/// Classifies types into plans, each once.
pub(super) struct Builder<'a> {
    pub(super) debug: &'a Debug,
    pub(super) types: Vec<TypePlan>,
    pub(super) kinds: Vec<Kind>,
    pub(super) by_die: HashMap<u64, u32>,
    /// How many types are being classified, one inside the other.
    pub(super) depth: usize,
    pub(super) hand_written: FastMap<u32, Arc<FrameInfo>>,
    /// The rule that classified each type, by DIE (see `shapes`).
    pub(super) decided_by: FastMap<u64, &'static str>,
    /// Types `classify` just followed through `descend`, for `ty` to record in `hand_written`.
    pub(super) descended: FastMap<u64, ()>,
    /// Structures and enums followed only for the senders they hold, by DIE, for `ty` to record in
    /// `sender_only`.
    pub(super) sender_only: FastSet<u64>,
    /// The same, by plan type.
    pub(super) sender_only_types: FastSet<u32>,
    /// The value types of the locals of the state machines planned.
    pub(super) values: super::values::ValueBuilder,
}

/// Deepest nesting of types classified one inside the other (each a stack frame of `classify`).
const MAX_DEPTH: usize = 256;

/// Plan types of nested futures are bounded by the program's types, but a pathological DWARF could
/// still chain wrappers forever: stop classifying past this many.
const MAX_TYPES: usize = 100_000;

impl<'a> Builder<'a> {
    pub(super) fn new(debug: &'a Debug) -> Builder<'a> {
        Builder {
            debug,
            types: Vec::new(),
            kinds: Vec::new(),
            by_die: HashMap::new(),
            depth: 0,
            hand_written: FastMap::default(),
            descended: FastMap::default(),
            sender_only: FastSet::default(),
            sender_only_types: FastSet::default(),
            decided_by: FastMap::default(),
            values: Default::default(),
        }
    }
}

impl Builder<'_> {
    /// The plan type of DIE `die`, classifying it (and what it leads to) on first sight.
    pub(super) fn ty(&mut self, die: u64) -> u32 {
        let die = self.strip(die);
        if let Some(&t) = self.by_die.get(&die) {
            return t;
        }
        let t = self.types.len() as u32;
        self.by_die.insert(die, t);
        // A placeholder while classifying, so that recursive types (through a box) terminate.
        self.types.push(TypePlan::default());
        self.kinds.push(Kind::Transparent);
        let (plan, kind) = if self.types.len() > MAX_TYPES || self.depth >= MAX_DEPTH {
            self.leaf(die)
        } else {
            self.depth += 1;
            let classified = self.classify(die);
            self.depth -= 1;
            classified
        };
        let sender_only = self.sender_only.remove(&die);
        if sender_only {
            self.sender_only_types.insert(t);
        }
        if self.descended.remove(&die).is_some() || sender_only {
            let name = self.leaf_name(die);
            self.hand_written
                .insert(t, Arc::new(FrameInfo::awaitee(name)));
        }
        if matches!(kind, Kind::Leaf(_))
            && let Some(target) = self.target(die)
        {
            self.values.targets.insert(t, target);
        }
        self.types[t as usize] = plan;
        self.kinds[t as usize] = kind;
        t
    }

    /// Follows typedefs and qualifiers to the type itself.
    pub(super) fn strip(&self, mut die: u64) -> u64 {
        for _ in 0..16 {
            match self.debug.node(die) {
                Some(n)
                    if matches!(
                        n.tag,
                        constants::DW_TAG_typedef
                            | constants::DW_TAG_const_type
                            | constants::DW_TAG_volatile_type
                    ) =>
                {
                    match n.type_ref {
                        Some(t) => die = t,
                        None => break,
                    }
                }
                _ => break,
            }
        }
        die
    }

    pub(super) fn is_leaf(&self, t: u32) -> bool {
        matches!(self.kinds[t as usize], Kind::Leaf(_))
    }

    pub(super) fn leaf(&self, die: u64) -> (TypePlan, Kind) {
        let name = self.leaf_name(die);
        (
            TypePlan::default(),
            Kind::Leaf(Arc::new(FrameInfo::awaitee(name))),
        )
    }

    /// A leaf future's name: its type's, or for a wrapper of one future (`Coop<Recv<()>>`, tokio's
    /// budget around a receive) the wrapped future's, which is what the task awaits.
    pub(super) fn leaf_name(&self, mut die: u64) -> String {
        for _ in 0..8 {
            match self.wrapped(die) {
                Some(inner) => die = inner,
                None => break,
            }
        }
        let qualified = self.debug.qualified_name(die);
        crate::names::closure_named(&qualified).unwrap_or_else(|| short_type(&qualified))
    }

    /// The future a structure wraps: its only member's type, when that is one of the structure's own
    /// type parameters (`struct Coop<F> { fut: F }`) and a structure or enum, but not a closure
    /// (`PollFn<F> { f: F }` is the future; its closure is not).
    pub(super) fn wrapped(&self, die: u64) -> Option<u64> {
        let node = self.debug.node(die)?;
        let [(_, _, member)] = self.members(die)[..] else {
            return None;
        };
        let member = self.strip(member);
        let inner = self.debug.node(member)?;
        let is_data = matches!(
            inner.tag,
            constants::DW_TAG_structure_type | constants::DW_TAG_enumeration_type
        );
        if !is_data || inner.name.as_deref().is_none_or(|n| n.contains("{closure")) {
            return None;
        }
        let is_param = |c: &crate::dwarf::Node| {
            c.tag == constants::DW_TAG_template_type_parameter
                && c.type_ref.map(|t| self.strip(t)) == Some(member)
        };
        node.children
            .iter()
            .any(|&c| is_param(&self.debug.nodes[c]))
            .then_some(member)
    }

    /// The data members of a structure: (name, offset, type DIE).
    pub(super) fn members(&self, die: u64) -> Vec<(String, u64, u64)> {
        let Some(n) = self.debug.node(die) else {
            return Vec::new();
        };
        n.children
            .iter()
            .map(|&c| &self.debug.nodes[c])
            .filter(|c| c.tag == constants::DW_TAG_member)
            .filter_map(|c| {
                Some((
                    c.name.clone().unwrap_or_default(),
                    c.member_offset.unwrap_or(0),
                    c.type_ref?,
                ))
            })
            .collect()
    }

    pub(super) fn member(&self, die: u64, names: &[&str]) -> Option<(u64, u64)> {
        self.members(die)
            .into_iter()
            .find(|(n, _, _)| names.contains(&n.as_str()))
            .map(|(_, off, ty)| (off, ty))
    }

    /// A Rust enum's discriminant and variants: (discr value, variant name, variant struct DIE, offset).
    #[allow(clippy::type_complexity)]
    pub(super) fn variants(
        &self,
        die: u64,
    ) -> Option<(Discr, Vec<(Option<u64>, String, u64, u64)>)> {
        let d = self.debug;
        let part = d.variant_part(die)?;
        let discr = Discr {
            offset: d.nodes[part.discr].member_offset? as u32,
            size: part.discr_size as u8,
        };
        let variants = part
            .variants
            .iter()
            .filter_map(|&(value, m)| {
                let m = &d.nodes[m];
                Some((
                    value,
                    m.name.clone().unwrap_or_default(),
                    m.type_ref?,
                    m.member_offset.unwrap_or(0),
                ))
            })
            .collect();
        Some((discr, variants))
    }

    /// The one variant of a one-variant enum, shaped as [`Builder::variants`] gives each: no
    /// discriminant value, its name, its payload's type and its offset.
    pub(super) fn sole_variant(&self, die: u64) -> Option<(Option<u64>, String, u64, u64)> {
        let m = &self.debug.nodes[self.debug.sole_variant(die)?];
        Some((
            None,
            m.name.clone().unwrap_or_default(),
            m.type_ref?,
            m.member_offset.unwrap_or(0),
        ))
    }

    /// Descends from field `names[0]`'s type through single-pointer wrappers (`Option` niche, `Arc`,
    /// `NonNull`, `AtomicPtr`) to a thin pointer; returns its offset within `die` and the pointee's DIE.
    pub(super) fn pointer_to(&mut self, die: u64, field: &str) -> Option<(u64, u64)> {
        let (mut off, t) = self.member(die, &[field])?;
        let mut ty = self.strip(t);
        for _ in 0..6 {
            let node = self.debug.node(ty)?;
            if node.tag == constants::DW_TAG_pointer_type {
                return Some((off, self.strip(node.type_ref?)));
            }
            let next = match self.variants(ty) {
                // `Option<P>` with a non-null niche: `Some`'s payload is the pointer.
                Some((_, vs)) => {
                    let (_, _, vdie, voff) = vs.into_iter().find(|v| v.1 == "Some")?;
                    let (o, t) = self.member(vdie, &["__0"])?;
                    (voff + o, t)
                }
                // `AtomicPtr { p: UnsafeCell { value } }` too.
                None => self.member(ty, &["ptr", "pointer", "__0", "p", "value"])?,
            };
            off += next.0;
            ty = self.strip(next.1);
        }
        None
    }

    /// A synthetic plan type that reads one `u64` at `offset` (as its discriminant).
    pub(super) fn synthetic(&mut self, offset: u64, kind: Kind) -> u32 {
        self.synthetic_sized(offset, 8, kind)
    }

    pub(super) fn synthetic_sized(&mut self, offset: u64, size: u8, kind: Kind) -> u32 {
        let t = self.types.len() as u32;
        self.types.push(TypePlan {
            size: offset as u32 + size as u32,
            discr: Some(Discr {
                offset: offset as u32,
                size,
            }),
            ..TypePlan::default()
        });
        self.kinds.push(kind);
        t
    }

    /// The offset of the first member named `name` anywhere inside `die` (depth-first, through nested
    /// structures and unions), at most `depth` levels down.
    pub(super) fn find_member(&self, die: u64, name: &str, depth: usize) -> Option<u64> {
        self.find_member_typed(die, name, depth).map(|(off, _)| off)
    }

    /// Like [`Self::find_member`], with the member's type.
    pub(super) fn find_member_typed(
        &self,
        die: u64,
        name: &str,
        depth: usize,
    ) -> Option<(u64, u64)> {
        let die = self.strip(die);
        // An enum's fields are in its variants (`Option<Waker>`: the waker is in `Some`).
        let variant_fields = self.variants(die).into_iter().flat_map(|(_, vs)| {
            vs.into_iter()
                .map(|(_, vname, vdie, voff)| (vname, voff, vdie))
        });
        for (n, off, ty) in self.members(die).into_iter().chain(variant_fields) {
            if n == name {
                return Some((off, ty));
            }
            if depth > 0
                && let Some((inner, inner_ty)) = self.find_member_typed(ty, name, depth - 1)
            {
                return Some((off + inner, inner_ty));
            }
        }
        None
    }
}

impl Builder<'_> {
    /// Where parking_lot's `ThreadData` keeps its thread's futex word and the key it parks under.
    pub(super) fn parked_key(&self) -> Option<super::ParkedKey> {
        let data = self
            .debug
            .find_type("parking_lot_core::parking_lot::ThreadData")?;
        let (parker, parker_ty) = self.member(data, &["parker"])?;
        let futex = parker + self.find_member(parker_ty, "futex", 2)?;
        let (key, _) = self.member(data, &["key"])?;
        Some(super::ParkedKey {
            futex: u32::try_from(futex).ok()?,
            key: u32::try_from(key).ok()?,
        })
    }

    /// Where tokio's `ScheduledIo` keeps its reader's and writer's wakers (see
    /// [`super::IoWakers`]).
    pub(super) fn io_wakers(&self) -> Option<super::IoWakers> {
        let io = (self.debug).find_type("tokio::runtime::io::scheduled_io::ScheduledIo")?;
        let (reader, waker) = self.find_member_typed(io, "reader", 6)?;
        let writer = self.find_member(io, "writer", 6)?;
        let data = self.find_member(waker, "data", 4)?;
        let vtable = self.find_member(waker, "vtable", 4)?;
        // Read as one 16-byte span (see `session::sockets`).
        if data.abs_diff(vtable) != 8 {
            return None;
        }
        let word = |v: u64| u32::try_from(v).ok();
        Some(super::IoWakers {
            reader: word(reader)?,
            writer: word(writer)?,
            data: word(data)?,
            vtable: word(vtable)?,
            waiters: self.io_waiters(io),
        })
    }

    /// Where `ScheduledIo` (`io`) keeps its waiter list's head, and a waiter its parts (see
    /// [`super::IoWaiters`]).
    fn io_waiters(&self, io: u64) -> Option<super::IoWaiters> {
        let (list, list_ty) = self.find_member_typed(io, "list", 6)?;
        let head = list + self.find_member(list_ty, "head", 2)?;
        let waiter = (self.debug).find_type("tokio::runtime::io::scheduled_io::Waiter")?;
        let (waker, waker_ty) = self.member(waiter, &["waker"])?;
        let data = waker + self.find_member(waker_ty, "data", 4)?;
        let vtable = waker + self.find_member(waker_ty, "vtable", 4)?;
        let (interest, _) = self.member(waiter, &["interest"])?;
        let (pointers, pointers_ty) = self.member(waiter, &["pointers"])?;
        let next = pointers + self.find_member(pointers_ty, "next", 3)?;
        let word = |v: u64| u32::try_from(v).ok();
        Some(super::IoWaiters {
            head: word(head)?,
            data: word(data)?,
            vtable: word(vtable)?,
            interest: word(interest)?,
            next: word(next)?,
        })
    }

    /// The offset of the first value of type `name` (qualified) inside `die`, itself included,
    /// through nested structures (not pointers) at most `depth` levels down.
    pub(super) fn offset_of_type(&self, die: u64, name: &str, depth: usize) -> Option<u64> {
        let die = self.strip(die);
        if self.debug.qualified_name(die) == name {
            return Some(0);
        }
        if depth == 0 {
            return None;
        }
        (self.members(die).into_iter())
            .find_map(|(_, off, ty)| Some(off + self.offset_of_type(ty, name, depth - 1)?))
    }
}

/// Whether `name` is an instantiation of the generic type `path` (`path<…>`).
pub(super) fn is_generic(name: &str, path: &str) -> bool {
    name.strip_prefix(path)
        .is_some_and(|rest| rest.starts_with('<'))
}

/// The plan of an enum (or state machine) that follows each of `cases` by its discriminant.
/// An enum's plan from `cases`, the variants that lead somewhere, given every variant's value
/// (`values`; `None` for the one without: the niche's dataful variant, the walker's default case).
/// Where a default case is among `cases`, every other variant with a value of its own gets a case
/// too, leading nowhere: left out, its discriminant would select the default case, and the bytes
/// of the variant it is would be read as the default one's (`Option<T>`'s `None` as `Some`).
pub(super) fn enum_plan(
    size: u32,
    discr: Discr,
    mut cases: Vec<Case>,
    values: &[Option<u64>],
) -> TypePlan {
    if cases.iter().any(|c| c.value.is_none()) {
        for &v in values.iter().flatten() {
            if !cases.iter().any(|c| c.value == Some(v)) {
                cases.push(Case {
                    value: Some(v),
                    edges: Vec::new(),
                });
            }
        }
    }
    TypePlan {
        size,
        discr: Some(discr),
        always: Vec::new(),
        cases,
    }
}

pub(super) fn loc(file: &str, line: u64) -> Loc {
    Loc {
        file: file.into(),
        line: line as u32,
        column: 0,
    }
}
