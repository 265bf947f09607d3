//! Source paths as DWARF gives them, and as people read them.
//!
//! A dependency's file is named in DWARF either whole (`~/.cargo/registry/src/<index>/tokio-1.54.1/src/…`,
//! for code generated in another crate) or relative to its own crate's directory (`src/lib.rs`, with
//! the crate's directory as the unit's `DW_AT_comp_dir`). [`in_unit`] makes the second kind whole, so
//! that no dependency's file reads like one of the program's own, and [`short_path`] shortens both
//! alike for text. The program's own files stay relative to where it was built (`src/main.rs`).

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// A source path as people read it: a file of a crate from cargo's registry from the crate's directory
/// on (from the checkout's, for a git dependency) (`tokio-1.54.1/src/sync/mpsc/bounded.rs`), one of the standard library's from
/// the library's (`std/src/thread/mod.rs`, not `/rustc/<commit>/library/std/…`). Any other path, the
/// program's own, is kept as it is.
pub fn short_path(file: &str) -> &str {
    // Every path shortened here is absolute; the program's own files, most of a dump, are not.
    if !file.starts_with('/') {
        return file;
    }
    static REGISTRY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"/registry/src/"));
    static CHECKOUTS: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"/git/checkouts/"));
    if let Some(i) = REGISTRY.find(file.as_bytes()) {
        // The index's directory comes next, then the crate's.
        let rest = &file[i + REGISTRY.needle().len()..];
        return rest.find('/').map_or(rest, |j| &rest[j + 1..]);
    }
    if let Some(i) = CHECKOUTS.find(file.as_bytes()) {
        // `<repository>-<hash>/<revision>/…`: the repository names it.
        return &file[i + CHECKOUTS.needle().len()..];
    }
    if let Some(rest) = file.strip_prefix("/rustc/")
        && let Some(i) = rest.find("/library/")
    {
        return &rest[i + "/library/".len()..];
    }
    file
}

/// A file of a unit compiled in `comp_dir`, as its line program names it (`name`, already joined with
/// its directory entry): a relative path is joined with `comp_dir` when that is a dependency's or the
/// standard library's directory (one [`short_path`] shortens), and kept relative otherwise.
pub fn in_unit(name: String, comp_dir: Option<&str>) -> String {
    // `include!("../../proto/shop.rs")` makes `src/bin/../../proto/shop.rs`.
    let name = lexical(name);
    match comp_dir {
        Some(dir) if !name.starts_with('/') => {
            let whole = format!("{}/{name}", dir.trim_end_matches('/'));
            if short_path(&whole).len() < whole.len() {
                whole
            } else {
                name
            }
        }
        _ => name,
    }
}

/// `path` with its `.` segments and each `dir/..` pair taken out, by its text alone (as the
/// compiler joined it, not as the file system resolves it); leading `..`s stay.
fn lexical(path: String) -> String {
    if !(path.contains("/../") || path.contains("/./") || path.starts_with("./")) {
        return path;
    }
    let mut kept: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "." => {}
            ".." if kept.last().is_some_and(|l| !l.is_empty() && *l != "..") => {
                kept.pop();
            }
            _ => kept.push(seg),
        }
    }
    kept.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_included_files_path_is_taken_as_the_compiler_joined_it() {
        let path = |p: &str| in_unit(p.to_owned(), None);
        assert_eq!(
            path("fixtures/src/bin/../../proto/shop.rs"),
            "fixtures/proto/shop.rs"
        );
        assert_eq!(path("/a/./b/../c.rs"), "/a/c.rs");
        assert_eq!(path("../x/../y.rs"), "../y.rs");
        assert_eq!(path("src/main.rs"), "src/main.rs");
    }

    #[test]
    fn dependency_and_standard_library_paths_start_at_their_crate() {
        assert_eq!(
            short_path(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.54.1/src/sync/mpsc/bounded.rs"
            ),
            "tokio-1.54.1/src/sync/mpsc/bounded.rs"
        );
        assert_eq!(
            short_path("/home/u/.cargo/git/checkouts/hyper-3a1b/5e2c1d0/src/proto/h1/dispatch.rs"),
            "hyper-3a1b/5e2c1d0/src/proto/h1/dispatch.rs"
        );
        assert_eq!(
            short_path(
                "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/thread/mod.rs"
            ),
            "std/src/thread/mod.rs"
        );
        assert_eq!(
            short_path("fixtures/src/bin/plain_tasks.rs"),
            "fixtures/src/bin/plain_tasks.rs"
        );
        assert_eq!(short_path("/srv/app/src/main.rs"), "/srv/app/src/main.rs");
    }

    #[test]
    fn a_dependency_file_relative_to_its_crate_is_made_whole_and_the_program_s_own_stays_relative()
    {
        let tokio = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.54.1";
        assert_eq!(
            in_unit("src/net/tcp/listener.rs".into(), Some(tokio)),
            format!("{tokio}/src/net/tcp/listener.rs")
        );
        assert_eq!(
            short_path(&in_unit("src/lib.rs".into(), Some(tokio))),
            "tokio-1.54.1/src/lib.rs"
        );
        assert_eq!(
            in_unit("src/main.rs".into(), Some("/srv/app")),
            "src/main.rs"
        );
        assert_eq!(in_unit("/abs/x.rs".into(), Some(tokio)), "/abs/x.rs");
        assert_eq!(in_unit("src/lib.rs".into(), None), "src/lib.rs");
    }
}
