//! Where a local of a function body is while its code runs, from its `DW_AT_location`: the few
//! shapes compilers give locals. Unoptimised code keeps every local at an offset from the frame base
//! (`DW_OP_fbreg N`). Optimised code keeps a local in a register, at an offset from one, or in
//! pieces (a pointer in a register beside a constant the compiler knows), each valid over a range
//! of code (a location list). Anything else (arithmetic, an implicit pointer, an entry value, a
//! piece that is gone) is not followed: the local is left out, never guessed.

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

impl Place {
    /// Whether the value is in memory (at an address), not in a register or nowhere.
    pub fn in_memory(&self) -> bool {
        matches!(self, Place::Frame { .. } | Place::Memory { .. })
    }
}

/// A local's location: the whole value in one place (what nearly every local has, kept without
/// an allocation: a binary has hundreds of thousands), or its pieces in order, each with its size
/// in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Location {
    Whole(Place),
    Pieces(Box<[(u32, Place)]>),
}

impl Location {
    /// The address of a value that lies whole in memory, given how to read a register and the
    /// frame base.
    pub fn address(
        &self,
        reg: impl Fn(u16) -> Option<u64>,
        base: impl Fn(FrameBase) -> Option<u64>,
    ) -> Option<u64> {
        match *self {
            Location::Whole(Place::Frame { base: b, offset }) => {
                base(b)?.checked_add_signed(offset)
            }
            Location::Whole(Place::Memory { reg: r, offset }) => reg(r)?.checked_add_signed(offset),
            _ => None,
        }
    }
}

/// The location a DWARF expression gives, if it is one of the shapes above. `base` is the
/// function's frame base, where known. Read straight from the expression's bytes, the few
/// operations these shapes use and no other: a binary has hundreds of thousands of them, and a
/// general reading of each operation cost a twentieth of planning a binary.
pub(super) fn parse(mut expr: Reader<'_>, base: Option<FrameBase>) -> Option<Location> {
    use gimli::Reader as _;
    let (mut pieces, mut place, mut constant) = (Vec::new(), None, None);
    while !expr.is_empty() {
        let op = expr.read_u8().ok()?;
        match op {
            // DW_OP_reg0..31, DW_OP_regx
            0x50..=0x6f => place = Some(Place::Register(u16::from(op - 0x50))),
            0x90 => {
                let reg = u16::try_from(expr.read_uleb128().ok()?).ok()?;
                place = Some(Place::Register(reg));
            }
            // DW_OP_breg0..31, DW_OP_bregx
            0x70..=0x8f => {
                let (reg, offset) = (u16::from(op - 0x70), expr.read_sleb128().ok()?);
                place = Some(Place::Memory { reg, offset });
            }
            0x92 => {
                let reg = u16::try_from(expr.read_uleb128().ok()?).ok()?;
                let offset = expr.read_sleb128().ok()?;
                place = Some(Place::Memory { reg, offset });
            }
            // DW_OP_fbreg
            0x91 => {
                let offset = expr.read_sleb128().ok()?;
                place = Some(Place::Frame {
                    base: base?,
                    offset,
                });
            }
            // DW_OP_lit0..31, DW_OP_const1u..8s, DW_OP_constu, DW_OP_consts
            0x30..=0x4f => constant = Some(u64::from(op - 0x30)),
            0x08 => constant = Some(u64::from(expr.read_u8().ok()?)),
            0x09 => constant = Some(expr.read_i8().ok()? as u64),
            0x0a => constant = Some(u64::from(expr.read_u16().ok()?)),
            0x0b => constant = Some(expr.read_i16().ok()? as u64),
            0x0c => constant = Some(u64::from(expr.read_u32().ok()?)),
            0x0d => constant = Some(expr.read_i32().ok()? as u64),
            0x0e => constant = Some(expr.read_u64().ok()?),
            0x0f => constant = Some(expr.read_i64().ok()? as u64),
            0x10 => constant = Some(expr.read_uleb128().ok()?),
            0x11 => constant = Some(expr.read_sleb128().ok()? as u64),
            // DW_OP_stack_value: the constant is the value.
            0x9f => place = Some(Place::Literal(constant.take()?)),
            // DW_OP_piece: one with no place before it is gone (optimised out), and so is the value.
            0x93 => {
                let size = u32::try_from(expr.read_uleb128().ok()?).ok()?;
                pieces.push((size, place.take()?));
            }
            _ => return None,
        }
    }
    located(pieces, place, constant)
}

/// What an expression read to its end gives: one place with no piece is the whole value; pieces
/// with nothing after the last are the value in parts. A constant left on the stack is an address
/// (a static's), not a local's place.
fn located(
    pieces: Vec<(u32, Place)>,
    place: Option<Place>,
    constant: Option<u64>,
) -> Option<Location> {
    match (pieces.is_empty(), place) {
        (true, Some(whole)) => Some(Location::Whole(whole)),
        (false, None) if constant.is_none() => Some(Location::Pieces(pieces.into())),
        _ => None,
    }
}

/// [`parse`] by gimli's reading of each operation: what the specs hold it to.
#[cfg(test)]
fn operations(expr: Reader<'_>, base: Option<FrameBase>) -> Option<Location> {
    use gimli::Operation;
    let encoding = gimli::Encoding {
        address_size: 8,
        format: gimli::Format::Dwarf32,
        version: 4,
    };
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
                pieces.push((u32::try_from(size_in_bits / 8).ok()?, place.take()?));
            }
            _ => return None,
        }
    }
    located(pieces, place, constant)
}

/// The location of an expression given as bytes, for the unit specs.
#[cfg(test)]
fn parse_bytes(bytes: &[u8], base: Option<FrameBase>) -> Option<Location> {
    parse(
        gimli::EndianSlice::new(bytes, gimli::RunTimeEndian::Little),
        base,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(place: Place) -> Option<Location> {
        Some(Location::Whole(place))
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
        assert_eq!(
            parse_bytes(&permit, None),
            Some(Location::Pieces(pieces.into()))
        );
    }

    #[test]
    fn each_expression_reads_as_gimli_reads_it() {
        let (mut uleb, mut sleb) = (Vec::new(), Vec::new());
        let mut exprs: Vec<Vec<u8>> = (0x50..=0x6f).map(|op| vec![op]).collect();
        for n in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            8191,
            -8192,
            1 << 20,
            -(1 << 40),
        ] {
            sleb.clear();
            gimli::leb128::write::signed(&mut sleb, n).unwrap();
            for op in [0x91, 0x70, 0x77, 0x8f] {
                exprs.push([vec![op], sleb.clone()].concat());
            }
            // bregx 40 N; a constant as the second piece's value.
            exprs.push([vec![0x92, 40], sleb.clone()].concat());
            exprs.push([vec![0x53, 0x93, 8, 0x11], sleb.clone(), vec![0x9f, 0x93, 8]].concat());
        }
        for n in [0u64, 5, 127, 128, 1 << 33] {
            uleb.clear();
            gimli::leb128::write::unsigned(&mut uleb, n).unwrap();
            exprs.push([vec![0x90], uleb.clone()].concat());
            exprs.push([vec![0x10], uleb.clone(), vec![0x9f]].concat());
            exprs.push([vec![0x5d, 0x93], uleb.clone()].concat());
        }
        // Fixed-size constants, a literal, then what is refused: a deref, an entry value, an
        // address, an empty piece, two registers with no piece between, a lone constant, nothing,
        // a cut operand.
        exprs.extend([
            vec![0x08, 0xff, 0x9f],
            vec![0x09, 0xff, 0x9f],
            vec![0x0a, 1, 2, 0x9f],
            vec![0x0b, 0xfe, 0xff, 0x9f],
            vec![0x0c, 1, 2, 3, 4, 0x9f],
            vec![0x0d, 0xfe, 0xff, 0xff, 0xff, 0x9f],
            vec![0x0e, 1, 2, 3, 4, 5, 6, 7, 8, 0x9f],
            vec![0x0f, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x9f],
            vec![0x31, 0x9f],
            vec![0x77, 0x00, 0x06],
            vec![0xf3, 0x01, 0x55, 0x9f],
            vec![0x03, 1, 0, 0, 0, 0, 0, 0, 0],
            vec![0x93, 0x08],
            vec![0x53, 0x54],
            vec![0x31],
            vec![],
            vec![0x91],
        ]);
        for e in exprs {
            for base in [None, Some(FrameBase::Cfa)] {
                let reader = gimli::EndianSlice::new(&e, gimli::RunTimeEndian::Little);
                assert_eq!(
                    parse(reader, base),
                    operations(reader, base),
                    "{e:x?} {base:?}"
                );
            }
        }
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
