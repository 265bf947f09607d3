//! The connection side of the live view: a thread that owns the [`Session`], subscribes to the agent's
//! updates and sends the state each one leaves to the screen's thread. The screen never waits on the
//! target; a target that stops answering shows as disconnected while the last state stays on screen,
//! and the feed attaches again, once a second, for as long as the process exists (an agent that was
//! stopped, or restarted its listener, comes back on screen).

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread;
use std::time::Duration;

use crate::attach::target::Target;
use crate::file::Recorder;
use crate::model::Dump;
use crate::session::{Session, SessionOptions};

/// What the feed sends.
pub enum FeedEvent {
    Snapshot(Box<Dump>),
    /// The recording could not be written and has stopped, and why; the view goes on.
    RecordingStopped(String),
    /// The connection is gone, and why; updates follow only if attaching again succeeds.
    Lost(String),
}

/// What the feed needs to attach again.
pub struct Feed {
    pub target: Target,
    pub options: SessionOptions,
    pub every: Duration,
    pub include_completed: bool,
    /// Every update is also appended here, when there is one (on the feed's thread: the screen's
    /// never waits on the disk).
    pub recorder: Option<Recorder>,
}

/// How often to try attaching again after the connection is lost.
const RETRY: Duration = Duration::from_secs(1);

/// Starts the feed on `session`. It ends when the receiver is dropped, or when the process is gone.
pub fn start(session: Session, mut feed: Feed) -> Receiver<FeedEvent> {
    // One update in flight: a screen that falls behind gets the newest state, not a backlog.
    let (tx, rx) = sync_channel(1);
    thread::Builder::new()
        .name("asyncdump-feed".into())
        // Recording an update writes its chains, which recurses once per level of a chain.
        .stack_size(32 << 20)
        .spawn(move || {
            let mut session = Some(session);
            while let Some(mut s) = session.take() {
                let why = follow(&mut s, &tx, &mut feed);
                drop(s);
                if tx.send(FeedEvent::Lost(why)).is_err() {
                    return;
                }
                session = reattach(&feed);
            }
        })
        .expect("spawn the feed thread");
    rx
}

/// Sends updates until the connection fails (returns why) or the screen is gone.
fn follow(session: &mut Session, tx: &SyncSender<FeedEvent>, feed: &mut Feed) -> String {
    let ms = feed.every.as_millis().min(u32::MAX as u128) as u32;
    if let Err(e) = session.subscribe(ms, feed.include_completed) {
        return e.to_string();
    }
    loop {
        let mut dump = match session.next_update() {
            Ok((dump, _)) => dump,
            Err(e) => return e.to_string(),
        };
        if let Some(Err(e)) = feed.recorder.as_mut().map(|r| r.record(&dump)) {
            feed.recorder = None;
            let _ = tx.send(FeedEvent::RecordingStopped(e.to_string()));
        }
        // Judged here, after recording (a recording keeps what the verdicts rest on, not them),
        // and not on the screen's thread: at 100,000 tasks it is milliseconds an update.
        dump.judge();
        // A screen that is behind skips this state: the next one holds all it says.
        match tx.try_send(FeedEvent::Snapshot(Box::new(dump))) {
            Ok(()) | Err(TrySendError::Full(_)) => {}
            // The screen has quit: the feed is done.
            Err(TrySendError::Disconnected(_)) => return String::new(),
        }
    }
}

/// Tries to attach again once a second while the process exists; `None` once it is gone.
fn reattach(feed: &Feed) -> Option<Session> {
    loop {
        thread::sleep(RETRY);
        if let Target::Pid(pid) = feed.target
            && !crate::attach::procfs::exists(pid)
        {
            return None;
        }
        // The screen quitting ends the process, and this thread with it.
        if let Ok(s) = Session::attach(&feed.target, &feed.options) {
            return Some(s);
        }
    }
}
