//! `asyncdump watch`: the live view. A feed thread ([`feed`]) keeps the target's [`Session`], subscribed
//! to its updates (and records them with `--record`); `--from` shows a snapshot file or replays a
//! recording instead; the screen's thread keeps the [`state::App`], gives it the keys [`input`] maps
//! (its one key table) and does the [`state::Effect`] each asks for, and draws it ([`view`]) with
//! ratatui on crossterm. State, view, input and connection are apart: the state knows nothing of the
//! terminal, and is what the tests drive.
//!
//! The terminal is restored on quit, on Ctrl-C (a key in raw mode), on a panic (ratatui's hook
//! restores it before the panic prints), and on a signal that ends the process (`kill`, a closed
//! terminal, a window closed): a thread watching for them gives the terminal back, then lets the
//! signal end the process as it would have.

pub mod feed;
pub mod history;
pub mod input;
pub mod state;
pub mod view;

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::time::{Duration, Instant};

use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use crate::attach::target::Target;
use crate::error::TargetError;
use crate::file::{self, FileError, Opened, Recorder, Replay};
use crate::model::Dump;
use crate::output::{self, Existing};
use crate::session::{Session, SessionOptions};
use feed::FeedEvent;
use input::{Key, key_of};
use state::{App, Effect, Link};

/// How to watch.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub session: SessionOptions,
    /// Time between updates.
    pub interval: Duration,
    /// Also list running and recently completed tasks.
    pub all: bool,
    /// Append every update to a new recording at this path.
    pub record: Option<std::path::PathBuf>,
    /// Tasks suspended this long are shown as stuck.
    pub stuck_after: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(
        "watch draws in a terminal, and standard output is not one (use `asyncdump dump` in scripts)"
    )]
    NotATerminal,
}

/// Where the screen's states come from.
enum Origin {
    Live(Receiver<FeedEvent>),
    File,
    Replay(Box<Replay>, String),
}

/// Attaches to `target` and runs the live view until the user quits.
pub fn run(target: &Target, options: &WatchOptions) -> Result<(), WatchError> {
    let session = Session::attach(target, &options.session)?;
    terminal_or_refuse()?;
    let recorder = options
        .record
        .as_deref()
        .map(Recorder::create)
        .transpose()?;
    let updates = feed::start(
        session,
        feed::Feed {
            target: target.clone(),
            options: options.session.clone(),
            every: options.interval,
            include_completed: options.all,
            recorder,
        },
    );
    screen(Origin::Live(updates), new_app(options.stuck_after))
}

fn new_app(stuck_after: Duration) -> App {
    let mut app = App::new(Instant::now());
    app.stuck_after = stuck_after;
    // https://no-color.org: present and not empty.
    app.colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    app
}

/// Opens a snapshot file or a core file, or replays a recording from its first update.
pub fn run_file(path: &std::path::Path, stuck_after: Duration) -> Result<(), WatchError> {
    let opened = match crate::agentless::core_file::is_core(path) {
        // A core holds one state, like a snapshot file, read with its own executable's DWARF.
        true => {
            let options = crate::session::core::CoreOptions {
                cache: true,
                ..Default::default()
            };
            Opened::Snapshot(Box::new(crate::session::core::dump(path, &options)?))
        }
        false => file::open(path)?,
    };
    terminal_or_refuse()?;
    // The name only: the status bar has little room, and the user knows where the file is.
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut app = new_app(stuck_after);
    let source = match opened {
        Opened::Snapshot(dump) => {
            app.update(*dump, Instant::now());
            app.link = Link::File(name);
            Origin::File
        }
        Opened::Recording(mut replay) => {
            app.update(replay.seek(0), Instant::now());
            app.message = replay.note.clone();
            app.link = replay_link(&replay, &name);
            Origin::Replay(replay, name)
        }
    };
    screen(source, app)
}

fn terminal_or_refuse() -> Result<(), WatchError> {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        Ok(())
    } else {
        Err(WatchError::NotATerminal)
    }
}

fn replay_link(replay: &Replay, file: &str) -> Link {
    let (at_ms, total_ms) = replay.at_ms();
    Link::Replay {
        file: file.to_owned(),
        pos: replay.pos(),
        len: replay.len(),
        at_ms,
        total_ms,
    }
}

/// The signals that end a watch by default; each is caught until the terminal is given back.
const ENDING_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGTERM,
];

/// Draws `app` and feeds it keys and states until the user quits or a signal ends it.
fn screen(source: Origin, app: App) -> Result<(), WatchError> {
    give_back_on_signals()?;
    draw_until_quit(source, app)
}

/// Starts the thread that ends a watch whose terminal is taken from it: on a signal that ends the
/// process, it gives the terminal back and then lets the signal end the process as it would have; on
/// a terminal that hung up (its window closed), it ends the process as that hang-up would. A thread
/// of its own, not a flag the screen's loop reads: that loop may be where it is stuck, since
/// crossterm's read spins, never returning, on a terminal that hung up.
fn give_back_on_signals() -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(ENDING_SIGNALS)?;
    std::thread::Builder::new()
        .name("asyncdump-signals".into())
        .spawn(move || {
            let signal = loop {
                if let Some(signal) = signals.pending().next() {
                    give_back_from_another_thread();
                    break signal;
                }
                if terminal_hung_up() {
                    break signal_hook::consts::SIGHUP;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            // A signal whose default is not to end the process: end it as asked all the same.
            std::process::exit(128 + signal);
        })?;
    Ok(())
}

/// What `ratatui::restore` and the mouse's release do, written past standard output's lock: the
/// screen's thread may hold it (the command line locks standard output once, for the whole run).
fn give_back_from_another_thread() {
    use crossterm::Command;
    use std::os::fd::AsFd;
    let _ = crossterm::terminal::disable_raw_mode();
    let mut undo = String::new();
    let _ = DisableMouseCapture.write_ansi(&mut undo);
    let _ = crossterm::terminal::LeaveAlternateScreen.write_ansi(&mut undo);
    let _ = crossterm::cursor::Show.write_ansi(&mut undo);
    let _ = nix::unistd::write(std::io::stdout().as_fd(), undo.as_bytes());
}

/// Whether the terminal on standard input hung up.
fn terminal_hung_up() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(1))
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR))
}

fn draw_until_quit(mut source: Origin, mut app: App) -> Result<(), WatchError> {
    let mut terminal = ratatui::try_init()?;
    // ratatui's panic hook gives the terminal back but knows nothing of the mouse: take it back first.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
        hook(info);
    }));
    crossterm::execute!(std::io::stdout(), EnableMouseCapture)?;
    let freed = graveyard();
    // Replay steps asked for since the last update was taken.
    let mut step = 0;
    let result = (|| -> std::io::Result<()> {
        loop {
            take_states(&mut source, &mut app, &freed, std::mem::take(&mut step));
            terminal.draw(|f| view::draw(f, &app, Instant::now()))?;
            // Redrawn at least every 100 ms (the status bar's ages move), and at once on a key.
            if !event::poll(Duration::from_millis(100))? {
                continue;
            }
            let key = match event::read()? {
                Event::Key(k) => key_of(k, app.typing),
                Event::Mouse(m) => {
                    let size = terminal.size()?;
                    mouse_key(&app, m, Rect::new(0, 0, size.width, size.height))
                }
                _ => None,
            };
            match key.map(|key| app.key(key)) {
                Some(Effect::Quit) => return Ok(()),
                Some(Effect::Save) => {
                    app.message = Some(match app.dump().map(save) {
                        Some(Ok(path)) => format!("saved {path}"),
                        Some(Err(e)) => format!("could not save: {e}"),
                        None => "nothing to save yet".to_owned(),
                    });
                }
                Some(Effect::Step(n)) => step += n,
                Some(Effect::Redraw) | None => {}
            }
        }
    })();
    let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    Ok(result?)
}

/// Where the screen sends the dumps it no longer shows, to be freed on a thread of their own: freeing
/// 100,000 tasks takes milliseconds that a redraw should not wait for.
type Graveyard = Sender<Vec<Arc<Dump>>>;

fn graveyard() -> Graveyard {
    let (tx, rx) = channel::<Vec<Arc<Dump>>>();
    // Without the thread, the sends fail and the dumps are freed where they are.
    let _ = std::thread::Builder::new()
        .name("asyncdump-free".into())
        .spawn(move || rx.into_iter().for_each(drop));
    tx
}

/// Gives `app` what its source has for it: the feed's newest states, or the replay's next step.
fn take_states(source: &mut Origin, app: &mut App, freed: &Graveyard, step: i32) {
    match source {
        Origin::Live(updates) => loop {
            match updates.try_recv() {
                Ok(FeedEvent::Snapshot(dump)) => {
                    let _ = freed.send(app.update(*dump, Instant::now()));
                }
                Ok(FeedEvent::Lost(why)) => app.disconnected(why),
                Ok(FeedEvent::RecordingStopped(why)) => {
                    app.message = Some(format!("recording stopped: {why}"));
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        },
        Origin::File => {}
        Origin::Replay(replay, name) => {
            if step != 0 {
                let to = (replay.pos() as i64 + i64::from(step)).max(0) as usize;
                let dump = replay.seek(to);
                let _ = freed.send(app.update(dump, Instant::now()));
                app.link = replay_link(replay, name);
            }
        }
    }
}

/// Writes `dump` as the `--json` document to `asyncdump-PID-UNIXSECS.json` in the current directory,
/// without replacing an existing file.
fn save(dump: &crate::model::Dump) -> std::io::Result<String> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let path = format!("asyncdump-{}-{secs}.json", dump.process.pid);
    let doc = crate::view::json::render(dump, None);
    let mode = file::SNAPSHOT_MODE;
    output::write_whole(Path::new(&path), doc.as_bytes(), mode, Existing::Keep)?;
    Ok(path)
}

/// The state's key for a mouse event: the wheel moves the selection, a click selects a row.
fn mouse_key(app: &App, m: MouseEvent, screen: Rect) -> Option<Key> {
    match m.kind {
        MouseEventKind::ScrollUp => Some(Key::Up),
        MouseEventKind::ScrollDown => Some(Key::Down),
        MouseEventKind::Down(MouseButton::Left) if !app.help => {
            view::row_at(app, screen, m.row).map(Key::Row)
        }
        _ => None,
    }
}
