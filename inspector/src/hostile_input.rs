//! Specs: random and mutated bytes into every reader of the inspector (replies, updates, snapshot
//! files and recordings) give a dump or a clear error, never a panic, and what they give renders.
//! (`fuzz/` runs the same readers under libFuzzer for longer.)

use std::path::Path;

use asyncdump_protocol::{Reply, Update, decode, encode};
use proptest::prelude::*;

use crate::file::{self, Opened};
use crate::model::{self, Dump};
use crate::session::Mirror;
use crate::testing::{handshake, sample};
use crate::view::{json, text};

fn render(dump: &Dump) {
    let groups = model::coalesce(&dump.tasks);
    let _ = text::render(dump, None, text::Style::default());
    let _ = text::render(dump, Some(&groups), text::Style::default());
    let _ = json::render(dump, None);
}

fn read_reply(bytes: &[u8]) {
    match decode::<Reply>(bytes) {
        Ok(Reply::Snapshot(snap)) => {
            if let Ok(dump) = crate::assemble::undecoded(&handshake(), &snap) {
                render(&dump);
            }
        }
        Ok(Reply::Update(update)) => {
            let mut mirror = Mirror::default();
            if mirror.apply(update).is_ok()
                && let Ok(dump) = crate::assemble::undecoded(&handshake(), &mirror.snap)
            {
                render(&dump);
            }
        }
        _ => {}
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let snap = sample();
    let update = Update {
        full: true,
        frame_metas: snap.frame_metas.clone(),
        spawn_sites: snap.spawn_sites.clone(),
        tasks: snap.tasks.clone(),
        ..Update::default()
    };
    vec![
        encode(&Reply::Snapshot(snap)).unwrap(),
        encode(&Reply::Update(update)).unwrap(),
    ]
}

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, kind, value) in edits {
        let at = at % (bytes.len() + 1);
        match kind % 3 {
            0 if at < bytes.len() => bytes[at] = value,
            1 => bytes.insert(at, value),
            _ if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {}
        }
    }
    bytes
}

/// A snapshot file as `dump -o` writes it.
fn snapshot_file() -> String {
    let dump = crate::assemble::undecoded(&handshake(), &sample()).unwrap();
    json::render(&dump, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn mutated_replies_give_a_dump_or_an_error(
        seed in 0..2usize,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
    ) {
        read_reply(&mutate(seeds()[seed].clone(), &edits));
    }

    #[test]
    fn random_replies_give_a_dump_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        read_reply(&bytes);
    }

    #[test]
    fn mutated_snapshot_files_open_or_are_refused(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0x20u8..0x7f), 1..6),
    ) {
        let bytes = mutate(snapshot_file().into_bytes(), &edits);
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(Opened::Snapshot(dump)) = file::parse(Path::new("spec.json"), &text) {
            render(&dump);
        }
    }
}

#[test]
fn the_seeds_unmutated_give_the_sample_task() {
    let seeds = seeds();
    let Ok(Reply::Snapshot(snap)) = decode::<Reply>(&seeds[0]) else {
        panic!("the snapshot seed decodes")
    };
    let Ok(Reply::Update(update)) = decode::<Reply>(&seeds[1]) else {
        panic!("the update seed decodes")
    };
    let mut mirror = Mirror::default();
    mirror.apply(update).expect("a full update applies");
    for snap in [snap, mirror.snap] {
        let dump = crate::assemble::undecoded(&handshake(), &snap).expect("consistent");
        assert_eq!(dump.tasks.len(), 1);
    }
    assert!(matches!(
        file::parse(Path::new("spec.json"), &snapshot_file()),
        Ok(Opened::Snapshot(_))
    ));
}
