//! Where the walker's bytes come from: the [`Memory`] trait and its sources.
//!
//! A source answers batches of reads ([`Memory::read_many`]), each of which succeeds whole or is
//! marked failed; a failed read is an answer (an unmapped address, a pointer that lied, a page a core
//! file did not keep), never a crash and never a guess. Only a source that cannot read at all (this
//! process may not read that one: `EPERM`, seccomp, not Linux) answers with an error, for the whole
//! batch. Batches exist because a read of another process costs a system call, and one
//! `process_vm_readv` takes up to 1,024 ranges.
//!
//! [`maps`] reads the lines of `/proc/PID/maps`.
//!
//! Sources: [`ProcessMemory`] (a live process, this one included; feature `process`) and
//! [`ImageMemory`] (byte regions held in memory: tests, and any source that has loaded its bytes, such
//! as the segments of a core file).

mod image;
pub mod maps;
#[cfg(feature = "process")]
mod process;

pub use image::ImageMemory;
#[cfg(feature = "process")]
pub use process::ProcessMemory;

use crate::bytes;

/// One range of a source's memory, `[start, end)`: what a census scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    /// A thread's stack: no task is allocated there, but a task built on the stack before it was
    /// boxed leaves a copy of its header behind, which a census must not take for a task.
    pub stack: bool,
}

/// One read of a batch: `dst.len()` bytes at `addr` into `dst`.
#[derive(Debug)]
pub struct Read<'a> {
    pub addr: u64,
    /// Set by the source when the bytes could not be read whole.
    pub failed: bool,
    pub dst: &'a mut [u8],
}

impl<'a> Read<'a> {
    pub fn new(addr: u64, dst: &'a mut [u8]) -> Read<'a> {
        Read {
            addr,
            failed: false,
            dst,
        }
    }

    /// A read known to fail without asking the source.
    pub fn fault() -> Read<'a> {
        Read {
            addr: 0,
            failed: true,
            dst: &mut [],
        }
    }
}

/// A list followed by [`Memory::chase`]: its nodes in order, and how the walk stopped: a null
/// (`ended`), a read that failed (`failed`), or neither (it reached its `max`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chased {
    pub nodes: Vec<u64>,
    pub ended: bool,
    pub failed: bool,
}

/// The source cannot read at all: `errno` as the system gave it (0 when there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable {
    pub errno: i32,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "this memory cannot be read (errno {})", self.errno)
    }
}

impl std::error::Error for Unreadable {}

/// A source of a target's bytes.
pub trait Memory {
    /// Performs every read of the batch, marking each one that could not be read whole. Reads at
    /// address 0 always fail. `Err` means nothing can be read from this source at all.
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable>;

    /// `len` bytes at `addr`, or `None` if any of them cannot be read.
    fn read_vec(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = vec![0u8; len];
        let mut r = [Read::new(addr, &mut out)];
        let read = self.read_many(&mut r).is_ok() && !r[0].failed;
        read.then_some(out)
    }

    /// The native-endian pointer-sized word at `addr`, or `None` if it cannot be read.
    fn read_word(&self, addr: u64) -> Option<u64> {
        let mut w = [0u8; 8];
        let mut r = [Read::new(addr, &mut w)];
        let read = self.read_many(&mut r).is_ok() && !r[0].failed;
        read.then(|| bytes::word(&w, 0))
    }

    /// Follows a linked list: the word at `at` is the first node, the word `next` bytes into each
    /// node the one after it, until a null word, a failed read, or `max` nodes. One read per node;
    /// a source that can follow the list where the memory is (an agent) does it in one exchange.
    fn chase(&self, at: u64, next: u32, max: usize) -> Chased {
        let mut out = Chased::default();
        let mut word_at = at;
        while out.nodes.len() < max {
            match self.read_word(word_at) {
                None => {
                    out.failed = true;
                    break;
                }
                Some(0) => {
                    out.ended = true;
                    break;
                }
                Some(node) => {
                    out.nodes.push(node);
                    word_at = node.wrapping_add(u64::from(next));
                }
            }
        }
        out
    }

    /// Follows every list of `lists` (each `(at, next, max)` as [`Memory::chase`] takes it), all of
    /// them a node at a time together: one batch of reads per step down the longest, not one read
    /// per node. A source that can follow them where the memory is (an agent) does all in one
    /// exchange.
    fn chase_all(&self, lists: &[(u64, u32, usize)]) -> Vec<Chased> {
        let mut out: Vec<Chased> = lists.iter().map(|_| Chased::default()).collect();
        // Each list still going: its index and the address of the word naming its next node.
        let mut going: Vec<(usize, u64)> = (lists.iter().enumerate())
            .filter(|(_, l)| l.2 > 0)
            .map(|(i, l)| (i, l.0))
            .collect();
        while !going.is_empty() {
            let mut words = vec![[0u8; 8]; going.len()];
            let mut reads: Vec<Read<'_>> = (going.iter().zip(words.iter_mut()))
                .map(|(&(_, at), w)| Read::new(at, w))
                .collect();
            let all_failed = self.read_many(&mut reads).is_err();
            let failed: Vec<bool> = reads.iter().map(|r| all_failed || r.failed).collect();
            drop(reads);
            let mut next = Vec::with_capacity(going.len());
            for ((&(i, _), w), failed) in going.iter().zip(&words).zip(failed) {
                let c = &mut out[i];
                match (failed, bytes::word(w, 0)) {
                    (true, _) => c.failed = true,
                    (false, 0) => c.ended = true,
                    (false, node) => {
                        c.nodes.push(node);
                        if c.nodes.len() < lists[i].2 {
                            next.push((i, node.wrapping_add(u64::from(lists[i].1))));
                        }
                    }
                }
            }
            going = next;
        }
        out
    }

    /// Reads each address of `from` into the buffer `into` gives it, in one batch; whether each read.
    fn read_each<'b>(
        &self,
        from: impl Iterator<Item = u64>,
        into: impl Iterator<Item = &'b mut [u8]>,
    ) -> Vec<bool>
    where
        Self: Sized,
    {
        let mut reads: Vec<Read<'_>> = from.zip(into).map(|(at, b)| Read::new(at, b)).collect();
        let read = self.read_many(&mut reads).is_ok();
        reads.iter().map(|r| read && !r.failed).collect()
    }

    /// Reads every `(address, length)` of `ranges` in one batch, into one buffer, one range after
    /// another: that buffer, and whether each read. Thousands of small ranges are one allocation.
    fn read_packed(&self, ranges: &[(u64, u32)]) -> (Vec<u8>, Vec<bool>)
    where
        Self: Sized,
    {
        let mut buf = vec![0u8; ranges.iter().map(|r| r.1 as usize).sum()];
        let read = self.read_packed_into(ranges, &mut buf);
        (buf, read)
    }

    /// [`Memory::read_packed`] into a buffer the caller holds (at least the ranges' lengths
    /// together; a range that does not fit is not read).
    fn read_packed_into(&self, ranges: &[(u64, u32)], buf: &mut [u8]) -> Vec<bool>
    where
        Self: Sized,
    {
        let mut rest = buf;
        let mut fits = Vec::with_capacity(ranges.len());
        let into = ranges.iter().filter_map(|&(_, len)| {
            let len = len as usize;
            fits.push(len <= rest.len());
            let (range, after) = std::mem::take(&mut rest).split_at_mut_checked(len)?;
            rest = after;
            Some(range)
        });
        let into: Vec<&mut [u8]> = into.collect();
        let from = (ranges.iter().zip(&fits)).filter_map(|(r, &fits)| fits.then_some(r.0));
        let mut read = self.read_each(from, into.into_iter()).into_iter();
        fits.iter()
            .map(|&fits| fits && read.next().unwrap_or(false))
            .collect()
    }
}

impl<M: Memory + ?Sized> Memory for &M {
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        (**self).read_many(reads)
    }
}
