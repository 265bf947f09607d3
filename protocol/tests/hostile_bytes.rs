//! Random and mutated bytes into every decoder of the protocol: each gives a value or an error, never a
//! panic, and a frame never claims more than its limit. (`fuzz/` runs the same decoders under
//! libFuzzer for longer.)

use asyncdump_protocol::{
    ClientHello, FrameError, Handshake, Reply, Request, SnapshotRequest, SubscribeRequest, decode,
    encode, read_frame, write_frame,
};
use proptest::prelude::*;

/// Valid encodings to mutate: what both sides really send.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        encode(&Request::Snapshot(SnapshotRequest::default())).unwrap(),
        encode(&Request::Subscribe(SubscribeRequest {
            interval_ms: 250,
            include_completed: true,
            walk: None,
        }))
        .unwrap(),
        encode(&Reply::Snapshot(Default::default())).unwrap(),
        encode(&Reply::Update(Default::default())).unwrap(),
        ClientHello::new("spec").to_bytes(),
    ]
}

/// Applies each edit: overwrite, insert or remove a byte.
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

fn every_decoder(bytes: &[u8]) {
    if let Ok(req) = decode::<Request>(bytes) {
        let again = encode(&req).unwrap();
        assert_eq!(decode::<Request>(&again).unwrap(), req, "round trip");
    }
    let _ = decode::<Reply>(bytes);
    let _ = Handshake::from_bytes(bytes);
    let _ = ClientHello::from_bytes(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        every_decoder(&bytes);
    }

    #[test]
    fn mutated_messages_decode_or_fail_cleanly(
        seed in 0..5usize,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8),
    ) {
        every_decoder(&mutate(seeds()[seed].clone(), &edits));
    }

    #[test]
    fn a_stream_of_random_bytes_reads_as_frames_within_the_limit(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        max in 0..64usize,
    ) {
        let mut stream = std::io::Cursor::new(bytes);
        loop {
            match read_frame(&mut stream, max) {
                Ok(frame) => prop_assert!(frame.len() <= max),
                Err(FrameError::TooLarge { len, max: m }) => {
                    prop_assert!(len > m);
                    break;
                }
                Err(_) => break,
            }
        }
    }

    #[test]
    fn a_frame_written_reads_back_whole(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &payload).unwrap();
        let read = read_frame(&mut std::io::Cursor::new(wire), 300).unwrap();
        prop_assert_eq!(read, payload);
    }
}

#[test]
fn a_four_gib_length_prefix_is_refused_before_anything_is_allocated() {
    let mut stream = std::io::Cursor::new(vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
    match read_frame(&mut stream, asyncdump_protocol::MAX_REQUEST_BYTES) {
        Err(FrameError::TooLarge { len, .. }) => assert_eq!(len, u32::MAX as usize),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}
