//! One attached target: a connection to its agent, kept with the DWARF plan for as many snapshots as the
//! caller takes (`dump` takes one).
//!
//! The binary's debug info is loaded once, at [`Session::attach`], and checked against the build-id the
//! agent reports. The walk plan covers the root future types of the tasks alive so far; a snapshot that
//! finds a task of a root type the plan has not seen plans again, from the DWARF already loaded,
//! instead of decoding that task as unknown. A live view subscribes instead ([`Session::subscribe`]): the
//! agent then sends what changed at every interval, the session keeps the agent's state current
//! (`mirror`), and each [`Session::next_update`] is a whole dump of it. A new root type there plans again
//! and subscribes anew with the new plan. What keeps chains from being decoded (no debug info,
//! another binary, a plan too big to send) is the dump's note, never an error: the annotated frames are
//! still worth showing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use asyncdump_protocol::{Handshake, SubscribeRequest, WalkInfo};

use crate::client::Client;
use crate::decode::Decoder;
use crate::dwarf;
use crate::error::TargetError;
use crate::model::{ChainCache, DecodingInfo, Dump};
use crate::target::Target;

mod mirror;
pub use mirror::{Applied, COMPLETED_KEPT, Mirror, OutOfStep};

/// How to attach.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Read the DWARF from this file instead of the process's own executable.
    pub binary: Option<PathBuf>,
    /// Decode unannotated chains from the DWARF (`false`: annotated frames only).
    pub decode: bool,
    /// The longest any one reply may take to arrive whole (`--timeout`).
    pub timeout: std::time::Duration,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            binary: None,
            decode: true,
            timeout: crate::client::DEFAULT_TIMEOUT,
        }
    }
}

/// The target's DWARF, loaded once.
struct Loaded {
    debug: dwarf::Debug,
    bias: u64,
    load_ns: u64,
    /// What the agent said while the DWARF was checked, for the first plan (asked again later).
    info: Option<WalkInfo>,
}

pub struct Session {
    client: Client,
    dwarf: Option<Loaded>,
    /// The plan for `anchors`, and what the dump says about decoding.
    decoder: Option<Decoder>,
    anchors: Vec<u64>,
    decoding: DecodingInfo,
    /// The open subscription, if any.
    live: Option<Live>,
}

/// A subscription's parameters and the state its updates built.
struct Live {
    interval_ms: u32,
    include_completed: bool,
    mirror: Mirror,
    chains: ChainCache,
    /// Set after subscribing anew, until the new subscription's full state arrives: the old one's
    /// updates still in flight are skipped.
    awaiting_full: bool,
}

/// Connects to the target's agent, and makes sure it is that agent: the kernel's word on who listens
/// must match what the agent says it is (see [`Client::connect`]), and for a pid, the socket and its
/// directory must be the target user's own (no one else could have planted them) and the listener
/// must run as the target's user.
pub fn connect(target: &Target, timeout: std::time::Duration) -> Result<Client, TargetError> {
    let path = target.resolve()?;
    let owner = match target.pid() {
        Some(pid) => {
            if let Some(state) = crate::target::stopped(pid) {
                return Err(TargetError::Stopped { pid, state });
            }
            let owner = crate::target::process_uid(pid).unwrap_or_else(crate::target::euid);
            crate::target::check_not_planted(&path, owner)?;
            Some(owner)
        }
        None => None,
    };
    let client = connect_when_free(&path, timeout)?;
    let (pid, uid) = client.peer();
    if owner.is_some_and(|o| uid != o) {
        return Err(TargetError::Impostor {
            path,
            claims: client.handshake.pid,
            pid,
            uid,
        });
    }
    if let Some(expected) = target.pid()
        && client.handshake.pid != expected
    {
        return Err(TargetError::WrongProcess {
            path,
            expected,
            actual: client.handshake.pid,
        });
    }
    Ok(client)
}

/// Connects, trying again while the agent is busy (its connection slots all taken), until `timeout`.
fn connect_when_free(path: &Path, timeout: std::time::Duration) -> Result<Client, TargetError> {
    let give_up = Instant::now() + timeout;
    // Short pauses: a slot held by a greedy client is taken from it by the agent, so one comes free soon.
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        match Client::connect(path, timeout) {
            Err(TargetError::Busy { .. }) if Instant::now() + pause < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

impl Session {
    /// Connects, handshakes and, when decoding, loads the target's DWARF.
    pub fn attach(target: &Target, options: &SessionOptions) -> Result<Session, TargetError> {
        let mut client = connect(target, options.timeout)?;
        let (dwarf, decoding) = if options.decode {
            match load(&mut client, options.binary.as_deref())? {
                Ok(loaded) => (Some(loaded), DecodingInfo::default()),
                Err(note) => (
                    None,
                    DecodingInfo::off(format!("chains not decoded: {note}")),
                ),
            }
        } else {
            let note = "chains not decoded (--no-decode): annotated frames only".to_owned();
            (None, DecodingInfo::off(note))
        };
        Ok(Session {
            client,
            dwarf,
            decoder: None,
            anchors: Vec::new(),
            decoding,
            live: None,
        })
    }

    pub fn handshake(&self) -> &Handshake {
        &self.client.handshake
    }

    /// One snapshot, decoded with the plan (planned again first if a root type is new).
    pub fn snapshot(&mut self, include_completed: bool) -> Result<Dump, TargetError> {
        self.replan_if_new_roots()?;
        let walk = self.decoder.as_ref().map(|d| d.plan.clone());
        let (snap, rtt) = match self.client.snapshot(include_completed, walk) {
            // A plan too big to send: the annotated frames are still worth a dump.
            Err(TargetError::RequestTooLarge { bytes, max }) if self.decoder.is_some() => {
                self.drop_plan(bytes, max);
                self.client.snapshot(include_completed, None)?
            }
            other => other?,
        };
        if let Some(detail) = crate::model::inconsistency(&snap) {
            return Err(TargetError::Inconsistent { detail });
        }
        Ok(Dump::build_decoded(
            &self.client.handshake,
            &snap,
            rtt.as_nanos() as u64,
            self.decoder.as_ref(),
            self.decoding.clone(),
            &mut ChainCache::default(),
        ))
    }

    /// Subscribes to updates every `interval_ms`; read them with [`Session::next_update`].
    pub fn subscribe(
        &mut self,
        interval_ms: u32,
        include_completed: bool,
    ) -> Result<(), TargetError> {
        self.replan_if_new_roots()?;
        self.live = Some(Live {
            interval_ms,
            include_completed,
            mirror: Mirror::default(),
            chains: ChainCache::default(),
            awaiting_full: true,
        });
        self.resubscribe()
    }

    fn resubscribe(&mut self) -> Result<(), TargetError> {
        let Some(live) = &mut self.live else {
            return Ok(());
        };
        live.awaiting_full = true;
        let req = SubscribeRequest {
            interval_ms: live.interval_ms,
            include_completed: live.include_completed,
            walk: self.decoder.as_ref().map(|d| d.plan.clone()),
        };
        match self.client.subscribe(req.clone()) {
            Err(TargetError::RequestTooLarge { bytes, max }) if self.decoder.is_some() => {
                self.drop_plan(bytes, max);
                self.client
                    .subscribe(SubscribeRequest { walk: None, ..req })
            }
            other => other,
        }
    }

    /// Waits for the subscription's next update and returns the whole state it leaves, with what it
    /// changed.
    pub fn next_update(&mut self) -> Result<(Dump, Applied), TargetError> {
        loop {
            let update = self.client.update()?;
            let start = Instant::now();
            let live = self.live.as_mut().expect("subscribed");
            if live.awaiting_full && !update.full {
                continue;
            }
            live.awaiting_full = false;
            let Ok(mut applied) = live.mirror.apply(update) else {
                // Start again from a full state rather than show a state that is not the agent's.
                self.resubscribe()?;
                continue;
            };
            if applied.full {
                // Its walks may follow a newer plan than the kept chains, at the same poll counts.
                live.chains.clear();
            }
            // Only the tasks this update carried can be of a root type the plan has not seen.
            let new_roots: Vec<u64> = (applied.anchors.iter())
                .filter(|a| !self.anchors.contains(a))
                .copied()
                .collect();
            if self.dwarf.is_some() && !new_roots.is_empty() {
                let runtimes = !live.mirror.snap.runtimes.is_empty();
                self.plan(new_roots, runtimes);
                self.resubscribe()?;
            }
            let live = self.live.as_mut().expect("subscribed");
            let dump = Dump::build_decoded(
                &self.client.handshake,
                &live.mirror.snap,
                0,
                self.decoder.as_ref(),
                self.decoding.clone(),
                &mut live.chains,
            );
            applied.bytes = self.client.last_reply_bytes;
            applied.build_ns = start.elapsed().as_nanos() as u64;
            return Ok((dump, applied));
        }
    }

    /// Decoding off, because the plan is too big for the agent to take.
    fn drop_plan(&mut self, bytes: usize, max: usize) {
        let types = self.decoder.take().map_or(0, |d| d.plan.types.len());
        self.dwarf = None;
        self.decoding = DecodingInfo::off(format!(
            "chains not decoded: the walk plan for {types} future types is {bytes} bytes, over the agent's limit of {max}"
        ));
    }

    /// Plans the live tasks' root types, unless the plan covers them all already.
    fn replan_if_new_roots(&mut self) -> Result<(), TargetError> {
        let Some(loaded) = &mut self.dwarf else {
            return Ok(());
        };
        let info = match loaded.info.take() {
            Some(info) => info,
            None => self.client.walk_info()?,
        };
        let new = info.root_anchors.iter().any(|a| !self.anchors.contains(a));
        if self.decoder.is_some() && !new {
            return Ok(());
        }
        self.plan(info.root_anchors, !info.runtimes.is_empty());
        Ok(())
    }

    /// Plans again for the anchors known so far and `anchors` (a no-op without DWARF).
    fn plan(&mut self, anchors: Vec<u64>, runtimes: bool) {
        let Some(loaded) = &self.dwarf else {
            return;
        };
        let start = Instant::now();
        for a in anchors {
            if !self.anchors.contains(&a) {
                self.anchors.push(a);
            }
        }
        let debug = &loaded.debug;
        let decoder = Decoder::new(debug, &self.anchors, loaded.bias, runtimes);
        let missing = self.anchors.len() - decoder.roots_found;
        self.decoding = DecodingInfo {
            enabled: true,
            note: (missing > 0).then(|| {
                format!(
                    "{missing} of {} root future types are not in {}'s DWARF; those tasks show annotated frames only",
                    self.anchors.len(),
                    debug.path.display()
                )
            }),
            debug_file: Some(debug.path.display().to_string()),
            build_id: debug.build_id.clone(),
            debug_info_bytes: debug.debug_info_bytes,
            plan_ns: loaded.load_ns + start.elapsed().as_nanos() as u64,
            plan_types: decoder.plan.types.len(),
        };
        self.decoder = Some(decoder);
        if let Some(live) = &mut self.live {
            live.chains.clear();
        }
    }
}

/// Loads the DWARF of the process `client` talks to (or of `binary`), checked against the build-id the
/// agent reads from what the loader mapped. `Ok(Err(note))`: decoding is off, and why.
fn load(client: &mut Client, binary: Option<&Path>) -> Result<Result<Loaded, String>, TargetError> {
    let start = Instant::now();
    let pid = client.handshake.pid;
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let path = binary.unwrap_or(&exe);
    let info = client.walk_info()?;
    if let Some(why) = &info.walks_refused {
        return Ok(Err(format!(
            "the agent allows this client no memory walks: {why}"
        )));
    }
    let debug = match dwarf::Debug::load(path) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // The agent reads its build-id from the notes the loader mapped: the truth about what runs, whether
    // the file on disk was replaced, `--binary` names another build, or the pid is another namespace's.
    let running = match info.build_id.as_deref().map(dwarf::hex) {
        Some(id) => Some(id),
        None if binary.is_some() => match dwarf::build_id(&exe) {
            Ok(id) => id,
            Err(e) => {
                return Ok(Err(format!(
                    "cannot check the running binary's build-id: {e}"
                )));
            }
        },
        None => None,
    };
    if running.is_some() && running != debug.build_id {
        let id = |b: &Option<String>| b.clone().unwrap_or_else(|| "none".into());
        return Ok(Err(format!(
            "{} (build-id {}) is not the binary process {pid} runs (build-id {}); pass the matching build with --binary",
            path.display(),
            id(&debug.build_id),
            id(&running)
        )));
    }
    let bias = match dwarf::load_bias(pid, debug.vaddr_at_zero) {
        Ok(b) => b,
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(Ok(Loaded {
        debug,
        bias,
        load_ns: start.elapsed().as_nanos() as u64,
        info: Some(info),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live view keeps the session on one thread and hands snapshots to another (the screen's).
    #[test]
    fn a_session_and_its_dumps_can_move_to_another_thread() {
        fn send<T: Send + 'static>() {}
        fn shared<T: Send + Sync + 'static>() {}
        send::<Session>();
        shared::<Dump>();
        shared::<Decoder>();
    }
}
