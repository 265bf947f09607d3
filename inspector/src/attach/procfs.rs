//! What the kernel says of a process, from `/proc`: every path and file format the inspector reads
//! there, in one place. Readers return `None` (or an `io::Error`) for a process that is gone or not
//! readable; nothing here parses by position what a file may spell with spaces (`comm` in `stat`).

use std::io;
use std::path::PathBuf;

/// This process's own executable.
pub const OWN_EXE: &str = "/proc/self/exe";

/// Whether process `pid` exists (as this process sees it).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The path through which process `pid`'s running executable opens, even if it was replaced on disk.
pub fn exe(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/exe"))
}

/// The state letter of process `pid` (`R`, `S`, `T`, ...).
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: the comm may hold spaces and parentheses; the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The real uid of process `pid`.
pub fn uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The name of process `pid` (its `comm`).
pub fn name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

/// The memory map of process `pid`, as `/proc/PID/maps` has it.
pub fn maps(pid: u32) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
}

/// When process `pid` started, in clock ticks after boot (`starttime` of `/proc/PID/stat`).
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the comm: state is field 3, starttime field 22.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The threads of process `pid`, by tid.
pub fn threads(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The pid of the process tracing `pid` (`TracerPid` of its status), 0 when none.
pub fn tracer(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("TracerPid:"))?;
    line.trim().parse().ok()
}

/// Whether `path` names something under `/proc` (it means nothing once its process is gone).
pub fn is_under(path: &std::path::Path) -> bool {
    path.starts_with("/proc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_itself() {
        let me = std::process::id();
        assert!(exists(me));
        assert_eq!(uid(me), Some(nix::unistd::getuid().as_raw()));
        assert!(state(me).is_some_and(|s| "RSD".contains(s)));
        assert!(name(me).is_some_and(|n| !n.is_empty()));
        assert!(maps(me).unwrap().contains(" r-xp "));
        assert!(start_ticks(me).is_some_and(|t| t > 0));
        assert!(threads(me).unwrap().contains(&me));
        assert_eq!(tracer(me), Some(0));
        assert_eq!(exe(me).canonicalize().ok(), std::env::current_exe().ok());
        assert!(!exists(u32::MAX), "no such pid");
    }

    #[test]
    fn a_stopped_process_reads_as_stopped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let stop = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status();
        assert!(stop.is_ok_and(|s| s.success()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while state(pid) != Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let seen = state(pid);
        child.kill().ok();
        child.wait().ok();
        assert_eq!(seen, Some('T'));
    }
}
