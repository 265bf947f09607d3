//! Any bytes as a core file, read as `dump --core` reads one: its segments and notes, what it says
//! of the executable and the census's regions, and memory read through it.
#![no_main]

use asyncdump::agentless::core_file::{CoreFile, build_id_at};
use asyncdump_walker::Memory;
use libfuzzer_sys::fuzz_target;

#[path = "scratch.rs"]
mod scratch;

fuzz_target!(|data: &[u8]| {
    let path = scratch::path("core");
    std::fs::write(&path, data).expect("write the input");
    let Ok(core) = CoreFile::open(&path) else {
        return;
    };
    let _ = core.missing_bytes();
    for r in core.regions().iter().take(16) {
        let _ = core.read_vec(r.start, 64);
        let _ = core.read_vec(r.end.saturating_sub(8), 16);
    }
    if let Some((_, base)) = core.executable() {
        let _ = build_id_at(&core, base);
    }
});
