//! [`ProcessMemory`]: a live process's memory through `process_vm_readv`, this process's own included.
//!
//! The kernel checks each remote range against the target's address space and fails with `EFAULT`
//! rather than faulting, so any address is safe to ask for: a plan that is wrong, malicious or stale
//! gives failed reads, never a signal. That is the agent's fault containment when it reads itself. A
//! call stops at the first range that faults; the ranges before it were read, that one failed, and the
//! rest are asked again in the next call. Reading another process needs the ptrace access check (same
//! uid, and Yama's leave); reading this one needs nothing.

use std::io::IoSliceMut;

use nix::errno::Errno;
use nix::sys::uio::RemoteIoVec;
use nix::unistd::Pid;

use super::{Memory, Read, Region, Unreadable};

/// The second page: below `vm.mmap_min_addr` (64 KiB by default), so no process maps it.
const NEVER_MAPPED: u64 = 0x1000;

/// Most iovecs one `process_vm_readv` call takes (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// The memory of the live process `pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessMemory {
    pid: Pid,
}

impl ProcessMemory {
    /// This process's own memory.
    pub fn own() -> ProcessMemory {
        ProcessMemory {
            pid: nix::unistd::getpid(),
        }
    }

    /// The memory of process `pid`.
    pub fn of(pid: i32) -> ProcessMemory {
        ProcessMemory {
            pid: Pid::from_raw(pid),
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Whether the kernel lets this process read the process's memory at all: one read of a byte
    /// where no process maps anything. The kernel checks access before it looks at the address, so
    /// `EFAULT` means allowed; an error is `EPERM` (refused) or `ESRCH` (gone, or a zombie).
    pub fn access(&self) -> Result<(), Unreadable> {
        let mut byte = [0u8; 1];
        self.read_many(&mut [Read::new(NEVER_MAPPED, &mut byte)])
    }

    /// The process's private, writable, anonymous memory (the heap, allocators' arenas, thread
    /// stacks) that is in use: where a census looks for task headers (see [`crate::tasks::census`]),
    /// in address order. Pages never written (most of a thread's stack, the reserve of an arena) hold
    /// no task and are left out when `/proc/PID/pagemap` says which they are; when it cannot be read,
    /// the regions are given whole.
    pub fn heap_regions(&self) -> std::io::Result<Vec<Region>> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid))?;
        let regions = heap_regions(&maps);
        let Ok(pagemap) = std::fs::File::open(format!("/proc/{}/pagemap", self.pid)) else {
            return Ok(regions);
        };
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .filter(|&p| p > 0)
            .map_or(4096, |p| p as u64);
        let mut used = Vec::with_capacity(regions.len());
        for r in regions {
            if in_use(&pagemap, r, page, &mut used).is_err() {
                used.push(r);
            }
        }
        Ok(used)
    }

    /// One `process_vm_readv` over the reads of `chunk` not marked failed (at most [`IOV_MAX`],
    /// none at address 0): how many of them from its start were read whole, or the errno.
    fn read_chunk(&self, chunk: &mut [Read<'_>]) -> Result<usize, Errno> {
        // Made room for whole: collected through a filter, they would grow a few times per call.
        let mut remote: Vec<RemoteIoVec> = Vec::with_capacity(chunk.len());
        let mut local: Vec<IoSliceMut<'_>> = Vec::with_capacity(chunk.len());
        for r in chunk.iter_mut().filter(|r| !r.failed) {
            remote.push(RemoteIoVec {
                base: r.addr as usize,
                len: r.dst.len(),
            });
            local.push(IoSliceMut::new(r.dst));
        }
        let mut left = nix::sys::uio::process_vm_readv(self.pid, &mut local, &remote)?;
        drop(local);
        // Reads wholly inside the `left` bytes succeeded.
        Ok(remote
            .iter()
            .take_while(|r| {
                let whole = left >= r.len;
                left = left.saturating_sub(r.len);
                whole
            })
            .count())
    }
}

/// The largest guard below a thread's stack (glibc's default is one page).
const MAX_GUARD: u64 = 64 << 10;

/// The private, writable, anonymous regions of a `/proc/PID/maps` text; the main thread's stack is
/// left out, and another thread's (an anonymous region right above its small inaccessible guard, as
/// glibc lays out a thread's stack) is marked.
fn heap_regions(maps: &str) -> Vec<Region> {
    let mut out = Vec::new();
    // The end of the last inaccessible anonymous mapping: a guard, if a writable one starts there.
    let mut guard_end = None;
    for m in super::maps::lines(maps) {
        let (start, end, perms, name) = (m.start, m.end, m.perms, m.path);
        let anonymous =
            m.inode == 0 && (name.is_empty() || name == "[heap]" || name.starts_with("[anon"));
        let after_guard = guard_end == Some(start);
        // A guard is a page or a few; an arena's inaccessible reserve, which the next arena may
        // start right after, is megabytes.
        let small = end.saturating_sub(start) <= MAX_GUARD;
        guard_end = (anonymous && perms.starts_with("---") && small).then_some(end);
        if perms.starts_with("rw") && perms.ends_with('p') && anonymous && start < end {
            out.push(Region {
                start,
                end,
                stack: after_guard && name.is_empty(),
            });
        }
    }
    out
}

/// Appends the runs of `r`'s pages that are present or swapped out, as `pagemap` (bits 63 and 62 of
/// each page's entry) says; `Err` when it cannot be read, and then nothing is appended.
fn in_use(
    pagemap: &std::fs::File,
    r: Region,
    page: u64,
    out: &mut Vec<Region>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const ENTRIES: usize = 4096;
    let mut runs: Vec<Region> = Vec::new();
    let mut buf = vec![0u8; ENTRIES * 8];
    let mut at = r.start;
    while at < r.end {
        let pages = ((r.end - at) / page).clamp(1, ENTRIES as u64) as usize;
        let bytes = &mut buf[..pages * 8];
        pagemap.read_exact_at(bytes, (at / page) * 8)?;
        for (i, e) in bytes.chunks_exact(8).enumerate() {
            let entry = u64::from_ne_bytes(e.try_into().expect("8 bytes"));
            if entry & (3 << 62) == 0 {
                continue;
            }
            let start = at + i as u64 * page;
            match runs.last_mut() {
                Some(last) if last.end == start => last.end = start + page,
                _ => runs.push(Region {
                    start,
                    end: start + page,
                    stack: r.stack,
                }),
            }
        }
        at += pages as u64 * page;
    }
    out.extend(runs);
    Ok(())
}

impl Memory for ProcessMemory {
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        // Reads known to fail are marked and left out of the calls, rather than ending a call where
        // they stand: a batch with a null pointer every other read is still one call, not one each.
        let known_bad = |r: &Read<'_>| r.failed || r.addr == 0 || usize::try_from(r.addr).is_err();
        for r in reads.iter_mut() {
            r.failed = known_bad(r);
        }
        let mut i = 0;
        while i < reads.len() {
            if reads[i].failed {
                i += 1;
                continue;
            }
            // A chunk: the reads from `i` to `end` that are not marked, at most IOV_MAX of them.
            let (mut end, mut asked) = (i, 0);
            while end < reads.len() && asked < IOV_MAX {
                asked += usize::from(!reads[end].failed);
                end += 1;
            }
            let done = match self.read_chunk(&mut reads[i..end]) {
                Ok(done) => done,
                // Nothing was read: the first range faults.
                Err(Errno::EFAULT) => 0,
                Err(errno) => {
                    return Err(Unreadable {
                        errno: errno as i32,
                    });
                }
            };
            if done == asked {
                i = end;
                continue;
            }
            // The call stopped at the read after the `done` read whole: it failed, and the rest
            // are asked in the next.
            let Some(stopped) = (i..end).filter(|&j| !reads[j].failed).nth(done) else {
                i = end;
                continue;
            };
            reads[stopped].failed = true;
            i = stopped + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_census_scans_private_writable_anonymous_memory_only() {
        let maps = "\
55d0c0000000-55d0c0010000 r--p 00000000 08:01 123 /usr/bin/service
55d0c0010000-55d0c0020000 rw-p 00010000 08:01 123 /usr/bin/service
55d0c1000000-55d0c1400000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f0000021000-7f0004000000 ---p 00000000 00:00 0 
7f1000000000-7f1000001000 rw-s 00000000 00:05 77 /dev/zero (deleted)
7f3000000000-7f3000001000 ---p 00000000 00:00 0 
7f3000001000-7f3000201000 rw-p 00000000 00:00 0 
7f4000000000-7f4003ff0000 ---p 00000000 00:00 0 
7f4003ff0000-7f4004000000 rw-p 00000000 00:00 0 
7f2000000000-7f2000002000 rw-p 00000000 00:00 0 [anon:arena]
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
7ffd00100000-7ffd00102000 r--p 00000000 00:00 0 [vvar]
";
        let found: Vec<(u64, bool)> = (heap_regions(maps).iter())
            .map(|r| (r.start, r.stack))
            .collect();
        assert_eq!(
            found,
            [
                (0x55d0_c100_0000, false),
                (0x7f00_0000_0000, false),
                (0x7f30_0000_1000, true),
                (0x7f40_03ff_0000, false),
                (0x7f20_0000_0000, false),
            ],
            "a thread's stack is marked, above its guard page; an arena after another's reserve is not"
        );
    }

    #[test]
    fn this_process_has_heap_regions_and_its_heap_is_among_them() {
        let boxed = Box::new([7u8; 4096]);
        let at = boxed.as_ptr() as u64;
        let regions = ProcessMemory::own().heap_regions().expect("own maps");
        assert!(regions.iter().any(|r| (r.start..r.end).contains(&at)));
    }

    #[test]
    fn a_read_of_unmapped_memory_fails_alone_and_the_others_are_read() {
        let (a, c) = (0x1122_3344_5566_7788u64.to_ne_bytes(), *b"chain!!!");
        let (mut da, mut db, mut dc, mut dn) = ([0u8; 8], [0u8; 8], [0u8; 8], [0u8; 4]);
        let mut reads = [
            Read::new(a.as_ptr() as u64, &mut da),
            Read::new(0x10, &mut db),
            Read::new(c.as_ptr() as u64, &mut dc),
            Read::new(0, &mut dn),
            Read::fault(),
        ];
        ProcessMemory::own()
            .read_many(&mut reads)
            .expect("this process can read itself");
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        assert_eq!(failed, [false, true, false, true, true]);
        assert_eq!((da, dc), (a, c));
    }

    #[test]
    fn more_reads_than_one_call_takes_are_all_answered() {
        let words: Vec<u64> = (0..3000).collect();
        let mut out = vec![[0u8; 8]; words.len()];
        let mut reads: Vec<Read<'_>> = words
            .iter()
            .zip(out.iter_mut())
            .enumerate()
            .map(|(i, (w, dst))| {
                let at = if i % 700 == 699 {
                    0x20
                } else {
                    w as *const u64 as u64
                };
                Read::new(at, dst)
            })
            .collect();
        ProcessMemory::own().read_many(&mut reads).unwrap();
        let failed: Vec<usize> = (0..reads.len()).filter(|&i| reads[i].failed).collect();
        assert_eq!(failed, [699, 1399, 2099, 2799]);
        drop(reads);
        assert!(
            (0..words.len())
                .filter(|i| i % 700 != 699)
                .all(|i| u64::from_ne_bytes(out[i]) == words[i])
        );
    }

    #[test]
    fn null_pointers_between_reads_and_faults_across_calls_fail_each_alone() {
        // Every third read a null pointer, every 500th an unmapped page: more than one call's
        // worth of reads asked, none in the wrong place.
        let words: Vec<u64> = (0..4000).collect();
        let mut out = vec![[0u8; 8]; words.len()];
        let at = |i: usize| match i {
            _ if i % 3 == 1 => 0,
            _ if i % 500 == 499 => 0x30,
            _ => &words[i] as *const u64 as u64,
        };
        let mut reads: Vec<Read<'_>> = (out.iter_mut().enumerate())
            .map(|(i, dst)| Read::new(at(i), dst))
            .collect();
        ProcessMemory::own().read_many(&mut reads).expect("own");
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        drop(reads);
        for (i, failed) in failed.into_iter().enumerate() {
            let bad = at(i) < 0x1000;
            assert_eq!(failed, bad, "read {i}");
            assert!(bad || u64::from_ne_bytes(out[i]) == words[i], "read {i}");
        }
    }

    #[test]
    fn this_process_may_be_read_and_one_gone_may_not() {
        assert_eq!(ProcessMemory::own().access(), Ok(()));
        // A child waited for: its pid names no process until it is used again.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("run true");
        let pid = child.id() as i32;
        child.wait().expect("wait");
        let gone = ProcessMemory::of(pid).access().unwrap_err();
        assert_eq!(gone.errno, Errno::ESRCH as i32);
    }

    /// Another process, read from outside: its executable's first mapped page starts with the ELF magic.
    #[test]
    fn another_process_is_read_from_outside() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("start sleep");
        let pid = child.id() as i32;
        // Until its exec has mapped `sleep`, the child is ours, or not mapped yet.
        let mapped = || -> Option<u64> {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            if exe.file_name()? != "sleep" {
                return None;
            }
            let exe = exe.to_str()?;
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
            let sleep = super::super::maps::lines(&maps).find(|m| m.path == exe)?;
            Some(sleep.start)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let start = loop {
            match mapped() {
                Some(start) => break start,
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                None => panic!("sleep was not mapped within 10 s"),
            }
        };
        let read = ProcessMemory::of(pid).read_vec(start, 4);
        child.kill().ok();
        child.wait().ok();
        assert_eq!(read.as_deref(), Some(&b"\x7fELF"[..]));
    }
}
