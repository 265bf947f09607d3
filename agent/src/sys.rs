//! Thin, safe wrappers over the few OS calls the agent needs (Linux), made through `nix`; `libc` only for
//! what nix does not offer (`setpriority` on a thread, `dl_iterate_phdr`, an anonymous mapping without
//! nix's `mman` feature).
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
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{MsgFlags, sockopt};

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
        let fresh = nix::unistd::gettid().as_raw() as u32;
        t.set(fresh);
        fresh
    })
}

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, answered by the vDSO without a syscall).
#[inline]
pub(crate) fn now_ns() -> u64 {
    // CLOCK_MONOTONIC always exists on Linux; a failure (none seen) reads as time 0, never a panic.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|ts| ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
        .unwrap_or(0)
}

/// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): what the agent charges itself
/// for work done outside its gate (see `slots`).
pub(crate) fn thread_cpu() -> std::time::Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|ts| std::time::Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32))
        .unwrap_or_default()
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

/// The monotonic clock at process start (from the process's wall-clock start time), computed once.
static START_MONO_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// The monotonic clock at process start, approximated by the agent's first use of it.
pub(crate) fn process_start_mono_ns() -> u64 {
    *START_MONO_NS.get_or_init(|| {
        // Convert the wall-clock process start into the monotonic clock.
        let wall_now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let age_ns = (wall_now_ms as u64).saturating_sub(process_start_unix_ms()) * 1_000_000;
        now_ns().saturating_sub(age_ns)
    })
}

/// Runs `hook` when the process exits normally (libc's `atexit`); whether it was registered.
pub(crate) fn at_exit(hook: extern "C" fn()) -> bool {
    // SAFETY: `atexit` keeps the function pointer and calls it, without arguments, at exit. An
    // `extern "C" fn` cannot unwind into libc: a panic escaping it aborts. (nix has no atexit.)
    unsafe { libc::atexit(hook) == 0 }
}

/// Lowers this thread's scheduling priority (nice 10), so that under CPU contention the application's
/// threads win over the agent's. Best effort: a failure leaves the priority as it was.
pub(crate) fn lower_thread_priority() {
    // SAFETY: setpriority with PRIO_PROCESS and a thread id affects only that thread on Linux; no memory
    // is passed. (nix has no setpriority.)
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid() as libc::id_t, 10) };
}

/// Hands freed heap memory back to the OS (glibc's `malloc_trim`; nothing elsewhere). Called after a
/// big answer: glibc keeps the pages of a freed 100 MB snapshot otherwise, and the host's RSS with them.
pub(crate) fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes no pointer of ours.
    // (nix has no wrapper for it.)
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Reads smaller than this are answered from the heap; bigger ones from pages of their own.
const OWN_PAGES_FROM: usize = 1 << 20;

/// Zeroed memory for the answer to a read: on the heap when small, else pages of its own, unmapped
/// when dropped. A freed heap block of tens of megabytes stays resident: glibc keeps a thread
/// arena's top (up to 64 MB), and `malloc_trim` does not give it back, so every connection thread
/// that once answered a big read would keep one.
pub(crate) enum AnswerBuffer {
    Heap(Vec<u8>),
    Pages(OwnPages),
}

/// An anonymous private mapping, read and written only through the slice it derefs to.
pub(crate) struct OwnPages {
    at: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone, like a `Vec<u8>`'s buffer.
unsafe impl Send for OwnPages {}

impl AnswerBuffer {
    /// `len` zeroed bytes; on the heap if the pages cannot be had.
    pub(crate) fn zeroed(len: usize) -> AnswerBuffer {
        if len < OWN_PAGES_FROM {
            return AnswerBuffer::Heap(vec![0; len]);
        }
        // SAFETY: a new anonymous private mapping at an address of the kernel's choosing: no memory
        // of ours is named, and the result is checked before it is used.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        match std::ptr::NonNull::new(at.cast::<u8>()) {
            Some(at) if at.as_ptr() != libc::MAP_FAILED.cast() => {
                AnswerBuffer::Pages(OwnPages { at, len })
            }
            _ => AnswerBuffer::Heap(vec![0; len]),
        }
    }
}

impl std::ops::Deref for AnswerBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            AnswerBuffer::Heap(v) => v,
            // SAFETY: `len` bytes mapped readable at `at` (zero-filled by the kernel), ours until
            // drop; the borrow of `self` keeps them mapped.
            AnswerBuffer::Pages(p) => unsafe { std::slice::from_raw_parts(p.at.as_ptr(), p.len) },
        }
    }
}

impl std::ops::DerefMut for AnswerBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            AnswerBuffer::Heap(v) => v,
            // SAFETY: as for `deref`, and the mutable borrow of `self` makes this the only access.
            AnswerBuffer::Pages(p) => unsafe {
                std::slice::from_raw_parts_mut(p.at.as_ptr(), p.len)
            },
        }
    }
}

impl Drop for OwnPages {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `zeroed` made, unmapped once; no slice of it outlives `self`.
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.len) };
    }
}

/// Maps keyed by pointers and ids the agent made itself: no untrusted keys, so no need for SipHash.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

pub(crate) fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The pid and uid of the process on the other end of a Unix stream (SO_PEERCRED), as of its connect.
pub(crate) fn peer(stream: &UnixStream) -> io::Result<(u32, u32)> {
    let cred = nix::sys::socket::getsockopt(stream, sockopt::PeerCredentials)?;
    Ok((cred.pid() as u32, cred.uid()))
}

/// Waits up to `timeout` for `stream` to have something to read: `Ok(None)` when the time passed,
/// `Ok(Some(0))` when the peer closed, `Ok(Some(n))` when `n` bytes (at most one) wait unread.
pub(crate) fn peek_wait(
    stream: &UnixStream,
    timeout: std::time::Duration,
) -> io::Result<Option<usize>> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(
        &mut fds,
        PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
    ) {
        Ok(0) | Err(Errno::EINTR) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.into()),
    }
    let mut byte = [0u8; 1];
    // MSG_PEEK leaves the byte in the socket; MSG_DONTWAIT never blocks.
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    match nix::sys::socket::recv(stream.as_raw_fd(), &mut byte, flags) {
        Ok(n) => Ok(Some(n)),
        Err(Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The GNU build-id of the main executable, read from its `PT_NOTE` segments as the loader mapped them
/// (no file access, no debug info): computed once.
pub(crate) fn own_build_id() -> Option<Vec<u8>> {
    static ID: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let mut found: Option<Vec<u8>> = None;
        // SAFETY: `dl_iterate_phdr` calls `main_program_note` with pointers valid for the call; `found`
        // outlives the call and is only touched from this thread.
        unsafe {
            libc::dl_iterate_phdr(Some(main_program_note), (&raw mut found).cast());
        }
        found
    })
    .clone()
}

/// `dl_iterate_phdr` callback: the main program comes first; scan its notes, then stop (return 1).
unsafe extern "C" fn main_program_note(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info` whose `dlpi_phdr` array has `dlpi_phnum`
    // entries, and `data` is the `Option<Vec<u8>>` that `own_build_id` passed.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Option<Vec<u8>>>()) };
    // SAFETY: as above.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
        // SAFETY: a PT_NOTE segment lies inside a loaded PT_LOAD segment (the loader mapped it readable),
        // `p_memsz` bytes from its address.
        let notes = unsafe { std::slice::from_raw_parts(start as *const u8, ph.p_memsz as usize) };
        if let Some(id) = gnu_build_id(notes) {
            *found = Some(id.to_vec());
            break;
        }
    }
    1
}

/// The descriptor of the `NT_GNU_BUILD_ID` note in an ELF note segment.
fn gnu_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let pad4 = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (
            word(notes, 0)? as usize,
            word(notes, 4)? as usize,
            word(notes, 8)?,
        );
        let name = notes.get(12..12 + namesz)?;
        let desc_at = 12 + pad4(namesz);
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return Some(desc);
        }
        notes = notes.get(desc_at + pad4(descsz)..)?;
    }
    None
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
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten();
        let hz = hz.filter(|&hz| hz > 0).map_or(100, |hz| hz as u64);
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

/// Starts `command` in a process group of its own (so that [`kill_group`] ends it with whatever it
/// started), to die with the thread that starts it: a host killed with SIGKILL leaves it no time to
/// stop its children, and the kernel then does.
pub(crate) fn spawn_tied(command: &mut std::process::Command) -> io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    command.process_group(0);
    // SAFETY: the closure runs in the child between fork and exec, and calls only prctl, getppid and
    // _exit, which are async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The host died before the request took: nothing is left to dump.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    };
    command.spawn()
}

/// Kills the process group `pgid` (one [`spawn_tied`] started) with SIGKILL.
pub(crate) fn kill_group(pgid: u32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Reads what `pipe` holds, waiting at most `patience` for something: `None` if nothing came,
/// `Some(0)` once it is closed.
pub(crate) fn read_within(
    pipe: &mut std::process::ChildStdout,
    buf: &mut [u8],
    patience: std::time::Duration,
) -> io::Result<Option<usize>> {
    let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
    let ms = patience.as_millis().min(u16::MAX as u128) as u16;
    match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
        Ok(0) | Err(Errno::EINTR) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.into()),
    }
    io::Read::read(pipe, buf).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(at: usize) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().any(|l| {
            let (range, _) = l.split_once(' ').unwrap();
            let (from, to) = range.split_once('-').unwrap();
            let (from, to) = (
                usize::from_str_radix(from, 16),
                usize::from_str_radix(to, 16),
            );
            (from.unwrap()..to.unwrap()).contains(&at)
        })
    }

    #[test]
    fn a_big_answer_buffer_is_zeroed_pages_of_its_own_unmapped_when_dropped() {
        let mut big = AnswerBuffer::zeroed(5 << 20);
        assert!(matches!(big, AnswerBuffer::Pages(_)));
        assert!(big.iter().all(|&b| b == 0));
        big[4 << 20] = 7;
        assert_eq!(big.len(), 5 << 20);
        let at = big.as_ptr() as usize;
        assert!(mapped(at));
        drop(big);
        assert!(!mapped(at), "still mapped after the answer was dropped");
        let small = AnswerBuffer::zeroed(100);
        assert!(matches!(&small, AnswerBuffer::Heap(v) if v.len() == 100));
        assert!(AnswerBuffer::zeroed(0).is_empty());
    }

    #[test]
    fn the_build_id_note_is_found_among_others() {
        let mut notes = Vec::new();
        let mut note = |name: &[u8], kind: u32, desc: &[u8]| {
            notes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&kind.to_ne_bytes());
            notes.extend_from_slice(name);
            notes.resize(notes.len().next_multiple_of(4), 0);
            notes.extend_from_slice(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        };
        note(
            b"GNU\0",
            1,
            &[0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        );
        note(b"GNU\0", 3, &[0xab, 0xcd, 0xef]);
        assert_eq!(gnu_build_id(&notes), Some(&[0xab, 0xcd, 0xef][..]));
        assert_eq!(
            gnu_build_id(&notes[..20]),
            None,
            "truncated notes are not read past"
        );
    }

    #[test]
    fn this_test_binary_has_a_build_id() {
        assert!(own_build_id().is_some_and(|id| id.len() >= 8));
    }
}
