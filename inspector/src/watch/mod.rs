//! `asyncdump watch`: the live view. A feed thread ([`feed`]) keeps the target's [`Session`] and
//! snapshots it every interval; the screen's thread keeps the [`state::App`], maps keys to it and draws
//! it ([`view`]) with ratatui on crossterm. State, view, input and connection are apart: the state knows
//! nothing of the terminal, and is what the tests drive.
//!
//! The terminal is restored on quit, on Ctrl-C (a key in raw mode) and on a panic (ratatui's hook
//! restores it before the panic prints).

pub mod feed;
pub mod state;
pub mod view;

use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::error::TargetError;
use crate::model::State;
use crate::session::{Session, SessionOptions};
use crate::target::Target;
use feed::Update;
use state::{App, Key};

/// How to watch.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub session: SessionOptions,
    /// Time between snapshots.
    pub interval: Duration,
    /// Also list running and recently completed tasks.
    pub all: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(
        "watch draws in a terminal, and standard output is not one (use `asyncdump dump` in scripts)"
    )]
    NotATerminal,
}

/// Attaches to `target` and runs the live view until the user quits.
pub fn run(target: &Target, options: &WatchOptions) -> Result<(), WatchError> {
    let session = Session::attach(target, &options.session)?;
    let updates = feed::start(session, options.interval, options.all);
    let mut app = App::new(Instant::now());
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(WatchError::NotATerminal);
    }
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> std::io::Result<()> {
        loop {
            loop {
                match updates.try_recv() {
                    Ok(Update::Snapshot(dump)) => app.update(*dump, Instant::now()),
                    Ok(Update::Lost(why)) => app.disconnected(why),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            if app.save_requested {
                app.save_requested = false;
                app.message = Some(match app.dump().map(save) {
                    Some(Ok(path)) => format!("saved {path}"),
                    Some(Err(e)) => format!("could not save: {e}"),
                    None => "nothing to save yet".to_owned(),
                });
            }
            terminal.draw(|f| view::draw(f, &app, Instant::now()))?;
            if app.quit {
                return Ok(());
            }
            // Redrawn at least every 100 ms (the status bar's ages move), and at once on a key.
            if event::poll(Duration::from_millis(100))?
                && let Event::Key(k) = event::read()?
                && let Some(key) = key_of(k, app.typing)
            {
                app.key(key);
            }
        }
    })();
    ratatui::restore();
    Ok(result?)
}

/// Writes `dump` as the `--json` document to `asyncdump-PID-UNIXSECS.json` in the current directory,
/// without replacing an existing file.
fn save(dump: &crate::model::Dump) -> std::io::Result<String> {
    use std::io::Write;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let path = format!("asyncdump-{}-{secs}.json", dump.process.pid);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    file.write_all(crate::view::json::render(dump, None).as_bytes())?;
    Ok(path)
}

/// The state's key for a terminal key press; while a search is typed, characters are its text.
fn key_of(k: KeyEvent, typing: bool) -> Option<Key> {
    if k.kind != KeyEventKind::Press {
        return None;
    }
    if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(Key::Quit);
    }
    if typing {
        return match k.code {
            KeyCode::Char(c) => Some(Key::Char(c)),
            KeyCode::Backspace => Some(Key::Erase),
            KeyCode::Enter | KeyCode::Esc => Some(Key::Done),
            _ => None,
        };
    }
    Some(match k.code {
        KeyCode::Up | KeyCode::Char('k') => Key::Up,
        KeyCode::Down | KeyCode::Char('j') => Key::Down,
        KeyCode::Home | KeyCode::Char('g') => Key::Top,
        KeyCode::End | KeyCode::Char('G') => Key::Bottom,
        KeyCode::Enter => Key::Follow,
        KeyCode::Backspace => Key::Back,
        KeyCode::Char(' ') => Key::Pause,
        KeyCode::Char('?') => Key::Help,
        KeyCode::Char('/') => Key::Search,
        KeyCode::Char('o') => Key::NextSort,
        KeyCode::Char('r') => Key::Reverse,
        KeyCode::Char('c') => Key::Coalesce,
        KeyCode::Char('1') => Key::Toggle(State::Idle),
        KeyCode::Char('2') => Key::Toggle(State::Scheduled),
        KeyCode::Char('3') => Key::Toggle(State::Running),
        KeyCode::Char('4') => Key::Toggle(State::Completed),
        KeyCode::Char('s') => Key::Save,
        KeyCode::Char('q') | KeyCode::Esc => Key::Quit,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_as_the_help_lists_them() {
        let press = |code, modifiers| key_of(KeyEvent::new(code, modifiers), false);
        let none = KeyModifiers::NONE;
        assert_eq!(press(KeyCode::Char('j'), none), Some(Key::Down));
        assert_eq!(press(KeyCode::Up, none), Some(Key::Up));
        assert_eq!(press(KeyCode::Enter, none), Some(Key::Follow));
        assert_eq!(press(KeyCode::Backspace, none), Some(Key::Back));
        assert_eq!(press(KeyCode::Char(' '), none), Some(Key::Pause));
        assert_eq!(
            press(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Key::Quit)
        );
        assert_eq!(press(KeyCode::Char('q'), none), Some(Key::Quit));
        assert_eq!(press(KeyCode::Char('x'), none), None);
        assert_eq!(press(KeyCode::Char('/'), none), Some(Key::Search));
        // While a search is typed, letters are its text and Enter ends it.
        let typed = |code| key_of(KeyEvent::new(code, none), true);
        assert_eq!(typed(KeyCode::Char('q')), Some(Key::Char('q')));
        assert_eq!(typed(KeyCode::Backspace), Some(Key::Erase));
        assert_eq!(typed(KeyCode::Enter), Some(Key::Done));
    }
}
