//! The wire contract between the asyncdump agent (inside the target process) and the inspector.
//!
//! This crate is deliberately small and changes rarely (the stance of `tracing-core`): both sides depend on it
//! and nothing else. It has three parts:
//!
//! - [`handshake`]: the first frame each side sends. It starts with a fixed magic and a `u32` protocol version
//!   *before* any serde payload, so a peer speaking another version is recognised and named instead of being
//!   misread as garbage.
//! - [`framing`]: length-prefixed frames (a big-endian `u32` length, then the payload) with a hard maximum size
//!   per direction; oversized, truncated and undecodable frames are distinct typed errors.
//! - [`paths`]: where agents bind their sockets, shared so that both sides agree.
//! - walk plans ([`WalkPlan`]), with which the agent reads unannotated async state machines for the
//!   inspector, and runtime plans ([`RuntimePlan`]), with which it lists every task of a tokio runtime,
//!   spawned through the agent or not: defined with their one interpreter in `asyncdump-walker`, and
//!   re-exported here because they travel in requests and replies.
//! - [`agent_names`]: the agent's own item names the inspector recognises in a target's DWARF.
//! - [`messages`]: the requests and replies, and the snapshot model (tasks, frames, continuation links,
//!   cross-task edges, delegates) encoded with `postcard`, a compact serde binary format.
//!
//! Conversation: the agent sends its [`Handshake`]; the client sends its [`ClientHello`]; then the client
//! sends [`Request`]s and the agent answers each with one [`Reply`], except [`Request::Subscribe`], which
//! the agent answers with an [`Update`] at every interval until the client speaks again or leaves. Any protocol violation gets a
//! [`Reply::Error`] and the connection is closed.

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

pub mod agent_names;
pub mod framing;
pub mod handshake;
pub mod messages;
pub mod paths;
pub mod read_data;

pub use asyncdump_walker::plan::*;
pub use asyncdump_walker::{MAX_SLICE_ELEMS, MAX_WALK_BYTES, MAX_WALK_NODES};
pub use framing::{FrameError, read_frame, read_frame_by, write_frame, write_message};
pub use handshake::{ClientHello, Handshake, HandshakeError};
pub use messages::*;
pub use read_data::{ReadData, ReadReplyRef};

/// Version of this wire protocol. Bump on any incompatible change to frames or messages.
pub const PROTOCOL_VERSION: u32 = 7;

/// Largest frame the agent accepts from a client. Requests are small (the biggest is a walk plan, a few
/// kilobytes per distinct future type); anything bigger is a bug or an attack.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Largest frame the inspector accepts from an agent: a snapshot of a few hundred thousand tasks fits.
pub const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

/// Errors of encoding or decoding one message.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("message could not be decoded: {0}")]
    Malformed(#[from] postcard::Error),
}

/// Encodes a message payload (without the frame header).
pub fn encode<T: serde::Serialize>(msg: &T) -> Result<Vec<u8>, CodecError> {
    Ok(postcard::to_stdvec(msg)?)
}

/// Decodes a message payload; trailing bytes are an error, so a frame holds exactly one message.
pub fn decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, CodecError> {
    let (msg, rest) = postcard::take_from_bytes(bytes)?;
    if rest.is_empty() {
        Ok(msg)
    } else {
        Err(CodecError::Malformed(
            postcard::Error::DeserializeBadEncoding,
        ))
    }
}
