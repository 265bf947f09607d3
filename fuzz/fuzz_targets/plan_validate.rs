//! Any bytes as a walk plan, through the validator the agent and the plan cache apply: it must never
//! panic, and a plan it passes, followed over the input's own bytes as memory, must keep within the
//! walker's bounds.
#![no_main]

use asyncdump_protocol::{MAX_WALK_NODES, Walk, WalkPlan, decode};
use asyncdump_walker::{ImageMemory, Walker};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(plan) = decode::<WalkPlan>(data) else {
        return;
    };
    if plan.validate().is_err() {
        return;
    }
    let mut memory = ImageMemory::new();
    memory.insert(0x1000, data.to_vec());
    let mut walker = Walker::default();
    for &(_, ty) in plan.roots.iter().take(8) {
        if let Walk::Nodes { nodes, .. } = walker.walk(&memory, &plan, ty, 0x1000) {
            assert!(nodes.len() <= MAX_WALK_NODES as usize);
        }
    }
});
