//! The program's threads as holders: a lock guard, a permit or a channel's end kept in a local of a
//! function on a thread's stack (a `spawn_blocking` closure that took a lock, a thread the program
//! started with a sender), found so that the task waiting for it is told who holds it.
//!
//! `registers` says where each thread's stack starts, `unwind` walks it by the call frame
//! information, and this module matches each frame's code address against the plan's
//! [`FrameLocalPlan`]s (the locals in scope there whose type may hold something) to give the values
//! stage their addresses, read like a static's. The wait graph stage then names the thread.
//!
//! Optimised code keeps a local in a register, or in pieces: its bytes are put together from the
//! frame's registers (where the walk knows them, see `unwind`) and given to the values stage at an
//! address no process maps ([`REGISTER_BYTES_AT`]), so that it is read like any other. A local whose
//! registers are not known is left out.
//!
//! What is left out, by design: a thread that is running (its stack moves under the read).
//!
//! A local that was moved out of keeps its old bits until its place is used again: two locals of
//! one thread that hold the same thing are told once, the one declared deeper (then in the
//! narrower scope) first. Across threads nothing tells the leftover from the holder: where more
//! are found than there can be, the wait line says so.

pub mod block_on;
pub mod blocking;
pub mod registers;
pub mod stacks;
pub mod starved;
pub mod symbols;
pub mod unwind;

pub use registers::Thread;
pub use unwind::{Frame, Mapping, Modules};

use asyncdump_walker::Memory;

use crate::dwarf::{FrameBase, Location, Place};
use crate::model::Dump;
use crate::model::values::ThreadLocal;
use crate::model::values::{Check, Local, Value};
use crate::plan::Plan;
use crate::plan::values::FrameLocalPlan;

/// Where the bytes of locals kept in registers are put for the values stage: past the top of the
/// lower half of the address space, where the kernel maps nothing for a process (x86_64 and
/// aarch64 alike), each local a page further than the last.
pub const REGISTER_BYTES_AT: u64 = 0xffff_ff00_0000_0000;
const REGISTER_BYTES_STRIDE: u64 = 0x1000;

/// Gives `dump` the locals of `threads`' stack frames that may hold a lock guard or a channel's
/// end, unread, for the values stage to read with the frames' locals (as it reads the statics).
pub fn add_locals(
    dump: &mut Dump,
    mem: &dyn Memory,
    mappings: &[Mapping],
    threads: &[Thread],
    plan: &Plan,
) {
    let (locals, types) = (&plan.frame_locals, &plan.values);
    if locals.is_empty() || threads.is_empty() {
        return;
    }
    let mut modules = Modules::new(mappings);
    // A walk reads a word at a time; through an agent each read is an exchange.
    let mem = &PageCache::new(mem);
    // The top of every stack at once, in one batch: where every walk starts.
    mem.fetch(threads.iter().flat_map(|t| stack_top(t.regs.sp)));
    for t in threads {
        for f in unwind::walk(mem, &mut modules, t.regs) {
            let mut here: Vec<&FrameLocalPlan> = (locals.iter())
                .filter(|l| (l.scope.0..l.scope.1).contains(&f.pc))
                .collect();
            here.sort_by_key(|l| (std::cmp::Reverse(l.depth), l.scope.1 - l.scope.0));
            for l in here {
                let size = types.get(l.ty).map_or(0, |t| t.size);
                let Some(addr) = place(dump, mem, &f, &l.location, size) else {
                    continue;
                };
                dump.on_threads.push(ThreadLocal {
                    tid: t.tid,
                    thread: t.name.clone(),
                    function: l.function.to_string(),
                    declared: l.declared.clone(),
                    local: Local::new(
                        l.name.clone(),
                        (types.get(l.ty)).map_or_else(|| "".into(), |t| t.name.clone()),
                        Value::Unread {
                            shape: l.ty,
                            addr,
                            check: Check::default(),
                        },
                    ),
                });
            }
        }
    }
}

/// Where a local of `size` bytes at `location` is read from in frame `f`: its address in memory,
/// or, for one kept in registers, where its bytes put together were given to `dump`. `None` where
/// a register or the frame base it needs is not known, or its pieces do not make up its size.
fn place(
    dump: &mut Dump,
    mem: &dyn Memory,
    f: &Frame,
    location: &Location,
    size: u32,
) -> Option<u64> {
    let base = |b: FrameBase| match b {
        FrameBase::Sp => Some(f.sp),
        FrameBase::Cfa => f.cfa,
        FrameBase::Fp => f.fp(),
    };
    let reg = |r: u16| f.register(r);
    let mut bytes = Vec::new();
    match location {
        Location::Whole(Place::Frame { .. } | Place::Memory { .. }) => {
            return location.address(reg, base);
        }
        &Location::Whole(at) => piece(&mut bytes, mem, at, size.min(8), reg, base)?,
        Location::Pieces(pieces) => {
            for &(len, at) in pieces.iter() {
                piece(&mut bytes, mem, at, len, reg, base)?;
            }
        }
    }
    if bytes.len() != size as usize {
        return None;
    }
    let addr = REGISTER_BYTES_AT + REGISTER_BYTES_STRIDE * dump.register_bytes.len() as u64;
    dump.register_bytes.push((addr, bytes));
    Some(addr)
}

/// Where a local at `location` lies in frame `f`, where it lies whole in memory and the registers
/// that place it are known.
pub(crate) fn address_of(f: &Frame, location: &Location) -> Option<u64> {
    location.address(|r| f.register(r), |b| base_of(f, b))
}

/// The frame base `b` of frame `f`, where the walk knows it.
fn base_of(f: &Frame, b: FrameBase) -> Option<u64> {
    match b {
        FrameBase::Sp => Some(f.sp),
        FrameBase::Cfa => f.cfa,
        FrameBase::Fp => f.fp(),
    }
}

/// The word a local of 8 bytes at `location` holds in frame `f` (a pointer): read from memory, or
/// from the frame's registers where it is kept in them. `None` where what it needs is not known.
pub(crate) fn word_of(mem: &dyn Memory, f: &Frame, location: &Location) -> Option<u64> {
    let base = |b: FrameBase| base_of(f, b);
    let reg = |r: u16| f.register(r);
    let mut bytes = Vec::with_capacity(8);
    match location {
        &Location::Whole(at) => piece(&mut bytes, mem, at, 8, reg, base)?,
        Location::Pieces(pieces) => {
            for &(len, at) in pieces.iter() {
                piece(&mut bytes, mem, at, len, reg, base)?;
            }
        }
    }
    Some(u64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// Adds `len` bytes of a value from `at` to `bytes`: a register's or a constant's low bytes, or
/// memory read now, as the thread stands.
fn piece(
    bytes: &mut Vec<u8>,
    mem: &dyn Memory,
    at: Place,
    len: u32,
    reg: impl Fn(u16) -> Option<u64>,
    base: impl Fn(FrameBase) -> Option<u64>,
) -> Option<()> {
    let len = len as usize;
    let word = match at {
        Place::Register(r) => reg(r)?,
        Place::Literal(v) => v,
        Place::Memory { .. } | Place::Frame { .. } => {
            let addr = Location::Whole(at).address(reg, base)?;
            bytes.extend(mem.read_vec(addr, len)?);
            return Some(());
        }
    };
    bytes.extend(word.to_ne_bytes().get(..len)?);
    Some(())
}

/// Whole pages of a source, each read once on first use: the walks of a process's threads read
/// their stacks and the code before their return addresses a few bytes at a time, and each read
/// of another process is a system call (through an agent, an exchange). A page is mapped whole or
/// not at all, so a page that fails fails every read in it, as it would have.
pub(crate) struct PageCache<'a> {
    inner: &'a dyn Memory,
    pages: std::cell::RefCell<crate::model::FastMap<u64, Option<Box<[u8]>>>>,
}

const PAGE: u64 = 4096;
/// How much of each stack above its pointer is read before the walks: most walks of a blocked
/// thread stay within it.
const STACK_TOP: u64 = 16 * 1024;

impl<'a> PageCache<'a> {
    pub(crate) fn new(inner: &'a dyn Memory) -> PageCache<'a> {
        PageCache {
            inner,
            pages: Default::default(),
        }
    }

    /// Reads the pages (their addresses) of `pages` not read yet, in one batch.
    pub(crate) fn fetch(&self, pages: impl Iterator<Item = u64>) {
        let mut cache = self.pages.borrow_mut();
        let mut missing: Vec<u64> = pages.filter(|p| !cache.contains_key(p)).collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return;
        }
        let mut bufs = vec![vec![0u8; PAGE as usize]; missing.len()];
        let into = bufs.iter_mut().map(Vec::as_mut_slice);
        let read = (&self.inner).read_each(missing.iter().copied(), into);
        for ((p, buf), ok) in missing.into_iter().zip(bufs).zip(read) {
            cache.insert(p, ok.then(|| buf.into_boxed_slice()));
        }
    }

    /// The pages `[addr, addr + len)` lies in.
    fn pages_of(addr: u64, len: usize) -> impl Iterator<Item = u64> {
        let last = addr.saturating_add(len.max(1) as u64 - 1) / PAGE;
        (addr / PAGE..=last).map(|p| p * PAGE)
    }
}

impl Memory for PageCache<'_> {
    fn read_many(
        &self,
        reads: &mut [asyncdump_walker::memory::Read<'_>],
    ) -> Result<(), asyncdump_walker::memory::Unreadable> {
        let wanted = (reads.iter())
            .filter(|r| r.addr != 0)
            .flat_map(|r| Self::pages_of(r.addr, r.dst.len()));
        self.fetch(wanted.collect::<Vec<_>>().into_iter());
        let pages = self.pages.borrow();
        for r in reads.iter_mut() {
            let mut at = r.addr;
            let mut done = 0;
            r.failed = r.addr == 0;
            while !r.failed && done < r.dst.len() {
                let page = at / PAGE * PAGE;
                let Some(Some(bytes)) = pages.get(&page) else {
                    r.failed = true;
                    break;
                };
                let from = (at - page) as usize;
                let n = (PAGE as usize - from).min(r.dst.len() - done);
                r.dst[done..done + n].copy_from_slice(&bytes[from..from + n]);
                (done, at) = (done + n, at + n as u64);
            }
        }
        Ok(())
    }
}

/// The pages of a stack's top, from its pointer `sp`: read for every thread in one batch before the
/// walks, which most often stay within them.
pub(crate) fn stack_top(sp: u64) -> impl Iterator<Item = u64> {
    (0..STACK_TOP / PAGE).map(move |k| sp / PAGE * PAGE + k * PAGE)
}

/// The words of a stack's top from its pointer `sp` (what [`stack_top`] fetched), as far as they
/// can be read.
pub(crate) fn top_words(mem: &PageCache<'_>, sp: u64) -> impl Iterator<Item = u64> {
    let sp = sp & !7;
    let end = sp / PAGE * PAGE + STACK_TOP;
    let mut pages = Vec::new();
    let mut at = sp;
    while at < end {
        let len = (PAGE - at % PAGE).min(end - at) as usize;
        match mem.read_vec(at, len) {
            Some(bytes) => pages.extend(bytes),
            None => break,
        }
        at += len as u64;
    }
    let words: Vec<u64> = (pages.chunks_exact(8))
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()))
        .collect();
    words.into_iter()
}

/// Drops what was read from the stacks of `threads` that moved while it was read (live `pid`).
pub fn keep_unmoved(dump: &mut Dump, pid: u32, threads: &[Thread]) {
    if dump.on_threads.is_empty() {
        return;
    }
    let moved = moved(pid, threads);
    dump.on_threads.retain(|l| !moved.contains(&l.tid));
}

/// The threads of `threads` (of live `pid`) that are no longer where they were read.
pub fn moved(pid: u32, threads: &[Thread]) -> Vec<u32> {
    let still = registers::still_there(pid, threads);
    (threads.iter().zip(still))
        .filter(|(_, s)| !s)
        .map(|(t, _)| t.tid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_walker::ImageMemory;
    use std::cell::Cell;

    /// A source that counts the reads asked of it.
    struct Counted<'a>(&'a ImageMemory, Cell<usize>);

    impl Memory for Counted<'_> {
        fn read_many(
            &self,
            reads: &mut [asyncdump_walker::memory::Read<'_>],
        ) -> Result<(), asyncdump_walker::memory::Unreadable> {
            self.1.set(self.1.get() + reads.len());
            self.0.read_many(reads)
        }
    }

    #[test]
    fn a_page_is_read_once_and_reads_across_pages_or_into_a_hole_answer_as_the_source_would() {
        let mut image = ImageMemory::new();
        let bytes: Vec<u8> = (0..2 * PAGE).map(|i| i as u8).collect();
        assert!(image.insert(0x10000, bytes.clone()));
        let source = Counted(&image, Cell::new(0));
        let cache = PageCache::new(&source);
        assert_eq!(cache.read_word(0x10008), image.read_word(0x10008));
        assert_eq!(cache.read_word(0x10010), image.read_word(0x10010));
        assert_eq!(source.1.get(), 1, "one page read, once");
        // Across the two pages.
        let across = cache.read_vec(0x10ffc, 8);
        assert_eq!(across.as_deref(), Some(&bytes[0xffc..0x1004]));
        assert_eq!(source.1.get(), 2);
        // Into the page after them, which is not there: failed, as the source's read would.
        assert_eq!(cache.read_vec(0x11ffc, 8), None);
        assert_eq!(image.read_vec(0x11ffc, 8), None);
        assert_eq!(cache.read_word(0), None);
    }
}
