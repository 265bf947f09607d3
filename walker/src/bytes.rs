//! Integers out of copied target bytes, native byte order. A plan's offsets are not trusted: a read
//! past the end of the bytes is `None` (or 0), never a panic.

/// The unsigned integer of `size` (1, 2, 4 or 8) bytes at `offset` in `bytes`.
pub fn uint(bytes: &[u8], offset: u32, size: u8) -> Option<u64> {
    if !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let at = offset as usize;
    let b = bytes.get(at..at + size as usize)?;
    let mut buf = [0u8; 8];
    if cfg!(target_endian = "little") {
        buf[..b.len()].copy_from_slice(b);
        Some(u64::from_le_bytes(buf))
    } else {
        buf[8 - b.len()..].copy_from_slice(b);
        Some(u64::from_be_bytes(buf))
    }
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
