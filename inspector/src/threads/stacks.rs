//! The threads stage: what every thread of the process is doing, read from its stack and its
//! system call. Each thread that is not running (or every one, held stopped or in a core) is walked
//! by its call frame information, its frames named (`symbols`) and read by the rules of
//! `blocking`: its role, whether it waits for work or is blocked, in what, and inside the poll of
//! which task. A runtime whose every worker is blocked inside a poll while tasks wait is said once.
//!
//! The task a worker polls is told by the code: the frame of `tokio::runtime::task::raw::poll`
//! on its stack is the one monomorphised for the task's future type, whose address tokio keeps in
//! the task's vtable. Where more running tasks than one share that type, the stack is searched for
//! the task's address, as the poll keeps it; where that does not single one out, none is named.
//!
//! A running thread is listed as running, unread: its stack moves under any read. So is one read
//! live that left its system call while it was read ([`forget_moved`]): never a torn stack.

use asyncdump_walker::Memory;

use super::blocking;
use super::registers::Thread;
use super::symbols::Symbols;
use super::unwind::{self, Frame, MAX_FRAMES, Mapping, Modules};
use crate::model::threads::{Blocking, Doing, NativeFrame, ThreadRole, ThreadView};
use crate::model::{Dump, State, THREAD};
use crate::names::path_of;

/// What the stage reads a process's threads from.
pub struct Sources<'a> {
    pub mem: &'a dyn Memory,
    pub mappings: &'a [Mapping],
    /// The threads whose registers are known: not running, held stopped, or a core's.
    pub threads: &'a [Thread],
    /// The other threads, running: their ids and names.
    pub running: Vec<(u32, Option<String>)>,
    /// A descriptor of the process, described (a socket's ends), where it can be.
    pub what_fd: &'a dyn Fn(i32) -> Option<String>,
    /// Where a thread parked by parking_lot keeps the key it parks under, where the plan knows.
    pub parked: Option<crate::plan::ParkedKey>,
}

/// Whether the stage has anything to say of `dump`: every thread was asked for, or a task is
/// running (its worker may be blocked inside its poll).
pub fn wanted(dump: &Dump, every_thread: bool) -> bool {
    every_thread || dump.tasks.iter().any(|t| t.state == State::Running)
}

/// Fills `dump.threads`, the running tasks' threads and `dump.starved` from `src`, its code named by
/// `symbols` (kept by a session from one snapshot to the next).
pub fn read(dump: &mut Dump, src: &Sources<'_>, symbols: &mut Symbols) {
    let mut modules = Modules::new(src.mappings);
    let mem = &super::PageCache::new(src.mem);
    mem.fetch(src.threads.iter().flat_map(|t| super::stack_top(t.regs.sp)));
    let read_word = |at: u64| mem.read_word(at);
    let mut views = Vec::new();
    for t in src.threads {
        let walked = unwind::walk(mem, &mut modules, t.regs);
        let frames = name_frames(&walked, &modules, symbols);
        let mut doing = blocking::doing(t.syscall.as_ref(), &frames, &read_word, src.what_fd);
        if let Doing::Blocked {
            on:
                Blocking::Lock {
                    kind,
                    addr,
                    static_name,
                },
        } = &mut doing
        {
            // parking_lot parks a thread on a word of its own: the lock is the key it parks under.
            if kind.starts_with("parking_lot::") {
                *addr = (src.parked)
                    .and_then(|p| p.key_of(*addr, &read_word))
                    .unwrap_or(0);
            }
            *static_name = symbols.static_in_exe(&modules, *addr);
        }
        let polling = polled_task(dump, mem, (&walked, &frames), &modules, symbols);
        views.push(ThreadView {
            tid: t.tid,
            name: t.name.clone(),
            role: blocking::role(&frames),
            doing,
            polling,
            unwind_stopped: stopped_at(&walked, &frames),
            frames,
        });
    }
    views.extend(src.running.iter().map(|(tid, name)| ThreadView {
        tid: *tid,
        name: name.clone(),
        role: ThreadRole::Other,
        doing: Doing::Running,
        polling: None,
        frames: Vec::new(),
        unwind_stopped: None,
    }));
    views.sort_by_key(|v| v.tid);
    // A thread inside the poll of its own future (a `block_on`'s) polls that.
    for v in views.iter_mut().filter(|v| v.polling.is_none()) {
        let own = THREAD | u64::from(v.tid);
        if dump.task(own).is_some_and(|t| t.state == State::Running) {
            v.polling = Some(own);
        }
    }
    for v in &views {
        let Some(task) =
            (dump.tasks.iter_mut()).find(|t| Some(t.id) == v.polling && t.block_on.is_none())
        else {
            continue;
        };
        task.thread.get_or_insert(crate::model::Thread {
            tid: v.tid,
            name: v.name.clone(),
        });
    }
    dump.starved = super::starved::find(dump, &views);
    dump.threads = views;
}

/// Takes back what was read of the threads `moved` (live, they left the place they were read in
/// while their stacks were read: what was read may be torn): each is listed as running, unread, no
/// task is said to run on it, and the starved runtime is told again without it.
pub fn forget_moved(dump: &mut Dump, moved: &[u32]) {
    if moved.is_empty() {
        return;
    }
    for v in dump.threads.iter_mut().filter(|v| moved.contains(&v.tid)) {
        let polled = v.polling.take();
        if let Some(task) = (dump.tasks.iter_mut()).find(|t| Some(t.id) == polled) {
            task.thread = task.thread.take().filter(|th| th.tid != v.tid);
        }
        v.doing = Doing::Running;
        v.frames.clear();
        v.unwind_stopped = None;
    }
    dump.starved = super::starved::find(dump, &dump.threads);
}

/// The walked frames named, each with the calls inlined at it, innermost first.
fn name_frames(walked: &[Frame], modules: &Modules, symbols: &mut Symbols) -> Vec<NativeFrame> {
    let mut out = Vec::new();
    for f in walked {
        match modules.file_at(f.pc) {
            Some((path, base)) => {
                let path = path.to_owned();
                out.extend(symbols.frames(&path, base, f.pc));
            }
            None => out.push(NativeFrame {
                function: format!("?? at {:#x}", f.pc).into(),
                file: None,
                line: 0,
                inlined: false,
                library: None,
                own: false,
            }),
        }
    }
    out
}

/// Where and why the walk stopped short of the outermost frame, if it did.
fn stopped_at(walked: &[Frame], frames: &[NativeFrame]) -> Option<String> {
    let last = walked.last()?;
    let at = frames.last().map_or("??", |f| &f.function);
    if walked.len() == MAX_FRAMES {
        return Some(format!("cut at {MAX_FRAMES} frames, in {at}"));
    }
    last.cfa.is_none().then(|| {
        format!(
            "stopped at {at} ({:#x}): no frame information there, or the stack above could not be read",
            last.pc
        )
    })
}

/// Most bytes of a stack searched for a task's address.
const SEARCHED: u64 = 64 << 10;
/// How far into a task's allocation a pointer may point and still be taken as the task's.
const INTO_TASK: u64 = 256;

/// The running task whose poll is on the stack `walked` (its frames `named`), by the function of
/// its frames: the poll function of the task's type, and where several running tasks share it,
/// the one whose address the stack holds (alone); where optimised code left no frame of it, the
/// one whose address the stack holds up to the task harness's frame (alone).
fn polled_task(
    dump: &Dump,
    mem: &dyn Memory,
    (walked, named): (&[Frame], &[NativeFrame]),
    modules: &Modules,
    symbols: &mut Symbols,
) -> Option<u64> {
    let running: Vec<_> = (dump.tasks.iter())
        .filter(|t| t.state == State::Running)
        .filter_map(|t| Some((t.id, t.tokio_task?)))
        .collect();
    if running.is_empty() {
        return None;
    }
    // Innermost first: a task polled inside another's poll (a nested runtime) is the one running.
    for f in walked {
        let Some((path, base)) = modules.file_at(f.pc) else {
            continue;
        };
        let path = path.to_owned();
        let Some(start) = symbols.function_start(&path, base, f.pc) else {
            continue;
        };
        let of_type: Vec<_> = running.iter().filter(|(_, t)| t.poll_fn == start).collect();
        match of_type.as_slice() {
            [] => continue,
            [(id, _)] => return Some(*id),
            several => return held_alone(mem, walked[0].sp, f, several),
        }
    }
    // Optimised code: the poll function tail-calls its task's harness, and leaves no frame. The
    // harness's frame keeps the task's address. Each walked frame is named by a group of frames
    // that ends with its one not inlined: the harness's walked frame is counted by those.
    let mut walked_at = 0;
    let harness = named.iter().find_map(|n| {
        let here = walked_at;
        walked_at += usize::from(!n.inlined);
        path_of(&n.function)
            .starts_with(HARNESS_POLL)
            .then_some(here)
    })?;
    let all: Vec<_> = running.iter().collect();
    held_alone(mem, walked[0].sp, walked.get(harness)?, &all)
}

/// The task harness's poll, which a task's poll function calls (or jumps to).
const HARNESS_POLL: &str = "tokio::runtime::task::harness::Harness::poll";

/// The one of the running tasks `of` whose address the stack holds from `sp` to frame `f`'s top,
/// if one alone is there.
fn held_alone(
    mem: &dyn Memory,
    sp: u64,
    f: &Frame,
    of: &[&(u64, crate::model::TokioTask)],
) -> Option<u64> {
    let top = f.cfa.unwrap_or(f.sp).max(f.sp);
    let words = stack_words(mem, sp, top);
    let held: Vec<u64> = (of.iter())
        .filter(|(_, t)| {
            let task = t.header..t.header.saturating_add(INTO_TASK);
            words.iter().any(|w| task.contains(w))
        })
        .map(|(id, _)| *id)
        .collect();
    (held.len() == 1).then(|| held[0])
}

/// The words of the stack from `sp` to `top` (at most [`SEARCHED`] bytes).
fn stack_words(mem: &dyn Memory, sp: u64, top: u64) -> Vec<u64> {
    let len = top.saturating_sub(sp).min(SEARCHED) as usize;
    let Some(bytes) = mem.read_vec(sp & !7, len) else {
        return Vec::new();
    };
    (bytes.chunks_exact(8))
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{blocked_worker as worker, edge_snapshot, handshake, runtime};

    #[test]
    fn a_thread_that_moved_while_it_was_read_is_running_unread_and_runs_no_task() {
        let mut dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        dump.runtimes = vec![runtime("multi_thread")];
        let in_runtime = Some(crate::model::TokioTask {
            header: 0x1000,
            poll_fn: 0x2000,
            runtime: 0,
            other_refs: Some(1),
        });
        let polled = dump.tasks[0].id;
        dump.tasks[0].state = State::Running;
        dump.tasks[0].thread = Some(crate::model::Thread { tid: 7, name: None });
        dump.tasks[1].state = State::Scheduled;
        dump.tasks[1].tokio_task = in_runtime;
        dump.threads = vec![worker(7, polled)];
        dump.starved = crate::threads::starved::find(&dump, &dump.threads);
        assert_eq!(
            dump.starved.len(),
            1,
            "its one worker blocked, a task ready"
        );
        forget_moved(&mut dump, &[7]);
        let t = &dump.threads[0];
        assert_eq!(t.doing, Doing::Running);
        assert!(t.frames.is_empty() && t.polling.is_none());
        assert_eq!(dump.tasks[0].thread, None);
        assert!(
            dump.starved.is_empty(),
            "a worker not known to be blocked starves nothing"
        );
    }
}
