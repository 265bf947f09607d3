//! What a thread's stack and system call say it is doing, as rules over the functions of its frames:
//! which runtime code it is in (a worker's loop, a `block_on`, the blocking pool, the poll of a
//! task, the place where a runtime waits for work), and which blocking API of the standard library,
//! `parking_lot` or tokio it waits in. Each rule is a path prefix of a function as demangled, its
//! generic arguments left out; each has a test.

use std::sync::Arc;

use crate::model::threads::{Blocking, Doing, NativeFrame, ThreadRole};
use crate::names::path_of;

use super::registers::Syscall;

/// What a frame's function says of its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Says {
    /// The loop of a runtime's worker.
    Worker,
    /// A `block_on`: the thread runs a future to its end, parking between its polls.
    BlockOn(&'static str),
    /// The loop of tokio's blocking pool (it runs closures, and waits for them).
    BlockingPool,
    /// Inside the poll of a task (or a blocking pool closure): what it calls is the program's.
    PollsTask,
    /// Where a runtime waits for work: nothing of the program's runs below it.
    Parks,
    /// A blocking API, as its user knows it.
    Api(&'static str),
}

/// The rules, by function path prefix (generic arguments left out, `<T as Trait>::f` as `T::f`).
const RULES: &[(&str, Says)] = &[
    (
        "tokio::runtime::scheduler::multi_thread::worker::run",
        Says::Worker,
    ),
    (
        "tokio::runtime::scheduler::current_thread::CurrentThread::block_on",
        Says::BlockOn("tokio::runtime::Runtime::block_on"),
    ),
    (
        "tokio::runtime::scheduler::current_thread::CoreGuard::block_on",
        Says::BlockOn("tokio::runtime::Runtime::block_on"),
    ),
    (
        "tokio::runtime::park::CachedParkThread::block_on",
        Says::BlockOn("tokio::runtime::Runtime::block_on"),
    ),
    (
        "futures_executor::local_pool::block_on",
        Says::BlockOn("futures::executor::block_on"),
    ),
    (
        "futures_executor::local_pool::run_executor",
        Says::BlockOn("futures::executor::block_on"),
    ),
    ("pollster::block_on", Says::BlockOn("pollster::block_on")),
    (
        "tokio::runtime::blocking::pool::Inner::run",
        Says::BlockingPool,
    ),
    ("tokio::runtime::task::raw::poll", Says::PollsTask),
    (
        "tokio::runtime::blocking::task::BlockingTask::poll",
        Says::PollsTask,
    ),
    (
        "tokio::runtime::scheduler::multi_thread::park::",
        Says::Parks,
    ),
    (
        "tokio::runtime::scheduler::multi_thread::worker::Context::park",
        Says::Parks,
    ),
    (
        "tokio::runtime::scheduler::current_thread::Context::park",
        Says::Parks,
    ),
    ("tokio::runtime::park::", Says::Parks),
    ("tokio::runtime::driver::", Says::Parks),
    ("tokio::runtime::io::driver::", Says::Parks),
    ("tokio::runtime::time::", Says::Parks),
    ("std::thread::sleep", Says::Api("std::thread::sleep")),
    (
        "std::thread::functions::sleep",
        Says::Api("std::thread::sleep"),
    ),
    (
        "std::sys::pal::unix::thread::Thread::sleep",
        Says::Api("std::thread::sleep"),
    ),
    ("std::sync::poison::mutex::Mutex::lock", Says::Api(MUTEX)),
    ("std::sync::mutex::Mutex::lock", Says::Api(MUTEX)),
    ("std::sys::sync::mutex::", Says::Api(MUTEX)),
    (
        "std::sync::poison::rwlock::RwLock::read",
        Says::Api("std::sync::RwLock (read)"),
    ),
    (
        "std::sync::poison::rwlock::RwLock::write",
        Says::Api("std::sync::RwLock (write)"),
    ),
    (
        "std::sync::rwlock::RwLock::read",
        Says::Api("std::sync::RwLock (read)"),
    ),
    (
        "std::sync::rwlock::RwLock::write",
        Says::Api("std::sync::RwLock (write)"),
    ),
    (
        "std::sys::sync::rwlock::futex::RwLock::read_contended",
        Says::Api("std::sync::RwLock (read)"),
    ),
    (
        "std::sys::sync::rwlock::futex::RwLock::write_contended",
        Says::Api("std::sync::RwLock (write)"),
    ),
    (
        "std::sync::poison::condvar::Condvar::wait",
        Says::Api(CONDVAR),
    ),
    ("std::sync::condvar::Condvar::wait", Says::Api(CONDVAR)),
    ("std::sys::sync::condvar::", Says::Api(CONDVAR)),
    (
        "std::sync::barrier::Barrier::wait",
        Says::Api("std::sync::Barrier"),
    ),
    (
        "std::sync::once_lock::OnceLock",
        Says::Api("std::sync::OnceLock"),
    ),
    (
        "std::sync::lazy_lock::LazyLock",
        Says::Api("std::sync::LazyLock"),
    ),
    ("std::sync::once::Once::call", Says::Api("std::sync::Once")),
    ("std::sys::sync::once::", Says::Api("std::sync::Once")),
    ("std::sync::mpmc::", Says::Api("std::sync::mpsc channel")),
    ("std::sync::mpsc::", Says::Api("std::sync::mpsc channel")),
    (
        "std::thread::JoinHandle::join",
        Says::Api("std::thread::JoinHandle::join"),
    ),
    (
        "std::thread::JoinInner::join",
        Says::Api("std::thread::JoinHandle::join"),
    ),
    ("std::thread::park", Says::Api("std::thread::park")),
    ("std::thread::Thread::park", Says::Api("std::thread::park")),
    (
        "parking_lot::raw_mutex::RawMutex::lock_slow",
        Says::Api("parking_lot::Mutex"),
    ),
    (
        "parking_lot::raw_rwlock::",
        Says::Api("parking_lot::RwLock"),
    ),
    ("parking_lot::condvar::", Says::Api("parking_lot::Condvar")),
    (
        "tokio::sync::mutex::Mutex::blocking_lock",
        Says::Api("tokio::sync::Mutex::blocking_lock"),
    ),
    (
        "tokio::sync::rwlock::RwLock::blocking_",
        Says::Api("tokio::sync::RwLock (blocking)"),
    ),
    (
        "tokio::sync::mpsc::bounded::Receiver::blocking_recv",
        Says::Api("tokio::sync::mpsc::Receiver::blocking_recv"),
    ),
    (
        "tokio::sync::mpsc::bounded::Sender::blocking_send",
        Says::Api("tokio::sync::mpsc::Sender::blocking_send"),
    ),
    (
        "tokio::sync::mpsc::unbounded::UnboundedReceiver::blocking_recv",
        Says::Api("tokio::sync::mpsc::UnboundedReceiver::blocking_recv"),
    ),
    (
        "tokio::sync::oneshot::Receiver::blocking_recv",
        Says::Api("tokio::sync::oneshot::Receiver::blocking_recv"),
    ),
];

const MUTEX: &str = crate::model::threads::STD_MUTEX;
const CONDVAR: &str = "std::sync::Condvar";

/// What the rules say of a function named `function` (demangled), if anything.
pub fn says(function: &str) -> Option<Says> {
    let path = path_of(function);
    (RULES.iter())
        .find(|(prefix, _)| path.starts_with(prefix))
        .map(|&(_, says)| says)
}

/// What a thread's frames (innermost first) make it to the runtimes: a worker wherever a worker's
/// loop is on its stack, else the thread of a `block_on`, else a blocking pool thread.
pub fn role(frames: &[NativeFrame]) -> ThreadRole {
    let said: Vec<Says> = frames.iter().filter_map(|f| says(&f.function)).collect();
    if said.contains(&Says::Worker) {
        ThreadRole::Worker
    } else if said.iter().any(|s| matches!(s, Says::BlockOn(_))) {
        ThreadRole::BlockOn
    } else if said.contains(&Says::BlockingPool) {
        ThreadRole::BlockingPool
    } else {
        ThreadRole::Other
    }
}

/// What a frame is to the walk out from a blocked thread's innermost frame: the first one that is
/// the program's own, a task's poll, or a runtime's loop or place of waiting decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Own,
    Poll,
    /// A runtime's loop (a worker's, the blocking pool's, a `block_on`) or where it waits for work.
    Runtime,
}

fn context(f: &NativeFrame) -> Option<Context> {
    match says(&f.function) {
        Some(Says::PollsTask) => Some(Context::Poll),
        Some(Says::Parks | Says::BlockOn(_) | Says::Worker | Says::BlockingPool) => {
            Some(Context::Runtime)
        }
        _ if f.own => Some(Context::Own),
        _ => None,
    }
}

/// What a thread in system call `call` (none: outside one) with these frames (innermost first) is
/// doing. Going out from the innermost frame, the first frame that is the program's own, a task's
/// poll, or a runtime's decides: the program's or a poll's, it is blocked; a runtime's, it is parked
/// waiting for work, unless that runtime is nested in the program's code inside a task's poll (a
/// `block_on` in a task), which blocks the thread as any blocking call does. What it is blocked in
/// is said by the call and the outermost blocking API below the deciding frame. `what_fd`
/// describes a descriptor.
pub fn doing(
    call: Option<&Syscall>,
    frames: &[NativeFrame],
    read_word: &dyn Fn(u64) -> Option<u64>,
    what_fd: &dyn Fn(i32) -> Option<String>,
) -> Doing {
    let Some(call) = call else {
        return Doing::Stopped;
    };
    let decides = frames.iter().position(|f| context(f).is_some());
    // The outermost blocking API below the deciding frame: the one the program called.
    let api = (frames[..decides.unwrap_or(frames.len())].iter())
        .rev()
        .find_map(|f| match says(&f.function) {
            Some(Says::Api(name)) => Some(name),
            _ => None,
        });
    if let Some(d) = decides
        && context(&frames[d]) == Some(Context::Runtime)
    {
        if !nested_in_poll(&frames[d..]) {
            return Doing::Parked;
        }
        // The runtime nested in the program's code names the call: a `block_on` parked there
        // waits for its own future, which is shown as its thread's.
        let nested =
            (frames[d..].iter())
                .take_while(|f| !f.own)
                .find_map(|f| match says(&f.function) {
                    Some(Says::BlockOn(name)) => Some(name),
                    _ => None,
                });
        if let Some(api) = nested {
            return Doing::Blocked {
                on: Blocking::BlockOn {
                    api: Arc::from(api),
                },
            };
        }
    }
    Doing::Blocked {
        on: blocking(call, api, read_word, what_fd),
    }
}

/// Whether the runtime whose frames start `outer` (innermost first) runs inside the program's own
/// code inside a task's poll.
fn nested_in_poll(outer: &[NativeFrame]) -> bool {
    let Some(own) = outer.iter().position(|f| f.own) else {
        return false;
    };
    (outer[own..].iter()).any(|f| context(f) == Some(Context::Poll))
}

/// Where an executor parks its thread between two polls of the future it runs, below the rules'
/// own (`Parks`): the standard library's thread parking and the locks and condition variables it
/// parks with.
const PARKING: &[&str] = &[
    "std::thread::park",
    "std::thread::functions::park",
    "std::thread::Thread::park",
    "std::thread::thread::Thread::park",
    "std::sys::sync::thread_parking::",
    "std::sys::pal::unix::futex::",
    "std::sys::sync::condvar::",
    "std::sync::condvar::Condvar::wait",
    "std::sync::poison::condvar::Condvar::wait",
    "std::sys::sync::mutex::",
    "std::sync::poison::mutex::Mutex::lock",
    "std::sync::mutex::Mutex::lock",
    "parking_lot_core::",
    "tokio::runtime::context::",
    "tokio::runtime::scheduler::current_thread::",
    "tokio::runtime::scheduler::inject::",
    "tokio::runtime::signal::",
    "tokio::runtime::process::",
    "tokio::loom::",
    "mio::poll::",
    "mio::sys::",
    "pollster::Signal::",
    "std::thread::local::LocalKey::",
    "core::ops::function::",
];

/// Whether a function inside a `block_on`'s frame is its executor between two polls of its future
/// (parking, or polling one of its runtime's tasks, or the `block_on` itself), not that future's
/// poll: its future can be read as it was left.
pub fn between_polls(function: &str) -> bool {
    let path = path_of(function);
    let said = says(function);
    matches!(
        said,
        Some(Says::Parks | Says::PollsTask | Says::BlockOn(_) | Says::Worker)
    ) || PARKING.iter().any(|p| path.starts_with(p))
}

/// Whether the frames (innermost first) are inside the poll of a tokio task, as a worker is when
/// its task blocks it.
pub fn in_task_poll(frames: &[NativeFrame]) -> bool {
    (frames.iter()).any(|f| path_of(&f.function).starts_with("tokio::runtime::task::raw::poll"))
}

/// The system call numbers this module tells apart.
#[cfg(not(target_arch = "aarch64"))]
mod nr {
    pub const READ: u64 = 0;
    pub const WRITE: u64 = 1;
    pub const POLL: u64 = 7;
    pub const PREAD: u64 = 17;
    pub const READV: u64 = 19;
    pub const SELECT: u64 = 23;
    pub const NANOSLEEP: u64 = 35;
    pub const CONNECT: u64 = 42;
    pub const ACCEPT: u64 = 43;
    pub const SENDTO: u64 = 44;
    pub const RECVFROM: u64 = 45;
    pub const SENDMSG: u64 = 46;
    pub const RECVMSG: u64 = 47;
    pub const WAIT4: u64 = 61;
    pub const FUTEX: u64 = 202;
    pub const EPOLL_WAIT: u64 = 232;
    pub const CLOCK_NANOSLEEP: u64 = 230;
    pub const WAITID: u64 = 247;
    pub const PSELECT6: u64 = 270;
    pub const PPOLL: u64 = 271;
    pub const EPOLL_PWAIT: u64 = 281;
    pub const ACCEPT4: u64 = 288;
    pub const RESTART_SYSCALL: u64 = 219;
}

#[cfg(target_arch = "aarch64")]
mod nr {
    pub const READ: u64 = 63;
    pub const WRITE: u64 = 64;
    pub const POLL: u64 = u64::MAX;
    pub const PREAD: u64 = 67;
    pub const READV: u64 = 65;
    pub const SELECT: u64 = u64::MAX;
    pub const NANOSLEEP: u64 = 101;
    pub const CONNECT: u64 = 203;
    pub const ACCEPT: u64 = 202;
    pub const SENDTO: u64 = 206;
    pub const RECVFROM: u64 = 207;
    pub const SENDMSG: u64 = 211;
    pub const RECVMSG: u64 = 212;
    pub const WAIT4: u64 = 260;
    pub const FUTEX: u64 = 98;
    pub const EPOLL_WAIT: u64 = u64::MAX;
    pub const CLOCK_NANOSLEEP: u64 = 115;
    pub const WAITID: u64 = 95;
    pub const PSELECT6: u64 = 72;
    pub const PPOLL: u64 = 73;
    pub const EPOLL_PWAIT: u64 = 22;
    pub const ACCEPT4: u64 = 242;
    pub const RESTART_SYSCALL: u64 = 128;
}

/// `clock_nanosleep`'s flag for an absolute time.
const TIMER_ABSTIME: u64 = 1;

/// What system call `call` waits for, named by `api` (the blocking API the frames show) where the
/// frames say one.
fn blocking(
    call: &Syscall,
    api: Option<&'static str>,
    read_word: &dyn Fn(u64) -> Option<u64>,
    what_fd: &dyn Fn(i32) -> Option<String>,
) -> Blocking {
    let a = call.args;
    let timespec = |at: u64| {
        let (s, ns) = (read_word(at)?, read_word(at.checked_add(8)?)?);
        s.checked_mul(1_000_000_000)?.checked_add(ns)
    };
    let io = |name: &str, fd: u64| Blocking::Io {
        call: Arc::from(name),
        fd: fd as i32,
        target: what_fd(fd as i32),
    };
    match call.nr {
        nr::FUTEX => Blocking::Lock {
            kind: Arc::from(api.unwrap_or("futex")),
            addr: a[0],
            static_name: None,
        },
        nr::NANOSLEEP => Blocking::Sleep {
            asked_ns: timespec(a[0]),
        },
        nr::CLOCK_NANOSLEEP => Blocking::Sleep {
            asked_ns: (a[1] & TIMER_ABSTIME == 0)
                .then(|| timespec(a[2]))
                .flatten(),
        },
        nr::READ | nr::READV | nr::PREAD => io("read", a[0]),
        nr::WRITE => io("write", a[0]),
        nr::RECVFROM | nr::RECVMSG => io("recv", a[0]),
        nr::SENDTO | nr::SENDMSG => io("send", a[0]),
        nr::ACCEPT | nr::ACCEPT4 => io("accept", a[0]),
        nr::CONNECT => io("connect", a[0]),
        // The first descriptor polled (`struct pollfd` starts with it).
        nr::POLL | nr::PPOLL => match read_word(a[0]) {
            Some(w) if a[1] >= 1 => io("poll", w & 0xffff_ffff),
            _ => Blocking::Syscall {
                call: Arc::from("poll"),
            },
        },
        nr::EPOLL_WAIT | nr::EPOLL_PWAIT => io("epoll_wait", a[0]),
        nr::SELECT | nr::PSELECT6 => Blocking::Syscall {
            call: Arc::from("select"),
        },
        // A sleep (or a timed wait) stopped and started again: the kernel keeps what is left of
        // it, not the arguments; the frames say what it is.
        nr::RESTART_SYSCALL => match api {
            Some("std::thread::sleep") => Blocking::Sleep { asked_ns: None },
            Some(api) => Blocking::Syscall {
                call: Arc::from(format!("{api} (a timed wait, restarted after a stop)").as_str()),
            },
            None => Blocking::Syscall {
                call: Arc::from("a system call restarted after a stop"),
            },
        },
        nr::WAIT4 | nr::WAITID => Blocking::Child {
            call: Arc::from(if call.nr == nr::WAIT4 {
                "wait4"
            } else {
                "waitid"
            }),
        },
        other => Blocking::Syscall {
            call: Arc::from(format!("system call {other}").as_str()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, own: bool) -> NativeFrame {
        NativeFrame {
            function: Arc::from(function),
            file: None,
            line: 0,
            inlined: false,
            library: None,
            own,
        }
    }

    #[test]
    fn a_path_leaves_generic_arguments_and_the_trait_out() {
        assert_eq!(
            path_of("std::sync::poison::mutex::Mutex<T>::lock"),
            "std::sync::poison::mutex::Mutex::lock"
        );
        assert_eq!(
            path_of(
                "<tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll"
            ),
            "tokio::runtime::blocking::task::BlockingTask::poll"
        );
        assert_eq!(
            path_of("tokio::runtime::task::raw::poll::<app::Fut, alloc::sync::Arc<H>>"),
            "tokio::runtime::task::raw::poll"
        );
        assert_eq!(path_of("main"), "main");
    }

    /// Every rule, with a name rustc gives a function it matches.
    const CASES: &[(&str, Says)] = &[
        (
            "tokio::runtime::scheduler::multi_thread::worker::run",
            Says::Worker,
        ),
        (
            "tokio::runtime::scheduler::current_thread::CurrentThread::block_on::{{closure}}",
            Says::BlockOn("tokio::runtime::Runtime::block_on"),
        ),
        (
            "tokio::runtime::park::CachedParkThread::block_on<F>",
            Says::BlockOn("tokio::runtime::Runtime::block_on"),
        ),
        (
            "futures_executor::local_pool::block_on<F>",
            Says::BlockOn("futures::executor::block_on"),
        ),
        (
            "futures_executor::local_pool::run_executor<T,F>",
            Says::BlockOn("futures::executor::block_on"),
        ),
        ("pollster::block_on<F>", Says::BlockOn("pollster::block_on")),
        (
            "tokio::runtime::blocking::pool::Inner::run",
            Says::BlockingPool,
        ),
        ("tokio::runtime::task::raw::poll<T,S>", Says::PollsTask),
        (
            "<tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll",
            Says::PollsTask,
        ),
        (
            "tokio::runtime::scheduler::multi_thread::park::Parker::park",
            Says::Parks,
        ),
        (
            "tokio::runtime::scheduler::multi_thread::worker::Context::park_timeout",
            Says::Parks,
        ),
        (
            "tokio::runtime::scheduler::current_thread::Context::park",
            Says::Parks,
        ),
        ("tokio::runtime::park::Inner::park", Says::Parks),
        ("tokio::runtime::driver::Driver::park", Says::Parks),
        ("tokio::runtime::io::driver::Driver::turn", Says::Parks),
        ("tokio::runtime::time::Driver::park_internal", Says::Parks),
        ("std::thread::sleep", Says::Api("std::thread::sleep")),
        (
            "std::thread::functions::sleep",
            Says::Api("std::thread::sleep"),
        ),
        (
            "std::sys::pal::unix::thread::Thread::sleep",
            Says::Api("std::thread::sleep"),
        ),
        ("std::sync::poison::mutex::Mutex<T>::lock", Says::Api(MUTEX)),
        ("std::sync::mutex::Mutex<T>::lock", Says::Api(MUTEX)),
        (
            "std::sys::sync::mutex::futex::Mutex::lock_contended",
            Says::Api(MUTEX),
        ),
        (
            "std::sync::poison::rwlock::RwLock<T>::read",
            Says::Api("std::sync::RwLock (read)"),
        ),
        (
            "std::sync::poison::rwlock::RwLock<T>::write",
            Says::Api("std::sync::RwLock (write)"),
        ),
        (
            "std::sync::rwlock::RwLock<T>::read",
            Says::Api("std::sync::RwLock (read)"),
        ),
        (
            "std::sync::rwlock::RwLock<T>::write",
            Says::Api("std::sync::RwLock (write)"),
        ),
        (
            "std::sys::sync::rwlock::futex::RwLock::read_contended",
            Says::Api("std::sync::RwLock (read)"),
        ),
        (
            "std::sys::sync::rwlock::futex::RwLock::write_contended",
            Says::Api("std::sync::RwLock (write)"),
        ),
        (
            "std::sync::poison::condvar::Condvar::wait<T>",
            Says::Api(CONDVAR),
        ),
        ("std::sync::condvar::Condvar::wait<T>", Says::Api(CONDVAR)),
        (
            "std::sys::sync::condvar::futex::Condvar::wait",
            Says::Api(CONDVAR),
        ),
        (
            "std::sync::barrier::Barrier::wait",
            Says::Api("std::sync::Barrier"),
        ),
        (
            "std::sync::once_lock::OnceLock<T>::initialize",
            Says::Api("std::sync::OnceLock"),
        ),
        (
            "std::sync::lazy_lock::LazyLock<T,F>::force",
            Says::Api("std::sync::LazyLock"),
        ),
        (
            "std::sync::once::Once::call_once::{{closure}}",
            Says::Api("std::sync::Once"),
        ),
        (
            "std::sys::sync::once::futex::Once::call",
            Says::Api("std::sync::Once"),
        ),
        (
            "std::sync::mpmc::list::Channel<T>::recv",
            Says::Api("std::sync::mpsc channel"),
        ),
        (
            "std::sync::mpsc::Receiver<T>::recv",
            Says::Api("std::sync::mpsc channel"),
        ),
        (
            "std::thread::JoinHandle<T>::join",
            Says::Api("std::thread::JoinHandle::join"),
        ),
        (
            "std::thread::JoinInner<T>::join",
            Says::Api("std::thread::JoinHandle::join"),
        ),
        ("std::thread::park", Says::Api("std::thread::park")),
        ("std::thread::Thread::park", Says::Api("std::thread::park")),
        (
            "parking_lot::raw_mutex::RawMutex::lock_slow",
            Says::Api("parking_lot::Mutex"),
        ),
        (
            "parking_lot::raw_rwlock::RawRwLock::lock_shared_slow",
            Says::Api("parking_lot::RwLock"),
        ),
        (
            "parking_lot::condvar::Condvar::wait_until_internal",
            Says::Api("parking_lot::Condvar"),
        ),
        (
            "tokio::sync::mutex::Mutex<T>::blocking_lock",
            Says::Api("tokio::sync::Mutex::blocking_lock"),
        ),
        (
            "tokio::sync::rwlock::RwLock<T>::blocking_write",
            Says::Api("tokio::sync::RwLock (blocking)"),
        ),
        (
            "tokio::sync::mpsc::bounded::Receiver<T>::blocking_recv",
            Says::Api("tokio::sync::mpsc::Receiver::blocking_recv"),
        ),
        (
            "tokio::sync::mpsc::bounded::Sender<T>::blocking_send",
            Says::Api("tokio::sync::mpsc::Sender::blocking_send"),
        ),
        (
            "tokio::sync::mpsc::unbounded::UnboundedReceiver<T>::blocking_recv",
            Says::Api("tokio::sync::mpsc::UnboundedReceiver::blocking_recv"),
        ),
        (
            "tokio::sync::oneshot::Receiver<T>::blocking_recv",
            Says::Api("tokio::sync::oneshot::Receiver::blocking_recv"),
        ),
        (
            "tokio::runtime::scheduler::current_thread::CoreGuard::block_on::{{closure}}<F>",
            Says::BlockOn("tokio::runtime::Runtime::block_on"),
        ),
    ];

    #[test]
    fn each_rule_says_what_its_function_is() {
        let cases = CASES;
        for &(function, want) in cases {
            assert_eq!(says(function), Some(want), "{function}");
        }
        let covered: Vec<&str> = (RULES.iter())
            .filter(|(prefix, _)| cases.iter().any(|(f, _)| path_of(f).starts_with(prefix)))
            .map(|r| r.0)
            .collect();
        assert_eq!(covered.len(), RULES.len(), "a rule without a case");
        assert_eq!(says("app::handler::{{closure}}"), None);
    }

    fn futex(addr: u64) -> Syscall {
        Syscall {
            nr: nr::FUTEX,
            args: [addr, 0x89, 2, 0, 0, 0],
        }
    }

    fn no_memory(_: u64) -> Option<u64> {
        None
    }

    fn no_fd(_: i32) -> Option<String> {
        None
    }

    #[test]
    fn a_futex_under_a_mutex_lock_in_the_programs_code_is_that_mutex() {
        let frames = [
            frame("std::sys::pal::unix::futex::futex_wait", false),
            frame("std::sys::sync::mutex::futex::Mutex::lock_contended", false),
            frame("std::sync::poison::mutex::Mutex<T>::lock", false),
            frame("app::cache::refresh::{{closure}}", true),
            frame("tokio::runtime::task::raw::poll<T,S>", false),
            frame(
                "tokio::runtime::scheduler::multi_thread::worker::run",
                false,
            ),
        ];
        let got = doing(Some(&futex(0x5000)), &frames, &no_memory, &no_fd);
        assert_eq!(
            got,
            Doing::Blocked {
                on: Blocking::Lock {
                    kind: Arc::from(MUTEX),
                    addr: 0x5000,
                    static_name: None
                }
            }
        );
        assert_eq!(role(&frames), ThreadRole::Worker);
        assert!(in_task_poll(&frames));
    }

    #[test]
    fn a_worker_waiting_for_work_is_parked_wherever_its_runtime_started_it() {
        let idle = [
            frame("epoll_wait", false),
            frame("mio::poll::Poll::poll", false),
            frame("tokio::runtime::io::driver::Driver::turn", false),
            frame(
                "tokio::runtime::scheduler::multi_thread::worker::run",
                false,
            ),
        ];
        let epoll = Syscall {
            nr: nr::EPOLL_WAIT,
            args: [3, 0, 1024, u64::MAX, 0, 0],
        };
        assert_eq!(
            doing(Some(&epoll), &idle, &no_memory, &no_fd),
            Doing::Parked
        );
        // A worker is started as a blocking pool task: that poll is not one of the program's.
        let launched = [
            frame("syscall", false),
            frame("std::sys::sync::condvar::futex::Condvar::wait", false),
            frame(
                "tokio::runtime::scheduler::multi_thread::park::Inner::park_condvar",
                false,
            ),
            frame(
                "tokio::runtime::scheduler::multi_thread::worker::run",
                false,
            ),
            frame(
                "<tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll",
                false,
            ),
            frame("tokio::runtime::blocking::pool::Inner::run", false),
        ];
        assert_eq!(
            doing(Some(&futex(0x20)), &launched, &no_memory, &no_fd),
            Doing::Parked
        );
        let pool_idle = [
            frame("syscall", false),
            frame(
                "std::sync::poison::condvar::Condvar::wait_timeout<T>",
                false,
            ),
            frame("tokio::runtime::blocking::pool::Inner::run", false),
        ];
        assert_eq!(
            doing(Some(&futex(0x30)), &pool_idle, &no_memory, &no_fd),
            Doing::Parked
        );
    }

    #[test]
    fn a_block_on_inside_a_poll_blocks_its_thread() {
        // `Handle::block_on` in a `spawn_blocking` closure waits for its future: blocked.
        let bridged = [
            frame("syscall", false),
            frame("tokio::runtime::park::Inner::park", false),
            frame("tokio::runtime::park::CachedParkThread::block_on<F>", false),
            frame("app::sync_call::{{closure}}", true),
            frame(
                "<tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll",
                false,
            ),
            frame("tokio::runtime::blocking::pool::Inner::run", false),
        ];
        let got = doing(Some(&futex(0x40)), &bridged, &no_memory, &no_fd);
        assert!(
            matches!(&got, Doing::Blocked { on: Blocking::BlockOn { api } } if &**api == "tokio::runtime::Runtime::block_on"),
            "{got:?}"
        );
        let nested = [
            frame("std::thread::park", false),
            frame("futures_executor::local_pool::run_executor<T,F>", false),
            frame("app::sync_bridge::{{closure}}", true),
            frame("tokio::runtime::task::raw::poll<T,S>", false),
            frame(
                "tokio::runtime::scheduler::multi_thread::worker::run",
                false,
            ),
        ];
        let got = doing(Some(&futex(0x10)), &nested, &no_memory, &no_fd);
        assert!(
            matches!(&got, Doing::Blocked { on: Blocking::BlockOn { api } } if &**api == "futures::executor::block_on"),
            "{got:?}"
        );
        assert_eq!(doing(None, &nested, &no_memory, &no_fd), Doing::Stopped);
    }

    #[test]
    fn a_block_ons_future_is_between_polls_while_only_its_executor_is_inside_it() {
        // Each executor's parking, below its `block_on`, as the symbol table names it.
        for parked in [
            "tokio::runtime::park::CachedParkThread::park",
            "tokio::runtime::park::Inner::park",
            "std::sys::sync::condvar::futex::Condvar::wait",
            "std::sync::poison::condvar::Condvar::wait<()>",
            "tokio::runtime::scheduler::current_thread::Context::park",
            "tokio::runtime::io::driver::Driver::turn",
            "mio::poll::Poll::poll",
            "futures_executor::local_pool::run_executor::{{closure}}<T,F>",
            "std::thread::park",
            "std::thread::local::LocalKey<T>::with<F,R>",
            "pollster::Signal::wait",
            // A task of the `block_on`'s own runtime polled on its thread (current_thread).
            "tokio::runtime::task::raw::poll<T,S>",
        ] {
            assert!(between_polls(parked), "{parked}");
        }
        // The future's own poll: the program's code, or the standard library it blocks in.
        for polling in [
            "app::main::{{closure}}",
            "tokio::task::coop::budget<R,F>",
            "std::thread::sleep",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
        ] {
            assert!(!between_polls(polling), "{polling}");
        }
    }

    #[test]
    fn a_sleep_says_the_time_it_asked_for_and_io_its_descriptor() {
        let frames = [
            frame("clock_nanosleep", false),
            frame("std::thread::sleep", false),
            frame("app::reports::render::{{closure}}", true),
        ];
        let relative = Syscall {
            nr: nr::CLOCK_NANOSLEEP,
            args: [0, 0, 0x7000, 0x7000, 0, 0],
        };
        let memory = |at: u64| match at {
            0x7000 => Some(3600),
            0x7008 => Some(5),
            _ => None,
        };
        let got = doing(Some(&relative), &frames, &memory, &no_fd);
        assert_eq!(
            got,
            Doing::Blocked {
                on: Blocking::Sleep {
                    asked_ns: Some(3_600_000_000_005)
                }
            }
        );
        let absolute = Syscall {
            args: [1, TIMER_ABSTIME, 0x7000, 0, 0, 0],
            ..relative
        };
        assert!(matches!(
            doing(Some(&absolute), &frames, &memory, &no_fd),
            Doing::Blocked {
                on: Blocking::Sleep { asked_ns: None }
            }
        ));
        let restarted = Syscall {
            nr: nr::RESTART_SYSCALL,
            args: [0; 6],
        };
        assert!(matches!(
            doing(Some(&restarted), &frames, &memory, &no_fd),
            Doing::Blocked {
                on: Blocking::Sleep { asked_ns: None }
            }
        ));
        let read = Syscall {
            nr: nr::READ,
            args: [7, 0, 0, 0, 0, 0],
        };
        let sock = |fd: i32| Some(format!("socket {fd}"));
        assert_eq!(
            doing(Some(&read), &frames, &memory, &sock),
            Doing::Blocked {
                on: Blocking::Io {
                    call: Arc::from("read"),
                    fd: 7,
                    target: Some("socket 7".into())
                }
            }
        );
    }
}
