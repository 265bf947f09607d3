//! One connection, on its own thread: the peer's credentials, the handshake, then requests until the
//! client leaves. Any malformed, oversized or truncated frame is answered with an error reply and the
//! connection is closed; the host program never notices.

use std::io;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use asyncdump_protocol::{
    ClientHello, ErrorKind, ErrorReply, Handshake, HandshakeError, MAX_REQUEST_BYTES, Reply,
    Request, decode, read_frame_by, write_frame, write_message,
};

use crate::capture::with_capturer;
use crate::slots::Lease;
use crate::wire::{frame_error, refuse, write_reply};
use crate::{access, containment, subscription, sys};

/// A client must send its whole hello within this long of connecting.
const HELLO_TIMEOUT: Duration = Duration::from_millis(500);
/// A client that sends nothing for this long, or takes longer to send one whole request, is
/// disconnected.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection was closed (with an error reply, where one was owed).
struct Closed;

/// Serves one connection, whose client is `peer` (its pid and uid, by SO_PEERCRED).
pub(super) fn connection(
    mut stream: UnixStream,
    peer: io::Result<(u32, u32)>,
    handshake: &Handshake,
    lease: &Lease,
) -> io::Result<()> {
    let mut outside = Outside::from_now(lease);
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let Ok(peer) = check_peer(&mut stream, peer) else {
        return Ok(());
    };
    let walks = access::may_walk(peer);
    write_frame(&mut stream, &handshake.to_bytes())?;
    if exchange_hello(&mut stream, handshake).is_err() {
        return Ok(());
    }
    loop {
        let Ok(request) = next_request(&mut stream, lease, &walks) else {
            return Ok(());
        };
        if let Request::Subscribe(req) = &request {
            let subscribed = match lease.subscribe() {
                Ok(subscribed) => subscribed,
                Err(busy) => {
                    refuse(&mut stream, ErrorKind::Busy, busy);
                    return Ok(());
                }
            };
            match subscription::serve(&mut stream, req, lease) {
                subscription::End::Spoke => {
                    drop(subscribed);
                    continue;
                }
                subscription::End::Closed => return Ok(()),
            }
        }
        // Held until the reply is written: what a read costs the host is bounded per agent.
        let _room = match &request {
            Request::Read(r) => match ReadRoom::take(r) {
                Ok(room) => Some(room),
                // Answered, and the connection kept: the client reads from outside, or asks again.
                Err(busy) => {
                    let reply = Reply::Error(ErrorReply {
                        kind: ErrorKind::Busy,
                        message: busy,
                    });
                    write_reply(&mut stream, reply)?;
                    continue;
                }
            },
            _ => None,
        };
        outside.charge();
        let Ok(answer) = work_out(&mut stream, lease, &request, &walks) else {
            return Ok(());
        };
        // The turn's work is charged by the gate already; encoding it as it is written is not.
        outside.skip();
        answer.write(&mut stream)?;
        outside.charge();
    }
}

/// Memory all the `Read` requests being answered may take at once, whatever the number of clients:
/// one request's worth of the largest kind, and room for small ones beside it.
const READ_ROOM: u64 = 48 << 20;

/// What answering a `Read` request is reckoned to take of the host's memory: its bytes, the words of
/// its chases, and a few hundred bytes a range (the range itself, its part of the reply and of the
/// encoding).
fn read_cost(r: &asyncdump_protocol::ReadRequest) -> u64 {
    let bytes: u64 = r.ranges.iter().map(|&(_, len)| u64::from(len)).sum();
    let nodes: u64 = r.chases.iter().map(|&(_, _, max)| u64::from(max)).sum();
    bytes + 8 * nodes + 320 * r.ranges.len() as u64
}

/// A `Read` request's share of [`READ_ROOM`], given back when dropped.
struct ReadRoom(u64);

static READ_TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl ReadRoom {
    fn take(r: &asyncdump_protocol::ReadRequest) -> Result<ReadRoom, String> {
        use std::sync::atomic::Ordering;
        let cost = read_cost(r).min(READ_ROOM);
        let taken = READ_TAKEN.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
            (t + cost <= READ_ROOM).then_some(t + cost)
        });
        match taken {
            Ok(_) => Ok(ReadRoom(cost)),
            Err(t) => Err(format!(
                "busy: other clients' reads take {} MB of the {} MB this agent gives reads; try again",
                t >> 20,
                READ_ROOM >> 20
            )),
        }
    }
}

impl Drop for ReadRoom {
    fn drop(&mut self) {
        READ_TAKEN.fetch_sub(self.0, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The CPU time a connection's thread spends outside its turns at the gate (the handshake, reading
/// requests, writing answers), charged to the gate as it goes (see `Lease::spent_outside`), and
/// whatever is left when the connection ends, however it ends.
struct Outside<'a> {
    lease: &'a Lease,
    /// The thread's CPU time when it last charged or skipped.
    since: std::time::Duration,
}

impl<'a> Outside<'a> {
    fn from_now(lease: &'a Lease) -> Outside<'a> {
        Outside {
            lease,
            since: sys::thread_cpu(),
        }
    }

    /// Charges what the thread used since the last call.
    fn charge(&mut self) {
        let now = sys::thread_cpu();
        self.lease.spent_outside(now.saturating_sub(self.since));
        self.since = now;
    }

    /// Leaves what the thread used since the last call uncharged: it was a turn, charged already.
    fn skip(&mut self) {
        self.since = sys::thread_cpu();
    }
}

impl Drop for Outside<'_> {
    fn drop(&mut self) {
        self.charge();
    }
}

/// The client's pid, when its uid is ours or root's; otherwise refused.
fn check_peer(stream: &mut UnixStream, peer: io::Result<(u32, u32)>) -> Result<u32, Closed> {
    let me = sys::euid();
    let message = match peer {
        Ok((pid, uid)) if uid == me || uid == 0 => return Ok(pid),
        Ok((_, uid)) => format!(
            "permission denied: this process runs as uid {me}, you are uid {uid}; run asyncdump as uid {me} or root"
        ),
        Err(e) => format!("cannot check peer credentials: {e}"),
    };
    refuse(stream, ErrorKind::PermissionDenied, message);
    Err(Closed)
}

/// Reads the client's hello, which must come at once and speak our protocol version.
fn exchange_hello(stream: &mut UnixStream, handshake: &Handshake) -> Result<(), Closed> {
    // A client sends its hello as soon as it has read ours: one that does not is holding a slot.
    let hello = match read_frame_by(stream, MAX_REQUEST_BYTES, Instant::now() + HELLO_TIMEOUT) {
        Ok(bytes) => bytes,
        Err(e) => {
            frame_error(stream, e);
            return Err(Closed);
        }
    };
    let (kind, message) = match ClientHello::from_bytes(&hello) {
        Ok(_) => return Ok(()),
        Err(HandshakeError::VersionMismatch { peer, ours }) => (
            ErrorKind::VersionMismatch,
            format!(
                "protocol version mismatch: this agent ({}) speaks protocol {ours}, the client speaks {peer}; use an asyncdump that speaks protocol {ours}",
                handshake.agent_version
            ),
        ),
        Err(e) => (ErrorKind::Malformed, format!("bad client hello: {e}")),
    };
    refuse(stream, kind, message);
    Err(Closed)
}

/// The next request, whole, decoded and allowed; anything else closes the connection.
fn next_request(
    stream: &mut UnixStream,
    lease: &Lease,
    walks: &Result<(), String>,
) -> Result<Request, Closed> {
    // Each request must arrive whole within `IO_TIMEOUT` of starting to wait for it: a client
    // sending a byte at a time cannot keep a connection slot for longer.
    let bytes = match read_frame_by(stream, MAX_REQUEST_BYTES, Instant::now() + IO_TIMEOUT) {
        Ok(bytes) => bytes,
        Err(e) => {
            frame_error(stream, e);
            return Err(Closed);
        }
    };
    let (kind, message) = if let Some(why) = lease.evicted() {
        (ErrorKind::Busy, why)
    } else {
        match decode::<Request>(&bytes) {
            Err(e) => (ErrorKind::Malformed, format!("malformed request: {e}")),
            Ok(request) => match (walks, request.walk_plan()) {
                (Err(why), plan) if request.reads_memory() => (
                    ErrorKind::PermissionDenied,
                    match plan {
                        Some(_) => format!("walk plan refused: {why}"),
                        None => format!("memory read refused: {why}"),
                    },
                ),
                (Ok(()), None)
                    if let Request::Read(r) = &request
                        && let Err(e) = r.check() =>
                {
                    (ErrorKind::TooLarge, format!("read refused: {e}"))
                }
                // Refused before any work: a plan that does not hold together can only come from
                // damage or malice (see `WalkPlan::validate`).
                (Ok(()), Some(plan)) if let Err(e) = plan.validate() => (
                    ErrorKind::Malformed,
                    format!("walk plan refused: it does not hold together: {e}"),
                ),
                _ => return Ok(request),
            },
        }
    };
    refuse(stream, kind, message);
    Err(Closed)
}

/// The answer to `request`, worked out at the agent's gate (see `slots`); it is encoded as it is
/// written, after the turn. A panic while answering is contained and answered with an internal
/// error.
fn work_out(
    stream: &mut UnixStream,
    lease: &Lease,
    request: &Request,
    walks: &Result<(), String>,
) -> Result<Answer, Closed> {
    let answered = lease.work(|| containment::contain("a request", || answer(request, walks)));
    let answered = match answered {
        Ok(answered) => answered,
        Err(evicted) => {
            refuse(stream, ErrorKind::Busy, evicted);
            return Err(Closed);
        }
    };
    Ok(answered.unwrap_or_else(|| {
        Answer::Reply(Reply::Error(ErrorReply {
            kind: ErrorKind::Internal,
            message: "the agent failed while answering (a bug, logged on the process's stderr); the process is unaffected; try again".into(),
        }))
    }))
}

/// What a request is answered with: a reply, or a read's bytes, encoded from where they lie.
enum Answer {
    Reply(Reply),
    Read(OwnRead),
}

impl Answer {
    fn write(self, stream: &mut UnixStream) -> io::Result<()> {
        match self {
            Answer::Reply(reply) => write_reply(stream, reply),
            Answer::Read(read) => write_message(stream, &read.reply()).map(drop),
        }
    }
}

fn answer(request: &Request, walks: &Result<(), String>) -> Answer {
    let reply = match request {
        Request::Stats => Reply::Stats(crate::task::registry().stats()),
        Request::WalkInfo => Reply::WalkInfo(asyncdump_protocol::WalkInfo {
            root_anchors: crate::task::registry().root_anchors(),
            build_id: sys::own_build_id(),
            runtimes: crate::runtime::handles(),
            walks_refused: walks.clone().err(),
        }),
        // Served by the connection loop itself: it answers with many replies.
        Request::Subscribe(_) => Reply::Error(ErrorReply {
            kind: ErrorKind::Internal,
            message: "subscriptions are served by the connection loop".into(),
        }),
        Request::Read(req) => return Answer::Read(read_own(req)),
        Request::Snapshot(req) => Reply::Snapshot(with_capturer(|c| {
            let snapshot = c.capture(req);
            containment::inject(containment::Site::Snapshot);
            snapshot
        })),
    };
    Answer::Reply(reply)
}

/// The answer to a `Read` request, its bytes in a buffer of their own (see [`sys::AnswerBuffer`]).
struct OwnRead {
    bytes: sys::AnswerBuffer,
    lens: Vec<u32>,
    read: Vec<bool>,
    chased: Vec<asyncdump_walker::Chased>,
}

impl OwnRead {
    fn reply(&self) -> asyncdump_protocol::ReadReplyRef<'_> {
        asyncdump_protocol::ReadReplyRef {
            bytes: &self.bytes,
            lens: &self.lens,
            read: &self.read,
            chased: &self.chased,
        }
    }
}

/// The ranges `req` asks for, read from this process with `process_vm_readv` (a bad address fails
/// the range, it never faults).
fn read_own(req: &asyncdump_protocol::ReadRequest) -> OwnRead {
    use asyncdump_walker::{Memory, ProcessMemory};
    let own = ProcessMemory::own();
    // Every range into one buffer: a dump's values ask for tens of thousands of small ones.
    let mut bytes = sys::AnswerBuffer::zeroed(req.ranges.iter().map(|r| r.1 as usize).sum());
    let read = own.read_packed_into(&req.ranges, &mut bytes);
    // The lists are followed after the ranges are read: a request's work is bounded by its size.
    OwnRead {
        bytes,
        lens: req.ranges.iter().map(|r| r.1).collect(),
        read,
        chased: (req.chases.iter())
            .map(|&(at, next, max)| {
                own.chase(at, next, max.min(asyncdump_protocol::MAX_CHASE) as usize)
            })
            .collect(),
    }
}
