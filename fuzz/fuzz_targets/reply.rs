//! Any bytes as the inspector reads a reply: decoded, checked, built into a dump and printed, or an
//! error; updates are applied to a mirror, as `watch` does.
#![no_main]

use asyncdump::assemble::undecoded;
use asyncdump::model::{self, Dump};
use asyncdump::session::Mirror;
use asyncdump::view::text::{self, Style};
use asyncdump_protocol::{Handshake, PROTOCOL_VERSION, Reply, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let hs = Handshake {
        protocol_version: PROTOCOL_VERSION,
        agent_version: "fuzz".into(),
        pid: 1,
        program: "fuzz".into(),
        start_time_unix_ms: 0,
    };
    let print = |dump: &Dump| {
        let groups = model::coalesce(&dump.tasks);
        let _ = text::render(dump, None, Style::default());
        let _ = text::render(dump, Some(&groups), Style::default());
    };
    match decode::<Reply>(data) {
        Ok(Reply::Snapshot(snap)) => {
            if let Ok(dump) = undecoded(&hs, &snap) {
                print(&dump);
            }
        }
        Ok(Reply::Update(update)) => {
            let mut mirror = Mirror::default();
            if mirror.apply(update).is_ok()
                && let Ok(dump) = undecoded(&hs, &mirror.snap)
            {
                print(&dump);
            }
        }
        _ => {}
    }
});
