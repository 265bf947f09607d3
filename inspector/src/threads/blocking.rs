//! What a thread's stack and system call say it is doing, as rules over the functions of its frames:
//! which runtime code it is in (a worker's loop, a `block_on`, the blocking pool, the poll of a
//! task, the place where a runtime waits for work), and which blocking API of the standard library,
//! `parking_lot` or tokio it waits in. Each rule is a path prefix of a function as demangled, its
//! generic arguments left out; each has a test.

use std::sync::Arc;

use crate::model::threads::{Blocking, Doing, NativeFrame, ThreadRole};
use crate::names::code::{Says, says};
use crate::names::path_of;

use super::registers::Syscall;

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
        // A blocking API that runs a future to its end on its thread (tokio's `blocking_lock`,
        // `blocking_recv`) called by the program: that call is what the thread is blocked in.
        let outer_api = (frames[d..].iter())
            .take_while(|f| !f.own)
            .filter_map(|f| match says(&f.function) {
                Some(Says::Api(name)) => Some(name),
                _ => None,
            })
            .last();
        if let Some(api) = outer_api {
            return Doing::Blocked {
                on: Blocking::BlockOn {
                    api: Arc::from(api),
                },
            };
        }
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
                    kind: Arc::from(crate::model::threads::STD_MUTEX),
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
    fn a_blocking_api_that_runs_a_future_on_its_thread_is_what_the_thread_is_blocked_in() {
        // Out of any task: not parked waiting for work, but in the program's `blocking_lock`.
        let frames = [
            frame("syscall", false),
            frame("std::sync::poison::condvar::Condvar::wait", false),
            frame("tokio::runtime::park::Inner::park", false),
            frame("tokio::runtime::park::CachedParkThread::block_on<F>", false),
            frame("tokio::future::block_on::block_on<F>", false),
            frame("tokio::sync::mutex::Mutex<T>::blocking_lock", false),
            frame("app::ledger::reconcile", true),
        ];
        let got = doing(Some(&futex(0x50)), &frames, &no_memory, &no_fd);
        let api = "tokio::sync::Mutex::blocking_lock";
        assert_eq!(
            got,
            Doing::Blocked {
                on: Blocking::BlockOn { api: api.into() }
            }
        );
        assert_eq!(role(&frames), ThreadRole::BlockOn);
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
