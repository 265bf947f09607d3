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
