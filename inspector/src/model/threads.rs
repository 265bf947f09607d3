//! The program's threads as a dump shows them: what each is blocked in, said as its user knows it
//! (a `std::sync::Mutex`, a sleep, a read from a socket), its native stack from there up, the task
//! it is polling, and what it is to its runtime (a worker, the thread of a `block_on`, a blocking
//! pool thread). Built by the `threads` stage; nothing here reads a process.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One thread of the process, as far as it could be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadView {
    pub tid: u32,
    /// Its name (`comm`), where known: a core keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is to the async runtimes in it, from its stack.
    pub role: ThreadRole,
    /// What it is doing: blocked in a system call (with what for), parked by its runtime, or
    /// running (its stack was not read, unless it was held stopped).
    pub doing: Doing,
    /// The task this thread is inside the poll of, by its key in the dump, when its stack says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling: Option<u64>,
    /// Its native stack, innermost first, inlined calls as frames of their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<NativeFrame>,
    /// Where and why the walk of its stack stopped before its outermost frame, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwind_stopped: Option<String>,
}

/// What a thread is to the async code in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadRole {
    /// A worker of a tokio runtime's scheduler.
    Worker,
    /// A thread inside a `block_on` (tokio's, `futures::executor`'s, `pollster`'s).
    BlockOn,
    /// A thread of tokio's blocking pool.
    BlockingPool,
    /// Any other thread.
    Other,
}

/// What a thread is doing, as far as its stack and its system call say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Doing {
    /// Blocked in a system call, inside code that is not its runtime's waiting for work.
    Blocked { on: Blocking },
    /// Waiting for work where its runtime or pool parks it: nothing of the program's runs on it.
    Parked,
    /// Running (or runnable): not read live, its stack moves under any read.
    Running,
    /// Stopped by a signal or a tracer, outside a system call.
    Stopped,
}

/// What a std `Mutex` a thread waits for or a guard holds is called.
pub const STD_MUTEX: &str = crate::names::code::STD_MUTEX;
/// The blocking locks other than std's `Mutex` whose holders are found, as [`Blocking::Lock`] and
/// [`crate::model::waits::Held`] name them.
pub const STD_RWLOCK: &str = crate::names::code::STD_RWLOCK;
pub const PARKING_LOT_MUTEX: &str = crate::names::code::PARKING_LOT_MUTEX;
pub const PARKING_LOT_RWLOCK: &str = crate::names::code::PARKING_LOT_RWLOCK;

/// What a blocked thread waits for, said as the program spelled it where the stack tells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Blocking {
    /// A lock, condition variable or one-time initialisation, waited for through a futex.
    Lock {
        /// `std::sync::Mutex`, `parking_lot::Mutex`, `tokio::sync::Mutex (blocking_lock)` …, from
        /// the frames; `futex` where they do not say.
        kind: Arc<str>,
        /// The futex word's address: for std's locks, one inside the lock (a `RwLock` has two);
        /// for parking_lot's, which park a thread on a word of its own, the key it parks under
        /// (the lock's address, or one past it), read from the thread's `ThreadData`; 0 where that
        /// could not be read.
        addr: u64,
        /// The static the lock is (or lies in), by its symbol, where it is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        static_name: Option<Arc<str>>,
    },
    /// Parked in a `block_on` called inside a poll (`futures::executor::block_on` in a task): it
    /// waits for its own future, which the dump shows as its thread's.
    BlockOn { api: Arc<str> },
    /// A sleep of the thread itself (`std::thread::sleep`), with the time it asked for.
    Sleep {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asked_ns: Option<u64>,
    },
    /// A read, write, accept, connect or poll on a descriptor.
    Io {
        call: Arc<str>,
        fd: i32,
        /// The descriptor's socket ends or file, where `/proc` tells.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// Waiting for a child process.
    Child { call: Arc<str> },
    /// Any other system call, by name (or number).
    Syscall { call: Arc<str> },
}

/// One native frame: a function, where it is in the source, and the file its code is in when that
/// is not the executable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeFrame {
    /// Demangled, without the hash; `??` where neither symbols nor debug info name it.
    pub function: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub line: u32,
    /// Inlined into the frame below it in the list (it has no stack frame of its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The shared library its code is in; absent for the executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<Arc<str>>,
    /// The program's own code (not the standard library's, a dependency's or a library's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A runtime none of whose workers can poll: every one is blocked (or busy) inside a poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Starved {
    /// The runtime's flavor as the dump's runtimes say it.
    pub flavor: String,
    pub workers: usize,
    pub blocked: usize,
    /// Tasks of its own woken (or never polled) and waiting for a worker.
    pub ready: usize,
    /// Its workers' thread ids: a `current_thread` runtime's one is the thread of its `block_on`.
    #[serde(default)]
    pub threads: Vec<u32>,
    /// The `current_thread` runtime's index in the dump's runtimes; none for the multi-thread
    /// runtimes, counted together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<u32>,
    /// How long, at least, no worker has been free, and what says so; absent where nothing timed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<StarvedSince>,
}

impl Starved {
    /// Whether `task` is one of this runtime's.
    pub fn holds(&self, dump: &super::Dump, task: &super::TaskView) -> bool {
        runs_on(dump, task, self.runtime)
    }
}

/// Whether `task` runs on `runtime` (a `current_thread` one's index), or on any multi-thread
/// runtime where `runtime` is none.
pub fn runs_on(dump: &super::Dump, task: &super::TaskView, runtime: Option<u32>) -> bool {
    let flavor = |r: u32| (dump.runtimes.get(r as usize)).and_then(|r| r.flavor.as_deref());
    task.tokio_task.is_some_and(|k| match runtime {
        Some(r) => k.runtime == r,
        None => flavor(k.runtime) == Some("multi_thread"),
    })
}

/// A lower bound of how long a runtime has been starved: the longest of what its tasks tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StarvedSince {
    pub ns: u64,
    pub by: StarvedBy,
}

/// What a [`StarvedSince`] is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StarvedBy {
    /// Every worker has been inside the poll of one task that long (the agent times polls; without
    /// it, listings that saw the tasks running throughout).
    Polls,
    /// A ready task was woken that long ago and not polled since (the agent times it).
    Woken,
    /// A timer of its tasks is that much past its deadline and has not fired: no worker came to
    /// the timers since.
    Timer,
}
