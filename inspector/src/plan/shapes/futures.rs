//! futures-util's types: the futures behind `futures::join!` and `futures::select!`, `join_all`,
//! `MaybeDone` (tokio's too, which has the same shape), and its wrappers (`Map`, `Then`, `Flatten`, ...).

use std::sync::Arc;

use asyncdump_protocol::Case;

use super::std::member;
use super::{Rule, Ty, Verdict, combinator, inline, plan};
use crate::model::{FrameInfo, Source};
use crate::plan::Kind;
use crate::plan::builder::{Builder, enum_plan};

/// `futures::join!` / `futures::try_join!`: a `PollFn` whose closure holds `_fut0`, `_fut1`, ... (each
/// a `Pin<&mut MaybeDone>` into the enclosing state machine); `futures::select!`: one whose closure
/// holds `_ref___0`, `_ref___1`, ... (each a `&mut` to a branch's fused future, which shows nothing
/// once it is done). Branches in order. Another `PollFn` is declined.
pub(super) const JOIN_OR_SELECT: Rule = Rule {
    name: "futures::join! / futures::select!",
    matches: |t| t.name.starts_with("futures_util::future::poll_fn::PollFn<"),
    plan: |b, t| {
        let Some((f_off, closure)) = member(t, &["f"]) else {
            return Verdict::Decline;
        };
        let members = b.members(b.strip(closure));
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
            _ => return Verdict::Decline,
        };
        let edges = branches
            .into_iter()
            .map(|(_, off, ty)| inline(f_off + off, b.ty(ty)))
            .collect();
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        Verdict::Plan(plan(t.size, edges), Kind::Combinator(Arc::new(info)))
    },
};

/// `futures::future::join_all`: up to 30 futures are a boxed slice of `MaybeDone`s, followed by the
/// rules for those. More become a `FuturesOrdered`, whose linked tasks this does not follow.
pub(super) const JOIN_ALL: Rule = Rule {
    name: "futures::future::join_all",
    matches: |t| {
        t.name
            .starts_with("futures_util::future::join_all::JoinAll<")
    },
    plan: |b, t| combinator(b, t, "kind", "futures::future::join_all"),
};

/// `MaybeDone` (tokio's and futures') and `TryMaybeDone`: the future while it is not done.
pub(super) const MAYBE_DONE: Rule = Rule {
    name: "MaybeDone",
    matches: |t| is_maybe_done(&t.name),
    plan: |b, t| b.wrapper(t, true),
};

/// Any other `futures_util` type (`Map`, `Then`, `Flatten`, ...): the inner future, through the
/// variant that still holds one, when it leads to a future the plan can read further.
pub(super) const WRAPPER: Rule = Rule {
    name: "futures_util wrapper",
    matches: |t| t.name.starts_with("futures_util::") && !is_maybe_done(&t.name),
    plan: |b, t| b.wrapper(t, false),
};

fn is_maybe_done(name: &str) -> bool {
    name.starts_with("tokio::future::maybe_done::MaybeDone<")
        || name.starts_with("futures_util::future::maybe_done::MaybeDone<")
        || name.starts_with("futures_util::future::try_maybe_done::TryMaybeDone<")
}

/// The variants of a wrapper that still hold its future.
const HOLDING: [&str; 6] = [
    "Future",
    "Incomplete",
    "First",
    "Second",
    "Pending",
    "Small",
];
/// The fields that hold it.
const INNER: [&str; 5] = ["future", "f", "__0", "fut", "elems"];

impl Builder<'_> {
    /// A wrapper's plan: follow the inner future through the variant that still holds one (or the
    /// struct's inner field). Unless `leaves` is set, only a future that leads further counts; declined
    /// when nothing does.
    fn wrapper(&mut self, t: &Ty, leaves: bool) -> Verdict {
        let Some((discr, variants)) = self.variants(t.die) else {
            let Some((off, ty)) = member(t, &["inner", "future", "fut"]) else {
                return Verdict::Decline;
            };
            let to = self.ty(ty);
            if self.is_leaf(to) {
                return Verdict::Decline;
            }
            return Verdict::Plan(plan(t.size, vec![inline(off, to)]), Kind::Transparent);
        };
        let mut cases = Vec::new();
        for (value, vname, vdie, voff) in variants {
            if !HOLDING.contains(&vname.as_str()) {
                continue;
            }
            if let Some((off, ty)) = self.member(vdie, &INNER) {
                let to = self.ty(ty);
                if leaves || !self.is_leaf(to) {
                    let edges = vec![inline(voff + off, to)];
                    cases.push(Case { value, edges });
                }
            }
        }
        if cases.is_empty() {
            return Verdict::Decline;
        }
        Verdict::Plan(enum_plan(t.size, discr, cases), Kind::Transparent)
    }
}
