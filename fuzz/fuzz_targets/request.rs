//! Any bytes as the agent decodes a request; what decodes encodes back to the same request.
#![no_main]

use asyncdump_protocol::{Request, decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode::<Request>(data) {
        let again = encode(&req).expect("a decoded request encodes");
        assert_eq!(decode::<Request>(&again).ok(), Some(req));
    }
});
