//! Where each thread's stack starts: its registers, and the files mapped into its process.
//!
//! A live process is not stopped for this. `/proc/PID/task/TID/syscall` gives the stack and
//! instruction pointers of a thread that is not running (blocked in a system call, or stopped):
//! such a thread's stack does not change while it is read, unless it wakes meanwhile, which
//! [`still_there`] tells afterwards. A running thread (`running`) is left out: its stack moves
//! under any read. Where the threads are held (`--stop`), every one is read, with all its
//! registers ([`held`]), as a core file keeps them (`NT_PRSTATUS`).

use std::path::PathBuf;

use super::unwind::{Mapping, Registers};

/// A thread of the process and where its stack starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub tid: u32,
    /// Its name (`comm`), where known.
    pub name: Option<String>,
    pub regs: Registers,
    /// The system call it is blocked in, where it is in one and that is known.
    pub syscall: Option<Syscall>,
}

/// A system call a thread is in: its number and arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Syscall {
    pub nr: u64,
    pub args: [u64; 6],
}

/// The threads of live process `pid` that are not running, with their registers. Empty where
/// `/proc` does not say (another user's process, Yama): no thread is then named as a holder.
pub fn live(pid: u32) -> Vec<Thread> {
    let mut threads = live_unnamed(pid, &[]);
    for t in &mut threads {
        t.name = comm(pid, t.tid);
    }
    threads
}

/// [`live`] without their names, which cost a read each: for a stage that names only the few
/// threads it shows ([`comm`]).
pub fn live_unnamed(pid: u32, known: &[u32]) -> Vec<Thread> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut threads: Vec<Thread> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| !known.contains(tid))
        .filter_map(|tid| {
            let (regs, syscall) = registers(pid, tid)?;
            Some(Thread {
                tid,
                name: None,
                regs,
                syscall,
            })
        })
        .collect();
    threads.sort_by_key(|t| t.tid);
    threads
}

/// The threads of live process `pid` held stopped, with every register: `regs` by thread id, in
/// `pr_reg`'s layout (as `crate::agentless::freeze::Frozen::registers` reads them), and then any
/// thread not held (or whose registers could not be read) as [`live`] finds it.
pub fn held(pid: u32, regs: Vec<(u32, Vec<u64>)>) -> Vec<Thread> {
    let mut threads: Vec<Thread> = (regs.into_iter())
        .filter_map(|(tid, words)| {
            let mut t = from_pr_reg(tid, |w| words.get(w).copied())?;
            t.name = comm(pid, tid);
            Some(t)
        })
        .collect();
    let known: Vec<u32> = threads.iter().map(|t| t.tid).collect();
    let mut others = live_unnamed(pid, &known);
    for t in &mut others {
        t.name = comm(pid, t.tid);
    }
    threads.extend(others);
    threads.sort_by_key(|t| t.tid);
    threads
}

/// The threads of live process `pid` that are not among `read`: their ids and names.
pub fn others(pid: u32, read: &[Thread]) -> Vec<(u32, Option<String>)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, Option<String>)> = (tasks.flatten())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| !read.iter().any(|t| t.tid == *tid))
        .map(|tid| (tid, comm(pid, tid)))
        .collect();
    out.sort_unstable();
    out
}

/// Thread `tid`'s name (`comm`), where `/proc` tells.
/// Thread `tid`'s name (`comm`), where `/proc` says.
pub fn comm(pid: u32, tid: u32) -> Option<String> {
    crate::attach::procfs::read(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_owned())
}

/// Thread `tid`'s stack and instruction pointers, and its system call, if it is not running.
fn registers(pid: u32, tid: u32) -> Option<(Registers, Option<Syscall>)> {
    let line = crate::attach::procfs::read(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    Some((syscall_registers(&line)?, syscall_of(&line)))
}

/// The last two fields of a `syscall` file, the stack and instruction pointers: `running` (or
/// anything else) gives none.
fn syscall_registers(line: &str) -> Option<Registers> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 3 {
        return None;
    }
    let (sp, pc) = (
        hex(fields[fields.len() - 2])?,
        hex(fields[fields.len() - 1])?,
    );
    (sp != 0 && pc != 0).then_some(Registers::pointers(pc, sp))
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// The system call of a `syscall` file's line (`nr arg1 … arg6 sp pc`); none for a thread outside
/// one (`-1 sp pc`) or running.
fn syscall_of(line: &str) -> Option<Syscall> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() != 9 {
        return None;
    }
    let nr = fields[0].parse().ok()?;
    let mut args = [0; 6];
    for (a, f) in args.iter_mut().zip(&fields[1..7]) {
        *a = hex(f)?;
    }
    Some(Syscall { nr, args })
}

/// Whether each of `threads` is still where it was read (same stack and instruction pointers): a
/// thread that woke while its stack was read may have changed what was read.
pub fn still_there(pid: u32, threads: &[Thread]) -> Vec<bool> {
    let pointers = |r: Registers| (r.pc, r.sp);
    threads
        .iter()
        .map(|t| registers(pid, t.tid).map(|(r, _)| pointers(r)) == Some(pointers(t.regs)))
        .collect()
}

/// The files of `/proc/PID/maps` text.
pub fn mappings(maps: &str) -> Vec<Mapping> {
    (asyncdump_walker::memory::maps::lines(maps))
        .filter(|m| m.path.starts_with('/') && !m.path.ends_with(" (deleted)"))
        .map(|m| Mapping {
            start: m.start,
            end: m.end,
            offset: m.offset,
            path: PathBuf::from(m.path),
        })
        .collect()
}

/// Where each DWARF register is in a core's `pr_reg` (x86_64's `user_regs_struct`: r15, r14, r13,
/// r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ...;
/// aarch64's: x0..x30, sp, pc), by word; and the words of the stack and instruction pointers.
#[cfg(target_arch = "aarch64")]
const PR_REG: ([usize; 31], usize, usize) = (
    [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 27, 28, 29, 30,
    ],
    31,
    32,
);
#[cfg(not(target_arch = "aarch64"))]
const PR_REG: ([usize; 16], usize, usize) = (
    // rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp (taken apart), r8..r15
    [10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0],
    19,
    16,
);

/// The system call a thread's `pr_reg` shows it in (x86_64: `orig_rax` is its number, -1 outside
/// one; the arguments in rdi, rsi, rdx, r10, r8, r9). aarch64's keeps no such word: none.
fn syscall_in_pr_reg(word: &impl Fn(usize) -> Option<u64>) -> Option<Syscall> {
    if cfg!(target_arch = "aarch64") {
        return None;
    }
    let nr = word(15).filter(|&nr| nr as i64 >= 0)?;
    let mut args = [0; 6];
    for (a, w) in args.iter_mut().zip([14, 13, 12, 7, 9, 8]) {
        *a = word(w)?;
    }
    Some(Syscall { nr, args })
}

/// The general registers of a core's `NT_PRSTATUS` note (`pr_pid` at 32, `pr_reg` at 112): the
/// thread's id and every register, by DWARF number.
pub fn from_prstatus(desc: &[u8]) -> Option<Thread> {
    let word = |at: usize| {
        let at = 112 + 8 * at;
        Some(u64::from_ne_bytes(desc.get(at..at + 8)?.try_into().ok()?))
    };
    let tid = u32::from_ne_bytes(desc.get(32..36)?.try_into().ok()?);
    from_pr_reg(tid, word)
}

/// Thread `tid` with every register, from `pr_reg`'s words (`word(i)`: the `i`th).
fn from_pr_reg(tid: u32, word: impl Fn(usize) -> Option<u64>) -> Option<Thread> {
    let (by_dwarf, sp, pc) = PR_REG;
    let mut regs = Registers::pointers(word(pc)?, word(sp)?);
    for (dwarf, &w) in by_dwarf.iter().enumerate() {
        regs.general[dwarf] = Some(word(w)?);
    }
    Some(Thread {
        tid,
        name: None,
        regs,
        syscall: syscall_in_pr_reg(&word),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_or_stopped_thread_gives_its_pointers_and_a_running_one_none() {
        let blocked = "202 0x7f0 0x80 0x0 0x0 0x0 0x0 0x7ffd5c 0x7f12ab\n";
        assert_eq!(
            syscall_registers(blocked),
            Some(Registers::pointers(0x7f12ab, 0x7ffd5c))
        );
        let stopped = "-1 0x7ffd00 0x5555a0\n";
        assert_eq!(syscall_registers(stopped).map(|r| r.pc), Some(0x5555a0));
        assert_eq!(syscall_registers("running\n"), None);
        assert_eq!(syscall_registers("0 0x0 0x0"), None, "no stack");
        assert_eq!(syscall_registers("1 zz 0x10"), None, "damaged");
    }

    #[test]
    fn maps_lines_give_the_files_mapped_and_leave_the_rest() {
        let maps = "\
5555a000-5555b000 r--p 00000000 08:01 1234     /usr/bin/app
5555b000-5555c000 r-xp 00001000 08:01 1234     /usr/bin/app
7f00-8f00 rw-p 00000000 00:00 0 
7ffd0000-7ffd1000 rw-p 00000000 00:00 0        [stack]
9000-a000 r-xp 00002000 08:01 99     /opt/a file (deleted)
b000-c000 r-xp 00000000 08:01 98     /opt/with space.so
";
        let m = mappings(maps);
        let paths: Vec<&str> = m.iter().map(|m| m.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            ["/usr/bin/app", "/usr/bin/app", "/opt/with space.so"]
        );
        assert_eq!(
            (m[1].start, m[1].end, m[1].offset),
            (0x5555b000, 0x5555c000, 0x1000)
        );
    }

    #[test]
    fn a_prstatus_note_gives_the_thread_and_every_register() {
        let mut desc = vec![0u8; 112 + 34 * 8];
        desc[32..36].copy_from_slice(&4242u32.to_ne_bytes());
        // Each word of `pr_reg` holds 100 plus its index.
        for w in 0..34 {
            desc[112 + w * 8..120 + w * 8].copy_from_slice(&(100 + w as u64).to_ne_bytes());
        }
        let t = from_prstatus(&desc).unwrap();
        let (by_dwarf, sp, pc) = PR_REG;
        assert_eq!(
            (t.tid, t.regs.sp, t.regs.pc),
            (4242, 100 + sp as u64, 100 + pc as u64)
        );
        if cfg!(target_arch = "x86_64") {
            // rbx is DWARF 3 and the 6th word; rbp DWARF 6, the 5th; r13 DWARF 13, the 3rd.
            assert_eq!(t.regs.general[3], Some(105));
            assert_eq!(t.regs.fp(), Some(104));
            assert_eq!(t.regs.general[13], Some(102));
        }
        assert!(t.regs.general[..by_dwarf.len()].iter().all(Option::is_some));
        assert_eq!(from_prstatus(&desc[..100]), None, "cut short");
    }
}
