//! The sockets a task waits on through tokio's I/O driver, found from the driver's side: epoll
//! watches each descriptor under the address of its `ScheduledIo` (`/proc/PID/fdinfo` says which
//! word for which descriptor), and each `ScheduledIo` keeps the wakers of the tasks waiting to
//! read and to write it. A waker of tokio's task vtable names its task by the task's header. So
//! a connection's task is tied to its socket, and its peer named, though the connection itself
//! (hyper's, inside a hand-written future) is never decoded; and each HTTP/2 stream's task to the
//! socket of its connection's.

use asyncdump_walker::Memory;
use asyncdump_walker::memory::Read;

use crate::attach::procfs::{End, Socket, SocketTables};
use crate::model::values::TaskSocket;
use crate::model::{Dump, FastMap};
use crate::plan::{IoWakers, Plan};

/// Gives each task of live process `dump.process.pid` the sockets it waits to read or write
/// (see the module docs), read through `mem`: twice, and only what both reads agree on kept (the
/// process runs on while it is read).
pub(crate) fn add(dump: &mut Dump, mem: &dyn Memory, plan: &Plan, tables: &SocketTables) {
    let (Some(io), Some(vtable)) = (plan.io_wakers, plan.tokio_vtable) else {
        return;
    };
    let pid = dump.process.pid;
    let registered = crate::attach::procfs::epoll_registrations(pid);
    if registered.is_empty() {
        return;
    }
    let headers: FastMap<u64, usize> = (dump.tasks.iter().enumerate())
        .filter_map(|(i, t)| Some((t.tokio_task.as_ref()?.header, i)))
        .collect();
    let first = wakers(mem, io, &registered);
    let again = wakers(mem, io, &registered);
    let mut found: Vec<(usize, i64, bool)> = Vec::new();
    for ((&(fd, _), a), b) in registered.iter().zip(&first).zip(&again) {
        for (k, write) in [(0, false), (1, true)] {
            let (data, vt) = a[k];
            if vt != vtable || a[k] != b[k] {
                continue;
            }
            if let Some(&task) = headers.get(&data) {
                found.push((task, fd, write));
            }
        }
    }
    if found.is_empty() {
        return;
    }
    // Each registered socket once; the listeners' own addresses among them: a socket whose local
    // address is one was accepted from a client.
    let sockets: FastMap<i64, Socket> = (registered.iter())
        .filter_map(|&(fd, _)| Some((fd, tables.socket(fd)?)))
        .collect();
    let listening: Vec<&End> = (sockets.values())
        .filter(|s| is_listener(&s.peer))
        .map(|s| &s.local)
        .collect();
    for (task, fd, write) in found {
        let Some(s) = sockets.get(&fd) else { continue };
        let own = &mut dump.tasks[task].sockets;
        let accepted = s.proto == "tcp" && listening.iter().any(|l| same_port(l, &s.local));
        match own.iter_mut().find(|t| t.fd == fd) {
            Some(t) => t.write |= write,
            None => own.push(TaskSocket {
                fd,
                socket: super::describe_fd(s),
                peer: accepted.then(|| end_text(&s.peer)),
                read: !write,
                write,
            }),
        }
    }
    stream_sockets(dump);
}

/// Gives each task serving an HTTP/2 stream its connection task's socket (the one it reads, which
/// names the client), where that task has one.
fn stream_sockets(dump: &mut Dump) {
    let sockets: Vec<(usize, TaskSocket)> = (dump.tasks.iter().enumerate())
        .filter_map(|(i, t)| {
            let conn = t.stream.as_ref()?.connection_task?;
            let c = dump.task(conn)?;
            let socket =
                (c.sockets.iter().find(|s| s.peer.is_some())).or_else(|| c.sockets.first())?;
            Some((i, socket.clone()))
        })
        .collect();
    for (i, socket) in sockets {
        if let Some(s) = dump.tasks[i].stream.as_mut() {
            s.socket = Some(socket);
        }
    }
}

/// Each registration's reader and writer waker, as (data, vtable); zeros where unread.
fn wakers(mem: &dyn Memory, io: IoWakers, registered: &[(i64, u64)]) -> Vec<[(u64, u64); 2]> {
    let mut bytes = vec![[0u8; 32]; registered.len()];
    let mut reads: Vec<Read<'_>> = Vec::with_capacity(2 * registered.len());
    for (buf, &(_, at)) in bytes.iter_mut().zip(registered) {
        let (reader, writer) = buf.split_at_mut(16);
        for (dst, off) in [(reader, io.reader), (writer, io.writer)] {
            // A waker's two words in one read: its data and vtable come from one moment.
            let start = u64::from(off) + u64::from(io.data.min(io.vtable));
            reads.push(Read::new(at.wrapping_add(start), dst));
        }
    }
    if mem.read_many(&mut reads).is_err() {
        return vec![[(0, 0); 2]; registered.len()];
    }
    let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
    drop(reads);
    let (data_at, vtable_at) = match io.data < io.vtable {
        true => (0, 8),
        false => (8, 0),
    };
    let word =
        |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default());
    (bytes.iter().enumerate())
        .map(|(i, b)| {
            let one = |k: usize| match failed[2 * i + k] {
                true => (0, 0),
                false => (word(&b[16 * k..], data_at), word(&b[16 * k..], vtable_at)),
            };
            [one(0), one(1)]
        })
        .collect()
}

/// Whether a socket whose peer is `peer` is a listener's (an internet one with no peer yet).
fn is_listener(peer: &End) -> bool {
    matches!(peer, End::Inet(a) if a.port() == 0)
}

/// Whether `local` is on a listener's port at `listener` (bound to any address, or to its own).
fn same_port(listener: &End, local: &End) -> bool {
    match (listener, local) {
        (End::Inet(l), End::Inet(a)) => {
            l.port() == a.port() && (l.ip().is_unspecified() || l.ip() == a.ip())
        }
        _ => false,
    }
}

fn end_text(e: &End) -> String {
    match e {
        End::Inet(a) => a.to_string(),
        End::Unix(Some(p)) => p.clone(),
        End::Unix(None) => "unknown".into(),
    }
}
