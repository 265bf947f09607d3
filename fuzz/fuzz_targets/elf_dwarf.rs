//! Any bytes as an executable or debug file, read as `dump` and `index` read one: its build-id, its
//! symbols (as `ps` asks whether it links tokio), its DWARF, and the plan made from it, which must
//! hold together.
#![no_main]

use asyncdump::dwarf::{self, Debug};
use asyncdump::plan::Plan;
use libfuzzer_sys::fuzz_target;

#[path = "scratch.rs"]
mod scratch;

fuzz_target!(|data: &[u8]| {
    let path = scratch::path("elf");
    std::fs::write(&path, data).expect("write the input");
    let _ = dwarf::build_id(&path);
    let _ = dwarf::links_tokio_runtime(&path);
    let Ok(debug) = Debug::load(&path) else {
        return;
    };
    let plan = Plan::for_every_root(&debug, true);
    assert!(
        plan.walk.validate().is_ok(),
        "a plan made from any DWARF holds together"
    );
});
