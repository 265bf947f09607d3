//! [`ImageMemory`]: a target's bytes held in this process, as regions at the target's addresses.

use super::{Memory, Read, Unreadable};

/// Byte regions at target addresses. A read succeeds when it lies wholly inside one region; anything
/// else (a gap, a read across two regions, address 0) fails, as an unmapped page of a live process
/// would.
#[derive(Debug, Default, Clone)]
pub struct ImageMemory {
    /// Sorted by start address; regions do not overlap.
    regions: Vec<(u64, Vec<u8>)>,
}

impl ImageMemory {
    pub fn new() -> ImageMemory {
        ImageMemory::default()
    }

    /// Adds `bytes` at `addr`. A region overlapping one already held is refused (`false`): two answers
    /// for one address would make reads depend on the order regions were added.
    pub fn insert(&mut self, addr: u64, bytes: Vec<u8>) -> bool {
        let Some(end) = addr.checked_add(bytes.len() as u64) else {
            return false;
        };
        let at = self.regions.partition_point(|(a, _)| *a < addr);
        let before_ends = at
            .checked_sub(1)
            .map_or(0, |i| self.regions[i].0 + self.regions[i].1.len() as u64);
        let after_starts = self.regions.get(at).map_or(u64::MAX, |r| r.0);
        if before_ends > addr || end > after_starts {
            return false;
        }
        self.regions.insert(at, (addr, bytes));
        true
    }

    /// The bytes at `addr..addr + len`, if one region holds all of them.
    pub fn get(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let at = self
            .regions
            .partition_point(|(a, _)| *a <= addr)
            .checked_sub(1)?;
        let (start, bytes) = &self.regions[at];
        let from = usize::try_from(addr - start).ok()?;
        bytes.get(from..from.checked_add(len)?)
    }
}

impl Memory for ImageMemory {
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        for r in reads.iter_mut().filter(|r| !r.failed) {
            match self.get(r.addr, r.dst.len()).filter(|_| r.addr != 0) {
                Some(bytes) => r.dst.copy_from_slice(bytes),
                None => r.failed = true,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> ImageMemory {
        let mut m = ImageMemory::new();
        assert!(m.insert(0x1000, vec![1, 2, 3, 4]));
        assert!(m.insert(0x1004, vec![5, 6]));
        m
    }

    #[test]
    fn a_read_inside_one_region_succeeds_and_any_other_fails() {
        let m = image();
        let (mut a, mut b, mut c, mut d) = ([0u8; 2], [0u8; 2], [0u8; 2], [0u8; 1]);
        let mut reads = [
            Read::new(0x1001, &mut a),
            Read::new(0x1003, &mut b),
            Read::new(0x1005, &mut c),
            Read::new(0x0fff, &mut d),
        ];
        m.read_many(&mut reads).unwrap();
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        assert_eq!(failed, [false, true, true, true], "across, past, before");
        assert_eq!(a, [2, 3]);
    }

    #[test]
    fn overlapping_regions_are_refused() {
        let mut m = image();
        assert!(!m.insert(0x0fff, vec![0; 2]));
        assert!(!m.insert(0x1005, vec![0; 1]));
        assert!(!m.insert(u64::MAX, vec![0; 2]), "wraps around");
        assert!(m.insert(0x1006, vec![7]));
        assert_eq!(m.read_vec(0x1006, 1), Some(vec![7]));
        assert_eq!(
            m.read_vec(0x1004, 3),
            None,
            "adjacent regions are still two"
        );
    }

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn a_list_is_chased_to_its_null_to_a_failed_read_or_to_its_bound() {
        let mut m = ImageMemory::new();
        // The head word at 0x100; nodes at 0x200 and 0x300, each's next at 8 into it.
        assert!(m.insert(0x100, words(&[0x200])));
        assert!(m.insert(0x200, words(&[0, 0x300])));
        assert!(m.insert(0x300, words(&[0, 0])));
        let c = m.chase(0x100, 8, 10);
        assert_eq!(
            (c.nodes, c.ended, c.failed),
            (vec![0x200, 0x300], true, false)
        );
        // A next pointer into nothing.
        assert!(m.insert(0x400, words(&[0x500])));
        let c = m.chase(0x400, 8, 10);
        assert_eq!((c.nodes, c.ended, c.failed), (vec![0x500], false, true));
        // A list that loops stops at the bound.
        assert!(m.insert(0x600, words(&[0x700])));
        assert!(m.insert(0x700, words(&[0, 0x700])));
        let c = m.chase(0x600, 8, 5);
        assert_eq!((c.nodes.len(), c.ended, c.failed), (5, false, false));
        // All of them together, a step at a time, say what each alone says.
        let lists = [(0x100, 8, 10), (0x400, 8, 10), (0x600, 8, 5), (0x100, 8, 0)];
        let alone: Vec<super::super::Chased> = lists
            .iter()
            .map(|&(a, n, max)| m.chase(a, n, max))
            .collect();
        assert_eq!(m.chase_all(&lists), alone);
    }
}
