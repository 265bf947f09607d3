//! Where a local of a function body is while its code runs, from its `DW_AT_location`: the few
//! shapes compilers give locals. Unoptimised code keeps every local at an offset from the frame base
//! (`DW_OP_fbreg N`). Optimised code keeps a local in a register, at an offset from one, or in
//! pieces (a pointer in a register beside a constant the compiler knows), each valid over a range
//! of code (a location list). Anything else (arithmetic, an implicit pointer, an entry value, a
//! piece that is gone) is not followed: the local is left out, never guessed.

use gimli::{Encoding, Operation};
use serde::{Deserialize, Serialize};

use super::Reader;

/// What a function's locals are addressed from (its `DW_AT_frame_base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameBase {
    /// The stack pointer while the function runs (unoptimised x86_64 code).
    Sp,
    /// The frame pointer register.
    Fp,
    /// The canonical frame address of the call frame information.
    Cfa,
}

/// Where some of a local's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Place {
    /// In memory at an offset from the function's frame base.
    Frame { base: FrameBase, offset: i64 },
    /// In memory at an offset from a register's value (its DWARF number).
    Memory { reg: u16, offset: i64 },
    /// In the register itself.
    Register(u16),
    /// A constant the compiler knows, not kept anywhere.
    Literal(u64),
}

/// A local's location: its pieces in order, each with its size in bytes; one piece of size 0 is
/// the whole value in one place.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    pub pieces: Vec<(u32, Place)>,
}

impl Location {
    /// The address of a value that lies whole in memory, given how to read a register and the
    /// frame base.
    pub fn address(
        &self,
        reg: impl Fn(u16) -> Option<u64>,
        base: impl Fn(FrameBase) -> Option<u64>,
    ) -> Option<u64> {
        match self.pieces.as_slice() {
            [(0, Place::Frame { base: b, offset })] => base(*b)?.checked_add_signed(*offset),
            [(0, Place::Memory { reg: r, offset })] => reg(*r)?.checked_add_signed(*offset),
            _ => None,
        }
    }
}

/// The location a DWARF expression gives, if it is one of the shapes above. `base` is the
/// function's frame base, where known.
pub(super) fn parse(
    expr: Reader<'_>,
    encoding: Encoding,
    base: Option<FrameBase>,
) -> Option<Location> {
    let mut ops = gimli::Expression(expr).operations(encoding);
    let (mut pieces, mut place, mut constant) = (Vec::new(), None, None);
    while let Some(op) = ops.next().ok()? {
        match op {
            Operation::Register { register } => place = Some(Place::Register(register.0)),
            Operation::RegisterOffset {
                register,
                offset,
                base_type,
            } if base_type.0 == 0 => {
                place = Some(Place::Memory {
                    reg: register.0,
                    offset,
                })
            }
            Operation::FrameOffset { offset } => {
                place = Some(Place::Frame {
                    base: base?,
                    offset,
                })
            }
            Operation::UnsignedConstant { value } => constant = Some(value),
            Operation::SignedConstant { value } => constant = Some(value as u64),
            Operation::StackValue => place = Some(Place::Literal(constant.take()?)),
            Operation::Piece {
                size_in_bits,
                bit_offset: None,
            } if size_in_bits % 8 == 0 => {
                // A piece with no place before it is gone (optimised out): so is the value.
                pieces.push((u32::try_from(size_in_bits / 8).ok()?, place.take()?));
            }
            _ => return None,
        }
    }
    match (pieces.is_empty(), place) {
        (true, Some(whole)) => Some(Location {
            pieces: vec![(0, whole)],
        }),
        // A constant left on the stack is an address: a static's, not a local's place.
        (false, None) if constant.is_none() => Some(Location { pieces }),
        _ => None,
    }
}

/// The location of an expression given as bytes, for the unit specs.
#[cfg(test)]
fn parse_bytes(bytes: &[u8], base: Option<FrameBase>) -> Option<Location> {
    let encoding = Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 4,
    };
    let reader = gimli::EndianSlice::new(bytes, gimli::RunTimeEndian::Little);
    parse(reader, encoding, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(place: Place) -> Option<Location> {
        Some(Location {
            pieces: vec![(0, place)],
        })
    }

    #[test]
    fn the_shapes_locals_take_are_read() {
        let cfa = Some(FrameBase::Cfa);
        // DW_OP_fbreg -24
        let frame = Place::Frame {
            base: FrameBase::Cfa,
            offset: -24,
        };
        assert_eq!(parse_bytes(&[0x91, 0x68], cfa), whole(frame));
        // DW_OP_reg3 (rbx)
        assert_eq!(parse_bytes(&[0x53], None), whole(Place::Register(3)));
        // DW_OP_breg7 (rsp) +16
        let memory = Place::Memory { reg: 7, offset: 16 };
        assert_eq!(parse_bytes(&[0x77, 0x10], None), whole(memory));
        // DW_OP_reg13 DW_OP_piece 8 DW_OP_lit1 DW_OP_stack_value DW_OP_piece 8: a permit's
        // semaphore in r13, its count known to be 1.
        let permit = [0x5d, 0x93, 0x08, 0x31, 0x9f, 0x93, 0x08];
        let pieces = vec![(8, Place::Register(13)), (8, Place::Literal(1))];
        assert_eq!(parse_bytes(&permit, None), Some(Location { pieces }));
    }

    #[test]
    fn what_is_gone_or_computed_is_not_followed() {
        // DW_OP_piece 8 with nothing before it: that part was optimised out.
        assert_eq!(
            parse_bytes(&[0x93, 0x08, 0x31, 0x9f, 0x93, 0x08], None),
            None
        );
        // DW_OP_fbreg without a frame base known.
        assert_eq!(parse_bytes(&[0x91, 0x68], None), None);
        // DW_OP_breg7 0 DW_OP_deref: a pointer to the value, not the value.
        assert_eq!(parse_bytes(&[0x77, 0x00, 0x06], None), None);
        // DW_OP_addr: a static's address.
        let addr = [0x03, 1, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse_bytes(&addr, None), None);
        // A register, then more without a piece: not a location.
        assert_eq!(parse_bytes(&[0x53, 0x93, 0x08, 0x54], None), None);
        assert_eq!(parse_bytes(&[], None), None, "empty: optimised out");
    }
}
