//! What the kernel says of a process, from `/proc`: every path and file format the inspector reads
//! there, in one place. Readers return `None` (or an `io::Error`) for a process that is gone or not
//! readable; nothing here parses by position what a file may spell with spaces (`comm` in `stat`).

use std::cell::OnceCell;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;

/// This process's own executable.
pub const OWN_EXE: &str = "/proc/self/exe";

/// A `/proc` file, whole. Read into room for a page at once: `fs::read_to_string` asks the size
/// first, which a `/proc` file gives as 0, then grows from 32 bytes a read; a dump reads a dozen
/// such files for its threads alone.
pub fn read(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(4096);
    // `Take`: `File`'s own `read_to_end` asks the size first too.
    std::fs::File::open(path)?
        .take(u64::MAX)
        .read_to_end(&mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Whether process `pid` exists (as this process sees it).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `alive(pid)` holds, asked again for a few milliseconds while it does not: a process in
/// the middle of an `execve` (its other threads ended, the thread that made it taking the process's
/// id) can look gone for a moment, and must not be said to have exited.
pub fn settled(pid: u32, alive: impl Fn(u32) -> bool) -> bool {
    for _ in 0..10 {
        if alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    alive(pid)
}

/// The path through which process `pid`'s running executable opens, even if it was replaced on disk.
pub fn exe(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/exe"))
}

/// The state letter of process `pid` (`R`, `S`, `T`, ...).
pub fn state(pid: u32) -> Option<char> {
    stat_state(&read(format!("/proc/{pid}/stat")).ok()?)
}

/// The real uid of process `pid`.
pub fn uid(pid: u32) -> Option<u32> {
    let status = read(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The program process `pid` runs, as people name it: its executable's file name, whole (the
/// agent's handshake names it so too), else its `comm`, which the kernel cuts to 15 bytes.
pub fn program(pid: u32) -> Option<String> {
    std::fs::read_link(exe(pid))
        .ok()
        .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .map(|n| n.trim_end_matches(" (deleted)").to_owned())
        .or_else(|| name(pid))
}

/// The name of process `pid` (its `comm`).
pub fn name(pid: u32) -> Option<String> {
    let comm = read(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

/// Most descriptors of a process looked at for its epoll instances, and most registrations read.
const MAX_EPOLL_FDS: usize = 1 << 16;

/// What process `pid`'s epoll instances watch: each registered descriptor with the word it was
/// registered under (`data`: the program's own; tokio's is its `ScheduledIo`'s address), from
/// `/proc/PID/fdinfo` of each descriptor that is an epoll instance. Empty where `/proc` says
/// nothing (another user's process, a core).
pub fn epoll_registrations(pid: u32) -> Vec<(i64, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten().take(MAX_EPOLL_FDS) {
        let is_epoll = std::fs::read_link(entry.path())
            .is_ok_and(|l| l.as_os_str() == "anon_inode:[eventpoll]");
        if !is_epoll {
            continue;
        }
        let name = entry.file_name();
        let Ok(info) = read(format!("/proc/{pid}/fdinfo/{}", name.to_string_lossy())) else {
            continue;
        };
        out.extend(info.lines().filter_map(epoll_line));
        if out.len() >= MAX_EPOLL_FDS {
            break;
        }
    }
    out
}

/// One registration of an epoll instance's fdinfo: `tfd: 9 events: 8000201d data: 55d0c2a1b2c0
/// pos:0 ino:…`: the descriptor and its data word (hex).
fn epoll_line(line: &str) -> Option<(i64, u64)> {
    let mut words = line.split_whitespace();
    if words.next()? != "tfd:" {
        return None;
    }
    let fd = words.next()?.parse().ok()?;
    let mut rest = words.skip_while(|w| *w != "data:");
    rest.next()?;
    let data = u64::from_str_radix(rest.next()?, 16).ok()?;
    Some((fd, data))
}

/// The memory map of process `pid`, as `/proc/PID/maps` has it.
pub fn maps(pid: u32) -> io::Result<String> {
    read(format!("/proc/{pid}/maps"))
}

/// Where process `pid`'s executable is mapped from its file offset 0: the start of the image it
/// runs, whose first page holds the ELF header and its notes (read there when the file itself
/// cannot be: execute-only, or not this user's to read). Found by the file's inode, not its path,
/// which may hold spaces or end in ` (deleted)` once replaced on disk, while `/proc/PID/exe` still
/// stats as the running image. `Ok(None)`: no such mapping.
pub fn exe_image(pid: u32) -> io::Result<Option<u64>> {
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(exe(pid))?);
    let maps = maps(pid)?;
    Ok((asyncdump_walker::memory::maps::lines(&maps))
        .find(|m| m.offset == 0 && m.inode == inode)
        .map(|m| m.start))
}

/// When process `pid` started, in clock ticks after boot (`starttime` of `/proc/PID/stat`).
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = read(format!("/proc/{pid}/stat")).ok()?;
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

/// The thread tracing thread `tid` of process `pid` (`TracerPid` of its status: the tracer's
/// thread id, which [`tgid`] turns into its process), 0 when none.
pub fn thread_tracer(pid: u32, tid: u32) -> Option<u32> {
    status_field(&format!("/proc/{pid}/task/{tid}/status"), "TracerPid:")
}

/// The process (thread group) thread `tid` belongs to.
pub fn tgid(tid: u32) -> Option<u32> {
    status_field(&format!("/proc/{tid}/status"), "Tgid:")
}

fn status_field(path: &str, field: &str) -> Option<u32> {
    let status = read(path).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(field))?;
    line.trim().parse().ok()
}

/// Whether thread `tid` of process `pid` has ended: gone, or a zombie (a thread group leader that
/// returned from `main` while other threads run on stays one until they end).
pub fn thread_dead(pid: u32, tid: u32) -> bool {
    let stat = read(format!("/proc/{pid}/task/{tid}/stat")).ok();
    let state = stat.as_deref().and_then(stat_state);
    state.is_none_or(|s| s == 'Z' || s == 'X')
}

/// A live thread of process `pid`, through which its memory, maps and executable are read: `pid`
/// itself unless its main thread has ended (then `/proc/PID/maps` is empty and its memory cannot be
/// read through it) while other threads run on. `None`: no thread lives.
pub fn live_thread(pid: u32) -> Option<u32> {
    if !thread_dead(pid, pid) {
        return Some(pid);
    }
    threads(pid)
        .ok()?
        .into_iter()
        .find(|&t| !thread_dead(pid, t))
}

/// The state letter of a `stat` line: the comm may hold spaces and parentheses, and the state
/// follows the last `)`.
fn stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether `path` names something under `/proc` (it means nothing once its process is gone).
pub fn is_under(path: &std::path::Path) -> bool {
    path.starts_with("/proc")
}

/// A socket of a process, as its `/proc/PID/net` tables (and, for a Unix one's peer,
/// [`super::unix_sockets`]) show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    /// `tcp`, `udp` or `unix`.
    pub proto: &'static str,
    pub local: End,
    pub peer: End,
    /// Bytes queued to send and to read; a listener's connections waiting to be accepted are its
    /// `rx_queue`.
    pub tx_queue: u64,
    pub rx_queue: u64,
}

/// One end of a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Inet(std::net::SocketAddr),
    /// A Unix socket's path: empty when unnamed, `@…` when abstract, `None` when not known (a
    /// peer the netlink query could not see).
    Unix(Option<String>),
}

/// The socket tables of process `pid`, each read once, when first needed: a dump looks up every
/// descriptor its waits name, and reading the tables once per descriptor would be quadratic in a
/// process with thousands of connections.
pub struct SocketTables {
    pid: u32,
    /// Internet sockets by inode, from `/proc/PID/net/{tcp,tcp6,udp,udp6}` ([`INET_TABLES`]),
    /// each read when a socket was not in those before it: the kernel walks every socket of the
    /// namespace to print one, a millisecond each here.
    inet: [OnceCell<HashMap<u64, Socket>>; 4],
    /// Unix sockets' own paths by inode, from `/proc/PID/net/unix`.
    unix: OnceCell<HashMap<u64, String>>,
    /// Unix sockets' peers and queues, from the kernel's socket diagnostics.
    diag: OnceCell<Option<HashMap<u64, super::unix_sockets::UnixSocket>>>,
}

impl SocketTables {
    pub fn new(pid: u32) -> SocketTables {
        SocketTables {
            pid,
            inet: Default::default(),
            unix: OnceCell::new(),
            diag: OnceCell::new(),
        }
    }

    /// The socket that file descriptor `fd` is, if this process may see it (`/proc/PID/fd/FD` names
    /// its inode; the process's own network namespace's tables hold it).
    pub fn socket(&self, fd: i64) -> Option<Socket> {
        let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", self.pid)).ok()?;
        let inode: u64 = (link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?)
            .parse()
            .ok()?;
        let mut tables = self.inet.iter().zip(INET_TABLES);
        tables
            .find_map(|(cell, table)| {
                cell.get_or_init(|| inet_table(self.pid, table))
                    .get(&inode)
                    .cloned()
            })
            .or_else(|| self.unix_socket(inode))
    }

    /// Unix socket `inode`: its path, its peer's and its queues where the diagnostics see it.
    fn unix_socket(&self, inode: u64) -> Option<Socket> {
        let unix = self.unix.get_or_init(|| unix_table(self.pid));
        let diag = self.diag.get_or_init(super::unix_sockets::all).as_ref();
        let me = diag.and_then(|d| d.get(&inode));
        if me.is_none() && !unix.contains_key(&inode) {
            return None;
        }
        // Named by the diagnostics where they see it (this network namespace), else by the
        // process's own table.
        let own = me.map(|me| me.path.clone());
        let mut socket = Socket {
            proto: "unix",
            local: End::Unix(own.or_else(|| unix.get(&inode).cloned())),
            peer: End::Unix(None),
            tx_queue: 0,
            rx_queue: 0,
        };
        if let Some(me) = me {
            let peer = me.peer.and_then(|p| diag?.get(&p));
            socket.peer = End::Unix(peer.map(|p| p.path.clone()));
            (socket.rx_queue, socket.tx_queue) = (me.rqueue, me.wqueue);
        }
        Some(socket)
    }
}

/// The internet socket tables, in the order they are looked in: the likeliest first.
const INET_TABLES: [&str; 4] = ["tcp", "tcp6", "udp", "udp6"];

/// Every internet socket of one of process `pid`'s tables (`tcp`, …), by inode.
fn inet_table(pid: u32, table: &str) -> HashMap<u64, Socket> {
    let mut out = HashMap::new();
    let Ok(text) = read(format!("/proc/{pid}/net/{table}")) else {
        return out;
    };
    let proto = if table.starts_with("tcp") {
        "tcp"
    } else {
        "udp"
    };
    for (inode, socket) in text.lines().skip(1).filter_map(|l| socket_line(l, proto)) {
        out.entry(inode).or_insert(socket);
    }
    out
}

/// Every Unix socket's path in process `pid`'s table, by inode.
fn unix_table(pid: u32) -> HashMap<u64, String> {
    unix_paths(&read(format!("/proc/{pid}/net/unix")).unwrap_or_default())
}

/// The paths of `/proc/net/unix`'s text, by inode. The kernel prints a name as it is, line breaks
/// and all, so a socket's name can carry a whole forged line, claiming another socket's inode: an
/// inode told twice is told by nobody (the real line for it is always there too), and no path is
/// kept for it. The socket diagnostics, where they see a socket, name it instead (binary, and not
/// forged so).
fn unix_paths(text: &str) -> HashMap<u64, String> {
    let mut paths = HashMap::new();
    let mut twice = std::collections::HashSet::new();
    for (inode, path) in text.lines().skip(1).filter_map(unix_line) {
        if paths.insert(inode, path).is_some() {
            twice.insert(inode);
        }
    }
    paths.retain(|inode, _| !twice.contains(inode));
    paths
}

/// One line of `/proc/net/unix`: the socket's inode and its path, empty when unnamed:
/// `Num RefCount Protocol Flags Type St Inode Path`.
fn unix_line(line: &str) -> Option<(u64, String)> {
    let inode_text = line.split_whitespace().nth(6)?;
    let inode = inode_text.parse::<u64>().ok()?;
    // A path may hold spaces: it is the rest of the line after the inode.
    let at = line.find(&format!(" {inode_text}"))? + 1 + inode_text.len();
    Some((inode, line[at..].trim_start().to_owned()))
}

/// One line of `/proc/net/tcp` (or `tcp6`, `udp`, `udp6`): its inode and socket,
/// `sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode …`.
fn socket_line(line: &str, proto: &'static str) -> Option<(u64, Socket)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let inode = f.get(9)?.parse::<u64>().ok()?;
    let (tx, rx) = f.get(4)?.split_once(':')?;
    let socket = Socket {
        proto,
        local: End::Inet(net_address(f.get(1)?)?),
        peer: End::Inet(net_address(f.get(2)?)?),
        tx_queue: u64::from_str_radix(tx, 16).ok()?,
        rx_queue: u64::from_str_radix(rx, 16).ok()?,
    };
    Some((inode, socket))
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
    fn an_epoll_registration_is_its_descriptor_and_data_word() {
        let line = "tfd:        9 events:       19 data:     55d0c2a1b2c0  pos:0 ino:2f4 sdev:8";
        assert_eq!(epoll_line(line), Some((9, 0x55d0_c2a1_b2c0)));
        assert_eq!(epoll_line("pos:\t0"), None);
        assert_eq!(epoll_line("tfd: 9 events: 19"), None, "no data word");
    }

    #[test]
    fn a_socket_table_line_reads_as_its_addresses_and_queues() {
        let v4 = "   3: 0100007F:A8CA 0100007F:1538 01 00000000:0000000A 00:00000000 00000000     0        0 48213 1 0000000000000000 20 4 30 10 -1";
        let (inode, s) = socket_line(v4, "tcp").expect("the socket");
        assert_eq!(inode, 48213);
        assert_eq!(s.local, End::Inet("127.0.0.1:43210".parse().unwrap()));
        assert_eq!(s.peer, End::Inet("127.0.0.1:5432".parse().unwrap()));
        assert_eq!((s.tx_queue, s.rx_queue), (0, 10));
        assert_eq!(
            socket_line("  sl  local_address rem_address   st", "tcp"),
            None
        );
        let v6 = "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1";
        let (_, s) = socket_line(v6, "tcp").expect("the socket");
        assert_eq!(s.local, End::Inet("[::1]:8080".parse().unwrap()));
    }

    #[test]
    fn a_unix_table_line_reads_as_its_inode_and_path() {
        let named = "00000000c414532b: 00000002 00000000 00010000 0001 01 148504797 /tmp/a b.sock";
        assert_eq!(unix_line(named), Some((148504797, "/tmp/a b.sock".into())));
        let unnamed = "0000000013b4960f: 00000003 00000000 00000000 0001 03   312";
        assert_eq!(unix_line(unnamed), Some((312, String::new())));
        let header = "Num       RefCount Protocol Flags    Type St Inode Path";
        assert_eq!(unix_line(header), None);
    }

    // Another user's abstract socket named with a line break and a forged line made root's dump
    // show the victim's socket at the attacker's path.
    #[test]
    fn a_name_that_forges_a_line_of_the_table_names_no_socket() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            00000000c414532b: 00000002 00000000 00010000 0001 01 5001 @x\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 7007 /run/attacker.sock\n\
            0000000013b4960f: 00000003 00000000 00000000 0001 03 7007 /run/victim.sock\n\
            0000000013b49610: 00000003 00000000 00000000 0001 03 8008 /run/other.sock\n";
        let paths = unix_paths(text);
        assert_eq!(paths.get(&7007), None, "told twice: told by nobody");
        assert_eq!(paths.get(&5001).map(String::as_str), Some("@x"));
        assert_eq!(
            paths.get(&8008).map(String::as_str),
            Some("/run/other.sock")
        );
    }

    #[test]
    fn a_socket_pair_of_this_process_reads_as_unix_with_its_peer() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("a pair");
        std::io::Write::write_all(&mut &a, b"hi").expect("write");
        let tables = SocketTables::new(std::process::id());
        use std::os::fd::AsRawFd;
        let s = tables.socket(i64::from(b.as_raw_fd())).expect("the socket");
        assert_eq!(s.proto, "unix");
        // A pair is unnamed on both ends, and the kernel says so of the peer.
        assert_eq!(
            (s.local, s.peer),
            (
                End::Unix(Some(String::new())),
                End::Unix(Some(String::new()))
            )
        );
        assert_eq!(s.rx_queue, 2, "two bytes wait at b");
        drop(a);
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
        assert_eq!(thread_tracer(me, me), Some(0));
        assert_eq!(tgid(me), Some(me));
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
