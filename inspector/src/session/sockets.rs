//! The sockets a task waits on through tokio's I/O driver, found from the driver's side: epoll
//! watches each descriptor under the address of its `ScheduledIo` (`/proc/PID/fdinfo` says which
//! word for which descriptor), and each `ScheduledIo` keeps the wakers of the tasks waiting to
//! read and to write it: in two slots (for `AsyncRead` and `AsyncWrite`), and in a list of the
//! readiness futures that wait on it (an `accept`, a UDP receive, a `readable()`). A waker of tokio's task vtable names its task by the task's header. So
//! a connection's task is tied to its socket, and its peer named, though the connection itself
//! (hyper's, inside a hand-written future) is never decoded; and each HTTP/2 stream's task to the
//! socket of its connection's.

use asyncdump_walker::Memory;
use asyncdump_walker::memory::Read;

use crate::attach::procfs::{End, Socket, SocketTables};
use crate::model::values::TaskSocket;
use crate::model::{Dump, FastMap};
use crate::plan::{IoWaiters, IoWakers, Plan};

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
    if let Some(w) = io.waiters {
        found.extend(waiting_tasks(mem, w, &registered, vtable, &headers));
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

/// The most waiters of one descriptor followed: a list torn by the running process into a loop
/// ends here.
const MAX_WAITERS: usize = 64;

/// (task, descriptor, writes) for each readiness future waiting on a registered descriptor (its
/// waiter list's nodes) whose waker is tokio's and names a task of `headers`: the lists read
/// twice, and only what both reads found kept.
fn waiting_tasks(
    mem: &dyn Memory,
    w: IoWaiters,
    registered: &[(i64, u64)],
    vtable: u64,
    headers: &FastMap<u64, usize>,
) -> Vec<(usize, i64, bool)> {
    let (first, again) = (waiters(mem, w, registered), waiters(mem, w, registered));
    let mut found = Vec::new();
    for ((&(fd, _), a), b) in registered.iter().zip(&first).zip(&again) {
        for &(data, vt, interest) in a.iter().filter(|x| b.contains(x)) {
            let Some(&task) = headers.get(&data).filter(|_| vt == vtable) else {
                continue;
            };
            // tokio's `Interest`: bit 0 readable, bit 1 writable.
            if interest & 1 != 0 {
                found.push((task, fd, false));
            }
            if interest & 2 != 0 {
                found.push((task, fd, true));
            }
        }
    }
    found
}

/// Each registration's waiters as (waker data, waker vtable, interest), its list followed from
/// the head: one round of reads a hop, for every list at once, at most [`MAX_WAITERS`] hops.
fn waiters(mem: &dyn Memory, w: IoWaiters, registered: &[(i64, u64)]) -> Vec<Vec<(u64, u64, u64)>> {
    let word = |b: &[u8], at: u32| {
        let at = at as usize;
        (b.get(at..at + 8)).map_or(0, |w| u64::from_ne_bytes(w.try_into().unwrap_or_default()))
    };
    let mut out = vec![Vec::new(); registered.len()];
    let mut heads = vec![[0u8; 8]; registered.len()];
    let mut reads: Vec<Read<'_>> = (heads.iter_mut().zip(registered))
        .map(|(dst, &(_, io))| Read::new(io.wrapping_add(u64::from(w.head)), dst))
        .collect();
    if mem.read_many(&mut reads).is_err() {
        return out;
    }
    let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
    drop(reads);
    let mut at: Vec<u64> = (heads.iter().zip(failed))
        .map(|(h, failed)| if failed { 0 } else { word(h, 0) })
        .collect();
    let span = w.span() as usize;
    for _ in 0..MAX_WAITERS {
        let live: Vec<usize> = (0..at.len()).filter(|&i| at[i] >= 0x1000).collect();
        if live.is_empty() {
            break;
        }
        let mut nodes = vec![vec![0u8; span]; live.len()];
        let mut reads: Vec<Read<'_>> = (nodes.iter_mut().zip(&live))
            .map(|(dst, &i)| Read::new(at[i], dst))
            .collect();
        if mem.read_many(&mut reads).is_err() {
            break;
        }
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        drop(reads);
        for ((node, &i), failed) in nodes.iter().zip(&live).zip(failed) {
            if failed {
                at[i] = 0;
                continue;
            }
            out[i].push((
                word(node, w.data),
                word(node, w.vtable),
                word(node, w.interest),
            ));
            at[i] = word(node, w.next);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use asyncdump_walker::memory::ImageMemory;

    use super::*;

    /// Waiter layout of the specs: next at 8, waker data at 16, vtable at 24, interest at 32.
    const LAYOUT: IoWaiters = IoWaiters {
        head: 0,
        data: 16,
        vtable: 24,
        interest: 32,
        next: 8,
    };

    fn node(next: u64, data: u64, interest: u64) -> Vec<u8> {
        [0, next, data, 0xbeef, interest]
            .iter()
            .flat_map(|w: &u64| w.to_ne_bytes())
            .collect()
    }

    /// Each descriptor's list is followed from its head to its end, every list a hop at a time;
    /// one torn into a loop stops at the bound; an unreadable node ends its list there.
    #[test]
    fn each_registrations_waiters_are_followed_to_the_end_of_its_list() {
        let mut mem = ImageMemory::new();
        // Descriptor 1: two waiters. Descriptor 2: a loop. Descriptor 3: a head nowhere.
        mem.insert(0x1000, 0x2000u64.to_ne_bytes().to_vec());
        mem.insert(0x2000, node(0x3000, 0xaa, 1));
        mem.insert(0x3000, node(0, 0xbb, 3));
        mem.insert(0x4000, 0x5000u64.to_ne_bytes().to_vec());
        mem.insert(0x5000, node(0x5000, 0xcc, 2));
        mem.insert(0x6000, 0x9000u64.to_ne_bytes().to_vec());
        let registered = [(1, 0x1000), (2, 0x4000), (3, 0x6000)];
        let lists = waiters(&mem, LAYOUT, &registered);
        assert_eq!(lists[0], [(0xaa, 0xbeef, 1), (0xbb, 0xbeef, 3)]);
        assert_eq!(lists[1].len(), MAX_WAITERS);
        assert!(lists[2].is_empty());
        // Tasks by their wakers: a read and a read-and-write waiter; the loop's waker names none.
        let headers: FastMap<u64, usize> = [(0xaa, 7), (0xbb, 8)].into_iter().collect();
        let mut found = waiting_tasks(&mem, LAYOUT, &registered, 0xbeef, &headers);
        found.sort_unstable();
        assert_eq!(found, [(7, 1, false), (8, 1, false), (8, 1, true)]);
    }
}
