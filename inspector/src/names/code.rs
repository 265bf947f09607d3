//! What a function's path says of the code it is: a runtime's worker loop, a `block_on`, a task's
//! poll, where a runtime waits for work, an executor between two polls of its future, the blocking
//! APIs of std, `parking_lot` and tokio. Each rule is a path prefix of a function as demangled, its
//! generic arguments left out ([`path_of`]); each has a test. The threads stage reads a stack's
//! frames by them, and the planner the code ranges of the functions they name.

use super::path_of;

/// What a std `Mutex` a thread waits for or a guard holds is called.
pub const STD_MUTEX: &str = "std::sync::Mutex";
/// The other blocking locks whose holders are found, likewise; a waiter's says `(read)` or
/// `(write)` after it where its stack tells.
pub const STD_RWLOCK: &str = "std::sync::RwLock";
pub const PARKING_LOT_MUTEX: &str = "parking_lot::Mutex";
pub const PARKING_LOT_RWLOCK: &str = "parking_lot::RwLock";

/// tokio's blocking APIs that run one of its futures through tokio's `block_on`, by that future's
/// type (as displayed, generic arguments left out): a thread's future of that type is that call's.
const BLOCKING_FUTURES: &[(&str, &str)] = &[
    (
        "tokio::sync::mutex::Mutex::lock_owned",
        "tokio::sync::Mutex::blocking_lock_owned",
    ),
    (
        "tokio::sync::mutex::Mutex::lock",
        "tokio::sync::Mutex::blocking_lock",
    ),
    (
        "tokio::sync::rwlock::RwLock::read",
        "tokio::sync::RwLock::blocking_read",
    ),
    (
        "tokio::sync::rwlock::RwLock::write",
        "tokio::sync::RwLock::blocking_write",
    ),
    (
        "tokio::sync::mpsc::bounded::Receiver::recv",
        "tokio::sync::mpsc::Receiver::blocking_recv",
    ),
    (
        "tokio::sync::mpsc::bounded::Sender::send",
        "tokio::sync::mpsc::Sender::blocking_send",
    ),
    (
        "tokio::sync::mpsc::unbounded::UnboundedReceiver::recv",
        "tokio::sync::mpsc::UnboundedReceiver::blocking_recv",
    ),
    (
        "tokio::sync::broadcast::Receiver::recv",
        "tokio::sync::broadcast::Receiver::blocking_recv",
    ),
    (
        "tokio::sync::oneshot::Receiver",
        "tokio::sync::oneshot::Receiver::blocking_recv",
    ),
];

/// The blocking API of tokio that runs a future of type `future` (as displayed) on its thread, if
/// it is one that does.
pub fn blocking_call_of(future: &str) -> Option<&'static str> {
    let path = path_of(future);
    (BLOCKING_FUTURES.iter())
        .find(|(ty, _)| path == *ty)
        .map(|&(_, api)| api)
}

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
        "parking_lot::raw_rwlock::RawRwLock::lock_shared",
        Says::Api("parking_lot::RwLock (read)"),
    ),
    (
        "parking_lot::raw_rwlock::RawRwLock::lock_upgradable",
        Says::Api("parking_lot::RwLock (upgradable read)"),
    ),
    (
        "parking_lot::raw_rwlock::RawRwLock::lock_exclusive",
        Says::Api("parking_lot::RwLock (write)"),
    ),
    (
        "parking_lot::raw_rwlock::RawRwLock::upgrade",
        Says::Api("parking_lot::RwLock (write)"),
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

const MUTEX: &str = STD_MUTEX;
const CONDVAR: &str = "std::sync::Condvar";

/// What the rules say of a function named `function` (demangled), if anything.
pub fn says(function: &str) -> Option<Says> {
    let path = path_of(function);
    (RULES.iter())
        .find(|(prefix, _)| path.starts_with(prefix))
        .map(|&(_, says)| says)
}

/// An executor's own code between two polls of the future it runs, below the rules' own
/// (`Parks`): where it parks its thread (the standard library's thread parking and the locks and
/// condition variables it parks with), and the scheduling code that leads from a `block_on` to a
/// task's poll (tokio's budget, its task harness).
const PARKING: &[&str] = &[
    "tokio::task::coop::",
    "tokio::runtime::coop::",
    "tokio::runtime::task::",
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

/// Whether a function in namespace `path` may be one a rule or [`between_polls`] names: its
/// crate is one they name. Cheap, for the planner, which asks it of every function's namespace.
pub fn may_say(path: &str) -> bool {
    let root = |p: &'static str| p.split("::").next().unwrap_or("");
    let krate = path
        .trim_start_matches('<')
        .split("::")
        .next()
        .unwrap_or("");
    (RULES.iter().map(|r| r.0))
        .chain(PARKING.iter().copied())
        .any(|p| root(p) == krate)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokios_blocking_calls_are_known_by_the_future_they_run() {
        let cases = [
            (
                "tokio::sync::mutex::Mutex::lock<u64>",
                Some("tokio::sync::Mutex::blocking_lock"),
            ),
            (
                "tokio::sync::mutex::Mutex::lock_owned<u64>",
                Some("tokio::sync::Mutex::blocking_lock_owned"),
            ),
            (
                "tokio::sync::mpsc::bounded::Receiver::recv<app::Job>",
                Some("tokio::sync::mpsc::Receiver::blocking_recv"),
            ),
            (
                "tokio::sync::oneshot::Receiver<u8>",
                Some("tokio::sync::oneshot::Receiver::blocking_recv"),
            ),
            ("app::main::{async block#0}", None),
            ("tokio::sync::mutex::Mutex::lock_then<u64>", None),
        ];
        for (future, want) in cases {
            assert_eq!(blocking_call_of(future), want, "{future}");
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
            Says::Api("parking_lot::RwLock (read)"),
        ),
        (
            "<parking_lot::raw_rwlock::RawRwLock as lock_api::rwlock::RawRwLock>::lock_shared",
            Says::Api("parking_lot::RwLock (read)"),
        ),
        (
            "parking_lot::raw_rwlock::RawRwLock::upgrade_slow",
            Says::Api("parking_lot::RwLock (write)"),
        ),
        (
            "parking_lot::raw_rwlock::RawRwLock::lock_upgradable_slow",
            Says::Api("parking_lot::RwLock (upgradable read)"),
        ),
        (
            "parking_lot::raw_rwlock::RawRwLock::lock_exclusive_slow",
            Says::Api("parking_lot::RwLock (write)"),
        ),
        (
            "parking_lot::raw_rwlock::RawRwLock::wait_for_readers",
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
            // A task of the `block_on`'s own runtime polled on its thread (current_thread), and
            // the budget around it.
            "tokio::runtime::task::raw::poll<T,S>",
            "tokio::task::coop::budget<R,F>",
        ] {
            assert!(between_polls(parked), "{parked}");
        }
        // The future's own poll: the program's code, or the standard library it blocks in.
        for polling in [
            "app::main::{{closure}}",
            "std::thread::sleep",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
        ] {
            assert!(!between_polls(polling), "{polling}");
        }
    }
}
