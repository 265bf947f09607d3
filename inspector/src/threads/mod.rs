//! The program's threads as holders: a lock guard, a permit or a channel's end kept in a local of a
//! function on a thread's stack (a `spawn_blocking` closure that took a lock, a thread the program
//! started with a sender), found so that the task waiting for it is told who holds it.
//!
//! `registers` says where each thread's stack starts, `unwind` walks it by the call frame
//! information, and this module matches each frame's code address against the plan's
//! [`FrameLocalPlan`]s (the locals in scope there whose type may hold something) to give the values
//! stage their addresses, read like a static's. The wait graph stage then names the thread.
//!
//! What is left out, by design: a thread that is running (its stack moves under the read), and
//! locals of optimised code (they live in registers as often as on the stack; see `dwarf::bodies`).
//! A local that was moved out of keeps its old bits until its scope ends: two locals of one frame
//! that hold the same thing are told once, the one declared later (narrower scope) first.

pub mod registers;
pub mod unwind;

pub use registers::Thread;
pub use unwind::{Mapping, Modules};

use asyncdump_walker::Memory;

use crate::dwarf::FrameBase;
use crate::model::Dump;
use crate::model::values::ThreadLocal;
use crate::model::values::{Check, Local, Value};
use crate::plan::Plan;
use crate::plan::values::FrameLocalPlan;

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
            here.sort_by_key(|l| l.scope.1 - l.scope.0);
            for l in here {
                let base = match l.base {
                    FrameBase::Sp => Some(f.sp),
                    FrameBase::Cfa => f.cfa,
                    FrameBase::Fp => f.fp,
                };
                let Some(addr) = base.and_then(|b| b.checked_add_signed(l.offset)) else {
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
