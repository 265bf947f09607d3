//! The connection side of the live view: a thread that owns the [`Session`], subscribes to the agent's
//! updates and sends the state each one leaves to the screen's thread. The screen never waits on the
//! target; a target that stops answering shows as disconnected while the last state stays on screen.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread;
use std::time::Duration;

use crate::file::Recorder;
use crate::model::Dump;
use crate::session::Session;

/// What the feed sends.
pub enum Update {
    Snapshot(Box<Dump>),
    /// The recording could not be written and has stopped, and why; the view goes on.
    RecordingStopped(String),
    /// The connection is gone, and why; nothing follows.
    Lost(String),
}

/// Starts the feed. It ends when the receiver is dropped, or after `Lost`.
/// Every update is also appended to `recorder`'s recording, when there is one (on this thread: the
/// screen's never waits on the disk).
pub fn start(
    mut session: Session,
    every: Duration,
    include_completed: bool,
    mut recorder: Option<Recorder>,
) -> Receiver<Update> {
    // One update in flight: a screen that falls behind gets the newest state, not a backlog.
    let (tx, rx) = sync_channel(1);
    thread::Builder::new()
        .name("asyncdump-feed".into())
        .spawn(move || feed(&mut session, &tx, every, include_completed, &mut recorder))
        .expect("spawn the feed thread");
    rx
}

fn feed(
    session: &mut Session,
    tx: &SyncSender<Update>,
    every: Duration,
    all: bool,
    recorder: &mut Option<Recorder>,
) {
    let ms = every.as_millis().min(u32::MAX as u128) as u32;
    if let Err(e) = session.subscribe(ms, all) {
        let _ = tx.send(Update::Lost(e.to_string()));
        return;
    }
    loop {
        let update = match session.next_update() {
            Ok((dump, _)) => {
                if let Some(Err(e)) = recorder.as_mut().map(|r| r.record(&dump)) {
                    *recorder = None;
                    let _ = tx.send(Update::RecordingStopped(e.to_string()));
                }
                Update::Snapshot(Box::new(dump))
            }
            Err(e) => {
                let _ = tx.send(Update::Lost(e.to_string()));
                return;
            }
        };
        // A screen that is behind skips this state: the next one holds all it says.
        match tx.try_send(update) {
            Ok(()) | Err(TrySendError::Full(_)) => {}
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}
