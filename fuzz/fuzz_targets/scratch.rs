//! Where a fuzz target writes each input for readers that take a path.

/// A file of this process's own under /dev/shm (else the temporary directory), rewritten with each
/// input: the readers take paths.
pub fn path(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_owned()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("asyncdump-fuzz-{name}-{}", std::process::id()))
}
