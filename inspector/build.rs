//! Stamps the binary with the commit it was built from, for `asyncdump --version`: `git describe` of
//! the checkout (`unknown` outside one, as from a published crate), `-dirty` when files differ.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&[
        "describe",
        "--always",
        "--dirty",
        "--abbrev=12",
        "--exclude",
        "*",
    ])
    .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ASYNCDUMP_COMMIT={commit}");
    // Built again when the checkout moves to another commit (or its index changes).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "index", "packed-refs"] {
            println!("cargo:rerun-if-changed={dir}/{file}");
        }
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
