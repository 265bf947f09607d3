//! Length-prefixed frames: a big-endian `u32` payload length, then the payload.
//!
//! The reader enforces a maximum before allocating, so a hostile length cannot make either side allocate
//! gigabytes; a clean end of stream *between* frames is [`FrameError::Closed`], while one inside a frame is
//! [`FrameError::Truncated`].

use std::io::{self, Read, Write};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("peer closed the connection")]
    Closed,
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("frame truncated: expected {expected} bytes, got {got}")]
    Truncated { expected: usize, got: usize },
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

/// Writes one frame. Fails with `InvalidInput` if the payload cannot be described by a `u32` length.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame payload over 4 GiB"))?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(payload)?;
    w.flush()
}

/// Writes `msg` as one frame, encoded straight into `w`: it is sized first, then encoded through a
/// small buffer, so that its encoding is never held in memory whole (a snapshot of 100,000 tasks
/// encodes to tens of megabytes). Returns the payload's size.
pub fn write_message<T: serde::Serialize>(w: &mut impl Write, msg: &T) -> io::Result<usize> {
    let invalid = |e: postcard::Error| io::Error::new(io::ErrorKind::InvalidData, e);
    let size = postcard::serialize_with_flavor(msg, postcard::ser_flavors::Size::default())
        .map_err(invalid)?;
    let len = u32::try_from(size)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame payload over 4 GiB"))?;
    let mut failed = None;
    let mut flavor = IoFlavor {
        out: w,
        buf: Vec::with_capacity(STREAM_BUFFER),
        failed: &mut failed,
    };
    flavor.buf.extend_from_slice(&len.to_be_bytes());
    let encoded = postcard::serialize_with_flavor(msg, flavor);
    match (encoded, failed) {
        (_, Some(io)) => Err(io),
        (Err(e), None) => Err(invalid(e)),
        (Ok(()), None) => Ok(size),
    }
}

/// Encodes into a writer through a buffer of [`STREAM_BUFFER`] bytes, keeping the writer's own
/// error (postcard's own `io` flavor turns every one into "buffer full").
struct IoFlavor<'a, W: Write> {
    out: &'a mut W,
    buf: Vec<u8>,
    failed: &'a mut Option<io::Error>,
}

impl<W: Write> IoFlavor<'_, W> {
    fn write_out(&mut self) -> postcard::Result<()> {
        let written = self.out.write_all(&self.buf);
        self.buf.clear();
        written.map_err(|e| {
            *self.failed = Some(e);
            postcard::Error::SerializeBufferFull
        })
    }
}

impl<W: Write> postcard::ser_flavors::Flavor for IoFlavor<'_, W> {
    type Output = ();

    #[inline]
    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        if self.buf.len() == STREAM_BUFFER {
            self.write_out()?;
        }
        self.buf.push(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        if self.buf.len() + bytes.len() > STREAM_BUFFER {
            self.write_out()?;
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<()> {
        self.write_out()?;
        self.out.flush().map_err(|e| {
            *self.failed = Some(e);
            postcard::Error::SerializeBufferFull
        })
    }
}

#[cfg(test)]
mod streaming_tests {
    use super::*;

    /// A streamed message is the frame `write_frame` makes of its encoding, byte for byte, and a
    /// writer's own error comes back as it is.
    #[test]
    fn a_streamed_message_is_the_same_frame_and_keeps_the_writers_error() {
        let msg = (7u32, "chains".to_owned(), vec![1u64; 100_000]);
        let mut streamed = Vec::new();
        let size = write_message(&mut streamed, &msg).unwrap();
        let mut whole = Vec::new();
        write_frame(&mut whole, &crate::encode(&msg).unwrap()).unwrap();
        assert_eq!((streamed.len(), &streamed), (size + 4, &whole));
        let mut full = [0u8; 1000];
        let err = write_message(&mut &mut full[..], &msg).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    }
}

/// The buffer a message is encoded through by [`write_message`]: what its encoding holds at once.
pub const STREAM_BUFFER: usize = 64 << 10;

/// Reads one frame of at most `max` payload bytes.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; 4];
    let got = read_full(r, &mut header)?;
    if got == 0 {
        return Err(FrameError::Closed);
    }
    if got < header.len() {
        return Err(FrameError::Truncated {
            expected: header.len(),
            got,
        });
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let mut payload = vec![0u8; len];
    let got = read_full(r, &mut payload)?;
    if got < len {
        return Err(FrameError::Truncated { expected: len, got });
    }
    Ok(payload)
}

/// Reads one frame of at most `max` payload bytes from a Unix stream, whole by `deadline`: each read
/// waits at most what is left, so a peer that sends a byte at a time cannot hold the reader past it
/// (a plain read timeout starts again at every byte). Past the deadline: `Io` of kind `TimedOut`.
pub fn read_frame_by(
    stream: &std::os::unix::net::UnixStream,
    max: usize,
    deadline: std::time::Instant,
) -> Result<Vec<u8>, FrameError> {
    read_frame(&mut Until { stream, deadline }, max)
}

/// A stream read until a deadline (see [`read_frame_by`]).
struct Until<'a> {
    stream: &'a std::os::unix::net::UnixStream,
    deadline: std::time::Instant,
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// Like `read_exact`, but reports how much arrived before end of stream instead of failing.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, payload).unwrap();
        out
    }

    #[test]
    fn a_frame_round_trips() {
        let bytes = framed(b"hello");
        assert_eq!(read_frame(&mut &bytes[..], 16).unwrap(), b"hello");
    }

    #[test]
    fn end_of_stream_between_frames_is_a_clean_close() {
        assert!(matches!(
            read_frame(&mut &[][..], 16),
            Err(FrameError::Closed)
        ));
    }

    #[test]
    fn a_partial_header_is_truncated() {
        let err = read_frame(&mut &[0u8, 0][..], 16).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::Truncated {
                    expected: 4,
                    got: 2
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_short_payload_is_truncated() {
        let mut bytes = framed(b"hello world");
        bytes.truncate(4 + 3);
        let err = read_frame(&mut &bytes[..], 64).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::Truncated {
                    expected: 11,
                    got: 3
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn an_oversized_length_is_refused_before_allocating() {
        let bytes = u32::MAX.to_be_bytes();
        let err = read_frame(&mut &bytes[..], 1024).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len, max: 1024 } if len == u32::MAX as usize));
    }
}
