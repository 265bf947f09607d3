//! [`ReadData`]: the bytes of a read's ranges, all in one buffer.
//!
//! A dump's values come to tens of thousands of small ranges a read. Held as one `Vec` each, a
//! reply was that many allocations on each side, and a copy more. On the wire it is still what a
//! `Vec<Option<bytes>>` is (a count, then per range a tag and, if read, a length and the bytes), so
//! an agent and a client of either kind understand each other.

use std::borrow::Cow;
use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Per range of a read, its bytes, or none where it could not be read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadData {
    bytes: Vec<u8>,
    /// Per range: where its bytes lie in `bytes` (start, length), if read.
    ranges: Vec<Option<(usize, usize)>>,
}

/// Ranges made room for ahead, at most, whatever count a reply states: the count comes from the
/// other side.
const MAX_RESERVED: usize = 1 << 16;

impl ReadData {
    /// Ranges of lengths `lens`, whose bytes lie one after another in `bytes`, and which were read
    /// where `read` says so.
    pub fn from_parts(bytes: Vec<u8>, lens: &[u32], read: &[bool]) -> ReadData {
        let mut at = 0;
        let ranges = (lens.iter().zip(read))
            .map(|(&len, &read)| {
                let (start, len) = (at, len as usize);
                at += len;
                (read && at <= bytes.len()).then_some((start, len))
            })
            .collect();
        ReadData { bytes, ranges }
    }

    /// Adds a range.
    pub fn push(&mut self, range: Option<&[u8]>) {
        let span = range.map(|b| {
            self.bytes.extend_from_slice(b);
            (self.bytes.len() - b.len(), b.len())
        });
        self.ranges.push(span);
    }

    /// Range `i`'s bytes, if it was read.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (start, len) = (*self.ranges.get(i)?)?;
        self.bytes.get(start..start + len)
    }

    /// How many ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Every range's bytes, if read, in order.
    pub fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> {
        (0..self.len()).map(|i| self.get(i))
    }
}

impl<'a> FromIterator<Option<&'a [u8]>> for ReadData {
    fn from_iter<I: IntoIterator<Item = Option<&'a [u8]>>>(iter: I) -> ReadData {
        let mut data = ReadData::default();
        iter.into_iter().for_each(|r| data.push(r));
        data
    }
}

impl Serialize for ReadData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_ranges(s, self.len(), self.iter())
    }
}

/// Encodes `count` ranges as a [`ReadData`] is encoded.
fn serialize_ranges<'a, S: Serializer>(
    s: S,
    count: usize,
    ranges: impl Iterator<Item = Option<&'a [u8]>>,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(count))?;
    for range in ranges {
        seq.serialize_element(&range.map(serde_bytes::Bytes::new))?;
    }
    seq.end()
}

/// A `Reply::Read` whose bytes are borrowed: encoded exactly as [`crate::Reply::Read`] of the same
/// ranges and lists, so that the agent answers from a buffer of its own keeping (one it gives back
/// to the system at once) without first copying it into a [`crate::ReadReply`].
#[derive(Debug, Clone, Copy)]
pub struct ReadReplyRef<'a> {
    /// The ranges' bytes, one after another, as [`ReadData::from_parts`] takes them.
    pub bytes: &'a [u8],
    /// Each range's length.
    pub lens: &'a [u32],
    /// Whether each range was read.
    pub read: &'a [bool],
    /// Per chase, the list as followed.
    pub chased: &'a [asyncdump_walker::Chased],
}

/// `Reply::Read`'s place among `Reply`'s variants (a spec checks it against the enum).
const READ_VARIANT: u32 = 4;

impl ReadReplyRef<'_> {
    fn ranges(&self) -> impl Iterator<Item = Option<&[u8]>> {
        let mut at = 0usize;
        (self.lens.iter().zip(self.read)).map(move |(&len, &read)| {
            let start = at;
            at += len as usize;
            self.bytes.get(start..at).filter(|_| read)
        })
    }
}

impl Serialize for ReadReplyRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_variant("Reply", READ_VARIANT, "Read", &Body(self))
    }
}

/// The [`crate::ReadReply`] inside.
struct Body<'r, 'a>(&'r ReadReplyRef<'a>);

impl Serialize for Body<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut body = s.serialize_struct("ReadReply", 2)?;
        body.serialize_field("data", &Data(self.0))?;
        body.serialize_field("chased", self.0.chased)?;
        body.end()
    }
}

/// The [`ReadData`] inside.
struct Data<'r, 'a>(&'r ReadReplyRef<'a>);

impl Serialize for Data<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_ranges(s, self.0.lens.len().min(self.0.read.len()), self.0.ranges())
    }
}

impl<'de> Deserialize<'de> for ReadData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ReadData, D::Error> {
        d.deserialize_seq(Ranges)
    }
}

struct Ranges;

impl<'de> Visitor<'de> for Ranges {
    type Value = ReadData;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence of optional byte strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReadData, A::Error> {
        let mut chunks: Vec<Option<Chunk<'de>>> =
            Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_RESERVED));
        // Borrowed from the frame where the decoder can, then copied once into a buffer of their
        // size: grown range by range, megabytes would be copied again at each doubling.
        while let Some(range) = seq.next_element::<Option<Chunk<'de>>>()? {
            chunks.push(range);
        }
        let total = chunks.iter().flatten().map(|c| c.0.len()).sum();
        let mut data = ReadData {
            bytes: Vec::with_capacity(total),
            ranges: Vec::with_capacity(chunks.len()),
        };
        for range in &chunks {
            data.push(range.as_ref().map(|c| &*c.0));
        }
        Ok(data)
    }
}

/// One range's bytes as decoded: borrowed where the decoder allows, else owned.
struct Chunk<'de>(Cow<'de, [u8]>);

impl<'de> Deserialize<'de> for Chunk<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Chunk<'de>, D::Error> {
        d.deserialize_bytes(ChunkVisitor)
    }
}

struct ChunkVisitor;

impl<'de> Visitor<'de> for ChunkVisitor {
    type Value = Chunk<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Chunk<'de>, E> {
        Ok(Chunk(Cow::Borrowed(v)))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<Chunk<'de>, E> {
        Ok(Chunk(Cow::Owned(v.to_vec())))
    }

    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Chunk<'de>, E> {
        Ok(Chunk(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode};

    fn ranges() -> Vec<Option<Vec<u8>>> {
        vec![
            Some(vec![1, 2, 0xff]),
            None,
            Some(Vec::new()),
            Some(vec![7; 300]),
        ]
    }

    #[test]
    fn it_is_on_the_wire_what_a_list_of_optional_byte_strings_is() {
        let before: Vec<Option<serde_bytes::ByteBuf>> =
            ranges().into_iter().map(|r| r.map(Into::into)).collect();
        let now: ReadData = ranges().iter().map(|r| r.as_deref()).collect();
        let bytes = encode(&now).unwrap();
        assert_eq!(bytes, encode(&before).unwrap());
        assert_eq!(decode::<ReadData>(&bytes).unwrap(), now);
        assert_eq!(
            decode::<Vec<Option<serde_bytes::ByteBuf>>>(&bytes).unwrap(),
            before
        );
        let got: Vec<Option<Vec<u8>>> = now.iter().map(|r| r.map(<[u8]>::to_vec)).collect();
        assert_eq!(got, ranges());
    }

    #[test]
    fn ranges_read_into_one_buffer_keep_their_places_and_failures() {
        let data = ReadData::from_parts(vec![1, 2, 3, 4, 5, 6], &[2, 1, 3], &[true, false, true]);
        assert_eq!(data.len(), 3);
        assert_eq!(data.get(0), Some(&[1, 2][..]));
        assert_eq!(data.get(1), None, "not read");
        assert_eq!(data.get(2), Some(&[4, 5, 6][..]));
        assert_eq!(data.get(3), None, "no such range");
        // Lengths past the buffer: those ranges are not read.
        let short = ReadData::from_parts(vec![1, 2], &[2, 4], &[true, true]);
        assert_eq!((short.get(0), short.get(1)), (Some(&[1, 2][..]), None));
    }

    #[test]
    fn a_count_larger_than_what_follows_fails_to_decode_without_reserving_it() {
        // A count of 2^32 - 1 and one range: the decoder runs out of input, having made room
        // for at most its bound.
        let bytes = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x01, 0xaa];
        assert!(decode::<ReadData>(&bytes).is_err());
    }

    #[test]
    fn a_borrowed_read_reply_is_on_the_wire_what_the_reply_enum_is() {
        let lens = [3, 2, 0, 4, 5];
        let read = [true, false, true, true, true];
        // The last range is cut short: not read, as `from_parts` has it.
        let bytes: Vec<u8> = (0u8..12).collect();
        let chased = vec![asyncdump_walker::Chased {
            nodes: vec![0x1000, 0x2000],
            ended: true,
            failed: false,
        }];
        let owned = crate::Reply::Read(crate::ReadReply {
            data: ReadData::from_parts(bytes.clone(), &lens, &read),
            chased: chased.clone(),
        });
        let borrowed = ReadReplyRef {
            bytes: &bytes,
            lens: &lens,
            read: &read,
            chased: &chased,
        };
        assert_eq!(encode(&borrowed).unwrap(), encode(&owned).unwrap());
        let mut framed = Vec::new();
        crate::write_message(&mut framed, &borrowed).unwrap();
        let decoded: crate::Reply = decode(&framed[4..]).unwrap();
        assert_eq!(decoded, decode(&encode(&owned).unwrap()).unwrap());
    }
}
