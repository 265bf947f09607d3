//! The planner's walk through DWARF types: each type reachable from a root future is classified once
//! into a [`TypePlan`] for the walker and a [`Kind`] for the decoder.

use std::collections::HashMap;
use std::sync::Arc;

use asyncdump_protocol::agent_names as names;
use asyncdump_protocol::{Case, Discr, Edge, Target, TypePlan};
use gimli::constants;

use super::{Kind, StateView};
use crate::dwarf::Debug;
use crate::model::{FastMap, FrameInfo, Loc, Source};
use crate::names::{display_name, short_type};

/// Classifies types into plans, each once.
pub(super) struct Builder<'a> {
    pub(super) debug: &'a Debug,
    pub(super) types: Vec<TypePlan>,
    pub(super) kinds: Vec<Kind>,
    pub(super) by_die: HashMap<u64, u32>,
    /// How many types are being classified, one inside the other.
    pub(super) depth: usize,
    pub(super) hand_written: FastMap<u32, Arc<FrameInfo>>,
    /// Types `classify` just followed through `descend`, for `ty` to record in `hand_written`.
    pub(super) descended: FastMap<u64, ()>,
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
        if self.descended.remove(&die).is_some() {
            let name = self.leaf_name(die);
            self.hand_written
                .insert(t, Arc::new(FrameInfo::awaitee(name)));
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
        short_type(&self.debug.qualified_name(die))
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

    pub(super) fn classify(&mut self, die: u64) -> (TypePlan, Kind) {
        let Some(node) = self.debug.node(die) else {
            return self.leaf(die);
        };
        let (tag, size) = (node.tag, node.byte_size.unwrap_or(0) as u32);
        let pointee = node.type_ref;
        let name = self.debug.qualified_name(die);
        if let Some(m) = self.debug.machine(die) {
            return self.coroutine(m);
        }
        let plan = |edges: Vec<Edge>| TypePlan {
            size,
            always: edges,
            ..TypePlan::default()
        };
        let inline = |offset: u64, to: u32| Edge {
            offset: offset as u32,
            to: Target::Inline(to),
        };
        if matches!(
            tag,
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type
        ) {
            // `Box<T>`, `&mut T`: a thin pointer to the future.
            let Some(pointee) = pointee else {
                return self.leaf(die);
            };
            let t = self.ty(pointee);
            let edge = Edge {
                offset: 0,
                to: Target::Pointer(t),
            };
            let size = if size == 0 { 8 } else { size };
            return (
                TypePlan {
                    size,
                    always: vec![edge],
                    ..TypePlan::default()
                },
                Kind::Transparent,
            );
        }
        if tag != constants::DW_TAG_structure_type {
            return self.leaf(die);
        }
        if name.starts_with("core::pin::Pin<") {
            return match self.member(die, &["pointer", "__pointer"]) {
                Some((off, ty)) => {
                    let t = self.ty(ty);
                    (plan(vec![inline(off, t)]), Kind::Transparent)
                }
                None => self.leaf(die),
            };
        }
        let members = self.members(die);
        if members.len() == 2 && name.contains("dyn core::future::future::Future") {
            // `Box<dyn Future>` / `*const dyn Future`: data pointer and vtable.
            if let (Some((_, data, _)), Some((_, vtable, _))) = (
                members.iter().find(|m| m.0 == "pointer"),
                members.iter().find(|m| m.0 == "vtable"),
            ) {
                let edge = Edge {
                    offset: *data as u32,
                    to: Target::Dyn {
                        vtable_offset: *vtable as u32,
                    },
                };
                return (plan(vec![edge]), Kind::Transparent);
            }
        }
        if members.len() == 2 && name.contains('[') {
            // `Box<[T]>` / `*const [T]`: data pointer and length.
            if let (Some((_, data, ptr)), Some((_, len, _))) = (
                members.iter().find(|m| m.0 == "data_ptr"),
                members.iter().find(|m| m.0 == "length"),
            ) && let Some(elem) = self.debug.node(self.strip(*ptr)).and_then(|p| p.type_ref)
            {
                let elem = self.strip(elem);
                let stride = self.debug.node(elem).and_then(|e| e.byte_size).unwrap_or(0);
                let t = self.ty(elem);
                let edge = Edge {
                    offset: *data as u32,
                    to: Target::Slice {
                        len_offset: *len as u32,
                        elem: t,
                        stride: stride as u32,
                    },
                };
                return (plan(vec![edge]), Kind::Transparent);
            }
        }
        if names::spellings(names::FRAMED).any(|p| is_generic(&name, p)) {
            if let (Some((inner, ty)), Some((node_offset, _))) = (
                self.member(die, &[names::FRAMED_INNER]),
                self.member(die, &[names::FRAMED_NODE]),
            ) {
                let t = self.ty(ty);
                return (plan(vec![inline(inner, t)]), Kind::Framed { node_offset });
            }
            return self.leaf(die);
        }
        if names::spellings(names::JOIN_HANDLE).any(|p| is_generic(&name, p)) {
            let info = Arc::new(FrameInfo::awaitee(short_type(&name.replacen(
                "tokio_support::",
                "",
                1,
            ))));
            return match self.task_id_path(die, names::JOIN_HANDLE_TASK) {
                Some(edge) => (plan(vec![edge]), Kind::JoinHandle(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if name.starts_with("tokio::runtime::task::join::JoinHandle<") {
            let info = Arc::new(FrameInfo::awaitee(short_type(&name.replacen(
                "runtime::task::join::",
                "task::",
                1,
            ))));
            return match self.header_path(die) {
                Some(edge) => (plan(vec![edge]), Kind::JoinHandle(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if names::spellings(names::INSTRUMENTED).any(|p| is_generic(&name, p)) {
            // A runtime task spawned through the agent: read only which agent task it is.
            return match self.task_id_path(die, names::INSTRUMENTED_TASK) {
                Some(edge) => (plan(vec![edge]), Kind::AgentRoot),
                None => self.leaf(die),
            };
        }
        if name.starts_with("tokio::runtime::task::core::Stage<") {
            // A runtime task's stage: the future while it runs, then its output.
            if let Some((discr, variants)) = self.variants(die) {
                let cases: Vec<Case> = variants
                    .into_iter()
                    .filter(|v| v.1 == "Running")
                    .filter_map(|(value, _, vdie, voff)| {
                        let (off, ty) = self.member(vdie, &["__0"])?;
                        Some(Case {
                            value,
                            edges: vec![inline(voff + off, self.ty(ty))],
                        })
                    })
                    .collect();
                return (enum_plan(size, discr, cases), Kind::Transparent);
            }
            return self.leaf(die);
        }
        if name.starts_with("tokio::sync::oneshot::Receiver<") {
            let info = Arc::new(FrameInfo::awaitee(short_type(&name)));
            return match self.oneshot_path(die) {
                Some(edge) => (plan(vec![edge]), Kind::Oneshot(info)),
                None => (TypePlan::default(), Kind::Leaf(info)),
            };
        }
        if name.starts_with("core::future::poll_fn::PollFn<")
            || name.starts_with("tokio::future::poll_fn::PollFn<")
        {
            // `tokio::join!` / `tokio::select!`: the closure holds (a pointer to) the tuple of branches.
            // Before 1.39 tokio's macros use its own `PollFn`, with the same field.
            if let Some((f_off, closure)) = self.member(die, &["f"]) {
                let closure = self.strip(closure);
                let caps = self.members(closure);
                if let Some((_, off, ty)) = caps
                    .iter()
                    .find(|m| m.0 == "futures" || m.0 == "_ref__futures")
                {
                    let (off, ty) = (*off, *ty);
                    let disabled = caps
                        .iter()
                        .find(|m| m.0 == "disabled" || m.0 == "_ref__disabled")
                        .map(|m| (m.1, m.2));
                    let label = if disabled.is_some() {
                        "tokio::select!"
                    } else {
                        "tokio::join!"
                    };
                    let info = Arc::new(FrameInfo::new(label.into(), None, Source::Decoded));
                    let mut edges = Vec::new();
                    // The mask first: the walk then reaches it before the branches, which sit deeper.
                    if let Some(edge) =
                        disabled.and_then(|(m_off, m_ty)| self.mask(f_off + m_off, m_ty))
                    {
                        edges.push(edge);
                    }
                    let t = self.ty(ty);
                    edges.push(inline(f_off + off, t));
                    let kind = match disabled {
                        Some(_) => Kind::Select(info),
                        None => Kind::Combinator(info),
                    };
                    return (plan(edges), kind);
                }
            }
            return self.leaf(die);
        }
        if name.starts_with('(') {
            // A tuple of join/select branches, in branch order (`__0`, `__1`, ...).
            let mut fields: Vec<(u64, u64, u64)> = members
                .iter()
                .filter_map(|(n, off, ty)| Some((n.strip_prefix("__")?.parse().ok()?, *off, *ty)))
                .collect();
            fields.sort_unstable();
            let edges = fields
                .into_iter()
                .map(|(_, off, ty)| {
                    let t = self.ty(ty);
                    inline(off, t)
                })
                .collect();
            return (plan(edges), Kind::Tuple);
        }
        if name.starts_with("futures_util::future::poll_fn::PollFn<")
            && let Some(found) = self.futures_macro(die, size)
        {
            return found;
        }
        if name.starts_with("futures_util::future::join_all::JoinAll<") {
            // Up to 30 futures: a boxed slice of `MaybeDone`s, followed by the enum rule below. More
            // become a `FuturesOrdered`, whose linked tasks this does not follow.
            return self.combinator(die, size, "kind", "futures::future::join_all");
        }
        if name.starts_with("tokio::time::timeout::Timeout<") {
            return self.combinator(die, size, "value", "tokio::time::timeout");
        }
        let maybe_done = name.starts_with("tokio::future::maybe_done::MaybeDone<")
            || name.starts_with("futures_util::future::maybe_done::MaybeDone<")
            || name.starts_with("futures_util::future::try_maybe_done::TryMaybeDone<");
        if maybe_done || name.starts_with("futures_util::") {
            // Wrappers: follow the inner future through the variant that still holds one. Generic
            // `futures_util` types count only when what they lead to is itself a future we know.
            if let Some((discr, variants)) = self.variants(die) {
                let mut cases = Vec::new();
                for (value, vname, vdie, voff) in variants {
                    if !matches!(
                        vname.as_str(),
                        "Future" | "Incomplete" | "First" | "Second" | "Pending" | "Small"
                    ) {
                        continue;
                    }
                    if let Some((off, ty)) =
                        self.member(vdie, &["future", "f", "__0", "fut", "elems"])
                    {
                        let t = self.ty(ty);
                        if maybe_done || !self.is_leaf(t) {
                            cases.push(Case {
                                value,
                                edges: vec![inline(voff + off, t)],
                            });
                        }
                    }
                }
                if !cases.is_empty() {
                    return (enum_plan(size, discr, cases), Kind::Transparent);
                }
            } else if let Some((off, ty)) = self.member(die, &["inner", "future", "fut"]) {
                let t = self.ty(ty);
                if !self.is_leaf(t) {
                    return (plan(vec![inline(off, t)]), Kind::Transparent);
                }
            }
        }
        match self.descend(die, size) {
            Some(found) => {
                self.descended.insert(die, ());
                found
            }
            None => self.leaf(die),
        }
    }

    /// `futures::join!` / `futures::try_join!`: a `PollFn` whose closure holds `_fut0`, `_fut1`, ... (each
    /// a `Pin<&mut MaybeDone>` into the enclosing state machine); `futures::select!`: one whose closure
    /// holds `_ref___0`, `_ref___1`, ... (each a `&mut` to a branch's fused future, which shows nothing
    /// once it is done). Branches in order.
    pub(super) fn futures_macro(&mut self, die: u64, size: u32) -> Option<(TypePlan, Kind)> {
        let (f_off, closure) = self.member(die, &["f"])?;
        let closure = self.strip(closure);
        let members = self.members(closure);
        let numbered = |prefix: &str| -> Vec<(u64, u64, u64)> {
            let mut v: Vec<_> = members
                .iter()
                .filter_map(|(n, off, ty)| Some((n.strip_prefix(prefix)?.parse().ok()?, *off, *ty)))
                .collect();
            v.sort_unstable();
            v
        };
        let (label, branches) = match (numbered("_fut"), numbered("_ref___")) {
            (join, _) if !join.is_empty() => ("futures::join!", join),
            (_, select) if !select.is_empty() => ("futures::select!", select),
            _ => return None,
        };
        let edges = branches
            .into_iter()
            .map(|(_, off, ty)| Edge {
                offset: (f_off + off) as u32,
                to: Target::Inline(self.ty(ty)),
            })
            .collect();
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        let plan = TypePlan {
            size,
            always: edges,
            ..TypePlan::default()
        };
        Some((plan, Kind::Combinator(Arc::new(info))))
    }

    /// Any other hand-written future (pin-project structs and enums of hyper, axum, tower, ...): not
    /// shown itself, followed through each field that leads to a future the plan can read further, in
    /// an enum only through the variant its discriminant selects. `None` when no field does: a leaf.
    pub(super) fn descend(&mut self, die: u64, size: u32) -> Option<(TypePlan, Kind)> {
        let plan = match self.variants(die) {
            Some((discr, variants)) => {
                let cases: Vec<Case> = variants
                    .into_iter()
                    .filter_map(|(value, _, vdie, voff)| {
                        let edges = self.future_fields(vdie, voff);
                        (!edges.is_empty()).then_some(Case { value, edges })
                    })
                    .collect();
                enum_plan(size, discr, cases)
            }
            None => TypePlan {
                size,
                always: self.future_fields(die, 0),
                ..TypePlan::default()
            },
        };
        (!plan.always.is_empty() || !plan.cases.is_empty()).then_some((plan, Kind::Transparent))
    }

    /// Edges to the fields of structure `of` (at `base` in the enclosing type) that may hold a future.
    pub(super) fn future_fields(&mut self, of: u64, base: u64) -> Vec<Edge> {
        self.members(of)
            .into_iter()
            .filter_map(|(_, off, ty)| {
                self.future_field(ty).map(|t| Edge {
                    offset: (base + off) as u32,
                    to: Target::Inline(t),
                })
            })
            .collect()
    }

    /// The plan type of a field's type if it may hold a future to read further: a structure or enum
    /// held inline, or a `Box` the future owns. Never another pointer: an `Arc`, `&` or raw pointer
    /// leads to state other threads change under the read.
    pub(super) fn future_field(&mut self, ty: u64) -> Option<u32> {
        let ty = self.strip(ty);
        let node = self.debug.node(ty)?;
        let owned = match node.tag {
            constants::DW_TAG_structure_type => true,
            constants::DW_TAG_pointer_type => node
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("alloc::boxed::Box<")),
            _ => false,
        };
        if !owned {
            return None;
        }
        let t = self.ty(ty);
        self.leads_further(t, 8).then_some(t)
    }

    /// Whether a node of plan type `t` can show more than a plain leaf: a state machine, a combinator,
    /// one of the agent's or tokio's types, or a wrapper or tuple of one (looked through `depth` wrappers
    /// deep; past that, assumed so). A wrapper of leaves only (`Pin<Box<dyn Sleep>>`, a boxed slice of
    /// indices) does not: inside a hand-written future it is state, not what the task waits on.
    pub(super) fn leads_further(&self, t: u32, depth: usize) -> bool {
        match &self.kinds[t as usize] {
            Kind::Leaf(_) => false,
            Kind::Transparent | Kind::Tuple if depth == 0 => true,
            // A tuple met inside a hand-written future (hyper's `(Recorder, Ponger)`) is state unless an
            // element leads on; the tuples of `join!`/`select!` are reached through their macro's rule.
            Kind::Transparent | Kind::Tuple => {
                let plan = &self.types[t as usize];
                plan.always
                    .iter()
                    .chain(plan.cases.iter().flat_map(|c| &c.edges))
                    .any(|e| match e.to {
                        Target::Inline(to) | Target::Pointer(to) => {
                            self.leads_further(to, depth - 1)
                        }
                        Target::Slice { elem, .. } => self.leads_further(elem, depth - 1),
                        Target::Dyn { .. } => true,
                    })
            }
            _ => true,
        }
    }

    /// A combinator shown as its own line, `label`, over the future in its field `field`.
    pub(super) fn combinator(
        &mut self,
        die: u64,
        size: u32,
        field: &str,
        label: &str,
    ) -> (TypePlan, Kind) {
        let Some((off, ty)) = self.member(die, &[field]) else {
            return self.leaf(die);
        };
        let t = self.ty(ty);
        let plan = TypePlan {
            size,
            always: vec![Edge {
                offset: off as u32,
                to: Target::Inline(t),
            }],
            ..TypePlan::default()
        };
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        (plan, Kind::Combinator(Arc::new(info)))
    }

    pub(super) fn coroutine(&mut self, m: crate::dwarf::StateMachine) -> (TypePlan, Kind) {
        let name = display_name(&m.name);
        let header = m
            .states
            .iter()
            .find(|s| s.name == "Unresumed")
            .map(|s| loc(&s.file, s.line));
        let mut states = FastMap::default();
        let mut cases = Vec::new();
        for s in &m.states {
            let suspended = s.name.starts_with("Suspend");
            let mut info = FrameInfo::new(name.clone(), header.clone(), Source::Decoded);
            if suspended {
                info = info.with_suspended_at(Some(loc(&s.file, s.line)));
            }
            states.insert(
                s.discr,
                StateView {
                    info: Arc::new(info),
                    done: matches!(s.name.as_str(), "Returned" | "Panicked"),
                },
            );
            if let Some(a) = &s.awaitee {
                let t = self.ty(a.type_die);
                let mut edges = vec![Edge {
                    offset: a.offset as u32,
                    to: Target::Inline(t),
                }];
                for &(offset, die) in &s.senders {
                    if let Some(t) = self.sender(die) {
                        edges.push(Edge {
                            offset: offset as u32,
                            to: Target::Inline(t),
                        });
                    }
                }
                cases.push(Case {
                    value: Some(s.discr),
                    edges,
                });
            }
        }
        (
            TypePlan {
                size: m.size as u32,
                discr: Some(Discr {
                    offset: m.state_offset as u32,
                    size: m.state_size as u8,
                }),
                always: Vec::new(),
                cases,
            },
            Kind::Coroutine(states),
        )
    }

    /// Descends from field `names[0]`'s type through single-pointer wrappers (`Option` niche, `Arc`,
    /// `NonNull`) to a thin pointer; returns its offset within `die` and the pointee's DIE.
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
                None => self.member(ty, &["ptr", "pointer", "__0"])?,
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

    /// The edge to a `select!`'s `disabled` mask, captured at `offset` by value or by reference.
    pub(super) fn mask(&mut self, offset: u64, ty: u64) -> Option<Edge> {
        let node = self.debug.node(self.strip(ty))?;
        let (pointer, size) = match node.tag {
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type => {
                let pointee = self.debug.node(self.strip(node.type_ref?))?;
                (true, pointee.byte_size?)
            }
            _ => (false, node.byte_size?),
        };
        if !matches!(size, 1 | 2 | 4 | 8) {
            return None;
        }
        let t = self.synthetic_sized(0, size as u8, Kind::SelectMask);
        Some(Edge {
            offset: offset as u32,
            to: if pointer {
                Target::Pointer(t)
            } else {
                Target::Inline(t)
            },
        })
    }

    /// In `tokio::sync::oneshot::Receiver`: `inner: Option<Arc<Inner>>` → `Inner { state, rx_task }`,
    /// where `rx_task` holds a `Waker { data, vtable }`. Returns the edge to a view of `Inner` whose
    /// discriminant is the state word, with children for the waker's vtable and data pointer, read from
    /// the same copy: one read per receiver. (The state word changes under the read as the sender acts;
    /// `rx_task` only changes when the receiving task, which the agent holds still, polls it.)
    pub(super) fn oneshot_path(&mut self, die: u64) -> Option<Edge> {
        let (ptr_off, arc_inner) = self.pointer_to(die, "inner")?;
        let (data_off, inner) = self.member(arc_inner, &["data"])?;
        let inner = self.strip(inner);
        let (state_off, _) = self.member(inner, &["state"])?;
        let (rx_off, rx_ty) = self.member(inner, &["rx_task"])?;
        let vtable_off = self.find_member(rx_ty, "vtable", 8)?;
        let waker_data_off = self.find_member(rx_ty, "data", 8)?;
        let base = data_off + rx_off;
        let vt = self.synthetic(base + vtable_off, Kind::WakerVtable);
        // The data pointer of an asyncdump waker is `Arc::<TaskCell>::into_raw`: the cell itself.
        let data = self.synthetic(base + waker_data_off, Kind::WakerData);
        let size = self.debug.node(arc_inner)?.byte_size?;
        let view = self.types.len() as u32;
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: (data_off + state_off) as u32,
                size: 8,
            }),
            always: vec![
                Edge {
                    offset: 0,
                    to: Target::Inline(vt),
                },
                Edge {
                    offset: 0,
                    to: Target::Inline(data),
                },
            ],
            cases: Vec::new(),
        });
        self.kinds.push(Kind::OneshotInner);
        Some(Edge {
            offset: ptr_off as u32,
            to: Target::Pointer(view),
        })
    }

    /// The plan type of a `oneshot::Sender` (DIE `die`): its channel pointer read as the discriminant,
    /// nothing followed. `None` if its layout is not the one known.
    pub(super) fn sender(&mut self, die: u64) -> Option<u32> {
        let die = self.strip(die);
        if let Some(&t) = self.by_die.get(&die) {
            return matches!(self.kinds[t as usize], Kind::OneshotSender).then_some(t);
        }
        let (ptr_off, _) = self.pointer_to(die, "inner")?;
        let size = self.debug.node(die)?.byte_size?;
        let t = self.types.len() as u32;
        self.by_die.insert(die, t);
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: ptr_off as u32,
                size: 8,
            }),
            ..TypePlan::default()
        });
        self.kinds.push(Kind::OneshotSender);
        Some(t)
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

    /// In tokio's `JoinHandle`: `raw: RawTask { ptr: NonNull<Header> }`. Returns the edge to a value that
    /// reads that pointer: the joined task's header, compared with the listed runtime tasks' headers.
    pub(super) fn header_path(&mut self, die: u64) -> Option<Edge> {
        let (off, _) = self.pointer_to(die, "raw")?;
        let t = self.synthetic(0, Kind::HeaderRef);
        Some(Edge {
            offset: off as u32,
            to: Target::Inline(t),
        })
    }

    /// In `asyncdump_agent::JoinHandle` and `Instrumented`: `field: Arc<TaskCell>` points at
    /// `ArcInner { .., data: TaskCell }`.
    /// Returns the edge to a value that reads that pointer: the joined task's cell, compared with the
    /// snapshot's task cells, names the task without another read.
    pub(super) fn task_id_path(&mut self, die: u64, field: &str) -> Option<Edge> {
        let (off, arc_inner) = self.pointer_to(die, field)?;
        let (data_off, _) = self.member(arc_inner, &["data"])?;
        let t = self.synthetic(0, Kind::CellRef { plus: data_off });
        Some(Edge {
            offset: off as u32,
            to: Target::Inline(t),
        })
    }
}

/// Whether `name` is an instantiation of the generic type `path` (`path<…>`).
pub(super) fn is_generic(name: &str, path: &str) -> bool {
    name.strip_prefix(path)
        .is_some_and(|rest| rest.starts_with('<'))
}

/// The plan of an enum (or state machine) that follows each of `cases` by its discriminant.
pub(super) fn enum_plan(size: u32, discr: Discr, cases: Vec<Case>) -> TypePlan {
    TypePlan {
        size,
        discr: Some(discr),
        always: Vec::new(),
        cases,
    }
}

pub(super) fn loc(file: &str, line: u64) -> Loc {
    Loc {
        file: file.to_owned(),
        line: line as u32,
        column: 0,
    }
}
