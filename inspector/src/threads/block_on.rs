//! The futures `block_on`s run: a thread's own future, which no runtime lists (the body of
//! `#[tokio::main]` and `#[tokio::test]`, a CLI's calls made from `main`, a
//! `futures::executor::block_on` inside a task), found on the thread's stack and walked like a
//! task's.
//!
//! The plan knows where each `block_on` keeps its future: its `Pin<&mut F>` local
//! ([`crate::plan::BlockOnPlan`]), over which code, and `F`'s plan type. Each thread whose stack was
//! read is walked by its call frame information; its innermost frame inside such a scope is the
//! `block_on` that drives it now, and the local's value is where `F` is. Where the frames between
//! that one and the thread's innermost are its executor's parking (or the poll of one of its
//! runtime's tasks), the future is between two polls and is walked; where they are anything else,
//! the future is being polled on that thread and is not walked (the threads stage says where its
//! thread is blocked). Those frames are told by their code's place alone, in the plan's ranges of
//! the executors' functions (`Plan::executor_code`): this runs at every dump, and names nothing.
//!
//! A `block_on` deeper in its thread's stack than the top the stage reads (16 KiB: a parked
//! executor's own frames fit in it many times) is not looked for; its future, which is then being
//! polled on that thread anyway, is not shown.
//!
//! A thread with two `block_on`s on its stack (one inside the other's future) is shown by the inner
//! one, which is the one running; the outer one is inside its poll.

use std::sync::Arc;

use asyncdump_walker::{Memory, Walker};

use super::registers::Thread;
use super::unwind::{self, Frame, Mapping, Modules};
use crate::plan::{BlockOnPlan, Plan};

/// A thread's `block_on` and its future.
#[derive(Debug, Clone)]
pub struct Root {
    pub tid: u32,
    /// The thread's name, where known.
    pub thread: Option<String>,
    /// The `block_on` function (or the closure in it) whose frame keeps the future.
    pub function: Arc<str>,
    /// The future's type, as the DWARF names it.
    pub future: Arc<str>,
    pub found: Found,
}

/// What was found of a `block_on`'s future.
#[derive(Debug, Clone)]
pub enum Found {
    /// Between two polls: its walk.
    Walked(asyncdump_walker::Walk),
    /// Being polled on its thread: not walked, its stack moves with the poll.
    Polled,
    /// Its `block_on` is on the stack but the future could not be read: why.
    Missing(String),
}

/// The `block_on` futures on the stacks of `threads` (whose registers are known), read through
/// `mem`; `exe` is where the executable's code is mapped (the plan's addresses are there).
pub fn find(
    mem: &dyn Memory,
    mappings: &[Mapping],
    threads: &[Thread],
    plan: &Plan,
    exe: Option<&std::path::Path>,
) -> Vec<Root> {
    if plan.block_ons.is_empty() || threads.is_empty() {
        return Vec::new();
    }
    let of_exe = || mappings.iter().filter(|m| Some(m.path.as_path()) == exe);
    let code =
        of_exe().map(|m| m.start).min().unwrap_or(0)..of_exe().map(|m| m.end).max().unwrap_or(0);
    let mut modules = Modules::new(mappings);
    let mem = &super::PageCache::new(mem);
    mem.fetch(threads.iter().flat_map(|t| super::stack_top(t.regs.sp)));
    let scopes = merged_scopes(plan);
    let mut walker = Walker::default();
    let mut out = Vec::new();
    for t in threads {
        // Only a stack that holds a return address into a `block_on` is walked: most threads
        // (a runtime's workers) have none, and a walk is the cost of this stage.
        // The scopes are the executable's code: most words are not, and cost one compare.
        let into = |w: u64| {
            let pc = w.wrapping_sub(1);
            (code.is_empty() || code.contains(&pc)) && in_scope(&scopes, pc)
        };
        if !super::top_words(mem, t.regs.sp).any(into) {
            continue;
        }
        let walked = unwind::walk(mem, &mut modules, t.regs);
        let Some((at, b)) = innermost(&walked, &plan.block_ons) else {
            continue;
        };
        let place = match b.by_value {
            true => super::address_of(&walked[at], &b.location),
            false => super::word_of(mem, &walked[at], &b.location),
        };
        let found = match place {
            None => Found::Missing(format!(
                "where {} keeps it could not be read here (a register only a stop reads, or memory that is not mapped)",
                crate::names::short(&b.function)
            )),
            Some(0) => Found::Missing("its pinned future's pointer is null".into()),
            Some(_) if polled(&walked[..at], &code, plan) => Found::Polled,
            Some(addr) => Found::Walked(walker.walk(mem, &plan.walk, b.ty, addr)),
        };
        out.push(Root {
            tid: t.tid,
            thread: t.name.clone(),
            function: b.function.clone(),
            future: b.future.clone(),
            found,
        });
    }
    out
}

/// Takes back what was read of the futures of the threads `moved` (live, they left the place
/// they were read in while they were read: the future may have been polled meanwhile).
pub fn forget_moved(roots: &mut [Root], moved: &[u32]) {
    for r in roots.iter_mut().filter(|r| moved.contains(&r.tid)) {
        r.found =
            Found::Missing("its thread ran while it was read (dump again, or with --stop)".into());
    }
}

/// Every `block_on`'s scope, merged where they overlap, sorted.
fn merged_scopes(plan: &Plan) -> Vec<(u64, u64)> {
    let mut scopes: Vec<(u64, u64)> = plan.block_ons.iter().map(|b| b.scope).collect();
    scopes.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(scopes.len());
    for (lo, hi) in scopes {
        match merged.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// Whether code address `pc` is inside one of `scopes` (merged, sorted).
fn in_scope(scopes: &[(u64, u64)], pc: u64) -> bool {
    let i = scopes.partition_point(|s| s.0 <= pc);
    i > 0 && pc < scopes[i - 1].1
}

/// The innermost frame of `walked` inside a `block_on`'s scope, and that `block_on`.
fn innermost<'p>(walked: &[Frame], plans: &'p [BlockOnPlan]) -> Option<(usize, &'p BlockOnPlan)> {
    walked.iter().enumerate().find_map(|(i, f)| {
        let b = plans
            .iter()
            .find(|b| (b.scope.0..b.scope.1).contains(&f.pc))?;
        Some((i, b))
    })
}

/// Whether the frames `inner` (those inside a `block_on`'s frame, innermost first) are the poll of
/// its future rather than its executor parking, or polling a task of its runtime (the program's
/// code inside that task's poll is the task's): each frame's code looked up in the plan's
/// executor code, from the `block_on` in. Frames outside the executable (the C library's system
/// call wrappers) say nothing.
fn polled(inner: &[Frame], exe: &std::ops::Range<u64>, plan: &Plan) -> bool {
    for f in inner.iter().rev().filter(|f| exe.contains(&f.pc)) {
        match plan.executor_code_at(f.pc) {
            Some(true) => return false,
            Some(false) => continue,
            None => return true,
        }
    }
    false
}
