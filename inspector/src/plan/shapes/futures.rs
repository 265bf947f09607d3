//! futures-util's types: the futures behind `futures::join!` and `futures::select!`, `join_all`,
//! `MaybeDone` (tokio's too, which has the same shape), `FuturesUnordered` (and so `buffer_unordered`,
//! `FuturesOrdered`, a long `join_all`), the stream futures that borrow a stream (`next()`), and its
//! wrappers (`Map`, `Then`, `Flatten`, ...).

use std::sync::Arc;

use asyncdump_protocol::Case;

use super::std::member;
use super::{Rule, Ty, Verdict, combinator, inline, plan, pointer};
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

/// `FuturesUnordered`: its futures live in tasks of an intrusive list, from `head_all` through each
/// task's `next_all`; each future is a branch under one line. The list changes only while the task that
/// owns the set polls it, and an idle task's walk is the only one kept.
pub(super) const FUTURES_UNORDERED: Rule = Rule {
    name: "FuturesUnordered",
    matches: |t| {
        t.name
            .starts_with("futures_util::stream::futures_unordered::FuturesUnordered<")
    },
    plan: |b, t| {
        let Some((head, task)) = b.pointer_to(t.die, "head_all") else {
            return Verdict::Leaf;
        };
        let edge = pointer(head, b.ty(task));
        let label = "futures::stream::FuturesUnordered";
        let info = FrameInfo::new(label.into(), None, Source::Decoded);
        Verdict::Plan(plan(t.size, vec![edge]), Kind::Combinator(Arc::new(info)))
    },
};

/// One task of a `FuturesUnordered`: its future while it holds one (`future: Option<Fut>`, even a
/// leaf: it is what that branch awaits), and the next task. Not shown itself: its future hangs under
/// the set's line, beside the others.
pub(super) const FUTURES_UNORDERED_TASK: Rule = Rule {
    name: "FuturesUnordered task",
    matches: |t| {
        t.name
            .starts_with("futures_util::stream::futures_unordered::task::Task<")
    },
    plan: |b, t| {
        let (Some((next, _)), Some((cell, cell_ty))) =
            (b.pointer_to(t.die, "next_all"), member(t, &["future"]))
        else {
            return Verdict::Decline;
        };
        let Some((value, option)) = b.member(b.strip(cell_ty), &["value"]) else {
            return Verdict::Decline;
        };
        let (at, option) = (cell + value, b.strip(option));
        let Some((mut discr, variants)) = b.variants(option) else {
            return Verdict::Decline;
        };
        let values: Vec<Option<u64>> = variants.iter().map(|v| v.0).collect();
        let Some((some, vdie, voff)) = (variants.into_iter())
            .find(|v| v.1 == "Some")
            .map(|(value, _, vdie, voff)| (value, vdie, voff))
        else {
            return Verdict::Decline;
        };
        let Some((off, fut)) = b.member(vdie, &["__0"]) else {
            return Verdict::Decline;
        };
        discr.offset += at as u32;
        let future = inline(at + voff + off, b.ty(fut));
        let mut plan = enum_plan(
            t.size,
            discr,
            vec![Case {
                value: some,
                edges: vec![future],
            }],
            &values,
        );
        plan.always.push(pointer(next, b.ty(t.die)));
        Verdict::Plan(plan, Kind::Transparent)
    },
};

/// A future that borrows a stream (`StreamExt::next`, `select_next_some`): the stream itself, behind
/// the `&mut` this task holds for as long as it awaits.
pub(super) const STREAM_BORROW: Rule = Rule {
    name: "stream future over a borrowed stream",
    matches: |t| {
        t.name
            .starts_with("futures_util::stream::stream::next::Next<")
            || t.name
                .starts_with("futures_util::stream::stream::select_next_some::SelectNextSome<")
    },
    plan: |b, t| {
        let Some((off, stream)) = b.pointer_to(t.die, "stream") else {
            return Verdict::Decline;
        };
        let edge = pointer(off, b.ty(stream));
        Verdict::Plan(plan(t.size, vec![edge]), Kind::Transparent)
    },
};

/// `futures::future::select_all` and `select_ok`: their futures, a `Vec`, each a branch.
pub(super) const SELECT_ALL: Rule = Rule {
    name: "futures::future::select_all",
    matches: |t| {
        t.name
            .starts_with("futures_util::future::select_all::SelectAll<")
            || t.name
                .starts_with("futures_util::future::select_ok::SelectOk<")
    },
    plan: |b, t| {
        let label = match t.name.contains("::select_ok::") {
            true => "futures::future::select_ok",
            false => "futures::future::select_all",
        };
        combinator(b, t, "inner", label)
    },
};

/// `MaybeDone` (tokio's and futures') and `TryMaybeDone`: the future while it is not done.
pub(super) const MAYBE_DONE: Rule = Rule {
    name: "MaybeDone",
    matches: |t| is_maybe_done(&t.name),
    plan: |b, t| b.wrapper(t, true),
};

/// Any other `futures_util` type (`Map`, `Then`, `MapErr`, `Flatten`, ...): the inner future, through
/// the variant that still holds one, even a leaf (the adapter is not what the task waits on; what it
/// wraps is). A struct with more than its inner future to follow (`Fold`'s stream too) is left to the
/// rule for any struct.
pub(super) const WRAPPER: Rule = Rule {
    name: "futures_util wrapper",
    matches: |t| t.name.starts_with("futures_util::") && !is_maybe_done(&t.name),
    plan: |b, t| b.wrapper(t, true),
};

fn is_maybe_done(name: &str) -> bool {
    name.starts_with("tokio::future::maybe_done::MaybeDone<")
        || name.starts_with("futures_util::future::maybe_done::MaybeDone<")
        || name.starts_with("futures_util::future::try_maybe_done::TryMaybeDone<")
}

/// The variants of a wrapper that still hold its future.
const HOLDING: [&str; 7] = [
    "Future",
    "Incomplete",
    "First",
    "Second",
    "Pending",
    "Small",
    "Big",
];
/// The fields that hold it.
const INNER: [&str; 5] = ["future", "f", "__0", "fut", "elems"];

impl Builder<'_> {
    /// A wrapper's plan: follow the inner future through the variant that still holds one (or the
    /// struct's inner field, when no other field leads further). Unless `leaves` is set, only a future
    /// that leads further counts; declined when nothing does.
    fn wrapper(&mut self, t: &Ty, leaves: bool) -> Verdict {
        let Some((discr, variants)) = self.variants(t.die) else {
            let Some((off, ty)) = member(t, &["inner", "future", "fut"]) else {
                return Verdict::Decline;
            };
            let to = self.ty(ty);
            let others = (t.members.iter())
                .filter(|(_, o, _)| *o != off)
                .any(|&(_, _, ty)| self.leads_further_field(ty));
            if others || (!leaves && self.is_leaf(to)) {
                return Verdict::Decline;
            }
            return Verdict::Plan(plan(t.size, vec![inline(off, to)]), Kind::Transparent);
        };
        let values: Vec<Option<u64>> = variants.iter().map(|v| v.0).collect();
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
        Verdict::Plan(enum_plan(t.size, discr, cases, &values), Kind::Transparent)
    }
}
