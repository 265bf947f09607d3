//! Writing to a client: replies as frames, the error reply that ends a connection, and big answers
//! whose memory is handed back to the OS afterwards. Shared by the connection loop and subscriptions.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;

use asyncdump_protocol::{
    ErrorKind, ErrorReply, FrameError, Reply, encode, write_frame, write_message,
};

use crate::sys;

pub(crate) fn send(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let bytes = encode(reply).map_err(io::Error::other)?;
    write_frame(stream, &bytes)
}

/// Sends an error reply and closes the connection.
pub(crate) fn refuse(stream: &mut UnixStream, kind: ErrorKind, message: String) {
    let _ = send(stream, &Reply::Error(ErrorReply { kind, message }));
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

pub(crate) fn frame_error(stream: &mut UnixStream, err: FrameError) {
    let (kind, message) = match err {
        FrameError::TooLarge { len, max } => (
            ErrorKind::TooLarge,
            format!("request of {len} bytes exceeds the agent's limit of {max} bytes"),
        ),
        FrameError::Truncated { expected, got } => (
            ErrorKind::Truncated,
            format!("request truncated: expected {expected} bytes, got {got}"),
        ),
        // A closed or timed-out connection has nobody left to tell.
        FrameError::Closed | FrameError::Io(_) => return,
    };
    refuse(stream, kind, message);
}

/// Answers bigger than this are followed by handing the memory they took back to the OS.
const BIG_ANSWER: usize = 1 << 20;

/// Writes one answer, encoded as it is written (its encoding is never held whole: see
/// `write_message`); after a big one, hands the memory it took back to the OS.
pub(crate) fn write_reply(stream: &mut UnixStream, reply: Reply) -> io::Result<()> {
    let written = write_message(stream, &reply);
    if written.as_ref().is_ok_and(|&size| size > BIG_ANSWER) {
        drop(reply);
        sys::give_back_memory();
    }
    written.map(drop)
}

/// Writes one encoded answer; after a big one, hands the memory it took back to the OS.
pub(crate) fn write_answer(stream: &mut UnixStream, bytes: Vec<u8>) -> io::Result<()> {
    let written = write_frame(stream, &bytes);
    if bytes.len() > BIG_ANSWER {
        drop(bytes);
        sys::give_back_memory();
    }
    written
}
