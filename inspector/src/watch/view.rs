//! Drawing the live view: the task table, the selected task's section (as `dump` prints it), and the
//! status bar. State is never shown by colour alone: the words are there, and the selection is
//! reversed video, so a monochrome terminal or `NO_COLOR` reads the same.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

use super::state::{App, Column, Link};
use crate::model::{FrameNode, TaskView};
use crate::view::names::{short, short_path};
use crate::view::text::{self, state_word};
use crate::view::{Dur, duration};

/// The keys, as `?` lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("↑ ↓  k j", "select a task"),
    ("g G", "first, last task"),
    ("Enter", "follow the edge to the awaited (or awaiting) task"),
    ("Backspace", "back to where Enter came from"),
    (
        "/",
        "search names, types, frames and files (Enter or Esc ends typing)",
    ),
    ("o  r", "sort by the next column, reverse the sort"),
    ("c", "group identical chains (Enter lists a group's tasks)"),
    (
        "1 2 3 4",
        "show or hide idle, scheduled, running, completed tasks",
    ),
    (
        "s",
        "save what is shown as a JSON snapshot (as dump --json)",
    ),
    ("space", "pause the screen (updates go on)"),
    (
        "← →",
        "replaying a recording: previous, next update (Shift: ten)",
    ),
    ("?", "this help"),
    ("q  Ctrl-C", "quit"),
];

pub fn draw(f: &mut Frame<'_>, app: &App, now: Instant) {
    let [table, detail, status] = Layout::vertical([
        Constraint::Percentage(45),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
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
    let titles = [
        Column::Task,
        Column::Name,
        Column::State,
        Column::Age,
        Column::Polls,
    ]
    .map(|c| {
        let mark = match (c == app.sort, app.reversed) {
            (false, _) => "",
            (true, false) => " ▼",
            (true, true) => " ▲",
        };
        format!("{}{mark}", c.title())
    });
    let header = titles.into_iter().chain(["leaf".to_owned()]).collect();
    let widths = [12, 14, 10, 9, 6];
    let (skip, selected) = window(area, tasks.len(), selected);
    let rows = tasks
        .into_iter()
        .skip(skip)
        .take(area.height.into())
        .map(row)
        .collect();
    render_table(f, area, header, &widths, rows, selected);
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
                Cell::from(leaf(&g.frames)),
            ])
        })
        .collect();
    let header = ["count", "tasks", "state", "for", "leaf"]
        .map(String::from)
        .to_vec();
    render_table(f, area, header, &[7, 14, 10, 16], rows, selected);
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
    let widths = widths
        .iter()
        .map(|&w| Constraint::Length(w))
        .chain([Constraint::Fill(1)]);
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::BOTTOM))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    let mut state = TableState::default();
    state.select(selected);
    f.render_stateful_widget(table, area, &mut state);
}

fn row(t: &TaskView) -> Row<'_> {
    let id = match (t.agent_id, t.tokio_id) {
        (Some(id), _) => id.to_string(),
        (None, Some(id)) => format!("tokio {id}"),
        (None, None) => t.id.to_string(),
    };
    let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    Row::new([
        Cell::from(id),
        Cell::from(t.name.as_deref().unwrap_or_default().to_owned()),
        Cell::from(state_word(t.state)),
        Cell::from(t.state_age_ns.map_or("-".to_owned(), duration)),
        Cell::from(opt(t.polls)),
        Cell::from(leaf(&t.frames)),
    ])
}

/// The chain's leaf: the deepest frame of its first branch, with where it is. A `poll_fn` closure
/// names nothing; the frame that awaits it does (`Receiver::recv`).
fn leaf(frames: &[FrameNode]) -> String {
    let (mut at, mut above) = (frames.first(), None);
    while let Some(f) = at {
        match f.children.first() {
            Some(c) => (above, at) = (Some(f), Some(c)),
            None => break,
        }
    }
    let Some(mut f) = at else {
        return String::new();
    };
    if f.meta.name.contains("::poll_fn::PollFn<")
        && let Some(parent) = above
    {
        f = parent;
    }
    let m = &f.meta;
    match m.suspended_at.as_ref().or(m.location.as_ref()) {
        Some(l) => format!("{} at {}:{}", short(&m.name), short_path(&l.file), l.line),
        None => short(&m.name).into_owned(),
    }
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
            let mut s = String::new();
            text::write_task(&mut s, d, t, text::Style::default());
            s
        }
        (Some(_), None) => "no task".to_owned(),
        (None, _) => "waiting for the first snapshot…".to_owned(),
    };
    f.render_widget(
        Paragraph::new(Text::raw(body)).wrap(Wrap { trim: false }),
        area,
    );
}

fn status_line(app: &App, now: Instant) -> Line<'static> {
    let mut parts = Vec::new();
    if let Some(d) = app.dump() {
        parts.push(format!("pid {} ({})", d.process.pid, d.process.program));
    }
    parts.push(match &app.link {
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
            Dur(at_ms * 1_000_000),
            Dur(total_ms * 1_000_000)
        ),
    });
    let live = matches!(
        app.link,
        Link::Connecting | Link::Connected | Link::Disconnected(_)
    );
    // What changes what is shown comes first: a narrow terminal cuts the end.
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
    if let Some(d) = app.dump() {
        let s = &d.snapshot;
        parts.push(format!(
            "{} tasks: {} idle, {} scheduled, {} running",
            s.tasks_total, s.idle, s.scheduled, s.running
        ));
    }
    if live {
        parts.push(format!("{:.1} updates/s", app.rate(now)));
        if let Some(age) = app.age(now) {
            parts.push(format!("updated {} ago", Dur(age.as_nanos() as u64)));
        }
    }
    parts.push("? keys".to_owned());
    Line::from(parts.join(" · ")).style(Style::new().add_modifier(Modifier::REVERSED))
}

fn draw_help(f: &mut Frame<'_>) {
    let area = f.area();
    let width = area.width.min(84);
    let height = (KEYS.len() as u16 + 2).min(area.height);
    let at = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let lines: Vec<Line<'_>> = KEYS
        .iter()
        .map(|(k, what)| Line::from(format!("{k:<12} {what}")))
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
    use crate::model::Dump;
    use crate::model::tests::handshake;
    use crate::watch::state::Key;
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
    fn a_narrow_terminal_still_shows_table_detail_and_status() {
        insta::assert_snapshot!(screen(&app(), 60, 20));
    }
}
