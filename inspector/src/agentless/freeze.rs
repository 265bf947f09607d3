//! `--stop`: every thread of the target held still for one consistent snapshot, then let go.
//! The census runs before (it only finds the task lists, and a list gone meanwhile fails its check):
//! the threads are held while the lists are read and the tasks walked, no longer.
//!
//! Each thread is attached with `PTRACE_SEIZE` (which, unlike `PTRACE_ATTACH`, sends no SIGSTOP) and
//! stopped with `PTRACE_INTERRUPT`; threads made meanwhile are caught by listing again until a pass
//! finds none new. Nothing is written to the target. What keeps the target unharmed:
//!
//! - **One tracer thread.** Every ptrace call is made on one thread of the inspector kept for it
//!   (the kernel ties a tracee to the thread that attached it), so that the thread asking for a
//!   freeze stays free to wait, reap and give up while an attach blocks.
//! - **An attach that blocks never holds an `execve` up.** Attaching takes the target's exec lock;
//!   an `execve` holds that lock while it waits for the target's other threads to die, and a thread
//!   we hold dies into a zombie only its tracer may reap. While an attach is under way, the thread
//!   that asked reaps every held thread that has died, so the `execve` goes on and so does the
//!   attach. A snapshot across an `execve` is refused ([`TargetError::Replaced`]), never shown.
//! - **Every stop's signal is handed back.** A thread that a signal stopped before our interrupt did
//!   (any signal, real-time ones too: the wait status is read raw, since nix's signal type has no
//!   real-time signals) gets it back at detach; an interrupt or group stop gives none.
//! - **A thread that did not stop in time is let go when it stops.** One in an uninterruptible
//!   wait (a `vfork` parent) stops only when the wait ends, and only a stopped thread can be
//!   detached: the tracer thread keeps watching such threads after the snapshot and detaches each
//!   as it stops, while the inspector lives (and the kernel does when it exits).
//! - **Threads that exit or are exiting are passed over**, as is a zombie thread group leader: a
//!   process whose main thread has ended is held by its live threads.
//!
//! [`Frozen`] lets every thread go when dropped: on success, on an error, on a panic's unwinding. If
//! the inspector dies instead (Ctrl-C, SIGKILL), the kernel detaches a dead tracer's tracees and
//! they run on.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::unistd::Pid;

use crate::attach::procfs;
use crate::error::TargetError;

/// How long a thread may take to stop (one in an uninterruptible sleep stops when it leaves it);
/// past it, the snapshot goes on with it running, and says so.
const STOP_PATIENCE: Duration = Duration::from_millis(500);

/// Most passes over the thread list: a program that makes threads without pause is held with the
/// ones it had.
const MAX_PASSES: usize = 8;

/// How long a freeze may take in all (attaches blocked behind the target's `execve` included)
/// before the snapshot is given up; the tracer thread lets go of what it held once it is free.
const FREEZE_PATIENCE: Duration = Duration::from_secs(10);

/// How often the thread that asked for a freeze reaps the held threads that died meanwhile, and
/// the tracer thread looks at threads still to be let go.
const POLL: Duration = Duration::from_millis(2);

/// How long a thread whose attach is refused (`EPERM`) is tried again, while it may be exiting,
/// before the refusal is taken for what it says.
const EXITING_PATIENCE: Duration = Duration::from_millis(50);

/// The target's threads, held stopped until dropped.
pub struct Frozen {
    pid: u32,
    threads: usize,
    /// Threads that did not stop in time (attached, and let go as soon as they stop).
    pub unstopped: usize,
    since: Instant,
}

impl Frozen {
    /// Stops every thread of `pid`. Refused if another tracer (a debugger) holds any of its threads,
    /// and if the process replaced its program (`execve`) meanwhile.
    pub fn all(pid: u32) -> Result<Frozen, TargetError> {
        if let Some(tracer) = foreign_tracer(pid) {
            return Err(TargetError::Traced { pid, tracer });
        }
        let before = Identity::of(pid);
        let seized = Arc::new(Mutex::new(Vec::new()));
        let reply = {
            let seized = Arc::clone(&seized);
            let undo = move |t: &mut Tracer| t.release(pid);
            submit_or_undo(move |t| t.freeze(pid, &seized), undo)
        };
        let (threads, unstopped) = wait_reaping(pid, &reply, &seized)?;
        let frozen = Frozen {
            pid,
            threads,
            unstopped,
            since: Instant::now(),
        };
        if Identity::of(pid) != before {
            return Err(TargetError::Replaced { pid });
        }
        Ok(frozen)
    }

    /// How many threads are held.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How long the threads have been held.
    pub fn held_for(&self) -> Duration {
        self.since.elapsed()
    }

    /// Every held thread's general registers, by thread id, as a core's `NT_PRSTATUS` note lays
    /// them out (`pr_reg`: the kernel's `user_regs_struct`, word by word). A thread that did not
    /// stop gives none: only a stopped thread's registers can be read.
    pub fn registers(&self) -> Vec<(u32, Vec<u64>)> {
        let reply = submit(|t| t.registers());
        reply.recv().unwrap_or_default()
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let pid = self.pid;
        // Waited for, so that what follows a snapshot (the next one, the process's exit) finds the
        // threads let go.
        let _ = submit(move |t| t.release(pid)).recv();
    }
}

/// Waits for the tracer thread's answer to a freeze, reaping meanwhile every held thread that has
/// died (an `execve` waits for them, and the attach under way waits for the `execve`).
fn wait_reaping(
    pid: u32,
    reply: &Receiver<Result<(usize, usize), TargetError>>,
    seized: &Mutex<Vec<Pid>>,
) -> Result<(usize, usize), TargetError> {
    let deadline = Instant::now() + FREEZE_PATIENCE;
    loop {
        match reply.recv_timeout(POLL) {
            Ok(answer) => return answer,
            Err(RecvTimeoutError::Disconnected) => return Err(TargetError::Exited { pid }),
            Err(RecvTimeoutError::Timeout) => {}
        }
        for &tid in seized.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            sys::reap_if_dead(tid);
        }
        if Instant::now() > deadline {
            return Err(TargetError::StopTimedOut { pid });
        }
    }
}

/// What tells one program image from the next in the same process: its auxiliary vector (whose
/// `AT_RANDOM` points into a stack laid anew by each `execve`) and its executable's identity.
#[derive(PartialEq, Eq)]
struct Identity(Option<Vec<u8>>, Option<(u64, u64)>);

impl Identity {
    fn of(pid: u32) -> Identity {
        use std::os::unix::fs::MetadataExt;
        let at = procfs::live_thread(pid).unwrap_or(pid);
        let auxv = std::fs::read(format!("/proc/{at}/auxv")).ok();
        let exe = std::fs::metadata(procfs::exe(at)).ok();
        Identity(auxv, exe.map(|m| (m.dev(), m.ino())))
    }
}

/// The process tracing one of `pid`'s threads, if it is not this one: a debugger holding a single
/// worker is named, never this inspector's own tracer thread.
fn foreign_tracer(pid: u32) -> Option<u32> {
    let me = std::process::id();
    let tids = procfs::threads(pid).unwrap_or_default();
    let tracers = tids
        .into_iter()
        .filter_map(|tid| procfs::thread_tracer(pid, tid));
    (tracers.filter(|&t| t != 0))
        .map(|t| procfs::tgid(t).unwrap_or(t))
        .find(|&p| p != me)
}

// ---------------------------------------------------------------------------------------------
// The tracer thread.

type Job = Box<dyn FnOnce(&mut Tracer) + Send>;

/// Runs `job` on the tracer thread (started at first use); its answer comes on the receiver.
fn submit<R: Send + 'static>(job: impl FnOnce(&mut Tracer) -> R + Send + 'static) -> Receiver<R> {
    submit_or_undo(job, |_| {})
}

/// As [`submit`], and runs `undo` after `job` if nobody is listening for its answer any more (a
/// freeze given up: what it held is let go then).
fn submit_or_undo<R: Send + 'static>(
    job: impl FnOnce(&mut Tracer) -> R + Send + 'static,
    undo: impl FnOnce(&mut Tracer) + Send + 'static,
) -> Receiver<R> {
    static JOBS: OnceLock<Sender<Job>> = OnceLock::new();
    let jobs = JOBS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("asyncdump-tracer".into())
            .spawn(move || Tracer::default().serve(rx));
        if let Err(e) = spawned {
            eprintln!("asyncdump: cannot start the tracer thread: {e}");
        }
        tx
    });
    let (tx, rx) = mpsc::channel();
    let job: Job = Box::new(move |t| {
        if tx.send(job(t)).is_err() {
            undo(t);
        }
    });
    // Sent to a thread that could not start: the receiver then says so (disconnected).
    let _ = jobs.send(job);
    rx
}

/// How a held thread stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    /// Not yet.
    Pending,
    /// Our interrupt, or a group stop (job control): nothing to hand back.
    Trap,
    /// A signal reached it first: handed back at detach.
    Signal(i32),
}

struct Held {
    tid: Pid,
    stop: Stop,
}

/// The state of the tracer thread: the threads of the one freeze under way, and threads of earlier
/// ones that had not stopped when they were let go.
#[derive(Default)]
struct Tracer {
    held: Vec<Held>,
    lingering: Vec<Pid>,
}

impl Tracer {
    fn serve(mut self, jobs: Receiver<Job>) {
        loop {
            let job = match self.lingering.is_empty() {
                true => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
                false => jobs.recv_timeout(POLL),
            };
            match job {
                Ok(job) => job(&mut self),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            self.let_go_of_lingering();
        }
    }

    /// Attaches and interrupts every thread of `pid`; `(held, not stopped in time)`.
    fn freeze(
        &mut self,
        pid: u32,
        seized: &Mutex<Vec<Pid>>,
    ) -> Result<(usize, usize), TargetError> {
        self.release(pid);
        let attached = self.attach_all(pid, seized);
        seized.lock().unwrap_or_else(|e| e.into_inner()).clear();
        if let Err(e) = attached {
            self.release(pid);
            return Err(e);
        }
        self.wait_stopped();
        if self.held.is_empty() {
            return Err(TargetError::Exited { pid });
        }
        let unstopped = self.held.iter().filter(|h| h.stop == Stop::Pending).count();
        Ok((self.held.len(), unstopped))
    }

    fn attach_all(&mut self, pid: u32, seized: &Mutex<Vec<Pid>>) -> Result<(), TargetError> {
        for _ in 0..MAX_PASSES {
            let listed = |p| procfs::threads(p).ok().filter(|t| !t.is_empty());
            let settled = procfs::settled(pid, |p| listed(p).is_some());
            let tids =
                (settled.then(|| listed(pid)).flatten()).ok_or(TargetError::Exited { pid })?;
            let new: Vec<Pid> = (tids.into_iter())
                .filter(|&t| !procfs::thread_dead(pid, t))
                .map(|t| Pid::from_raw(t as i32))
                .filter(|t| !self.held.iter().any(|h| h.tid == *t))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            for tid in new {
                if let Some(pause) = attach_pause() {
                    std::thread::sleep(pause);
                }
                if self.attach(pid, tid)? {
                    seized.lock().unwrap_or_else(|e| e.into_inner()).push(tid);
                }
            }
        }
        Ok(())
    }

    /// Attaches one thread and asks it to stop; `false` when it is gone or going.
    fn attach(&mut self, pid: u32, tid: Pid) -> Result<bool, TargetError> {
        let refused_since = Instant::now();
        loop {
            match ptrace::seize(tid, ptrace::Options::empty()) {
                Ok(()) => break,
                // Exited since it was listed.
                Err(Errno::ESRCH) => return Ok(false),
                // Refused also to a thread that is exiting (a storm of short-lived threads, an
                // `execve` ending the others), whose id may name the thread that made the
                // `execve` a moment later: tried again while the refusal may be that.
                Err(Errno::EPERM) => {
                    if procfs::thread_dead(pid, tid.as_raw() as u32) {
                        return Ok(false);
                    }
                    // Ours already, under another id: the thread that made an `execve` takes the
                    // process's id.
                    // Or one an earlier freeze still waits to let go: held again, and no longer
                    // let go between two jobs.
                    let tracer = procfs::thread_tracer(pid, tid.as_raw() as u32);
                    if tracer == Some(sys::gettid()) {
                        self.lingering.retain(|&t| t != tid);
                        break;
                    }
                    if let Some(tracer) = foreign_tracer(pid) {
                        return Err(TargetError::Traced { pid, tracer });
                    }
                    if refused_since.elapsed() > EXITING_PATIENCE {
                        let why = format!("PTRACE_SEIZE of thread {tid} was refused (EPERM)");
                        return Err(TargetError::AccessDenied { pid, why });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => {
                    let why = format!("PTRACE_SEIZE of thread {tid} failed ({e})");
                    return Err(TargetError::AccessDenied { pid, why });
                }
            }
        }
        self.held.push(Held {
            tid,
            stop: Stop::Pending,
        });
        let _ = ptrace::interrupt(tid);
        Ok(true)
    }

    /// Waits for each held thread's stop, keeping a signal that stopped one instead.
    fn wait_stopped(&mut self) {
        let deadline = Instant::now() + STOP_PATIENCE;
        loop {
            self.held.retain_mut(|h| {
                if h.stop == Stop::Pending {
                    match sys::wait_stop(h.tid) {
                        sys::Waited::Running => {}
                        sys::Waited::Stopped(stop) => h.stop = stop,
                        sys::Waited::Gone => return false,
                    }
                }
                true
            });
            let pending = self.held.iter().any(|h| h.stop == Stop::Pending);
            if !pending || Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn registers(&self) -> Vec<(u32, Vec<u64>)> {
        (self.held.iter())
            .filter(|h| h.stop != Stop::Pending)
            .filter_map(|h| Some((h.tid.as_raw() as u32, user_regs(h.tid)?)))
            .collect()
    }

    /// Lets every thread of `pid` go: the held ones, and any other of its threads this thread
    /// traces (an `execve` gives the thread that made it the process's id).
    fn release(&mut self, pid: u32) {
        let me = sys::gettid();
        let mut held: Vec<Held> = self.held.drain(..).collect();
        for tid in procfs::threads(pid).unwrap_or_default() {
            let traced = procfs::thread_tracer(pid, tid) == Some(me);
            let tid = Pid::from_raw(tid as i32);
            if traced && !held.iter().any(|h| h.tid == tid) {
                held.push(Held {
                    tid,
                    stop: Stop::Pending,
                });
            }
        }
        for h in held {
            if !let_go(h.tid, h.stop) {
                self.lingering.push(h.tid);
            }
        }
    }

    /// Detaches each thread that was still to stop, once it has.
    fn let_go_of_lingering(&mut self) {
        self.lingering.retain(|&tid| !let_go(tid, Stop::Pending));
    }
}

/// Detaches `tid` with the signal its stop took, if any (`known`: its stop as collected already);
/// `false` while it is attached but not stopped (only a stopped tracee can be detached).
fn let_go(tid: Pid, known: Stop) -> bool {
    let stop = match known {
        Stop::Pending => match sys::wait_stop(tid) {
            sys::Waited::Gone => return true,
            sys::Waited::Stopped(stop) => stop,
            // Still running (the detach fails), or stopped with its stop collected before.
            sys::Waited::Running => Stop::Pending,
        },
        stop => stop,
    };
    let sig = match stop {
        Stop::Signal(sig) => sig,
        Stop::Trap | Stop::Pending => 0,
    };
    // Refused while it runs; a thread killed meanwhile is told gone by the next wait.
    sys::detach(tid, sig).is_ok()
}

/// For the specs of a freeze racing the target's `execve`: a pause before each attach
/// (`ASYNCDUMP_ATTACH_PAUSE_US`), which widens the moments an `execve` can fall between two.
fn attach_pause() -> Option<Duration> {
    static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
    *PAUSE.get_or_init(|| {
        let us = std::env::var("ASYNCDUMP_ATTACH_PAUSE_US")
            .ok()?
            .parse()
            .ok()?;
        Some(Duration::from_micros(us))
    })
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

/// The raw calls nix cannot make: its wait status and `PTRACE_DETACH` take nix's `Signal`, which
/// has no real-time signals, so a thread stopped by one could be neither told nor given it back.
mod sys {
    use nix::errno::Errno;
    use nix::unistd::Pid;

    use super::Stop;

    /// What a non-blocking wait for one tracee said.
    pub(super) enum Waited {
        Running,
        Stopped(Stop),
        /// Exited (and reaped now), or not ours to wait for any more.
        Gone,
    }

    /// Collects `tid`'s stop, if it has stopped, without blocking.
    pub(super) fn wait_stop(tid: Pid) -> Waited {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes only the status integer we own, and blocks not (WNOHANG).
        let r = unsafe { libc::waitpid(tid.as_raw(), &mut status, libc::__WALL | libc::WNOHANG) };
        match r {
            0 => Waited::Running,
            r if r < 0 => match Errno::last() {
                Errno::EINTR => Waited::Running,
                _ => Waited::Gone,
            },
            _ if libc::WIFSTOPPED(status) => {
                let sig = libc::WSTOPSIG(status);
                // An event stop (our interrupt, a group stop under PTRACE_SEIZE) has its event
                // number in the status's high bits; a signal-delivery stop has none.
                match status >> 16 {
                    0 => Waited::Stopped(Stop::Signal(sig)),
                    _ => Waited::Stopped(Stop::Trap),
                }
            }
            _ => Waited::Gone,
        }
    }

    /// Reaps `tid` if it has died (its exit status only: a stop is left for the tracer thread).
    pub(super) fn reap_if_dead(tid: Pid) {
        // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`, which we own, and blocks not (WNOHANG).
        unsafe {
            libc::waitid(
                libc::P_PID,
                tid.as_raw() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::__WALL,
            )
        };
    }

    /// Detaches `tid`, handing it `sig` (0: none).
    pub(super) fn detach(tid: Pid, sig: i32) -> Result<(), Errno> {
        // SAFETY: PTRACE_DETACH takes no address and the signal number as an integer in `data`;
        // no memory of ours is read or written.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_DETACH,
                tid.as_raw(),
                std::ptr::null_mut::<libc::c_void>(),
                sig as libc::c_long as *mut libc::c_void,
            )
        };
        match r {
            -1 => Err(Errno::last()),
            _ => Ok(()),
        }
    }

    /// The calling thread's id.
    pub(super) fn gettid() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }
}
