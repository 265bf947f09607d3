//! Where agents put their sockets, so that agent and inspector agree without configuration.
//!
//! An agent binds `$ASYNCDUMP_SOCKET` if set; else `$XDG_RUNTIME_DIR/asyncdump/<pid>.sock`; else
//! `/tmp/asyncdump-<uid>/<pid>.sock`. The inspector looks for a pid's socket in both default directories
//! (the target may have been started with another environment than the inspector).

use std::path::{Path, PathBuf};

/// Environment variable naming an exact socket path.
pub const SOCKET_ENV: &str = "ASYNCDUMP_SOCKET";

/// File name of a pid's socket inside a socket directory.
pub fn socket_file_name(pid: u32) -> String {
    format!("{pid}.sock")
}

/// The pid a socket file name belongs to, if it follows the `<pid>.sock` convention.
pub fn pid_of_socket(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".sock")?
        .parse()
        .ok()
}

/// The default socket directory for an environment: `$XDG_RUNTIME_DIR/asyncdump` or `/tmp/asyncdump-<uid>`.
pub fn default_dir(xdg_runtime_dir: Option<&Path>, uid: u32) -> PathBuf {
    match xdg_runtime_dir {
        Some(xdg) if !xdg.as_os_str().is_empty() => xdg.join("asyncdump"),
        _ => tmp_dir(uid),
    }
}

/// The fallback directory, used when `XDG_RUNTIME_DIR` is unset.
pub fn tmp_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/asyncdump-{uid}"))
}

/// Every directory an agent of `uid` may have used, most specific first, without duplicates.
pub fn search_dirs(xdg_runtime_dir: Option<&Path>, uid: u32) -> Vec<PathBuf> {
    let mut dirs = vec![default_dir(xdg_runtime_dir, uid)];
    let tmp = tmp_dir(uid);
    if !dirs.contains(&tmp) {
        dirs.push(tmp);
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_runtime_dir_wins_over_tmp() {
        assert_eq!(
            default_dir(Some(Path::new("/run/user/1000")), 1000),
            Path::new("/run/user/1000/asyncdump")
        );
        assert_eq!(default_dir(None, 1000), Path::new("/tmp/asyncdump-1000"));
        assert_eq!(
            default_dir(Some(Path::new("")), 7),
            Path::new("/tmp/asyncdump-7")
        );
    }

    #[test]
    fn the_inspector_searches_both_directories() {
        assert_eq!(search_dirs(Some(Path::new("/run/user/5")), 5).len(), 2);
        assert_eq!(
            search_dirs(None, 5),
            vec![PathBuf::from("/tmp/asyncdump-5")]
        );
    }

    #[test]
    fn socket_names_carry_the_pid() {
        assert_eq!(pid_of_socket(Path::new("/x/123.sock")), Some(123));
        assert_eq!(pid_of_socket(Path::new("/x/.123.sock.tmp")), None);
        assert_eq!(socket_file_name(9), "9.sock");
    }
}
