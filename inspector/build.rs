//! Stamps the binary with the commit it was built from, for `asyncdump --version` (`unknown` outside
//! a checkout, as from a published crate).
//!
//! The script runs again only when the checkout moves to another commit: it watches `HEAD`, the
//! branch's loose ref and `packed-refs`, each only where it exists (cargo reruns a script on every
//! build for a watched path that does not exist). It watches neither the index (`git status` rewrites
//! it) nor the work tree, so the stamp names the commit and never claims the tree was clean.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The files whose change means another commit: `HEAD` (in a worktree, its own), and the branch's
/// ref in the common directory, loose or packed. Only those that exist.
fn watched() -> Vec<PathBuf> {
    // `--path-format` is git 2.31's; before it the common directory is said relative to here.
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]).or_else(|| {
        let dir = git(&["rev-parse", "--git-common-dir"])?;
        Some(
            std::env::current_dir()
                .ok()?
                .join(dir)
                .display()
                .to_string(),
        )
    });
    let (Some(dir), Some(common)) = (git(&["rev-parse", "--absolute-git-dir"]), common) else {
        return Vec::new();
    };
    let mut files = vec![Path::new(&dir).join("HEAD")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(Path::new(&common).join(branch));
    }
    files.push(Path::new(&common).join("packed-refs"));
    files.retain(|f| f.is_file());
    files
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ASYNCDUMP_COMMIT={commit}");
    for file in watched() {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
