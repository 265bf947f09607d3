//! Unix sockets by inode: each one's path and its peer's, with the bytes queued each way, from the
//! kernel's `sock_diag` netlink interface (what `ss -x` reads). `/proc/net/unix` names a socket's
//! own path but not its peer, and a connected client's own path is empty: its peer's is the one
//! that says what it talks to.
//!
//! The query sees the sockets of the inspector's own network namespace; a target in another one
//! is not found, and its waits show the descriptor alone.

use std::collections::HashMap;
use std::os::fd::AsRawFd;

use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send};

/// One Unix socket, as `sock_diag` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnixSocket {
    /// Its path (an abstract name starts with `@`), empty when unnamed.
    pub path: String,
    /// The inode of the socket at its other end, if connected.
    pub peer: Option<u64>,
    /// Bytes waiting to be read, and not yet taken by the peer (a listener: connections waiting to
    /// be accepted, and its backlog).
    pub rqueue: u64,
    pub wqueue: u64,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const UDIAG_SHOW_NAME: u32 = 1;
const UDIAG_SHOW_PEER: u32 = 4;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_PEER: u16 = 2;
const UNIX_DIAG_RQLEN: u16 = 4;
/// Most bytes of answers read: a machine with a few thousand Unix sockets answers in well under it.
const MAX_ANSWER: usize = 16 << 20;

/// Every Unix socket of this network namespace, by inode; `None` where the kernel does not answer.
pub fn all() -> Option<HashMap<u64, UnixSocket>> {
    let fd = nix::sys::socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .ok()?;
    // A bounded wait: the kernel answers at once, or something is wrong with it.
    let timeout = nix::sys::time::TimeVal::new(2, 0);
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &timeout).ok()?;
    send(fd.as_raw_fd(), &request(), MsgFlags::empty()).ok()?;
    let mut found = HashMap::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).ok()?;
        total += n;
        if n == 0 || total > MAX_ANSWER {
            return None;
        }
        if parse(&buf[..n], &mut found)? {
            return Some(found);
        }
    }
}

/// A dump of every Unix socket in any state, with its name, peer and queues.
fn request() -> Vec<u8> {
    let mut m = Vec::with_capacity(40);
    m.extend_from_slice(&40u32.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&[0; 8]); // sequence, port
    m.push(libc::AF_UNIX as u8);
    m.extend_from_slice(&[0; 3]); // protocol, padding
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    m.extend_from_slice(&0u32.to_ne_bytes()); // any inode
    m.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN).to_ne_bytes());
    m.extend_from_slice(&[0xff; 8]); // no cookie
    m
}

/// Adds the sockets of one answer datagram to `found`: `Some(true)` once the dump is done, `None`
/// for an error or a message that does not parse.
fn parse(mut b: &[u8], found: &mut HashMap<u64, UnixSocket>) -> Option<bool> {
    while b.len() >= 16 {
        let len = u32_at(b, 0)? as usize;
        let kind = u16::from_ne_bytes(b.get(4..6)?.try_into().ok()?);
        if len < 16 || len > b.len() {
            return None;
        }
        match kind {
            NLMSG_DONE => return Some(true),
            NLMSG_ERROR => return None,
            SOCK_DIAG_BY_FAMILY => {
                let (inode, socket) = message(&b[16..len])?;
                found.insert(inode, socket);
            }
            _ => {}
        }
        b = b.get(align(len)..).unwrap_or(&[]);
    }
    Some(false)
}

/// One `unix_diag_msg` (family, type, state, padding, inode, cookie) and its attributes.
fn message(b: &[u8]) -> Option<(u64, UnixSocket)> {
    let inode = u64::from(u32_at(b, 4)?);
    let mut socket = UnixSocket::default();
    let mut attrs = b.get(16..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes(attrs[0..2].try_into().ok()?));
        let kind = u16::from_ne_bytes(attrs[2..4].try_into().ok()?);
        let data = attrs.get(4..len)?;
        match kind {
            UNIX_DIAG_NAME => socket.path = path(data),
            UNIX_DIAG_PEER => socket.peer = Some(u64::from(u32_at(data, 0)?)),
            UNIX_DIAG_RQLEN => {
                socket.rqueue = u64::from(u32_at(data, 0)?);
                socket.wqueue = u64::from(u32_at(data, 4)?);
            }
            _ => {}
        }
        attrs = attrs.get(align(len.max(4))..).unwrap_or(&[]);
    }
    Some((inode, socket))
}

/// A socket's name as `ss` prints it: an abstract one (a leading NUL) with `@`; a path up to its
/// first NUL. Lossy where not UTF-8; escaping is the view's.
fn path(name: &[u8]) -> String {
    match name.split_first() {
        Some((0, rest)) => format!("@{}", String::from_utf8_lossy(rest)),
        _ => {
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            String::from_utf8_lossy(&name[..end]).into_owned()
        }
    }
}

/// A native-endian `u32` `at` bytes in (netlink speaks the host's byte order).
fn u32_at(b: &[u8], at: u32) -> Option<u32> {
    asyncdump_walker::bytes::uint(b, at, 4).map(|v| v as u32)
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(data);
        a.resize(align(a.len()), 0);
        a
    }

    fn msg(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn an_answer_reads_as_each_socket_with_its_name_peer_and_queues() {
        let mut body = vec![1, 1, 1, 0];
        body.extend_from_slice(&77u32.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend(attr(UNIX_DIAG_NAME, b"/run/app.sock"));
        body.extend(attr(UNIX_DIAG_PEER, &78u32.to_ne_bytes()));
        let queues: Vec<u8> = [5u32, 9].iter().flat_map(|q| q.to_ne_bytes()).collect();
        body.extend(attr(UNIX_DIAG_RQLEN, &queues));
        let mut answer = msg(SOCK_DIAG_BY_FAMILY, &body);
        answer.extend(msg(NLMSG_DONE, &[0; 4]));
        let mut found = HashMap::new();
        assert_eq!(parse(&answer, &mut found), Some(true));
        let s = &found[&77];
        assert_eq!(s.path, "/run/app.sock");
        assert_eq!((s.peer, s.rqueue, s.wqueue), (Some(78), 5, 9));
    }

    #[test]
    fn a_damaged_answer_is_no_answer() {
        let mut found = HashMap::new();
        let mut answer = msg(SOCK_DIAG_BY_FAMILY, &[0; 20]);
        answer[0] = 200; // longer than what was read
        assert_eq!(parse(&answer, &mut found), None);
        assert_eq!(parse(&msg(NLMSG_ERROR, &[0; 20]), &mut found), None);
        // An attribute longer than its message.
        let mut body = vec![1, 1, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        body.extend_from_slice(&[200, 0, 0, 0]);
        assert_eq!(parse(&msg(SOCK_DIAG_BY_FAMILY, &body), &mut found), None);
    }

    #[test]
    fn names_read_as_ss_prints_them() {
        assert_eq!(path(b"\0hidden"), "@hidden");
        assert_eq!(path(b"/tmp/a.sock\0\0"), "/tmp/a.sock");
        assert_eq!(path(b""), "");
    }

    #[test]
    fn a_connected_pair_names_each_other() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("a pair");
        let inode = |s: &std::os::unix::net::UnixStream| {
            use std::os::unix::fs::MetadataExt;
            let fd = s.as_raw_fd();
            std::fs::metadata(format!("/proc/self/fd/{fd}")).map(|m| m.ino())
        };
        let (ia, ib) = (inode(&a).expect("inode"), inode(&b).expect("inode"));
        std::io::Write::write_all(&mut &a, b"hello").expect("write");
        let all = all().expect("the kernel answers");
        assert_eq!(all[&ia].peer, Some(ib));
        assert_eq!(all[&ib].peer, Some(ia));
        assert_eq!(all[&ib].rqueue, 5, "five bytes wait to be read at b");
    }
}
