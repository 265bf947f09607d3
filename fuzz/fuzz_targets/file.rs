//! Any bytes as a snapshot file or a recording, read as `dump --from` and `watch --from` do.
#![no_main]

use std::path::Path;

use asyncdump::file::{self, Opened};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Opened::Recording(mut replay)) = file::parse(Path::new("fuzz"), text) {
        for step in 0..replay.len() {
            let _ = replay.seek(step);
        }
    }
});
