//! The inspector as users install it: its version names the commit it was built from, its shell
//! completions and manual page come from its real command line, and the licenses it declares are there.

use std::process::Command;

use crate::support::{asyncdump_ok, workspace};

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let version = asyncdump_ok(&["--version"]);
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(workspace())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout)[..12].to_owned());
    let expected = match head {
        Some(commit) => format!("asyncdump {} (commit {commit}", env!("CARGO_PKG_VERSION")),
        // Built outside a git checkout: it says so rather than inventing one.
        None => format!("asyncdump {} (commit unknown)", env!("CARGO_PKG_VERSION")),
    };
    assert!(
        version.starts_with(&expected),
        "{version} (expected {expected}…)"
    );
}

#[test]
fn completions_cover_every_subcommand_and_option_in_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = asyncdump_ok(&["completions", shell]);
        // Options by their name: fish spells them `-l min-age`.
        for word in [
            "dump",
            "watch",
            "index",
            "demo",
            "completions",
            "min-age",
            "coalesce",
        ] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let bad = crate::support::asyncdump(&["completions", "tcsh"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_manual_has_a_page_per_subcommand_each_with_its_options() {
    let page = asyncdump_ok(&["man"]);
    assert!(page.contains(".TH asyncdump 1"), "{page}");
    assert!(page.contains("Dump the suspended async chains of a live Rust process"));
    let dir = crate::support::tempdir();
    let said = asyncdump_ok(&["man", "--out-dir", dir.to_str().unwrap()]);
    for sub in ["ps", "dump", "index", "watch", "demo", "completions", "man"] {
        // The main page lists each subcommand's page, and that page is there.
        assert!(
            page.contains(&format!("asyncdump\\-{sub}(1)")),
            "{sub} listed"
        );
        let path = dir.join(format!("asyncdump-{sub}.1"));
        let sub_page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(
            sub_page.contains(&format!(".TH asyncdump-{sub} 1")),
            "{sub_page}"
        );
        assert!(said.contains(&format!("asyncdump-{sub}.1\n")), "{said}");
    }
    let dump = std::fs::read_to_string(dir.join("asyncdump-dump.1")).unwrap();
    assert!(
        dump.contains("min\\-age") && dump.contains("coalesce"),
        "{dump}"
    );
    let nowhere = crate::support::asyncdump(&["man", "--out-dir", "/nonexistent/dir"]);
    assert_eq!(
        nowhere.status.code(),
        Some(3),
        "a directory that is not there: {nowhere:?}"
    );
}

#[test]
fn the_declared_licenses_are_in_the_repository() {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"MIT OR Apache-2.0\""),
        "{manifest}"
    );
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).expect("LICENSE-MIT");
    assert!(mit.starts_with("MIT License") && mit.contains("Permission is hereby granted"));
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).expect("LICENSE-APACHE");
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.trim_end().ends_with("END OF TERMS AND CONDITIONS"));
}
