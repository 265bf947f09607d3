//! The live view's keys, in one table: what each press means to the state (an intent, [`Key`]) and
//! what the help says of it. The event loop asks [`key_of`] for each key press; the help is drawn from
//! [`BINDINGS`]; nothing else knows a key. While a search is typed, characters are its text.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::State;

/// A key, as the state understands it: what the user means, whatever they pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Top,
    Bottom,
    /// Follow the selected task's edge: to the task it awaits, or else the one awaiting it.
    Follow,
    Back,
    Pause,
    Help,
    Quit,
    /// Start typing a search (`/`).
    Search,
    /// A character of the search being typed.
    Char(char),
    /// Remove the search's last character.
    Erase,
    /// Stop typing the search (it stays applied; an empty one clears it).
    Done,
    /// Sort by the next column.
    NextSort,
    /// Reverse the sort.
    Reverse,
    /// Group identical chains, or list tasks again.
    Coalesce,
    /// Show or hide the tasks in a state.
    Toggle(State),
    /// Save what is on screen as a snapshot file.
    Save,
    /// List deadlocked and stuck tasks first, or not.
    AttentionFirst,
    /// Select this row of the table (a mouse click).
    Row(usize),
    /// In a replay: the previous and the next update (`←`, `→`), or ten of them (with Shift).
    Step(i32),
}

/// Which modifier a press needs; a press that needs none takes any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    Shift,
    Control,
}

/// One line of the help, and the presses it describes.
pub struct Binding {
    /// The keys as the help shows them.
    pub keys: &'static str,
    pub does: &'static str,
    presses: &'static [(KeyCode, Needs, Key)],
}

const fn bind(
    keys: &'static str,
    does: &'static str,
    presses: &'static [(KeyCode, Needs, Key)],
) -> Binding {
    Binding {
        keys,
        does,
        presses,
    }
}

use KeyCode::{Backspace, Char, Down, End, Enter, Esc, Home, Left, Right, Up};
use Needs::{Control, Nothing, Shift};

/// Every key of the live view, in the order the help lists them.
#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    bind("↑ ↓  k j", "select a task", &[
        (Up, Nothing, Key::Up), (Char('k'), Nothing, Key::Up),
        (Down, Nothing, Key::Down), (Char('j'), Nothing, Key::Down),
    ]),
    bind("g G", "first, last task", &[
        (Home, Nothing, Key::Top), (Char('g'), Nothing, Key::Top),
        (End, Nothing, Key::Bottom), (Char('G'), Nothing, Key::Bottom),
    ]),
    bind("Enter", "follow the edge: awaited task, else holder of what it waits for", &[(Enter, Nothing, Key::Follow)]),
    bind("Backspace", "back to where Enter came from", &[(Backspace, Nothing, Key::Back)]),
    bind("/", "search; on:TEXT waits on it, holds:TEXT holds it (Enter/Esc ends)", &[
        (Char('/'), Nothing, Key::Search),
    ]),
    bind("o  r", "sort by the next column, reverse the sort", &[
        (Char('o'), Nothing, Key::NextSort), (Char('r'), Nothing, Key::Reverse),
    ]),
    bind("!", "deadlocked, then stuck (over --stuck-after) tasks first", &[
        (Char('!'), Nothing, Key::AttentionFirst),
    ]),
    bind("c", "group identical chains (Enter lists a group's tasks)", &[(Char('c'), Nothing, Key::Coalesce)]),
    bind("1 2 3 4", "show or hide idle, scheduled, running, completed tasks", &[
        (Char('1'), Nothing, Key::Toggle(State::Idle)),
        (Char('2'), Nothing, Key::Toggle(State::Scheduled)),
        (Char('3'), Nothing, Key::Toggle(State::Running)),
        (Char('4'), Nothing, Key::Toggle(State::Completed)),
    ]),
    bind("s", "save what is shown as a JSON snapshot (as dump --json)", &[(Char('s'), Nothing, Key::Save)]),
    bind("space", "pause the screen (updates go on)", &[(Char(' '), Nothing, Key::Pause)]),
    bind("← →", "replaying a recording: previous, next update (Shift: ten)", &[
        (Left, Shift, Key::Step(-10)), (Right, Shift, Key::Step(10)),
        (Left, Nothing, Key::Step(-1)), (Right, Nothing, Key::Step(1)),
    ]),
    bind("mouse", "wheel moves the selection, a click selects a row", &[]),
    bind("?", "this help", &[(Char('?'), Nothing, Key::Help)]),
    bind("q  Ctrl-C", "quit", &[
        (Char('c'), Control, Key::Quit), (Char('q'), Nothing, Key::Quit), (Esc, Nothing, Key::Quit),
    ]),
];

/// The state's key for a terminal key press (`typing`: a search is being typed).
pub fn key_of(k: KeyEvent, typing: bool) -> Option<Key> {
    if k.kind != KeyEventKind::Press {
        return None;
    }
    let presses = || BINDINGS.iter().flat_map(|b| b.presses);
    let held = |needs| match needs {
        Nothing => true,
        Shift => k.modifiers.contains(KeyModifiers::SHIFT),
        Control => k.modifiers.contains(KeyModifiers::CONTROL),
    };
    // A press that needs a modifier first: Shift-→ is not →, and Ctrl-C quits even while typing.
    let modified =
        presses().find(|&&(code, needs, _)| needs != Nothing && code == k.code && held(needs));
    if let Some(&(_, _, key)) = modified {
        return Some(key);
    }
    if typing {
        return match k.code {
            Char(c) => Some(Key::Char(c)),
            Backspace => Some(Key::Erase),
            Enter | Esc => Some(Key::Done),
            _ => None,
        };
    }
    presses()
        .find(|&&(code, needs, _)| needs == Nothing && code == k.code)
        .map(|&(_, _, key)| key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
        key_of(KeyEvent::new(code, modifiers), false)
    }

    #[test]
    fn keys_map_as_the_help_lists_them() {
        let none = KeyModifiers::NONE;
        assert_eq!(press(Char('j'), none), Some(Key::Down));
        assert_eq!(press(Up, none), Some(Key::Up));
        assert_eq!(press(Enter, none), Some(Key::Follow));
        assert_eq!(press(Backspace, none), Some(Key::Back));
        assert_eq!(press(Char(' '), none), Some(Key::Pause));
        assert_eq!(press(Char('c'), KeyModifiers::CONTROL), Some(Key::Quit));
        assert_eq!(press(Char('c'), none), Some(Key::Coalesce));
        assert_eq!(press(Char('q'), none), Some(Key::Quit));
        assert_eq!(press(Char('x'), none), None);
        assert_eq!(press(Char('/'), none), Some(Key::Search));
        assert_eq!(press(Right, KeyModifiers::SHIFT), Some(Key::Step(10)));
        assert_eq!(press(Right, none), Some(Key::Step(1)));
    }

    #[test]
    fn while_a_search_is_typed_letters_are_its_text_and_ctrl_c_still_quits() {
        let typed = |code, modifiers| key_of(KeyEvent::new(code, modifiers), true);
        let none = KeyModifiers::NONE;
        assert_eq!(typed(Char('q'), none), Some(Key::Char('q')));
        assert_eq!(typed(Backspace, none), Some(Key::Erase));
        assert_eq!(typed(Enter, none), Some(Key::Done));
        assert_eq!(typed(Char('c'), KeyModifiers::CONTROL), Some(Key::Quit));
    }

    #[test]
    fn no_press_is_bound_twice_and_every_line_of_the_help_names_its_keys() {
        let mut seen: Vec<(KeyCode, bool, bool)> = Vec::new();
        for b in BINDINGS {
            assert!(!b.keys.is_empty() && !b.does.is_empty());
            for &(code, needs, _) in b.presses {
                let key = (code, needs == Shift, needs == Control);
                assert!(!seen.contains(&key), "{code:?} bound twice");
                seen.push(key);
            }
        }
    }
}
