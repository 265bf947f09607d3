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

use super::{Memory, Read, Unreadable};

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

    /// One `process_vm_readv` over `chunk` (at most [`IOV_MAX`] reads, none at address 0): how many
    /// reads from its start were read whole, or the errno.
    fn read_chunk(&self, chunk: &mut [Read<'_>]) -> Result<usize, Errno> {
        let remote: Vec<RemoteIoVec> = chunk
            .iter()
            .map(|r| RemoteIoVec {
                base: r.addr as usize,
                len: r.dst.len(),
            })
            .collect();
        let mut local: Vec<IoSliceMut<'_>> =
            chunk.iter_mut().map(|r| IoSliceMut::new(r.dst)).collect();
        let mut left = nix::sys::uio::process_vm_readv(self.pid, &mut local, &remote)?;
        drop(local);
        // Reads wholly inside the `left` bytes succeeded.
        Ok(chunk
            .iter()
            .take_while(|r| {
                let whole = left >= r.dst.len();
                left = left.saturating_sub(r.dst.len());
                whole
            })
            .count())
    }
}

impl Memory for ProcessMemory {
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        let known_bad = |r: &Read<'_>| r.failed || r.addr == 0 || usize::try_from(r.addr).is_err();
        let mut i = 0;
        while i < reads.len() {
            if known_bad(&reads[i]) {
                reads[i].failed = true;
                i += 1;
                continue;
            }
            // A chunk runs to the next read known to fail, so the kernel is never asked for it.
            let limit = reads.len().min(i + IOV_MAX);
            let end = (i..limit).find(|&j| known_bad(&reads[j])).unwrap_or(limit);
            let chunk = &mut reads[i..end];
            let done = match self.read_chunk(chunk) {
                Ok(done) => done,
                // Nothing was read: the first range faults.
                Err(Errno::EFAULT) => 0,
                Err(errno) => {
                    return Err(Unreadable {
                        errno: errno as i32,
                    });
                }
            };
            i += done;
            if done < chunk.len() {
                reads[i].failed = true;
                i += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let line = maps.lines().find(|l| l.ends_with(exe))?;
            u64::from_str_radix(line.split('-').next()?, 16).ok()
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
