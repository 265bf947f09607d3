//! Drawing the live view: the task table, the selected task's section (as `dump` prints it), and the
//! status bar. State is never shown by colour alone: the words are there, and the selection is
//! reversed video, so a monochrome terminal or `NO_COLOR` reads the same.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

use super::input::BINDINGS;
use super::state::{App, Attention, Column, Link};
use crate::model::{FrameNode, ReadFrom, TaskView, summary};
use crate::names::{short, short_path};
use crate::view::text::{self, state_word};
use crate::view::{Dur, duration};

/// The screen's parts: the table, the detail pane, the status bar.
fn areas(screen: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Percentage(45),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(screen)
}

/// The row of the table (task or group, counted from the first) drawn at line `y` of a screen of
/// `size`, for a mouse click.
pub fn row_at(app: &App, size: Rect, y: u16) -> Option<usize> {
    let [table, ..] = areas(size);
    // Below the header, above the bottom border.
    let line = y.checked_sub(table.y + 1)?;
    if line + 2 >= table.height {
        return None;
    }
    let (len, selected) = if app.coalesced {
        let (groups, row) = app.groups();
        (groups.len(), (!groups.is_empty()).then_some(row))
    } else {
        let rows = app.rows();
        let at = app
            .selected
            .and_then(|id| rows.iter().position(|t| t.id == id));
        (rows.len(), at)
    };
    let (skip, _) = window(table, len, selected);
    let row = skip + usize::from(line);
    (row < len).then_some(row)
}

pub fn draw(f: &mut Frame<'_>, app: &App, now: Instant) {
    let [table, detail, status] = areas(f.area());
    draw_table(f, app, table);
    draw_detail(f, app, detail);
    f.render_widget(Paragraph::new(status_line(app, now)), status);
    if app.help {
        draw_help(f);
    }
}

fn draw_table(f: &mut Frame<'_>, app: &App, area: Rect) {
    if app.coalesced {
        return draw_groups(f, app, area);
    }
    let tasks = app.rows();
    let selected = app
        .selected
        .and_then(|id| tasks.iter().position(|t| t.id == id));
    let requests = tasks.iter().any(|t| t.request.is_some());
    let sites = tasks.iter().any(|t| t.spawned_at.is_some());
    let columns = columns(area.width, requests, sites);
    let header = columns
        .iter()
        .map(|&(c, _)| {
            let mark = match (c == app.sort, app.reversed) {
                (false, _) => "",
                (true, false) => " ▼",
                (true, true) => " ▲",
            };
            format!("{}{mark}", c.title())
        })
        .collect();
    // The leaf takes what the others leave; it is last, or before the spawn site.
    let widths: Vec<u16> = columns.iter().map(|&(_, w)| w).collect();
    let (skip, selected) = window(area, tasks.len(), selected);
    let rows = tasks
        .into_iter()
        .skip(skip)
        .take(area.height.into())
        .map(|t| row(app, t, &columns))
        .collect();
    render_table(f, area, header, &widths, rows, selected);
}

/// The columns that fit `width`, each with its width (0: the leaf, which fills the rest). The least
/// needed go first as the terminal narrows. The request's column is there when a task serves one,
/// the spawn site's when a task has one (the agent's tasks do).
fn columns(width: u16, requests: bool, sites: bool) -> Vec<(Column, u16)> {
    let mut out = vec![(Column::Task, 12)];
    match width {
        150.. => out.push((Column::Name, 28)),
        70.. => out.push((Column::Name, 14)),
        _ => {}
    }
    match width {
        _ if !requests => {}
        170.. => out.push((Column::Request, 30)),
        120.. => out.push((Column::Request, 20)),
        _ => {}
    }
    out.extend([(Column::State, 16), (Column::Age, 9)]);
    if width >= 90 {
        out.push((Column::Polls, 7));
    }
    if width >= 110 {
        out.extend([(Column::Busy, 9), (Column::Wakes, 7)]);
    }
    out.push((Column::Leaf, 0));
    // The leaf keeps room: the spawn site goes first where a request takes its place.
    if sites && width >= if requests { 200 } else { 150 } {
        out.push((Column::Site, 36));
    }
    out
}

/// The coalesced view's table: one row per group of identical chains, largest first.
fn draw_groups(f: &mut Frame<'_>, app: &App, area: Rect) {
    let (groups, selected) = app.groups();
    let selected = (!groups.is_empty()).then_some(selected);
    let (skip, selected) = window(area, groups.len(), selected);
    let rows = groups
        .iter()
        .skip(skip)
        .take(area.height.into())
        .map(|g| {
            let age = match (g.min_age_ns, g.max_age_ns) {
                (Some(a), Some(b)) if a != b => format!("{}–{}", Dur(a), Dur(b)),
                (Some(a), _) => duration(a),
                _ => "-".to_owned(),
            };
            Row::new([
                Cell::from(format!("×{}", g.count)),
                Cell::from(crate::view::id_ranges(&g.task_ids)),
                Cell::from(state_word(g.state)),
                Cell::from(age),
                Cell::from(one_line_owned(leaf(&g.frames))),
            ])
        })
        .collect();
    let header = ["count", "tasks", "state", "for", "leaf"]
        .map(String::from)
        .to_vec();
    render_table(f, area, header, &[7, 14, 10, 16, 0], rows, selected);
}

/// Which of `len` rows a table in `area` shows: how many to skip, and the selection among the rest.
/// Only those are built (a process may have 100,000 tasks); the selection scrolls into view at the
/// bottom, as ratatui scrolls a table.
fn window(area: Rect, len: usize, selected: Option<usize>) -> (usize, Option<usize>) {
    // The header and the bottom border take two lines.
    let visible = usize::from(area.height.saturating_sub(2)).max(1);
    let skip = selected.map_or(0, |s| (s + 1).saturating_sub(visible));
    (skip.min(len), selected.map(|s| s - skip))
}

/// A table of `rows` under a bold `header`, its columns `widths` wide and the last one the rest, with
/// the `selected` row reversed and marked (so that it reads without colour too).
fn render_table(
    f: &mut Frame<'_>,
    area: Rect,
    header: Vec<String>,
    widths: &[u16],
    rows: Vec<Row<'_>>,
    selected: Option<usize>,
) {
    let widths = widths.iter().map(|&w| match w {
        0 => Constraint::Fill(1),
        w => Constraint::Length(w),
    });
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::BOTTOM))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    let mut state = TableState::default();
    state.select(selected);
    f.render_stateful_widget(table, area, &mut state);
}

fn row<'a>(app: &App, t: &'a TaskView, columns: &[(Column, u16)]) -> Row<'a> {
    let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    let attention = app.attention(t);
    let cells = columns.iter().map(|&(c, width)| {
        Cell::from(one_line_owned(match c {
            Column::Task => match (t.agent_id, t.tokio_id) {
                (Some(id), _) => id.to_string(),
                (None, Some(id)) => format!("tokio {id}"),
                (None, None) => crate::view::TaskId(t.id).to_string(),
            },
            // A name from the chain reads as in `dump`: in parentheses.
            Column::Name => match (&t.name, &t.derived_name) {
                (Some(name), _) => name.to_string(),
                // The end of a path is what tells tasks apart: cut from the front.
                (None, Some(derived)) => tail(&format!("({derived})"), usize::from(width)),
                (None, None) => String::new(),
            },
            Column::Request => t.request.as_ref().map_or(String::new(), |r| {
                // The method whole, then the path's end, which tells requests apart.
                let method = r
                    .method
                    .as_deref()
                    .map_or(String::new(), |m| format!("{m} "));
                let room = usize::from(width).saturating_sub(method.chars().count());
                format!("{method}{}", tail(r.target.as_deref().unwrap_or(""), room))
            }),
            // In words, so that it reads without colour; what changed since the last screen first.
            Column::State => {
                let mark = app.history.change(t.id).map_or(' ', |c| c.mark());
                match attention {
                    Attention::Deadlock => format!("{mark}DEADLOCK"),
                    Attention::Stuck => format!("{mark}STUCK {}", state_word(t.state)),
                    Attention::None => format!("{mark}{}", state_word(t.state)),
                }
            }
            Column::Age => match t.waiting_ns() {
                Some((ns, false)) => duration(ns),
                Some((ns, true)) => format!("≥{}", duration(ns)),
                None => "-".to_owned(),
            },
            Column::Polls => opt(t.polls),
            Column::Busy => t.busy_ns.map_or("-".to_owned(), duration),
            Column::Wakes => opt(t.wakes),
            Column::Leaf => leaf(&t.frames),
            Column::Site => t.spawned_at.as_deref().map_or(String::new(), |l| {
                format!("{}:{}", short_path(&l.file), l.line)
            }),
        }))
    });
    let style = match (app.colour, attention) {
        (true, Attention::Deadlock) => Style::new().fg(Color::Red),
        (true, Attention::Stuck) => Style::new().fg(Color::Yellow),
        _ => Style::new(),
    };
    Row::new(cells.collect::<Vec<_>>()).style(style)
}

/// `s` with its control characters escaped (see [`crate::view::printable`]): the target's strings
/// reach the terminal only this way or through [`one_line_owned`].
fn printable_owned(s: String) -> String {
    match crate::view::printable(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// `s` for a table cell or the status bar: its line breaks escaped too (see
/// [`crate::view::one_line`]).
fn one_line_owned(s: String) -> String {
    match crate::view::one_line(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// The last `width` characters of `s`, the cut marked with `…`.
fn tail(s: &str, width: usize) -> String {
    let len = s.chars().count();
    if len <= width || width == 0 {
        return s.to_owned();
    }
    let kept: String = s.chars().skip(len - width + 1).collect();
    format!("…{kept}")
}

/// The chain's leaf, with where it is.
fn leaf(frames: &[FrameNode]) -> String {
    let Some(s) = summary(frames) else {
        return String::new();
    };
    let m = &s.leaf.meta;
    let mut out = match m.at() {
        Some(l) => format!("{} at {}:{}", short(&m.name), short_path(&l.file), l.line),
        None => short(&m.name).into_owned(),
    };
    match s.others {
        0 => {}
        1 => out.push_str(" · +1 branch"),
        n => out.push_str(&format!(" · +{n} branches")),
    }
    out
}

fn draw_detail(f: &mut Frame<'_>, app: &App, area: Rect) {
    let (groups, selected) = app.groups();
    let body = match (app.dump(), app.selected_task()) {
        (Some(d), _) if app.coalesced => match groups.get(selected) {
            Some(g) => {
                let mut s = String::new();
                text::write_group(&mut s, d, g, text::Style::default());
                s
            }
            None => "no task".to_owned(),
        },
        (Some(d), Some(t)) => {
            let mut s = attention_line(app, d, t);
            text::write_task(&mut s, d, t, text::Style::default());
            timeline(&mut s, app.history.timeline(t.id));
            s
        }
        (Some(_), None) => "no task".to_owned(),
        (None, _) => "waiting for the first snapshot…".to_owned(),
    };
    f.render_widget(
        Paragraph::new(Text::raw(printable_owned(body))).wrap(Wrap { trim: false }),
        area,
    );
}

/// The awaits the selected task was seen at in this view, oldest first, after its section:
/// `  at 3.25s idle in app::handler at src/main.rs:40, awaiting tokio::time::sleep::Sleep`.
fn timeline(out: &mut String, seen: &[super::history::Seen]) {
    if seen.is_empty() {
        return;
    }
    out.push_str("\nseen at, in this view (process uptime, oldest first):\n");
    for s in seen {
        out.push_str(&format!(
            "  at {} {}",
            Dur(s.uptime_ns),
            state_word(s.state)
        ));
        if let Some(own) = &s.at.own {
            out.push_str(&format!(" in {own}"));
        }
        if let Some(at) = &s.at.own_at {
            out.push_str(&format!(" at {}:{}", short_path(&at.file), at.line));
        }
        if let Some(leaf) = &s.at.leaf {
            out.push_str(&format!(", awaiting {}", crate::names::short(leaf)));
        }
        out.push('\n');
    }
}

/// Why the selected task wants attention, if it does, as the detail pane's first line.
fn attention_line(app: &App, d: &crate::model::Dump, t: &TaskView) -> String {
    match app.attention(t) {
        Attention::Deadlock => {
            let cycle = d.deadlocks.iter().find(|c| c.contains(&t.id));
            let path = cycle.map_or(String::new(), |c| {
                let mut ids: Vec<String> = c
                    .iter()
                    .map(|&id| crate::view::TaskId(id).to_string())
                    .collect();
                ids.push(ids[0].clone());
                ids.join(" → ")
            });
            format!("DEADLOCK: in the wait cycle {path}\n")
        }
        Attention::Stuck => format!(
            "STUCK: {} {}, over the {} of --stuck-after\n",
            match t.waiting_ns() {
                Some((_, true)) => "unchanged for ≥",
                _ => "suspended",
            },
            t.waiting_ns().map_or("-".to_owned(), |w| duration(w.0)),
            Dur(app.stuck_after.as_nanos() as u64)
        ),
        Attention::None => String::new(),
    }
}

fn status_line(app: &App, now: Instant) -> Line<'static> {
    let mut parts = Vec::new();
    if let Some(d) = app.dump() {
        parts.push(format!("pid {} ({})", d.process.pid, d.process.program));
    }
    parts.push(link_word(&app.link));
    if app
        .dump()
        .is_some_and(|d| d.process.read_from == ReadFrom::LiveMemory)
    {
        parts.push(format!(
            "no agent: its memory read every ≥{}",
            Dur(crate::session::MEMORY_MIN_INTERVAL.as_nanos() as u64)
        ));
    }
    // What changes what is shown comes first: a narrow terminal cuts the end.
    shown_parts(app, &mut parts);
    let (cycles, deadlocked, stuck) = app.attention_counts();
    if cycles > 0 {
        let what = if cycles == 1 { "cycle" } else { "cycles" };
        parts.push(format!(
            "DEADLOCK: {deadlocked} tasks in {cycles} wait {what}"
        ));
    }
    // Every worker blocked inside a poll: nothing else of the runtime's runs.
    for st in app.dump().map_or(&[][..], |d| &d.starved[..]) {
        let since = st.since.map(|s| format!(" for ≥ {}", Dur(s.ns)));
        parts.push(format!(
            "STARVED: {} of {} workers blocked{}, {} ready",
            st.blocked,
            st.workers,
            since.unwrap_or_default(),
            st.ready
        ));
    }
    if stuck > 0 {
        parts.push(format!(
            "{stuck} STUCK over {}",
            Dur(app.stuck_after.as_nanos() as u64)
        ));
    }
    // What changed since the last screen, as the state column marks it.
    let (new, moved, ran, gone) = app.history.counts();
    if new + moved + ran + gone > 0 {
        parts.push(format!("+{new} new →{moved} moved ↻{ran} ran, {gone} gone"));
    }
    if let Some(d) = app.dump() {
        let s = &d.snapshot;
        parts.push(format!(
            "{} tasks: {} idle, {} scheduled, {} running",
            s.tasks_total, s.idle, s.scheduled, s.running
        ));
    }
    let live = matches!(
        app.link,
        Link::Connecting | Link::Connected | Link::Disconnected(_)
    );
    if live {
        parts.push(format!("{:.1} updates/s", app.rate(now)));
        if let Some(age) = app.age(now) {
            parts.push(format!("updated {} ago", Dur(age.as_nanos() as u64)));
        }
    }
    parts.push("? keys".to_owned());
    Line::from(one_line_owned(parts.join(" · ")))
        .style(Style::new().add_modifier(Modifier::REVERSED))
}

/// Where the states come from, and how that is going.
fn link_word(link: &Link) -> String {
    match link {
        Link::Connecting => "connecting".to_owned(),
        Link::Connected => "connected".to_owned(),
        Link::Disconnected(why) => format!("DISCONNECTED: {why}"),
        Link::File(file) => format!("file {file}"),
        Link::Replay {
            file,
            pos,
            len,
            at_ms,
            total_ms,
        } => format!(
            "recording {file}: update {}/{len} at {} of {} (←/→ step)",
            pos + 1,
            // From the recording: a crafted one must not overflow.
            Dur(at_ms.saturating_mul(1_000_000)),
            Dur(total_ms.saturating_mul(1_000_000))
        ),
    }
}

/// What changes what is shown: pause, a message, hidden states, groups, a search.
fn shown_parts(app: &App, parts: &mut Vec<String>) {
    if app.paused {
        parts.push("PAUSED (space resumes)".to_owned());
    }
    if let Some(m) = &app.message {
        parts.push(m.clone());
    }
    if !app.hidden.is_empty() {
        let hidden: Vec<&str> = app.hidden.iter().map(|&s| state_word(s)).collect();
        parts.push(format!("hiding {}", hidden.join(", ")));
    }
    if app.coalesced {
        let n = app.groups().0.len();
        let groups = if n == 1 { "group" } else { "groups" };
        parts.push(format!("{n} {groups} (c lists tasks)"));
    } else if app.in_group() {
        parts.push(format!(
            "one group's {} tasks (Backspace returns)",
            app.rows().len()
        ));
    }
    match (app.typing, app.search.is_empty()) {
        (true, _) => parts.push(format!("search: {}▏", app.search)),
        (false, false) => parts.push(format!(
            "search \"{}\": {} shown",
            app.search,
            app.rows().len()
        )),
        (false, true) => {}
    }
}

fn draw_help(f: &mut Frame<'_>) {
    let area = f.area();
    let width = area.width.min(84);
    let height = (BINDINGS.len() as u16 + 2).min(area.height);
    let at = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let lines: Vec<Line<'_>> = BINDINGS
        .iter()
        .map(|b| Line::from(format!("{:<12} {}", b.keys, b.does)))
        .collect();
    f.render_widget(Clear, at);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" keys (any key closes) ")),
        at,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_derived_name_is_cut_from_the_front_where_paths_agree() {
        assert_eq!(tail("(axum_service::peer_read)", 14), "…e::peer_read)");
        assert_eq!(tail("(a::b)", 14), "(a::b)");
        assert_eq!(tail("(axum_service::peer_read)", 14).chars().count(), 14);
    }
    use crate::model::Dump;
    use crate::testing::handshake;
    use crate::watch::input::Key;
    use crate::watch::state::tests::three;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    /// The screen as text, one line per row, trailing spaces cut.
    fn screen(app: &App, width: u16, height: u16) -> String {
        let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
        let now = app.started + std::time::Duration::from_secs(1);
        term.draw(|f| draw(f, app, now)).unwrap();
        let buf = term.backend().buffer().clone();
        (0..height)
            .map(|y| {
                let line: String = (0..width).map(|x| buf[(x, y)].symbol()).collect();
                line.trim_end().to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn app() -> App {
        let mut app = App::new(Instant::now());
        let now = app.started;
        app.update(Dump::build(&handshake(), &three(), 0), now);
        app
    }

    #[test]
    fn the_table_lists_every_task_and_the_detail_shows_the_selected_one() {
        insta::assert_snapshot!(screen(&app(), 100, 24));
    }

    #[test]
    fn following_an_edge_shows_the_awaited_task() {
        let mut app = app();
        app.key(Key::Follow);
        insta::assert_snapshot!(screen(&app, 100, 24));
    }

    /// A recording's times come from its file: a crafted one is shown, never an overflow.
    #[test]
    fn a_recordings_crafted_times_do_not_overflow_the_status_bar() {
        let link = Link::Replay {
            file: "r.jsonl".into(),
            pos: 0,
            len: 1,
            at_ms: u64::MAX,
            total_ms: u64::MAX,
        };
        assert!(link_word(&link).starts_with("recording r.jsonl: update 1/1 at "));
    }

    #[test]
    fn help_lists_every_key() {
        let mut app = app();
        app.key(Key::Help);
        insta::assert_snapshot!(screen(&app, 100, 24));
    }

    #[test]
    fn a_disconnected_target_keeps_its_last_state_on_screen() {
        let mut app = app();
        app.disconnected("the agent closed the connection".into());
        insta::assert_snapshot!(screen(&app, 100, 24));
    }

    #[test]
    fn a_search_keeps_the_tasks_it_finds_and_says_so() {
        let mut app = app();
        app.key(Key::Search);
        for c in "beta".chars() {
            app.key(Key::Char(c));
        }
        app.key(Key::Done);
        insta::assert_snapshot!(screen(&app, 100, 24));
    }

    #[test]
    fn the_coalesced_view_shows_each_group_once_with_its_count() {
        let mut app = app();
        app.key(Key::Coalesce);
        insta::assert_snapshot!(screen(&app, 100, 24));
    }

    #[test]
    fn what_changed_since_the_last_screen_is_marked_and_the_detail_has_the_timeline() {
        use crate::watch::history::tests::{dump, task};
        let mut app = App::new(Instant::now());
        let now = app.started;
        let second = 1_000_000_000;
        app.update(
            dump(second, vec![task(1, 10, "Sleep"), task(2, 10, "Sleep")]),
            now,
        );
        app.update(
            dump(3 * second, vec![task(1, 12, "Acquire"), task(3, 5, "Recv")]),
            now,
        );
        insta::assert_snapshot!(screen(&app, 110, 24));
    }

    #[test]
    fn a_narrow_terminal_still_shows_table_detail_and_status() {
        insta::assert_snapshot!(screen(&app(), 60, 20));
    }

    fn attention_app(colour: bool) -> App {
        let now = Instant::now();
        let mut app = App::new(now);
        app.stuck_after = std::time::Duration::from_millis(1_200);
        app.colour = colour;
        let snap = crate::watch::state::tests::cycle_and_stuck();
        app.update(Dump::build(&handshake(), &snap, 0), now);
        app.key(Key::AttentionFirst);
        app
    }

    #[test]
    fn deadlocked_and_stuck_tasks_are_marked_in_words_listed_first_and_counted() {
        insta::assert_snapshot!(screen(&attention_app(false), 110, 16));
    }

    #[test]
    fn colour_adds_to_the_words_and_no_color_takes_it_away() {
        let fg_of_row = |app: &App, y: u16| {
            let mut term = Terminal::new(TestBackend::new(110, 16)).unwrap();
            term.draw(|f| draw(f, app, app.started)).unwrap();
            term.backend().buffer()[(30, y)].fg
        };
        let coloured = attention_app(true);
        // Row 1 is the selected (reversed) task 1; row 2 is task 2, deadlocked; row 3 task 4, stuck.
        assert_eq!(fg_of_row(&coloured, 2), Color::Red);
        assert_eq!(fg_of_row(&coloured, 3), Color::Yellow);
        let plain = attention_app(false);
        assert_eq!(fg_of_row(&plain, 2), Color::Reset);
        assert_eq!(fg_of_row(&plain, 3), Color::Reset);
    }

    #[test]
    fn a_click_on_a_row_selects_that_row_and_nothing_else_does() {
        let mut app = app();
        let size = Rect::new(0, 0, 100, 24);
        assert_eq!(row_at(&app, size, 0), None, "the header");
        assert_eq!(row_at(&app, size, 1), Some(0));
        assert_eq!(row_at(&app, size, 3), Some(2));
        assert_eq!(row_at(&app, size, 4), None, "below the last task");
        assert_eq!(row_at(&app, size, 20), None, "the detail pane");
        app.key(Key::Row(2));
        assert_eq!(app.selected, Some(3));
    }

    #[test]
    fn control_characters_and_line_breaks_in_names_and_frames_are_drawn_escaped() {
        let mut snap = crate::watch::state::tests::three();
        snap.tasks[0].name = Some("evil\x1b[2J\x07\nFORGED".into());
        snap.tasks[2].name = Some("c\nFORGED".into());
        snap.frame_metas[0].name = "frame\x1b]0;title".into();
        let now = Instant::now();
        let mut app = App::new(now);
        let mut dump = Dump::build(&handshake(), &snap, 0);
        dump.process.program = "svc\nFORGED".into();
        let _ = app.update(dump, now);
        let text = screen(&app, 120, 24);
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(text.contains(r"evil\u{1b}[2J\u{7}\nFORGED"), "{text}");
        let third = text.lines().find(|l| l.starts_with("  3 ")).unwrap();
        assert!(third.contains(r"c\nFORGED"), "a cell is one line: {text}");
        assert!(
            text.contains(r"pid 42 (svc\nFORGED)"),
            "so is the status bar: {text}"
        );
        assert!(text.contains(r"frame\u{1b}]0;title"), "{text}");
    }
}
