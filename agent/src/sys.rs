//! Thin, safe wrappers over the few OS calls the agent needs (Linux).
//!
//! Everything here runs at start-up or on the agent's own threads, except [`tid`], which the poll path calls
//! and which makes one `gettid` syscall per thread, then answers from a thread-local.

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
