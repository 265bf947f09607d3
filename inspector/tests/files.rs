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
    assert!(
        said.contains("wrote 2 tasks and 1 thread's own future of pid"),
        "{said}"
    );
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

/// `-o` makes a new snapshot its owner's alone (it holds what the process's memory held), keeps
/// the mode of a regular file it replaces, writes to standard output for `-`, and refuses a symlink
/// or a FIFO in one line with status 3, leaving it and what it points to as they were.
#[test]
fn output_files_are_private_keep_their_mode_and_only_regular_files_are_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::start("deadlock", &[]);
    let pid = fx.pid.to_string();
    let dir = crate::support::tempdir();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let new = dir.join("new.json");
    asyncdump_ok(&["dump", &pid, "-o", new.to_str().unwrap()]);
    assert_eq!(mode(&new), 0o600);
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
    asyncdump_ok(&["dump", &pid, "-o", new.to_str().unwrap()]);
    assert_eq!(mode(&new), 0o644, "a replaced file keeps its mode");

    let doc = asyncdump_ok(&["dump", &pid, "-o", "-"]);
    assert!(
        doc.starts_with("{\"format\":\"asyncdump-dump\""),
        "{doc:.80}"
    );

    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (target, what) in [(&link, "a symbolic link"), (&fifo, "a FIFO")] {
        let out = asyncdump(&["dump", &pid, "-o", target.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!("it is {what}; asyncdump writes only")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    let fifo_kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&fifo_kind));
}
