//! Turning the user's `PID|SOCKET` argument into an agent socket, with a precise error when there is none.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use asyncdump_protocol::paths;

use crate::attach::procfs;
use crate::error::TargetError;

/// What the user pointed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    Socket(PathBuf),
}

impl Target {
    pub fn parse(arg: &str) -> Target {
        match arg.parse::<u32>() {
            Ok(pid) => Target::Pid(pid),
            Err(_) => Target::Socket(PathBuf::from(arg)),
        }
    }

    /// The pid this target must belong to, if the user named one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Target::Pid(pid) => Some(*pid),
            Target::Socket(_) => None,
        }
    }

    /// Finds the socket for this target.
    pub fn resolve(&self) -> Result<PathBuf, TargetError> {
        match self {
            // `exists()` would also be false for a socket in a directory we may not search: tell them apart.
            Target::Socket(path) => match std::fs::symlink_metadata(path) {
                // Through a symlink the user gave, to what it names; a link that names nothing
                // readable is left to the connection to report.
                Ok(_) => match std::fs::metadata(path) {
                    Ok(m) if !m.file_type().is_socket() => {
                        Err(TargetError::NotASocket { path: path.clone() })
                    }
                    _ => Ok(path.clone()),
                },
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    Err(TargetError::PermissionDenied { path: path.clone() })
                }
                Err(_) => Err(TargetError::NoSuchSocket { path: path.clone() }),
            },
            Target::Pid(pid) => resolve_pid(*pid),
        }
    }
}

/// Removes `path` if it is one of our own stale agent sockets: a socket, owned by this uid, directly in
/// one of this uid's socket directories, which is itself a directory of ours. Anything else is left
/// alone, whatever the user pointed at. Returns whether it removed it.
pub fn remove_stale(path: &Path) -> bool {
    let me = euid();
    let ours = |p: &Path, dir: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let kind = if dir {
                m.file_type().is_dir()
            } else {
                m.file_type().is_socket()
            };
            kind && m.uid() == me
        })
    };
    let in_our_dir = path
        .parent()
        .is_some_and(|d| dirs_for(me).iter().any(|ours| ours == d) && ours(d, true));
    in_our_dir && ours(path, false) && std::fs::remove_file(path).is_ok()
}

pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The socket directories to search for agents of the given uid (ours by default, or the target's).
pub fn dirs_for(uid: u32) -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    let mut dirs = if uid == euid() {
        paths::search_dirs(xdg.as_deref(), uid)
    } else {
        Vec::new()
    };
    for dir in [
        Path::new("/run/user")
            .join(uid.to_string())
            .join("asyncdump"),
        paths::tmp_dir(uid),
    ] {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// Refuses an agent socket that its owner could not have made alone: the socket must be a socket (not
/// a symlink) owned by `owner`, directly in a directory (not a symlink) owned by `owner` that no one
/// else may write to. Anyone who can plant either could stand in for the agent, or point us elsewhere.
pub fn check_not_planted(path: &Path, owner: u32) -> Result<(), TargetError> {
    let planted = |why: String| TargetError::Planted {
        path: path.to_owned(),
        why,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let d = std::fs::symlink_metadata(dir).map_err(|e| planted(format!("its directory: {e}")))?;
    if !d.file_type().is_dir() {
        return Err(planted(format!(
            "{} is not a directory (a symlink?)",
            dir.display()
        )));
    }
    if d.uid() != owner {
        return Err(planted(format!(
            "{} is owned by uid {}, not the target's uid {owner}",
            dir.display(),
            d.uid()
        )));
    }
    if d.mode() & 0o022 != 0 {
        return Err(planted(format!(
            "{} may be written by others (mode {:o})",
            dir.display(),
            d.mode() & 0o777
        )));
    }
    let s = std::fs::symlink_metadata(path).map_err(|e| planted(e.to_string()))?;
    if !s.file_type().is_socket() {
        return Err(planted("it is not a socket (a symlink?)".into()));
    }
    if s.uid() != owner {
        return Err(planted(format!(
            "it is owned by uid {}, not the target's uid {owner}",
            s.uid()
        )));
    }
    Ok(())
}

/// The state letter of process `pid` when it is stopped (`T`) or stopped by a tracer (`t`): a stopped
/// process cannot answer, and waiting for it would only run into the timeout.
pub fn stopped(pid: u32) -> Option<char> {
    procfs::state(pid).filter(|s| matches!(s, 'T' | 't'))
}

fn resolve_pid(pid: u32) -> Result<PathBuf, TargetError> {
    let alive = procfs::exists(pid);
    let uid = procfs::uid(pid).unwrap_or_else(euid);
    let mut dirs = dirs_for(euid());
    for dir in dirs_for(uid) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let name = paths::socket_file_name(pid);
    let mut denied = None;
    let found = dirs
        .iter()
        .map(|d| d.join(&name))
        .find(|p| match std::fs::symlink_metadata(p) {
            Ok(_) => true,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    denied.get_or_insert_with(|| p.clone());
                }
                false
            }
        });
    if !alive {
        // A socket left behind by a dead process is stale: tidy it up while reporting the real problem.
        if let Some(stale) = found {
            remove_stale(&stale);
        }
        return Err(TargetError::NoSuchProcess { pid });
    }
    if let (None, Some(path)) = (&found, denied) {
        return Err(TargetError::PermissionDenied { path });
    }
    found.ok_or_else(|| TargetError::NoAgent {
        pid,
        program: procfs::program(pid).unwrap_or_else(|| "?".into()),
        searched: dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_pids_and_anything_else_is_a_socket_path() {
        assert_eq!(Target::parse("123"), Target::Pid(123));
        assert_eq!(
            Target::parse("/tmp/x.sock"),
            Target::Socket("/tmp/x.sock".into())
        );
        assert_eq!(Target::parse("./123"), Target::Socket("./123".into()));
    }

    #[test]
    fn a_dead_pid_is_no_such_process() {
        // Above the kernel's pid_max, so never a live process.
        assert!(matches!(
            resolve_pid(4_194_304 + 7),
            Err(TargetError::NoSuchProcess { .. })
        ));
    }

    #[test]
    fn a_live_process_without_agent_says_how_to_add_one() {
        let err = resolve_pid(std::process::id()).unwrap_err();
        assert!(matches!(err, TargetError::NoAgent { .. }), "{err}");
        assert!(err.to_string().contains("asyncdump_agent::init()"));
    }
}
