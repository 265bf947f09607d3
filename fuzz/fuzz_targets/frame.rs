//! Any bytes as a stream of frames: each read is a frame within the limit or an error (and the end),
//! never a panic or an allocation beyond the limit.
#![no_main]

use asyncdump_protocol::{MAX_REQUEST_BYTES, read_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut stream = std::io::Cursor::new(data);
    while let Ok(frame) = read_frame(&mut stream, MAX_REQUEST_BYTES) {
        assert!(frame.len() <= MAX_REQUEST_BYTES);
    }
});
