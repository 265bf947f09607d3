//! A chain far deeper than any reader could want: every output stays bounded and readable, shows where
//! it was cut, and a file the tool wrote reads back.

use asyncdump_protocol::{Frame, FrameMeta, FrameSource, Location, Snapshot, SpawnSite, Task};

use crate::support::{Fixture, asyncdump, crafted_task, serve_fake_agent, tempdir};
use crate::watch::Tmux;

/// A snapshot of one idle task suspended in a chain of `depth` frames, each awaiting the next.
fn deep_snapshot(depth: u64) -> Snapshot {
    let frames = (0..depth)
        .map(|i| Frame {
            id: i + 1,
            parent: (i > 0).then_some(i),
            meta: (i % 2) as u32,
        })
        .collect();
    let meta = |name: &str| FrameMeta {
        name: name.into(),
        location: Location {
            file: "src/deep.rs".into(),
            line: 7,
            column: 5,
        },
        source: FrameSource::AnnotatedFn,
    };
    Snapshot {
        frame_metas: vec![meta("deep::recurse_even"), meta("deep::recurse_odd")],
        spawn_sites: vec![SpawnSite {
            location: Location {
                file: "src/main.rs".into(),
                line: 1,
                column: 1,
            },
            root_type: "deep::main::{{closure}}".into(),
        }],
        tasks: vec![Task {
            name: Some("deep".into()),
            last_poll_end_ns: Some(0),
            frames,
            ..crafted_task(1)
        }],
        ..Snapshot::default()
    }
}

/// A chain 200,000 frames deep (as a broken or hostile agent may send) is kept to
/// `MAX_CHAIN_DEPTH` (512) frames and one marker counting the rest, in every format; the text
/// indents 32 levels at most and numbers the deeper lines, so its size grows with the depth, not its
/// square; a snapshot file of it reads back.
#[test]
fn a_chain_200000_frames_deep_is_cut_with_a_marker_in_every_format() {
    let dir = tempdir();
    let mut served = 0;
    let mut run = |format: &str, extra: &[&str]| {
        served += 1;
        let path = dir.join(format!("{served}.sock"));
        let server = serve_fake_agent(&path, "deep", deep_snapshot(200_000));
        let mut args = vec![
            "dump",
            path.to_str().unwrap(),
            "--no-decode",
            "--format",
            format,
        ];
        args.extend(extra);
        let out = asyncdump(&args);
        server.join().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {:?} {stderr}", out.status);
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run("text", &[]);
    let marker = "… 199488 more frames";
    assert!(
        text.contains(&format!("[513] {marker}")),
        "{}",
        &text[text.len() - 300..]
    );
    assert!(
        text.contains("[33] deep::recurse_even at src/deep.rs:7:5\n"),
        "{}",
        &text[..3000]
    );
    let widest = text.lines().map(str::len).max().unwrap();
    assert!(widest < 120, "lines stay narrow: {widest}");
    assert!(text.len() < 64 << 10, "{} bytes", text.len());

    let json = run("json", &[]);
    assert!(
        json.contains(&format!("\"name\":\"{marker}\"")),
        "{json:.300}"
    );
    assert!(json.contains("\"source\":\"cut\""));

    let folded = run("folded", &[]);
    assert_eq!(folded.lines().count(), 1, "one stack, one line");
    assert!(
        folded.trim_end().ends_with(&format!(";{marker} 1")),
        "{folded:.300}"
    );

    let file = dir.join("deep.json");
    run("text", &["-o", file.to_str().unwrap()]);
    let back = asyncdump(&["dump", "--from", file.to_str().unwrap()]);
    let back_text = String::from_utf8_lossy(&back.stdout);
    assert!(back.status.success(), "{back:?}");
    assert!(back_text.contains(&format!("[513] {marker}")));
}

/// The deepest chain the agent and the walker keep (4,096 frames): the files the tool writes of it
/// (`dump -o`, watch's `s`, `watch --record`) all read back with `--from`, cut where the live dump is.
#[test]
fn every_file_of_the_deepest_chain_reads_back() {
    let fx = Fixture::start("depth_chain", &["--depth", "4095"]);
    let dir = tempdir();
    let marker = "[513] … 3584 more frames";
    let reads_back = |file: &std::path::Path| {
        let out = asyncdump(&["dump", "--from", file.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {out:?}", file.display());
        assert!(text.contains(marker), "{}: {text}", file.display());
    };
    let snapshot = dir.join("deep.json");
    let out = asyncdump(&[
        "dump",
        &fx.pid.to_string(),
        "-o",
        snapshot.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    reads_back(&snapshot);

    let recording = dir.join("deep.jsonl");
    let watch = Tmux::start(&format!(
        "cd {} && {} watch {} --record {}; echo watch-exited-$?; sleep 60",
        dir.display(),
        env!("CARGO_BIN_EXE_asyncdump"),
        fx.pid,
        recording.display()
    ));
    watch.until("the deep task", |s| s.contains("task 1 \"depth-chain\""));
    watch.keys("s");
    watch.until("s saves a snapshot", |s| s.contains("saved asyncdump-"));
    watch.keys("q");
    watch.until("q quits with status 0", |s| s.contains("watch-exited-0"));
    let saved = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("asyncdump-")
        })
        .expect("the file `s` saved");
    reads_back(&saved);
    reads_back(&recording);
}
