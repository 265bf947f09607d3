//! The first frame of each side: `MAGIC`, a little-endian `u32` protocol version, then a postcard body.
//!
//! The version sits outside the serde body on purpose: a peer of another version can always be identified
//! ("agent speaks protocol 2") even when the body's layout has changed.

use serde::{Deserialize, Serialize};

use crate::{CodecError, PROTOCOL_VERSION, decode, encode};

/// Eight bytes that open every handshake; anything else on the socket is not an asyncdump peer.
pub const MAGIC: [u8; 8] = *b"ASYNCDMP";

/// Sent by the agent as soon as a client is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handshake {
    pub protocol_version: u32,
    /// Version of the `asyncdump-agent` crate linked into the target.
    pub agent_version: String,
    pub pid: u32,
    /// File name of the target's executable.
    pub program: String,
    /// Process start time, milliseconds since the Unix epoch (from `/proc/self/stat`).
    pub start_time_unix_ms: u64,
}

/// Sent by the client in answer to the agent's [`Handshake`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientHello {
    pub protocol_version: u32,
    /// Free-form client identification, e.g. `asyncdump 0.1.0`.
    pub client: String,
}

/// Why a handshake frame was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("not an asyncdump peer (bad magic)")]
    BadMagic,
    #[error("peer speaks protocol version {peer}, this side speaks {ours}")]
    VersionMismatch { peer: u32, ours: u32 },
    #[error(transparent)]
    Codec(#[from] CodecError),
}

fn encode_with_header<T: Serialize>(body: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    // Encoding our own plain structs into a Vec cannot fail.
    out.extend_from_slice(&encode(body).expect("handshake body encodes"));
    out
}

fn decode_with_header<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, HandshakeError> {
    let header = MAGIC.len() + 4;
    if bytes.len() < header || bytes[..MAGIC.len()] != MAGIC {
        return Err(HandshakeError::BadMagic);
    }
    let peer = u32::from_le_bytes(bytes[MAGIC.len()..header].try_into().unwrap());
    if peer != PROTOCOL_VERSION {
        return Err(HandshakeError::VersionMismatch {
            peer,
            ours: PROTOCOL_VERSION,
        });
    }
    Ok(decode(&bytes[header..])?)
}

impl Handshake {
    pub fn to_bytes(&self) -> Vec<u8> {
        encode_with_header(self)
    }
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, HandshakeError> {
        decode_with_header(bytes)
    }
}

impl ClientHello {
    pub fn new(client: impl Into<String>) -> Self {
        ClientHello {
            protocol_version: PROTOCOL_VERSION,
            client: client.into(),
        }
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        encode_with_header(self)
    }
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, HandshakeError> {
        decode_with_header(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Handshake {
        Handshake {
            protocol_version: PROTOCOL_VERSION,
            agent_version: "0.1.0".into(),
            pid: 42,
            program: "svc".into(),
            start_time_unix_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_handshake_round_trips() {
        assert_eq!(
            Handshake::from_bytes(&sample().to_bytes()).unwrap(),
            sample()
        );
    }

    #[test]
    fn another_version_is_named_not_misread() {
        let mut bytes = sample().to_bytes();
        let other = PROTOCOL_VERSION + 1;
        bytes[8..12].copy_from_slice(&other.to_le_bytes());
        let err = Handshake::from_bytes(&bytes).unwrap_err();
        assert!(matches!(
            err,
            HandshakeError::VersionMismatch { peer, ours: PROTOCOL_VERSION } if peer == other
        ));
    }

    #[test]
    fn garbage_is_not_a_peer() {
        assert!(matches!(
            Handshake::from_bytes(b"GET / HTTP/1.1"),
            Err(HandshakeError::BadMagic)
        ));
        assert!(matches!(
            Handshake::from_bytes(b""),
            Err(HandshakeError::BadMagic)
        ));
    }

    #[test]
    fn a_truncated_body_is_malformed() {
        let bytes = sample().to_bytes();
        let err = Handshake::from_bytes(&bytes[..bytes.len() - 3]).unwrap_err();
        assert!(matches!(err, HandshakeError::Codec(_)), "{err}");
    }
}
