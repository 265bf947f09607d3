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

pub mod registers;
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
                    local: Local {
                        name: l.name.clone(),
                        type_name: (types.get(l.ty)).map_or_else(|| "".into(), |t| t.name.clone()),
                        value: Value::Unread {
                            shape: l.ty,
                            addr,
                            check: Check::default(),
                        },
                        acquired: None,
                    },
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

/// Drops what was read from the stacks of `threads` that moved while it was read (live `pid`).
pub fn keep_unmoved(dump: &mut Dump, pid: u32, threads: &[Thread]) {
    if dump.on_threads.is_empty() {
        return;
    }
    let still = registers::still_there(pid, threads);
    let moved: Vec<u32> = (threads.iter().zip(still))
        .filter(|(_, s)| !s)
        .map(|(t, _)| t.tid)
        .collect();
    dump.on_threads.retain(|l| !moved.contains(&l.tid));
}
