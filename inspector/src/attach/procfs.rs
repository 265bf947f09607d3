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

/// An internet socket of a process, as its `/proc/PID/net` tables show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    /// `tcp` or `udp`.
    pub proto: &'static str,
    pub local: std::net::SocketAddr,
    pub peer: std::net::SocketAddr,
    /// Bytes queued to send and to read.
    pub tx_queue: u64,
    pub rx_queue: u64,
}

/// The socket that file descriptor `fd` of process `pid` is, if it is an internet one this process
/// may see (`/proc/PID/fd/FD` names its inode; the process's own network namespace's tables hold it).
pub fn socket(pid: u32, fd: i64) -> Option<Socket> {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let inode: u64 = (link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?)
        .parse()
        .ok()?;
    ["tcp", "tcp6", "udp", "udp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok()?;
        let proto = if table.starts_with("tcp") {
            "tcp"
        } else {
            "udp"
        };
        text.lines()
            .skip(1)
            .find_map(|l| socket_line(l, proto, inode))
    })
}

/// One line of `/proc/net/tcp` (or `tcp6`, `udp`, `udp6`), if it is the socket `inode`:
/// `sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode …`.
fn socket_line(line: &str, proto: &'static str, inode: u64) -> Option<Socket> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(9)?.parse::<u64>().ok()? != inode {
        return None;
    }
    let (tx, rx) = f.get(4)?.split_once(':')?;
    Some(Socket {
        proto,
        local: net_address(f.get(1)?)?,
        peer: net_address(f.get(2)?)?,
        tx_queue: u64::from_str_radix(tx, 16).ok()?,
        rx_queue: u64::from_str_radix(rx, 16).ok()?,
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address as the kernel prints it,
/// each 32-bit word in this machine's byte order, the port as a number.
fn net_address(text: &str) -> Option<std::net::SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Option<Vec<[u8; 4]>> = (0..ip.len() / 8)
        .map(|i| {
            Some(
                u32::from_str_radix(ip.get(8 * i..8 * i + 8)?, 16)
                    .ok()?
                    .to_ne_bytes(),
            )
        })
        .collect();
    let octets: Vec<u8> = words?.concat();
    let ip: std::net::IpAddr = match octets.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(octets).ok()?).into(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(octets).ok()?).into(),
        _ => return None,
    };
    Some(std::net::SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_table_line_reads_as_its_addresses_and_queues() {
        let v4 = "   3: 0100007F:A8CA 0100007F:1538 01 00000000:0000000A 00:00000000 00000000     0        0 48213 1 0000000000000000 20 4 30 10 -1";
        let s = socket_line(v4, "tcp", 48213).expect("the socket");
        assert_eq!(s.local.to_string(), "127.0.0.1:43210");
        assert_eq!(s.peer.to_string(), "127.0.0.1:5432");
        assert_eq!((s.tx_queue, s.rx_queue), (0, 10));
        assert_eq!(socket_line(v4, "tcp", 1), None);
        let v6 = "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1";
        let s = socket_line(v6, "tcp", 777).expect("the socket");
        assert_eq!(s.local.to_string(), "[::1]:8080");
    }

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
