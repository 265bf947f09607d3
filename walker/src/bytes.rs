//! Integers out of copied target bytes, native byte order. A plan's offsets are not trusted: a read
//! past the end of the bytes is `None` (or 0), never a panic.

/// The unsigned integer of `size` (1, 2, 4 or 8) bytes at `offset` in `bytes`.
pub fn uint(bytes: &[u8], offset: u32, size: u8) -> Option<u64> {
    let at = offset as usize;
    // One fixed-size load per width: a copy of a length known only at run time is a call to
    // `memcpy`, and a dump reads a word this way for every value.
    fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
        bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    Some(match size {
        1 => u64::from(bytes.get(at).copied()?),
        2 => u64::from(u16::from_ne_bytes(array(bytes, at)?)),
        4 => u64::from(u32::from_ne_bytes(array(bytes, at)?)),
        8 => u64::from_ne_bytes(array(bytes, at)?),
        _ => return None,
    })
}

/// The pointer-sized word at `offset` in `bytes`; 0 past the end (a plan that lies reads zeros).
pub fn word(bytes: &[u8], offset: u32) -> u64 {
    uint(bytes, offset, 8).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_in_native_order_and_never_past_the_end() {
        let b = 0x1122_3344_5566_7788u64.to_ne_bytes();
        assert_eq!(uint(&b, 0, 8), Some(0x1122_3344_5566_7788));
        assert_eq!(
            uint(&b, 0, 4),
            Some(u32::from_ne_bytes(b[..4].try_into().unwrap()) as u64)
        );
        assert_eq!(uint(&b, 7, 2), None);
        assert_eq!(uint(&b, 0, 3), None, "no such integer");
        assert_eq!(word(&b, 1), 0);
        assert_eq!(word(&b, u32::MAX), 0);
    }
}
