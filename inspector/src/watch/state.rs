//! What the live view shows and how keys change it: no terminal, no ratatui, so every key is tested on
//! the state alone.
//!
//! The selection is a task id, not a row: it survives updates that add or remove tasks above it, a new
//! sort and a new search. When the selected task is gone, the row it was on is selected instead.
//! Following an edge (Enter: a JoinHandle awaited, else the holder of the lock or channel end the task
//! waits for, else the task awaiting it) pushes the current task on a stack that Backspace pops. `/`
//! searches every task's name, root type, spawn site and frames (names and files) as you type;
//! `/on:TEXT` keeps the tasks whose leaf waits on what TEXT says (`on:mutex @ 0x55d1`), and
//! `/holds:TEXT` those holding it. `c` groups identical
//! chains (largest group first); Enter on a group lists its tasks, and Backspace returns to the groups.
//! Tasks in a wait cycle, and tasks suspended longer than `stuck_after`, want attention: `!` lists them
//! first (deadlocked, then stuck), and the view marks and counts them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::input::Key;
use crate::model::{Dump, FrameNode, Group, State, TaskView, any_frame, coalesce, leaf_frame};

/// What a key asks of the screen's loop, beyond changing the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing more: the screen is redrawn.
    Redraw,
    Quit,
    /// Save what is shown as a snapshot file (there is something shown).
    Save,
    /// In a replay: move this many updates.
    Step(i32),
}

/// The task table's columns; each sorts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Task,
    Name,
    /// The HTTP request the task serves (where its chain holds one).
    Request,
    State,
    /// Time in the current state.
    Age,
    Polls,
    Busy,
    Wakes,
    /// The chain's leaf frame.
    Leaf,
    /// Where the task was spawned.
    Site,
}

impl Column {
    /// In the order `o` steps through them.
    pub const ALL: [Column; 10] = [
        Column::Task,
        Column::Name,
        Column::Request,
        Column::State,
        Column::Age,
        Column::Polls,
        Column::Busy,
        Column::Wakes,
        Column::Leaf,
        Column::Site,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Task => "task",
            Column::Name => "name",
            Column::Request => "request",
            Column::State => "state",
            Column::Age => "for",
            Column::Polls => "polls",
            Column::Busy => "busy",
            Column::Wakes => "wakes",
            Column::Leaf => "leaf",
            Column::Site => "spawned at",
        }
    }

    fn next(self) -> Column {
        let at = Column::ALL.iter().position(|&c| c == self).unwrap_or(0);
        Column::ALL[(at + 1) % Column::ALL.len()]
    }
}

/// Why a task wants a look: it is in a wait cycle, or suspended for longer than the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Attention {
    Deadlock,
    Stuck,
    None,
}

/// Tasks suspended this long are stuck unless told otherwise (`--stuck-after`).
pub const STUCK_AFTER: Duration = Duration::from_secs(10);

/// Where the data comes from, as the status bar says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Connected,
    Disconnected(String),
    /// A snapshot file: one state, nothing live.
    File(String),
    /// A recording, at update `pos` of `len`, `at_ms` into it (of `total_ms`).
    Replay {
        file: String,
        pos: usize,
        len: usize,
        at_ms: u64,
        total_ms: u64,
    },
}

pub struct App {
    /// What is on screen: the newest update, or the one on screen when paused.
    shown: Option<Arc<Dump>>,
    /// The newest update, kept while paused.
    newest: Option<Arc<Dump>>,
    pub selected: Option<u64>,
    /// The row of the selection, for when the selected task goes away.
    row: usize,
    /// The rows: indexes into the shown dump's tasks, searched and sorted.
    order: Vec<usize>,
    /// The search applied, and whether it is being typed.
    pub search: String,
    pub typing: bool,
    pub sort: Column,
    pub reversed: bool,
    /// The coalesced view: groups of identical chains instead of tasks.
    pub coalesced: bool,
    groups: Vec<Group>,
    group_row: usize,
    /// The tasks of the group Enter opened, while they are listed.
    group_tasks: Option<Vec<u64>>,
    /// States whose tasks are hidden.
    pub hidden: Vec<State>,
    pub message: Option<String>,
    back: Vec<u64>,
    pub paused: bool,
    pub help: bool,
    pub link: Link,
    /// Suspended this long is stuck.
    pub stuck_after: Duration,
    /// List deadlocked, then stuck tasks before the others (`!`).
    pub attention_first: bool,
    /// Tasks in a wait cycle of the shown dump.
    deadlocked: rustc_hash::FxHashSet<u64>,
    /// See [`App::attention_counts`]: counted when the shown tasks change, not at each redraw.
    counts: (usize, usize, usize),
    /// Colour may be used (not under `NO_COLOR`); nothing depends on it alone.
    pub colour: bool,
    pub updates: u64,
    pub last_update: Option<Instant>,
    pub started: Instant,
    /// What changed since the last screen, and each task's timeline.
    pub history: super::history::History,
}

impl App {
    pub fn new(now: Instant) -> App {
        App {
            shown: None,
            newest: None,
            selected: None,
            row: 0,
            order: Vec::new(),
            search: String::new(),
            typing: false,
            sort: Column::Task,
            reversed: false,
            coalesced: false,
            groups: Vec::new(),
            group_row: 0,
            group_tasks: None,
            hidden: Vec::new(),
            message: None,
            back: Vec::new(),
            paused: false,
            help: false,
            link: Link::Connecting,
            stuck_after: STUCK_AFTER,
            attention_first: false,
            deadlocked: Default::default(),
            counts: (0, 0, 0),
            colour: false,
            updates: 0,
            last_update: None,
            started: now,
            history: Default::default(),
        }
    }

    /// The dump on screen.
    pub fn dump(&self) -> Option<&Dump> {
        self.shown.as_deref()
    }

    /// The rows of the task table: the tasks the search finds, in the sort's order.
    pub fn rows(&self) -> Vec<&TaskView> {
        let Some(d) = self.shown.as_deref() else {
            return Vec::new();
        };
        self.order.iter().map(|&i| &d.tasks[i]).collect()
    }

    /// The groups of the coalesced view, largest first, and the selected one's row.
    pub fn groups(&self) -> (&[Group], usize) {
        (&self.groups, self.group_row)
    }

    /// Whether the table lists one group's tasks (opened from the coalesced view).
    pub fn in_group(&self) -> bool {
        self.group_tasks.is_some()
    }

    /// The selected task, if it is on screen.
    pub fn selected_task(&self) -> Option<&TaskView> {
        let id = self.selected?;
        self.rows().into_iter().find(|t| t.id == id)
    }

    /// Whether `t` wants a look, and why.
    pub fn attention(&self, t: &TaskView) -> Attention {
        if self.deadlocked.contains(&t.id) {
            Attention::Deadlock
        } else if t.state.suspended()
            && t.waiting_ns()
                .is_some_and(|(a, _)| a >= self.stuck_after.as_nanos() as u64)
        {
            Attention::Stuck
        } else {
            Attention::None
        }
    }

    /// Of the shown dump's tasks: how many wait cycles, how many tasks in them, how many stuck.
    pub fn attention_counts(&self) -> (usize, usize, usize) {
        self.counts
    }

    /// A new snapshot arrived. Returns the dumps no longer needed, for the caller to drop where it
    /// costs the screen nothing (freeing 100,000 tasks takes milliseconds).
    pub fn update(&mut self, mut dump: Dump, now: Instant) -> Vec<Arc<Dump>> {
        // The feed judges live updates; a recording's state, or a document without verdicts,
        // is judged here.
        if dump.tasks.iter().all(|t| t.verdict.is_none()) {
            dump.judge();
        }
        self.link = Link::Connected;
        self.updates += 1;
        self.last_update = Some(now);
        let mut retired: Vec<Arc<Dump>> = self.newest.replace(Arc::new(dump)).into_iter().collect();
        if !self.paused {
            retired.extend(self.show_newest());
        }
        retired
    }

    /// The target went away or stopped answering: the last state stays on screen.
    pub fn disconnected(&mut self, why: String) {
        self.link = Link::Disconnected(why);
    }

    /// Updates per second since the first one.
    pub fn rate(&self, now: Instant) -> f64 {
        let secs = now.duration_since(self.started).as_secs_f64().max(0.001);
        self.updates as f64 / secs
    }

    /// How long ago the newest update came.
    pub fn age(&self, now: Instant) -> Option<Duration> {
        self.last_update.map(|t| now.duration_since(t))
    }

    /// Changes the state as `key` asks; what else it asks of the screen's loop.
    pub fn key(&mut self, key: Key) -> Effect {
        if self.help && key != Key::Quit {
            self.help = false;
            return Effect::Redraw;
        }
        if self.typing {
            return self.typed(key);
        }
        match key {
            Key::Quit => return Effect::Quit,
            Key::Toggle(state) => {
                match self.hidden.iter().position(|&s| s == state) {
                    Some(i) => {
                        self.hidden.remove(i);
                    }
                    None => self.hidden.push(state),
                }
                self.reorder();
            }
            Key::Save if self.shown.is_some() => return Effect::Save,
            Key::Step(n) if matches!(self.link, Link::Replay { .. }) => return Effect::Step(n),
            Key::Save | Key::Step(_) => {}
            _ if self.coalesced => self.group_key(key),
            _ => self.task_key(key),
        }
        Effect::Redraw
    }

    /// A key while a search is typed.
    fn typed(&mut self, key: Key) -> Effect {
        match key {
            Key::Char(c) => self.search.push(c),
            Key::Erase => {
                self.search.pop();
            }
            Key::Done => self.typing = false,
            Key::Quit => return Effect::Quit,
            _ => return Effect::Redraw,
        }
        self.reorder();
        Effect::Redraw
    }

    /// A key in the task table.
    fn task_key(&mut self, key: Key) {
        match key {
            Key::Search => self.typing = true,
            Key::Coalesce => {
                self.coalesced = true;
                self.group_tasks = None;
                self.reorder();
            }
            Key::Back if self.back.is_empty() && self.group_tasks.is_some() => {
                self.group_tasks = None;
                self.coalesced = true;
                self.reorder();
            }
            Key::NextSort => {
                self.sort = self.sort.next();
                self.reorder();
            }
            Key::AttentionFirst => {
                self.attention_first = !self.attention_first;
                self.reorder();
            }
            Key::Reverse => {
                self.reversed = !self.reversed;
                self.reorder();
            }
            Key::Up => self.select_row(self.row.saturating_sub(1)),
            Key::Down => self.select_row(self.row + 1),
            Key::Row(row) => self.select_row(row),
            Key::Top => self.select_row(0),
            Key::Bottom => self.select_row(usize::MAX),
            Key::Follow => self.follow(),
            Key::Back => {
                if let Some(id) = self.back.pop() {
                    self.select_id(id);
                }
            }
            Key::Pause => self.key_pause(),
            Key::Help => self.help = true,
            Key::Quit
            | Key::Char(_)
            | Key::Erase
            | Key::Done
            | Key::Toggle(_)
            | Key::Save
            | Key::Step(_) => {}
        }
    }

    /// A key in the coalesced view.
    fn group_key(&mut self, key: Key) {
        let last = self.groups.len().saturating_sub(1);
        match key {
            Key::Up => self.group_row = self.group_row.saturating_sub(1),
            Key::Down => self.group_row = (self.group_row + 1).min(last),
            Key::Top => self.group_row = 0,
            Key::Bottom => self.group_row = last,
            Key::Row(row) => self.group_row = row.min(last),
            Key::Follow => {
                if let Some(g) = self.groups.get(self.group_row) {
                    self.group_tasks = Some(g.task_ids.clone());
                    self.coalesced = false;
                    self.back.clear();
                    self.reorder();
                    self.select_row(0);
                }
            }
            Key::Coalesce => {
                self.coalesced = false;
                self.reorder();
            }
            Key::Search => self.typing = true,
            Key::Pause => self.key_pause(),
            Key::Help => self.help = true,
            _ => {}
        }
    }

    fn key_pause(&mut self) {
        self.paused = !self.paused;
        if !self.paused {
            self.show_newest();
        }
    }

    /// Shows the newest update; the one shown before, if any.
    fn show_newest(&mut self) -> Option<Arc<Dump>> {
        if let Some(newest) = self.newest.as_deref() {
            self.history.update(self.shown.as_deref(), newest);
        }
        let before = std::mem::replace(&mut self.shown, self.newest.clone());
        self.note_attention();
        self.reorder();
        before
    }

    /// Searches and sorts the shown tasks again, keeping the selection on its task if it is still there.
    fn reorder(&mut self) {
        let Some(d) = self.shown.clone() else {
            return;
        };
        let needle = self.search.to_lowercase();
        let group: Option<rustc_hash::FxHashSet<u64>> = self
            .group_tasks
            .as_ref()
            .map(|g| g.iter().copied().collect());
        let in_group = |id: u64| group.as_ref().is_none_or(|g| g.contains(&id));
        let mut order: Vec<usize> = (0..d.tasks.len())
            .filter(|&i| in_group(d.tasks[i].id) && !self.hidden.contains(&d.tasks[i].state))
            .filter(|&i| needle.is_empty() || found(&d.tasks[i], &needle))
            .collect();
        if self.coalesced {
            self.groups = coalesce(order.iter().map(|&i| &d.tasks[i]));
            self.group_row = self.group_row.min(self.groups.len().saturating_sub(1));
        }
        let t = |i: usize| &d.tasks[i];
        match self.sort {
            Column::Task => {}
            Column::Name => order.sort_by(|&a, &b| shown_name(t(a)).cmp(&shown_name(t(b)))),
            // Tasks serving no request last.
            Column::Request => order.sort_by(|&a, &b| {
                let key = |i: usize| t(i).request.as_ref().map(|r| (&r.target, &r.method));
                (key(a).is_none(), key(a)).cmp(&(key(b).is_none(), key(b)))
            }),
            Column::State => order.sort_by_key(|&i| t(i).state as u8),
            Column::Age => {
                order.sort_by_key(|&i| std::cmp::Reverse(t(i).waiting_ns().map(|w| w.0)))
            }
            Column::Polls => order.sort_by_key(|&i| std::cmp::Reverse(t(i).polls)),
            Column::Busy => order.sort_by_key(|&i| std::cmp::Reverse(t(i).busy_ns)),
            Column::Wakes => order.sort_by_key(|&i| std::cmp::Reverse(t(i).wakes)),
            Column::Leaf => {
                // Borrowed keys, found once per task: no string is copied.
                let keys: Vec<Option<(&str, Option<&crate::model::Loc>)>> = d
                    .tasks
                    .iter()
                    .map(|t| {
                        leaf_frame(&t.frames).map(|f| (&*f.meta.name, f.meta.location.as_ref()))
                    })
                    .collect();
                order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
            }
            Column::Site => order.sort_by(|&a, &b| t(a).spawned_at.cmp(&t(b).spawned_at)),
        }
        if self.reversed {
            order.reverse();
        }
        if self.attention_first {
            // Stable: within each kind, the order chosen above.
            order.sort_by_key(|&i| self.attention(t(i)));
        }
        let at = |id: u64| order.iter().position(|&i| d.tasks[i].id == id);
        match self.selected.and_then(at) {
            Some(row) => self.row = row,
            // Gone (or nothing selected yet): the same row, or the last one.
            None => {
                self.order = order;
                return self.select_row(self.row);
            }
        }
        self.order = order;
    }

    /// Finds the wait cycles and stuck tasks of the shown dump: once per update, not at each key.
    fn note_attention(&mut self) {
        let Some(d) = self.shown.clone() else {
            return;
        };
        self.deadlocked = d.deadlocks.iter().flatten().copied().collect();
        let stuck = d
            .tasks
            .iter()
            .filter(|t| self.attention(t) == Attention::Stuck)
            .count();
        self.counts = (d.deadlocks.len(), self.deadlocked.len(), stuck);
    }

    fn select_row(&mut self, row: usize) {
        let rows = self.rows();
        if rows.is_empty() {
            self.selected = None;
            self.row = 0;
            return;
        }
        let row = row.min(rows.len() - 1);
        self.selected = Some(rows[row].id);
        self.row = row;
    }

    fn select_id(&mut self, id: u64) {
        if let Some(row) = self.rows().iter().position(|t| t.id == id) {
            self.selected = Some(id);
            self.row = row;
        }
    }

    /// To the first task the selected one awaits (from its chain, root first), or else to the one that
    /// awaits it.
    fn follow(&mut self) {
        let Some(t) = self.selected_task() else {
            return;
        };
        // A JoinHandle it awaits, then the holder of what it waits for, then who awaits it.
        let holder = (self.dump().into_iter())
            .flat_map(|d| &d.waits)
            .find(|e| e.from == t.id && e.to != t.id)
            .map(|e| e.to);
        let target = first_awaited(&t.frames)
            .or_else(|| t.awaits_tasks.first().copied())
            .or(holder)
            .or_else(|| t.awaited_by.as_ref().map(|a| a.task));
        let from = t.id;
        if let Some(to) = target.filter(|to| self.rows().iter().any(|t| t.id == *to)) {
            self.back.push(from);
            self.select_id(to);
        }
    }
}

/// The first task any frame of `frames` awaits, in pre-order.
fn first_awaited(frames: &[FrameNode]) -> Option<u64> {
    let mut stack: Vec<&FrameNode> = frames.iter().rev().collect();
    while let Some(f) = stack.pop() {
        if let Some(&t) = f.awaits_tasks.first() {
            return Some(t);
        }
        stack.extend(f.children.iter().rev());
    }
    None
}

/// Whether task `t` is what the search `needle` (lower case) asks for: `on:TEXT` a task whose leaf
/// waits on something its words contain (`on:mutex @ 0x55d1`, `on:channel`), `holds:TEXT` a task
/// holding a lock or a channel's end they contain, anything else a task that mentions it.
fn found(t: &TaskView, needle: &str) -> bool {
    if let Some(text) = needle.strip_prefix("on:") {
        let waits = |f: &FrameNode| {
            (f.waits_on.as_deref())
                .and_then(crate::view::values::wait_text)
                .is_some_and(|w| w.to_lowercase().contains(text.trim()))
        };
        return any_frame(&t.frames, &waits);
    }
    if let Some(text) = needle.strip_prefix("holds:") {
        let holds = |f: &FrameNode| {
            (f.holds.iter()).any(|h| {
                crate::view::values::held_text(h)
                    .to_lowercase()
                    .contains(text.trim())
            })
        };
        return any_frame(&t.frames, &holds);
    }
    t.mentions(needle)
}

/// The name a task is listed by: the program's, else the one from its chain.
fn shown_name(t: &TaskView) -> Option<&str> {
    t.name.as_deref().or(t.derived_name.as_deref())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{handshake, sample};
    use asyncdump_protocol::Snapshot;

    /// Three tasks: 1 awaits 2 (through its JoinHandle), 3 is on its own.
    pub(crate) fn three() -> Snapshot {
        let mut s = sample();
        let mut second = s.tasks[0].clone();
        second.id = 2;
        second.awaited_by = Some(asyncdump_protocol::Awaiter {
            task: 1,
            frame: Some(12),
        });
        let mut third = s.tasks[0].clone();
        third.id = 3;
        s.tasks.push(second);
        s.tasks.push(third);
        for (t, name) in s.tasks.iter_mut().zip(["alpha", "beta", "gamma"]) {
            t.name = Some(name.into());
        }
        s
    }

    fn app_with(s: &Snapshot) -> App {
        let now = Instant::now();
        let mut app = App::new(now);
        app.update(Dump::build(&handshake(), s, 0), now);
        app
    }

    #[test]
    fn the_first_task_is_selected_and_arrows_move_within_the_table() {
        let mut app = app_with(&three());
        assert_eq!(app.selected, Some(1));
        app.key(Key::Up);
        assert_eq!(app.selected, Some(1), "stays at the top");
        app.key(Key::Down);
        app.key(Key::Down);
        app.key(Key::Down);
        assert_eq!(app.selected, Some(3), "stays at the bottom");
        app.key(Key::Top);
        assert_eq!(app.selected, Some(1));
    }

    #[test]
    fn the_selection_follows_its_task_through_updates() {
        let mut app = app_with(&three());
        app.key(Key::Bottom);
        assert_eq!(app.selected, Some(3));
        // Task 1 completes and leaves the table: task 3 moves up a row and stays selected.
        let mut s = three();
        s.tasks.remove(0);
        app.update(Dump::build(&handshake(), &s, 0), Instant::now());
        assert_eq!(app.selected, Some(3));
        // Task 3 goes too: the row it was on is selected.
        s.tasks.pop();
        app.update(Dump::build(&handshake(), &s, 0), Instant::now());
        assert_eq!(app.selected, Some(2));
    }

    #[test]
    fn enter_follows_the_edge_and_backspace_returns() {
        let mut app = app_with(&three());
        app.key(Key::Follow);
        assert_eq!(app.selected, Some(2), "task 1's frame awaits task 2");
        app.key(Key::Follow);
        assert_eq!(app.selected, Some(1), "task 2 is awaited by task 1");
        app.key(Key::Back);
        assert_eq!(app.selected, Some(2));
        app.key(Key::Back);
        assert_eq!(app.selected, Some(1));
        app.key(Key::Back);
        assert_eq!(app.selected, Some(1), "nothing left to go back to");
    }

    /// [`three`], where task 3 sleeps at its leaf and waits (by the wait graph) for a lock task 2
    /// holds in its frame.
    fn waiting_on_a_holder() -> Dump {
        use crate::model::values::{Local, Value, WaitKind, WaitOn};
        use crate::model::waits::{Held, Holder, WaitEdge, WaitsFor};
        let mut d = Dump::build(&handshake(), &three(), 0);
        let held = Held {
            lock: "Mutex".into(),
            write: false,
            addr: 0xa,
            local: "guard".into(),
            acquired_at: None,
            polled: true,
            stopped_at: None,
        };
        Arc::make_mut(&mut d.tasks[1].frames)[0].holds = vec![held.clone()];
        let deadline = Value::Instant {
            monotonic_ns: 1,
            age_ns: Some(-60_000_000_000),
        };
        Arc::make_mut(&mut d.tasks[2].frames)[0].waits_on = Some(Box::new(WaitOn {
            kind: WaitKind::Sleep,
            parts: vec![Local::new("deadline", "Instant", deadline)],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        }));
        let holder = Holder {
            task: 2,
            frame: "read_frame".into(),
            at: None,
            held,
        };
        d.waits = vec![WaitEdge {
            from: 3,
            to: 2,
            waits_in: None,
            waits_at: None,
            any_of: false,
            on: WaitsFor::Lock { holder },
        }];
        d
    }

    #[test]
    fn enter_follows_a_wait_to_the_holder_and_searches_find_waiters_and_holders() {
        let now = Instant::now();
        let mut app = App::new(now);
        app.update(waiting_on_a_holder(), now);
        app.key(Key::Bottom);
        app.key(Key::Follow);
        assert_eq!(
            app.selected,
            Some(2),
            "task 3 waits for the lock task 2 holds"
        );
        let search = |app: &mut App, text: &str| {
            app.key(Key::Search);
            for c in text.chars() {
                app.key(Key::Char(c));
            }
            app.key(Key::Done);
            let ids: Vec<u64> = app.rows().iter().map(|t| t.id).collect();
            app.key(Key::Search);
            for _ in text.chars() {
                app.key(Key::Erase);
            }
            app.key(Key::Done);
            ids
        };
        assert_eq!(search(&mut app, "on:deadline in 1m"), [3]);
        assert_eq!(search(&mut app, "holds:Mutex @ 0xa"), [2]);
        assert_eq!(search(&mut app, "holds:0xb"), Vec::<u64>::new());
    }

    #[test]
    fn pause_holds_the_screen_while_updates_keep_coming() {
        let mut app = app_with(&three());
        app.key(Key::Pause);
        let mut s = three();
        s.tasks.truncate(1);
        app.update(Dump::build(&handshake(), &s, 0), Instant::now());
        assert_eq!(app.rows().len(), 3, "held");
        assert_eq!(app.updates, 2, "still counted");
        app.key(Key::Pause);
        assert_eq!(app.rows().len(), 1, "the newest shows on resume");
    }

    #[test]
    fn help_closes_on_any_key_and_quit_quits() {
        let mut app = app_with(&three());
        app.key(Key::Help);
        assert!(app.help);
        app.key(Key::Down);
        assert!(!app.help);
        assert_eq!(app.selected, Some(1), "the key only closed the help");
        assert_eq!(app.key(Key::Quit), Effect::Quit);
    }

    #[test]
    fn a_search_narrows_the_table_as_it_is_typed_and_keeps_it_after() {
        let mut app = app_with(&three());
        app.key(Key::Search);
        app.key(Key::Char('B'));
        app.key(Key::Char('e'));
        let ids = |app: &App| app.rows().iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&app), [2], "case-insensitive, on the name");
        assert_eq!(
            app.selected,
            Some(2),
            "task 1 is not shown: the row's task is selected"
        );
        app.key(Key::Down);
        assert_eq!(ids(&app), [2], "while typing, keys are text or editing");
        app.key(Key::Done);
        assert!(!app.typing);
        // Frames and files are searched too: every task's chain has `read_frame` in `src/main.rs`.
        app.key(Key::Search);
        app.key(Key::Erase);
        app.key(Key::Erase);
        for c in "main.rs".chars() {
            app.key(Key::Char(c));
        }
        assert_eq!(ids(&app), [1, 2, 3]);
        app.key(Key::Char('x'));
        assert!(ids(&app).is_empty());
        assert_eq!(app.selected, None);
    }

    #[test]
    fn sorting_cycles_columns_and_reverses_keeping_the_selection() {
        let mut app = app_with(&three());
        app.key(Key::Down);
        assert_eq!(app.selected, Some(2));
        app.key(Key::NextSort);
        assert_eq!(app.sort, Column::Name);
        app.key(Key::Reverse);
        let names = app
            .rows()
            .iter()
            .map(|t| t.name.as_deref().unwrap().to_owned())
            .collect::<Vec<_>>();
        assert_eq!(names, ["gamma", "beta", "alpha"]);
        assert_eq!(app.selected, Some(2), "still beta");
    }

    #[test]
    fn c_groups_identical_chains_and_enter_lists_a_groups_tasks_until_backspace() {
        // Tasks 2 and 3 have the same chain; task 1 is completed, a group of its own.
        let mut s = three();
        s.tasks[0].state = asyncdump_protocol::TaskState::Completed { at_ns: 1 };
        let mut app = app_with(&s);
        app.key(Key::Coalesce);
        let (groups, row) = app.groups();
        let sizes: Vec<usize> = groups.iter().map(|g| g.count).collect();
        assert_eq!(sizes, [2, 1], "largest first");
        assert_eq!(row, 0);
        app.key(Key::Follow);
        assert!(!app.coalesced && app.in_group());
        let ids: Vec<u64> = app.rows().iter().map(|t| t.id).collect();
        assert_eq!(ids, [2, 3]);
        assert_eq!(app.selected, Some(2));
        app.key(Key::Back);
        assert!(app.coalesced && !app.in_group(), "back to the groups");
        app.key(Key::Coalesce);
        assert_eq!(app.rows().len(), 3, "every task again");
    }

    #[test]
    fn state_toggles_hide_and_show_the_tasks_in_a_state() {
        let mut s = three();
        s.tasks[1].state = asyncdump_protocol::TaskState::Completed { at_ns: 1 };
        let mut app = app_with(&s);
        let ids = |app: &App| app.rows().iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&app), [1, 2, 3]);
        app.key(Key::Toggle(State::Completed));
        assert_eq!(ids(&app), [1, 3]);
        app.key(Key::Toggle(State::Idle));
        assert!(ids(&app).is_empty());
        app.key(Key::Toggle(State::Idle));
        app.key(Key::Toggle(State::Completed));
        assert_eq!(ids(&app), [1, 2, 3]);
    }

    #[test]
    fn s_asks_the_screen_to_save_what_is_shown() {
        let mut app = App::new(Instant::now());
        assert_eq!(app.key(Key::Save), Effect::Redraw, "nothing to save yet");
        let mut app = app_with(&three());
        assert_eq!(app.key(Key::Save), Effect::Save);
    }

    #[test]
    fn a_disconnect_keeps_the_last_state() {
        let mut app = app_with(&three());
        app.disconnected("the agent closed the connection".into());
        assert_eq!(app.rows().len(), 3);
        assert!(matches!(app.link, Link::Disconnected(_)));
    }

    /// Tasks 1 and 2 await each other; 3 and 4 are suspended, 4 for longer than the threshold.
    pub(crate) fn cycle_and_stuck() -> Snapshot {
        let mut s = crate::testing::edge_snapshot(&[(1, 2), (2, 1)]);
        for t in &mut s.tasks {
            t.last_poll_end_ns = Some(s.now_ns - 1_000_000_000);
        }
        s.tasks[3].last_poll_end_ns = Some(s.now_ns - 1_500_000_000);
        s
    }

    #[test]
    fn deadlocked_then_stuck_tasks_come_first_on_demand() {
        let mut app = App::new(Instant::now());
        app.stuck_after = Duration::from_millis(1_200);
        app.update(
            Dump::build(&handshake(), &cycle_and_stuck(), 0),
            Instant::now(),
        );
        app.key(Key::Reverse);
        let ids = |app: &App| app.rows().iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&app), [4, 3, 2, 1]);
        app.key(Key::AttentionFirst);
        assert_eq!(
            ids(&app),
            [2, 1, 4, 3],
            "the cycle, then the stuck one, each in the sort's order"
        );
        let attention: Vec<Attention> = app.rows().iter().map(|t| app.attention(t)).collect();
        assert_eq!(
            attention,
            [
                Attention::Deadlock,
                Attention::Deadlock,
                Attention::Stuck,
                Attention::None
            ]
        );
        assert_eq!(app.attention_counts(), (1, 2, 1));
        app.key(Key::AttentionFirst);
        assert_eq!(ids(&app), [4, 3, 2, 1]);
    }
}
