//! The signal that asks for a dump: its handler only counts it and wakes the dump thread through a
//! pipe (both async-signal-safe); everything else happens on that thread. Installed only when asked
//! for: otherwise the signal keeps its default behaviour (`SIGQUIT` ends the process with a core).

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// A signal an operator can send for a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpSignal {
    /// `SIGQUIT` (`kill -QUIT`, Ctrl-\ in a terminal), as the JVM and Go use it.
    Quit,
    Usr1,
    Usr2,
}

impl DumpSignal {
    /// `QUIT`, `SIGQUIT`, `usr1`, …: the names `kill -s` takes.
    pub fn parse(name: &str) -> Option<DumpSignal> {
        let name = name.trim().to_ascii_uppercase();
        match name.strip_prefix("SIG").unwrap_or(&name) {
            "QUIT" => Some(DumpSignal::Quit),
            "USR1" => Some(DumpSignal::Usr1),
            "USR2" => Some(DumpSignal::Usr2),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DumpSignal::Quit => "SIGQUIT",
            DumpSignal::Usr1 => "SIGUSR1",
            DumpSignal::Usr2 => "SIGUSR2",
        }
    }

    fn number(self) -> libc::c_int {
        match self {
            DumpSignal::Quit => libc::SIGQUIT,
            DumpSignal::Usr1 => libc::SIGUSR1,
            DumpSignal::Usr2 => libc::SIGUSR2,
        }
    }
}

/// Signals received and not yet taken by the dump thread.
static RECEIVED: AtomicU64 = AtomicU64::new(0);
/// The pipe's write end, once installed.
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    RECEIVED.fetch_add(1, Ordering::Relaxed);
    let fd = WAKE.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: `__errno_location` gives this thread's errno, which `write` may change; the
    // interrupted code must find it as it left it.
    let errno = unsafe { *libc::__errno_location() };
    let byte = 1u8;
    // SAFETY: write(2) is async-signal-safe; `fd` is the pipe's write end, opened non-blocking and
    // never closed: a full pipe drops the byte, and the count above still says a signal came.
    unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Installs the handler for `signal`: the read end of the pipe it writes to, for the dump thread to
/// wait on.
pub(super) fn install(signal: DumpSignal) -> std::io::Result<OwnedFd> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are open descriptors this function alone owns. The write end is
    // kept open for the life of the process (the handler may run at any time).
    let read = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    WAKE.store(fds[1], Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value to fill in (no handler, empty mask, no flags).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: `action.sa_mask` is a valid sigset to clear; sigaction gets a fully initialised
    // action whose handler only does async-signal-safe work.
    let installed = unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal.number(), &action, std::ptr::null_mut())
    };
    if installed != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(read)
}

/// The signals received since the last call.
pub(super) fn take() -> u64 {
    RECEIVED.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_read_as_kill_writes_them() {
        for (name, want) in [
            ("QUIT", Some(DumpSignal::Quit)),
            ("sigquit", Some(DumpSignal::Quit)),
            (" USR1 ", Some(DumpSignal::Usr1)),
            ("SIGUSR2", Some(DumpSignal::Usr2)),
            ("KILL", None),
            ("", None),
        ] {
            assert_eq!(DumpSignal::parse(name), want, "{name:?}");
        }
    }
}
