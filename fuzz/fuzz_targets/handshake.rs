//! Any bytes as either side's handshake.
#![no_main]

use asyncdump_protocol::{ClientHello, Handshake};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Handshake::from_bytes(data) {
        assert_eq!(Handshake::from_bytes(&h.to_bytes()).ok(), Some(h));
    }
    let _ = ClientHello::from_bytes(data);
});
