//! `--stop`: every thread of the target held still for one consistent snapshot, then let go.
//! The census runs before (it only finds the task lists, and a list gone meanwhile fails its check):
//! the threads are held while the lists are read and the tasks walked, no longer.
//!
//! Each thread is attached with `PTRACE_SEIZE` (which, unlike `PTRACE_ATTACH`, sends no SIGSTOP) and
//! stopped with `PTRACE_INTERRUPT`; threads made meanwhile are caught by listing again until a pass
//! finds none new. [`Frozen`] detaches every thread when dropped: on success, on an error, on a
//! panic's unwinding. If the inspector dies instead (Ctrl-C, SIGKILL), the kernel detaches a dead
//! tracer's tracees and they run on. A signal that arrived for a thread while it was held is handed
//! back to it at detach, so nothing the program was sent is lost. Nothing is written to the target.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::attach::procfs;
use crate::error::TargetError;

/// How long a thread may take to stop (one in an uninterruptible sleep stops when it leaves it);
/// past it, the snapshot goes on with it running, and says so.
const STOP_PATIENCE: Duration = Duration::from_millis(500);

/// Most passes over the thread list: a program that makes threads without pause is held with the
/// ones it had.
const MAX_PASSES: usize = 8;

/// The target's threads, held stopped until dropped.
pub struct Frozen {
    /// Each thread held, and the signal to give back to it at detach.
    held: Vec<(Pid, Option<Signal>)>,
    /// Threads that did not stop in time (they are attached, and detached with the rest).
    pub unstopped: usize,
    since: Instant,
}

impl Frozen {
    /// Stops every thread of `pid`. Refused if another tracer (a debugger) holds the process.
    pub fn all(pid: u32) -> Result<Frozen, TargetError> {
        if let Some(tracer) = procfs::tracer(pid).filter(|&t| t != 0) {
            return Err(TargetError::Traced { pid, tracer });
        }
        let mut frozen = Frozen {
            held: Vec::new(),
            unstopped: 0,
            since: Instant::now(),
        };
        for _ in 0..MAX_PASSES {
            let tids = procfs::threads(pid).map_err(|_| TargetError::Exited { pid })?;
            let new: Vec<Pid> = (tids.into_iter())
                .map(|t| Pid::from_raw(t as i32))
                .filter(|t| !frozen.held.iter().any(|(h, _)| h == t))
                .collect();
            if new.is_empty() {
                break;
            }
            for tid in new {
                match ptrace::seize(tid, ptrace::Options::empty()) {
                    Ok(()) => frozen.held.push((tid, None)),
                    // Exited since it was listed.
                    Err(Errno::ESRCH) => {}
                    Err(Errno::EPERM) if procfs::tracer(pid).is_some_and(|t| t != 0) => {
                        let tracer = procfs::tracer(pid).unwrap_or(0);
                        return Err(TargetError::Traced { pid, tracer });
                    }
                    Err(e) => {
                        let why = format!("PTRACE_SEIZE of thread {tid} failed ({e})");
                        return Err(TargetError::AccessDenied { pid, why });
                    }
                }
                let _ = ptrace::interrupt(tid);
            }
        }
        frozen.wait_stopped();
        if frozen.held.is_empty() {
            return Err(TargetError::Exited { pid });
        }
        Ok(frozen)
    }

    /// Waits for each held thread's stop, keeping a signal that stopped one instead.
    fn wait_stopped(&mut self) {
        let deadline = Instant::now() + STOP_PATIENCE;
        let mut pending: Vec<usize> = (0..self.held.len()).collect();
        let mut gone = Vec::new();
        while !pending.is_empty() && Instant::now() < deadline {
            pending.retain(|&i| {
                let tid = self.held[i].0;
                match waitpid(tid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) => true,
                    // A signal arrived first: held, and given back at detach.
                    Ok(WaitStatus::Stopped(_, sig)) => {
                        self.held[i].1 = Some(sig);
                        false
                    }
                    Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => {
                        gone.push(i);
                        false
                    }
                    Ok(_) => false,
                }
            });
            if !pending.is_empty() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        self.unstopped = pending.len();
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            self.held.remove(i);
        }
    }

    /// How many threads are held.
    pub fn threads(&self) -> usize {
        self.held.len()
    }

    /// How long the threads have been held.
    pub fn held_for(&self) -> Duration {
        self.since.elapsed()
    }

    /// Every held thread's general registers, by thread id, as a core's `NT_PRSTATUS` note lays
    /// them out (`pr_reg`: the kernel's `user_regs_struct`, word by word). A thread that did not
    /// stop gives none: only a stopped thread's registers can be read.
    pub fn registers(&self) -> Vec<(u32, Vec<u64>)> {
        (self.held.iter())
            .filter_map(|&(tid, _)| Some((tid.as_raw() as u32, user_regs(tid)?)))
            .collect()
    }
}

#[cfg(target_arch = "x86_64")]
fn user_regs(tid: Pid) -> Option<Vec<u64>> {
    let r = ptrace::getregs(tid).ok()?;
    Some(vec![
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base, r.gs_base, r.ds,
        r.es, r.fs, r.gs,
    ])
}

#[cfg(target_arch = "aarch64")]
fn user_regs(tid: Pid) -> Option<Vec<u64>> {
    let r = ptrace::getregs(tid).ok()?;
    let mut words = r.regs.to_vec();
    words.extend([r.sp, r.pc, r.pstate]);
    Some(words)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn user_regs(_: Pid) -> Option<Vec<u64>> {
    None
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for &(tid, sig) in &self.held {
            // A thread that exited meanwhile has nothing to detach.
            let _ = ptrace::detach(tid, sig);
        }
    }
}
