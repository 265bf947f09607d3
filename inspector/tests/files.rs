//! Snapshot files: `dump -o FILE` writes the `--json` document, and `dump --from FILE` prints it as if
//! live, with the same filters; a file that cannot be read gets one line and exit status 4.

use crate::support::{Fixture, asyncdump, asyncdump_ok};

#[test]
fn a_saved_dump_prints_as_the_live_one_did_and_reads_back_to_the_same_document() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::support::tempdir();
    let file = dir.join("deadlock.json");
    let out = asyncdump(&["dump", &fx.pid.to_string(), "-o", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "the document goes to the file");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("wrote 2 tasks of pid"), "{said}");
    let from = file.to_str().unwrap();
    let saved = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        asyncdump_ok(&["dump", "--from", from, "--json"]),
        saved,
        "read back and written again, byte for byte"
    );
    let text = asyncdump_ok(&["dump", "--from", from]);
    assert!(
        text.contains("DEADLOCK cycle: task 1 → task 2 → task 1"),
        "{text}"
    );
    assert!(text.contains("deadlock::join_peer"), "{text}");
    let none = asyncdump_ok(&["dump", "--from", from, "--type", "no_such_frame"]);
    assert!(none.contains("showing 0 of 2 tasks"), "{none}");
    let both = asyncdump_ok(&["dump", "--from", from, "--type", "join_peer"]);
    assert!(both.contains("showing 2 of 2 tasks"), "{both}");
    let grouped = asyncdump_ok(&["dump", "--from", from, "--coalesce"]);
    assert!(grouped.contains("×1"), "{grouped}");
}

#[test]
fn a_damaged_or_foreign_file_gets_one_line_and_status_4() {
    let dir = crate::support::tempdir();
    let cut = dir.join("cut.json");
    std::fs::write(
        &cut,
        r#"{"format":"asyncdump-dump","version":3,"process":{"pid":1"#,
    )
    .unwrap();
    let missing = dir.join("missing.json");
    for (path, says) in [
        (cut.to_str().unwrap(), "is damaged or not an asyncdump file"),
        ("/dev/zero", "not a regular file"),
    ] {
        let out = asyncdump(&["dump", "--from", path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let out = asyncdump(&["dump", "--from", missing.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}
