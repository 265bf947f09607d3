//! Thin, safe wrappers over the few OS calls the agent needs (Linux).
//!
//! Everything here runs at start-up or on the agent's own threads, except [`tid`] (one `gettid` syscall per
//! thread, then a thread-local) and [`ticks`], which the poll path calls.
//!
//! **Ticks.** The poll path timestamps with [`ticks`]: the CPU's time-stamp counter where the kernel itself
//! trusts it (its clocksource is `tsc`, which implies an invariant TSC synchronised across cores; ~10 ns),
//! else `CLOCK_MONOTONIC` nanoseconds (~25 ns through the vDSO). A snapshot converts ticks to monotonic
//! nanoseconds with a [`TickConv`], calibrated over the whole time since the first tick was read.

use std::cell::Cell;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

thread_local! {
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// This thread's OS thread id; never 0.
#[inline]
pub(crate) fn tid() -> u32 {
    TID.with(|t| {
        let cached = t.get();
        if cached != 0 {
            return cached;
        }
        // SAFETY: gettid takes no arguments and cannot fail.
        let fresh = unsafe { libc::gettid() } as u32;
        t.set(fresh);
        fresh
    })
}

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, answered by the vDSO without a syscall).
#[inline]
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

struct TickBase {
    use_tsc: bool,
    ticks: u64,
    ns: u64,
}

fn tick_base() -> &'static TickBase {
    static BASE: std::sync::OnceLock<TickBase> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let use_tsc = cfg!(target_arch = "x86_64")
            && std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc");
        let ns = now_ns();
        TickBase {
            use_tsc,
            ticks: if use_tsc { rdtsc() } else { ns },
            ns,
        }
    })
}

#[inline]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// A timestamp for the poll path; never 0. Convert with [`TickConv`].
#[inline]
pub(crate) fn ticks() -> u64 {
    if tick_base().use_tsc {
        rdtsc()
    } else {
        now_ns()
    }
}

/// Converts ticks taken by [`ticks`] into `CLOCK_MONOTONIC` nanoseconds, as of the moment it was made.
pub(crate) struct TickConv {
    ticks_now: u64,
    pub(crate) ns_now: u64,
    ns_per_tick: f64,
}

impl TickConv {
    pub(crate) fn now() -> TickConv {
        let base = tick_base();
        let (ticks_now, ns_now) = (ticks(), now_ns());
        let ns_per_tick = if !base.use_tsc || ticks_now <= base.ticks {
            1.0
        } else {
            (ns_now - base.ns) as f64 / (ticks_now - base.ticks) as f64
        };
        TickConv {
            ticks_now,
            ns_now,
            ns_per_tick,
        }
    }

    /// The monotonic time of tick `t`; 0 stays 0 ("never").
    pub(crate) fn ns(&self, t: u64) -> u64 {
        if t == 0 {
            return 0;
        }
        let ago = (self.ticks_now.saturating_sub(t) as f64 * self.ns_per_tick) as u64;
        self.ns_now.saturating_sub(ago).max(1)
    }

    /// A duration measured in ticks, in nanoseconds.
    pub(crate) fn duration_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }
}

/// Lowers this thread's scheduling priority (nice 10), so that under CPU contention the application's
/// threads win over the agent's. Best effort: a failure leaves the priority as it was.
pub(crate) fn lower_thread_priority() {
    // SAFETY: setpriority with PRIO_PROCESS and a thread id affects only that thread on Linux; no memory
    // is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid() as libc::id_t, 10) };
}

/// Maps keyed by pointers and ids the agent made itself: no untrusted keys, so no need for SipHash.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The uid of the process on the other end of a Unix stream (SO_PEERCRED).
pub(crate) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes and `len` holds the size of `cred`, as getsockopt requires.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(cred.uid)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Copies `buf.len()` bytes of this process's memory at `addr` into `buf` with `process_vm_readv` on our
/// own pid: an unmapped address gives `Err(EFAULT)` instead of a signal, and a range that runs into an
/// unmapped page is a short read, reported as `EFAULT` too. Other errors (`ENOSYS`, `EPERM` under seccomp)
/// mean this process cannot read itself this way at all.
pub(crate) fn read_own(addr: usize, buf: &mut [u8]) -> Result<(), i32> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we own mutably for the call; `remote` is only read by the
    // kernel, which checks it against our address space and fails with EFAULT rather than faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EFAULT))
    } else if n as usize != buf.len() {
        Err(libc::EFAULT)
    } else {
        Ok(())
    }
}

/// The name of a thread of this process, from `/proc/self/task/TID/comm`.
pub(crate) fn thread_name(tid: u32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
    Some(name.trim_end().to_owned())
}

/// Process start time in milliseconds since the Unix epoch: `/proc/self/stat` start ticks + boot time.
pub(crate) fn process_start_unix_ms() -> u64 {
    fn read() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Field 2 (comm) may contain spaces and parentheses: fields after it start at the last ')'.
        let after = &stat[stat.rfind(')')? + 2..];
        let start_ticks: u64 = after.split_whitespace().nth(19)?.parse().ok()?;
        let btime: u64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = if hz > 0 { hz as u64 } else { 100 };
        Some(btime * 1000 + start_ticks * 1000 / hz)
    }
    read().unwrap_or(0)
}

/// The file name of this process's executable.
pub(crate) fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| std::env::args().next())
        .unwrap_or_else(|| "unknown".to_owned())
}
