//! Any bytes as a core file, read as `dump --core` reads one: its segments and notes, what it says
//! of the executable and the census's regions, and memory read through it.
#![no_main]

use asyncdump::agentless::core_file::{CoreFile, build_id_at};
use asyncdump_walker::Memory;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = scratch_path("core");
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

/// A file of this process's own under /dev/shm (else the temporary directory), rewritten with each
/// input: the readers take paths.
fn scratch_path(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_owned()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("asyncdump-fuzz-{name}-{}", std::process::id()))
}
