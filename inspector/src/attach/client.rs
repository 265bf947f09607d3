//! A connection to one agent: connect, handshake, then request/reply.

use std::io::{self, ErrorKind as IoKind};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use asyncdump_protocol::{
    ClientHello, FrameError, Handshake, HandshakeError, MAX_REPLY_BYTES, MAX_REQUEST_BYTES,
    ReadReply, ReadRequest, Reply, Request, Snapshot, SnapshotRequest, Stats, SubscribeRequest,
    Update, WalkInfo, WalkPlan, decode, encode, paths, read_frame_by, write_frame,
};

use crate::error::TargetError;

/// How long to wait for an agent by default (`--timeout`). A snapshot of a very large process takes
/// well under this.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait for an agent: for each answer to arrive whole, and, for a one-off command such
/// as `dump`, for all of them together (an agent that answers slowly, each answer just in time,
/// holds the command no longer than that).
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    pub each: Duration,
    /// When the whole exchange must be over, and the duration that was.
    pub until: Option<(Instant, Duration)>,
}

impl Patience {
    /// `each` for every answer, however many.
    pub fn each(each: Duration) -> Patience {
        Patience { each, until: None }
    }

    /// `whole` for every answer together, from now.
    pub fn whole(whole: Duration) -> Patience {
        Patience {
            each: whole,
            until: Some((Instant::now() + whole, whole)),
        }
    }

    /// How long the next answer may take, given `extra` on top of each, and what bounds it.
    fn next(&self, extra: Duration) -> (Duration, Bound) {
        let each = self.each + extra;
        match self.until {
            Some((at, whole)) if at.saturating_duration_since(Instant::now()) < each => (
                at.saturating_duration_since(Instant::now()),
                Bound::Whole(whole),
            ),
            _ => (each, Bound::Each(each)),
        }
    }
}

/// What an answer's time ran out against.
#[derive(Clone, Copy)]
enum Bound {
    Each(Duration),
    Whole(Duration),
}

pub struct Client {
    stream: UnixStream,
    path: PathBuf,
    /// How long replies may take.
    patience: Patience,
    /// Added to each answer's time for a subscription's updates, which come an interval apart.
    extra: Duration,
    pub handshake: Handshake,
    /// See [`Client::peer`]; read once, at connection.
    peer: (u32, u32),
    /// Size of the last reply read, in bytes.
    pub last_reply_bytes: usize,
}

impl Client {
    /// Another connection to the same agent, with the same patience: a subscribed connection
    /// carries updates, and takes no other request.
    pub fn reconnect(&self) -> Result<Client, TargetError> {
        Client::connect(&self.path, self.patience)
    }

    /// Connects and completes the handshake, each reply (this one too) to arrive whole within
    /// `patience`. A refused connection removes the stale socket if it is ours.
    pub fn connect(path: &Path, patience: Patience) -> Result<Client, TargetError> {
        let stream = match UnixStream::connect(path) {
            Ok(s) => s,
            Err(e) => return Err(connect_error(path, e)),
        };
        // A process that forked and then died leaves its listening socket to its child, where the
        // kernel still queues connections nobody will ever accept: stale, though it connects.
        if let Ok((pid, _)) = peer_of(&stream, path)
            && pid != 0
            && crate::attach::procfs::live_thread(pid).is_none()
        {
            return Err(TargetError::StaleSocket {
                path: path.to_owned(),
                removed: crate::attach::target::remove_stale(path),
            });
        }
        stream
            .set_write_timeout(Some(patience.each))
            .map_err(|e| TargetError::NoAnswer {
                path: path.to_owned(),
                detail: e.to_string(),
            })?;
        let first = read(
            &stream,
            path,
            MAX_REQUEST_BYTES,
            patience.next(Duration::ZERO),
        )?;
        let handshake = match Handshake::from_bytes(&first) {
            Ok(h) => h,
            Err(HandshakeError::VersionMismatch { peer, ours }) => {
                return Err(TargetError::VersionMismatch {
                    agent: peer,
                    ours,
                    ours_version: env!("CARGO_PKG_VERSION"),
                });
            }
            Err(HandshakeError::BadMagic) => {
                // An agent that refuses us (permissions, busy) answers with an error reply instead.
                return Err(match decode::<Reply>(&first) {
                    Ok(Reply::Error(e)) if e.kind == asyncdump_protocol::ErrorKind::Busy => {
                        TargetError::Busy { message: e.message }
                    }
                    Ok(Reply::Error(e)) => TargetError::Refused { message: e.message },
                    _ => TargetError::NotAnAgent {
                        path: path.to_owned(),
                        detail: "bad handshake".into(),
                    },
                });
            }
            Err(HandshakeError::Codec(e)) => {
                return Err(TargetError::NotAnAgent {
                    path: path.to_owned(),
                    detail: e.to_string(),
                });
            }
        };
        // Before saying anything: the kernel's word on who listens must match the agent's.
        let (pid, uid) = peer_of(&stream, path)?;
        let mut client = Client {
            stream,
            path: path.to_owned(),
            patience,
            extra: Duration::ZERO,
            handshake,
            peer: (pid, uid),
            last_reply_bytes: 0,
        };
        let me = crate::attach::target::euid();
        if pid != client.handshake.pid || !(uid == me || uid == 0 || me == 0) {
            return Err(TargetError::Impostor {
                path: path.to_owned(),
                claims: client.handshake.pid,
                pid,
                uid,
            });
        }
        let hello = ClientHello::new(format!("asyncdump {}", env!("CARGO_PKG_VERSION")));
        client.write(&hello.to_bytes())?;
        Ok(client)
    }

    /// The pid and uid of the process listening on the other end, as the kernel saw them when it
    /// bound (SO_PEERCRED): not what the peer says of itself. [`Client::connect`] checks them
    /// against the handshake, and that the uid is ours or root's (any, when we are root).
    pub fn peer(&self) -> (u32, u32) {
        self.peer
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), TargetError> {
        write_frame(&mut self.stream, bytes).map_err(|e| TargetError::NoAnswer {
            path: self.path.clone(),
            detail: e.to_string(),
        })
    }

    fn read(&mut self, max: usize) -> Result<Vec<u8>, TargetError> {
        read(
            &self.stream,
            &self.path,
            max,
            self.patience.next(self.extra),
        )
    }

    fn send(&mut self, request: &Request) -> Result<(), TargetError> {
        let bytes = encode(request).expect("requests encode");
        if bytes.len() > MAX_REQUEST_BYTES {
            return Err(TargetError::RequestTooLarge {
                bytes: bytes.len(),
                max: MAX_REQUEST_BYTES,
            });
        }
        self.write(&bytes)
    }

    fn reply(&mut self) -> Result<Reply, TargetError> {
        let reply = self.read(MAX_REPLY_BYTES)?;
        self.last_reply_bytes = reply.len();
        match decode::<Reply>(&reply) {
            Ok(Reply::Error(e)) => Err(TargetError::AgentError { message: e.message }),
            Ok(reply) => Ok(reply),
            Err(e) => Err(TargetError::NotAnAgent {
                path: self.path.clone(),
                detail: e.to_string(),
            }),
        }
    }

    pub fn request(&mut self, request: &Request) -> Result<Reply, TargetError> {
        self.send(request)?;
        self.reply()
    }

    /// Starts a subscription (ending any earlier one): updates follow, read with [`Client::update`].
    pub fn subscribe(&mut self, req: SubscribeRequest) -> Result<(), TargetError> {
        // An update may take a whole interval to come, on top of its capture.
        self.extra = Duration::from_millis(req.interval_ms.into());
        self.send(&Request::Subscribe(req))
    }

    /// The subscription's next update.
    pub fn update(&mut self) -> Result<Update, TargetError> {
        match self.reply()? {
            Reply::Update(u) => Ok(u),
            _ => Err(self.unexpected()),
        }
    }

    /// Takes a snapshot; also returns the round-trip time.
    pub fn snapshot(
        &mut self,
        include_completed: bool,
        walk: Option<WalkPlan>,
    ) -> Result<(Snapshot, Duration), TargetError> {
        let start = Instant::now();
        let req = SnapshotRequest {
            include_completed,
            walk,
        };
        match self.request(&Request::Snapshot(req))? {
            Reply::Snapshot(s) => Ok((s, start.elapsed())),
            _ => Err(self.unexpected()),
        }
    }

    /// The live tasks' root anchors and the running binary's build-id: what a walk plan needs.
    pub fn walk_info(&mut self) -> Result<WalkInfo, TargetError> {
        match self.request(&Request::WalkInfo)? {
            Reply::WalkInfo(w) => Ok(w),
            _ => Err(self.unexpected()),
        }
    }

    /// Bytes of the process's memory, read by its agent: per range, its bytes or `None`; per chase,
    /// the list as the agent followed it.
    pub fn read_memory(&mut self, req: ReadRequest) -> Result<ReadReply, TargetError> {
        let (ranges, chases) = (req.ranges.len(), req.chases.len());
        match self.request(&Request::Read(req))? {
            Reply::Read(r) if r.data.len() == ranges && r.chased.len() == chases => Ok(r),
            _ => Err(self.unexpected()),
        }
    }

    pub fn stats(&mut self) -> Result<Stats, TargetError> {
        match self.request(&Request::Stats)? {
            Reply::Stats(s) => Ok(s),
            _ => Err(self.unexpected()),
        }
    }

    fn unexpected(&self) -> TargetError {
        TargetError::NotAnAgent {
            path: self.path.clone(),
            detail: "unexpected reply".into(),
        }
    }
}

/// SO_PEERCRED of `stream`: the listener's pid and uid (see [`Client::peer`]).
fn peer_of(stream: &UnixStream, path: &Path) -> Result<(u32, u32), TargetError> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    match getsockopt(stream, PeerCredentials) {
        Ok(c) => Ok((c.pid() as u32, c.uid())),
        Err(e) => Err(TargetError::NoAnswer {
            path: path.to_owned(),
            detail: format!("cannot read the peer's credentials: {e}"),
        }),
    }
}

/// Reads one frame, whole within `within`, turning failures into what they mean for the user.
fn read(
    stream: &UnixStream,
    path: &Path,
    max: usize,
    (within, bound): (Duration, Bound),
) -> Result<Vec<u8>, TargetError> {
    read_frame_by(stream, max, Instant::now() + within).map_err(|e| {
        let detail = match e {
            FrameError::Closed => "the agent closed the connection".to_owned(),
            FrameError::Io(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => {
                let stopped = paths::pid_of_socket(path).and_then(crate::attach::target::stopped);
                match stopped {
                    Some(state) => {
                        format!("the process is stopped (state {state}); resume it with kill -CONT")
                    }
                    None => match bound {
                        Bound::Each(d) => format!(
                            "no whole reply within {} (--timeout)",
                            crate::view::Dur(d.as_nanos() as u64)
                        ),
                        Bound::Whole(d) => format!(
                            "its answers took longer than {} in all (--timeout)",
                            crate::view::Dur(d.as_nanos() as u64)
                        ),
                    },
                }
            }
            other => other.to_string(),
        };
        TargetError::NoAnswer {
            path: path.to_owned(),
            detail,
        }
    })
}

fn connect_error(path: &Path, e: io::Error) -> TargetError {
    match e.kind() {
        IoKind::NotFound => TargetError::NoSuchSocket {
            path: path.to_owned(),
        },
        IoKind::ConnectionRefused => TargetError::StaleSocket {
            path: path.to_owned(),
            removed: crate::attach::target::remove_stale(path),
        },
        IoKind::PermissionDenied => TargetError::PermissionDenied {
            path: path.to_owned(),
        },
        _ => TargetError::NoAnswer {
            path: path.to_owned(),
            detail: e.to_string(),
        },
    }
}
