//! Recognised shapes: the table of rules that says what a type is to the planner.
//!
//! Every type a chain can pass through is classified once ([`Builder::classify`]): the rules of
//! [`RULES`] are tried in order, and the first whose matcher accepts the type and whose planner does
//! not decline gives its [`TypePlan`] (what the walker reads and follows) and its [`Kind`] (how the
//! decoder shows a node of it). A rule that matches may also say the type is a leaf: the chain ends
//! there with "awaiting TYPE". Rules are filed by who owns the layout they read, as hansei files its
//! recognisers: `std` (the compiler's and the standard library's shapes), `agent` (asyncdump-agent's
//! own types), `tokio`, `futures` (futures-util), `h2` (which stream a request is), and `any` (any other struct or enum that leads to a
//! future), which is last and matches everything.
//!
//! Adding a shape is adding one rule to its owner's file, one line to [`RULES`] and one unit spec on a
//! synthetic type description (`crate::dwarf::synthetic`). The values a suspended frame holds (`-v`)
//! have a table of their own in `values` (specs in `value_tests`), made the same way. Each rule fails safe: a type whose fields
//! are not the ones it knows is declined or made a leaf, never guessed at.

mod agent;
mod any;
mod futures;
mod h2;
mod std;
#[cfg(test)]
mod target_tests;
mod targets;
mod tokio;
#[cfg(test)]
mod value_tests;
mod values;

use ::std::sync::Arc;

use gimli::constants;

use super::Kind;
use super::builder::Builder;
use crate::dwarf::StateMachine;
use crate::model::{FrameInfo, Source};
use asyncdump_protocol::{Edge, EdgeTarget, TypePlan};

/// What the rules look at: one type, read once.
pub(super) struct Ty {
    pub(super) die: u64,
    pub(super) name: String,
    pub(super) tag: constants::DwTag,
    /// Bytes; 0 when the DWARF gives none.
    pub(super) size: u32,
    /// The pointee of a pointer or reference type.
    pub(super) pointee: Option<u64>,
    /// The data members of a structure: (name, offset, type DIE).
    pub(super) members: Vec<(String, u64, u64)>,
    /// The state machine it is, if it is an async fn's or block's.
    pub(super) machine: Option<StateMachine>,
}

/// What a rule says of a type it matched.
pub(super) enum Verdict {
    Plan(TypePlan, Kind),
    /// A leaf: the chain ends at it.
    Leaf,
    /// Not this rule's after all: the next one is tried.
    Decline,
}

/// One recognised shape.
pub(super) struct Rule {
    /// What it recognises, as people call it.
    pub(super) name: &'static str,
    /// A cheap test of the type's name, tag or member count.
    pub(super) matches: fn(&Ty) -> bool,
    /// The plan of a type it matches.
    pub(super) plan: fn(&mut Builder<'_>, &Ty) -> Verdict,
}

/// Every recognised shape, in the order they are tried: the structural ones first (state machines,
/// pointers, `Pin`, trait objects, slices), then named types, then any struct or enum.
pub(super) const RULES: &[&Rule] = &[
    &std::STATE_MACHINE,
    &std::POINTER,
    &std::NOT_A_STRUCTURE,
    &std::PIN,
    &std::DYN_FUTURE,
    &std::BOXED_SLICE,
    &std::VEC,
    &agent::FRAMED,
    &agent::JOIN_HANDLE,
    &tokio::JOIN_HANDLE,
    &agent::INSTRUMENTED,
    &tokio::TASK_STAGE,
    &tokio::ONESHOT_RECEIVER,
    &tokio::JOIN_OR_SELECT,
    &std::TUPLE,
    &futures::JOIN_OR_SELECT,
    &futures::JOIN_ALL,
    &tokio::TIMEOUT,
    &futures::MAYBE_DONE,
    &futures::SELECT_ALL,
    &futures::FUTURES_UNORDERED,
    &futures::FUTURES_UNORDERED_TASK,
    &futures::STREAM_BORROW,
    &futures::WRAPPER,
    &h2::STREAM_REF,
    &any::FIELDS_LEADING_TO_FUTURES,
];

impl Builder<'_> {
    /// The plan and kind of type `die`, by the first rule of [`RULES`] that takes it (a leaf when the
    /// DWARF does not describe it). The rule is remembered in `decided_by`.
    pub(super) fn classify(&mut self, die: u64) -> (TypePlan, Kind) {
        let Some(ty) = self.describe(die) else {
            return self.leaf(die);
        };
        for rule in RULES {
            if !(rule.matches)(&ty) {
                continue;
            }
            let verdict = (rule.plan)(self, &ty);
            if matches!(verdict, Verdict::Decline) {
                continue;
            }
            self.decided_by.insert(die, rule.name);
            return match verdict {
                Verdict::Plan(plan, kind) => (plan, kind),
                _ => self.leaf(die),
            };
        }
        self.leaf(die)
    }

    fn describe(&self, die: u64) -> Option<Ty> {
        let node = self.debug.node(die)?;
        Some(Ty {
            die,
            name: self.debug.qualified_name(die),
            tag: node.tag,
            size: node.byte_size.unwrap_or(0) as u32,
            pointee: node.type_ref,
            members: self.members(die),
            machine: self.debug.machine(die),
        })
    }
}

/// A plan that reads `size` bytes and follows `edges` whatever its state.
fn plan(size: u32, edges: Vec<Edge>) -> TypePlan {
    TypePlan {
        size,
        always: edges,
        ..TypePlan::default()
    }
}

/// The edge to a future of plan type `to` held inline at `offset`.
fn inline(offset: u64, to: u32) -> Edge {
    Edge {
        offset: offset as u32,
        to: EdgeTarget::Inline(to),
    }
}

/// The edge to a future of plan type `to` behind a thin pointer at `offset`.
fn pointer(offset: u64, to: u32) -> Edge {
    Edge {
        offset: offset as u32,
        to: EdgeTarget::Pointer(to),
    }
}

/// A combinator shown as its own line, `label`, over the future in `t`'s field `field`; a leaf
/// without that field.
fn combinator(b: &mut Builder<'_>, t: &Ty, field: &str, label: &str) -> Verdict {
    let Some((off, ty)) = std::member(t, &[field]) else {
        return Verdict::Leaf;
    };
    let edge = inline(off, b.ty(ty));
    let info = FrameInfo::new(label.into(), None, Source::Decoded);
    Verdict::Plan(plan(t.size, vec![edge]), Kind::Combinator(Arc::new(info)))
}

#[cfg(test)]
mod tests;
