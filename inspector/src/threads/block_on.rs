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
//! thread is blocked). Only the symbol table names those frames: this runs at every dump.
//!
//! A thread with two `block_on`s on its stack (one inside the other's future) is shown by the inner
//! one, which is the one running; the outer one is inside its poll.

use std::sync::Arc;

use asyncdump_walker::{Memory, Walker};

use super::registers::Thread;
use super::symbols::Symbols;
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
/// `mem`, their executors' frames named by `symbols`' symbol tables.
pub fn find(
    mem: &dyn Memory,
    mappings: &[Mapping],
    threads: &[Thread],
    plan: &Plan,
    symbols: &mut Symbols,
) -> Vec<Root> {
    if plan.block_ons.is_empty() || threads.is_empty() {
        return Vec::new();
    }
    let mut modules = Modules::new(mappings);
    let mem = &super::PageCache::new(mem);
    mem.fetch(threads.iter().flat_map(|t| super::stack_top(t.regs.sp)));
    let mut walker = Walker::default();
    let mut out = Vec::new();
    for t in threads {
        let walked = unwind::walk(mem, &mut modules, t.regs);
        let Some((at, b)) = innermost(&walked, &plan.block_ons) else {
            continue;
        };
        let found = match super::word_of(mem, &walked[at], &b.location) {
            None => Found::Missing(format!(
                "the DWARF gives {} no place for its future at this point of its code (optimised out?)",
                crate::names::short(&b.function)
            )),
            Some(0) => Found::Missing("its pinned future's pointer is null".into()),
            Some(_) if polled(&walked[..at], &modules, symbols) => Found::Polled,
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
/// its future rather than its executor parking, or polling a task of its runtime: the executable's
/// frames among them named by the symbol table (a library's, the C library's system call wrappers,
/// say nothing).
fn polled(inner: &[Frame], modules: &Modules, symbols: &mut Symbols) -> bool {
    let exe = symbols.exe().map(ToOwned::to_owned);
    inner.iter().any(|f| {
        let Some((path, base)) = modules.file_at(f.pc) else {
            return false;
        };
        if exe.as_deref() != Some(path) {
            return false;
        }
        let path = path.to_owned();
        match symbols.symbol(&path, base, f.pc) {
            Some(name) => !super::blocking::between_polls(&name),
            None => true,
        }
    })
}
