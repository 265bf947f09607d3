//! Any other struct or enum: the hand-written futures of hyper, axum, tower and the rest (pin-project
//! structs and enums), followed through each field that leads to a future the plan can read further,
//! and to each `oneshot::Sender` they own (hyper's connection task holds the sender of the response
//! a request task awaits: read, never shown, it names who can wake that task) and each h2 stream
//! reference (which HTTP/2 stream a request's task serves, and on which connection).

use asyncdump_protocol::{Case, Edge, EdgeTarget, TypePlan};
use gimli::constants;

use super::{Rule, Verdict, inline};
use crate::plan::Kind;
use crate::plan::builder::{Builder, enum_plan};

/// Matches every structure; in an enum only the variant its discriminant selects is followed (the one
/// variant, in an enum of one). A leaf when no field leads further (its fields are state, not what the
/// task waits on).
pub(super) const FIELDS_LEADING_TO_FUTURES: Rule = Rule {
    name: "struct or enum with future fields",
    matches: |_| true,
    plan: |b, t| {
        let mut futures = false;
        let plan = match b.variants(t.die) {
            Some((discr, variants)) => {
                let values: Vec<Option<u64>> = variants.iter().map(|v| v.0).collect();
                let cases: Vec<Case> = variants
                    .into_iter()
                    .filter_map(|(value, _, vdie, voff)| {
                        let (edges, f) = b.held_fields(vdie, voff);
                        futures |= f;
                        (!edges.is_empty()).then_some(Case { value, edges })
                    })
                    .collect();
                enum_plan(t.size, discr, cases, &values)
            }
            // An enum of one variant keeps no discriminant (a pin-project state enum whose other
            // variants a cargo feature left out): its fields are always there.
            None => {
                let (always, f) = match b.sole_variant(t.die) {
                    Some((_, _, vdie, voff)) => b.held_fields(vdie, voff),
                    None => b.held_fields(t.die, 0),
                };
                futures = f;
                TypePlan {
                    size: t.size,
                    always,
                    ..TypePlan::default()
                }
            }
        };
        if plan.always.is_empty() && plan.cases.iter().all(|c| c.edges.is_empty()) {
            return Verdict::Leaf;
        }
        // An `Option` holding no future (`Fold`'s between two items) is nothing to wait on; any
        // other hand-written future with none below it is the leaf the task waits on. One that
        // holds senders only is that leaf where a future is expected, and state elsewhere.
        if !futures {
            b.sender_only.insert(t.die);
        } else if !t.name.starts_with("core::option::Option<") {
            b.descended.insert(t.die, ());
        }
        Verdict::Plan(plan, Kind::Transparent)
    },
};

/// What a field of a hand-written future holds that the plan reads.
enum Held {
    /// A future the plan can read further (plan type).
    Future(u32),
    /// A `oneshot::Sender` or an h2 stream reference, or something that owns one and no future.
    Sender(u32),
}

impl Builder<'_> {
    /// Edges to the fields of structure `of` (at `base` in the enclosing type) that may hold a future
    /// or a sender, and whether any may hold a future.
    fn held_fields(&mut self, of: u64, base: u64) -> (Vec<Edge>, bool) {
        let mut futures = false;
        let edges = (self.members(of).into_iter())
            .filter_map(|(_, off, ty)| {
                let t = match self.held(ty)? {
                    Held::Future(t) => {
                        futures = true;
                        t
                    }
                    Held::Sender(t) => t,
                };
                Some(inline(base + off, t))
            })
            .collect();
        (edges, futures)
    }

    /// What a field of type `ty` holds that the plan reads: a future (see `future_field`), else a
    /// sender it owns inline (directly, in an `Option` or an enum of its own, a few levels deep).
    fn held(&mut self, ty: u64) -> Option<Held> {
        let die = self.strip(ty);
        let named = |n: &str| (self.debug.node(die)?.name.as_deref()).map(|s| s.starts_with(n));
        // The unqualified name first: most fields are not senders.
        if named("Sender<") == Some(true)
            && (self.debug.qualified_name(die)).starts_with("tokio::sync::oneshot::Sender<")
        {
            return self.sender(die).map(Held::Sender);
        }
        if let Some(t) = self.future_field(ty) {
            return Some(Held::Future(t));
        }
        let node = self.debug.node(die)?;
        if node.tag != constants::DW_TAG_structure_type {
            return None;
        }
        let t = self.ty(die);
        self.holds_sender(t, 8).then_some(Held::Sender(t))
    }

    /// Whether a node of plan type `t` is or holds a sender (or an h2 stream reference) through
    /// followed fields, `depth` deep.
    fn holds_sender(&self, t: u32, depth: usize) -> bool {
        match &self.kinds[t as usize] {
            Kind::OneshotSender | Kind::H2Stream => true,
            Kind::Transparent if depth > 0 => {
                let plan = &self.types[t as usize];
                (plan.always.iter())
                    .chain(plan.cases.iter().flat_map(|c| &c.edges))
                    .any(|e| match e.to {
                        EdgeTarget::Inline(to) => self.holds_sender(to, depth - 1),
                        _ => false,
                    })
            }
            _ => false,
        }
    }

    /// Whether a field of type `ty` holds a future the plan can read further (see `future_field`).
    pub(super) fn leads_further_field(&mut self, ty: u64) -> bool {
        self.future_field(ty).is_some()
    }

    /// The plan type of a field's type if it may hold a future to read further: a structure or enum
    /// held inline, or a `Box` the future owns. Never another pointer: an `Arc`, `&` or raw pointer
    /// leads to state other threads change under the read.
    fn future_field(&mut self, ty: u64) -> Option<u32> {
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
    fn leads_further(&self, t: u32, depth: usize) -> bool {
        match &self.kinds[t as usize] {
            Kind::Leaf(_) | Kind::OneshotSender | Kind::H2Stream => false,
            Kind::Transparent | Kind::Tuple if depth == 0 => true,
            // A tuple met inside a hand-written future (hyper's `(Recorder, Ponger)`) is state unless an
            // element leads on; the tuples of `join!`/`select!` are reached through their macro's rule.
            Kind::Transparent | Kind::Tuple => {
                let plan = &self.types[t as usize];
                plan.always
                    .iter()
                    .chain(plan.cases.iter().flat_map(|c| &c.edges))
                    .any(|e| match e.to {
                        EdgeTarget::Inline(to) | EdgeTarget::Pointer(to) => {
                            self.leads_further(to, depth - 1)
                        }
                        EdgeTarget::Slice { elem, .. } => self.leads_further(elem, depth - 1),
                        EdgeTarget::Dyn { .. } => true,
                    })
            }
            _ => true,
        }
    }
}
