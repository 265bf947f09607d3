//! `dump --format folded` and `dump --svg`: the demo's chains as folded stacks and as a flame graph.

use std::time::Instant;

use crate::support::tempdir;
use crate::support::{Fixture, asyncdump_ok, at_line};

/// A frame of a folded line as expected: whole, or (a dependency's, whose lines move with its
/// version) by its start.
enum Expect {
    Is(String),
    StartsWith(&'static str),
}
use Expect::{Is, StartsWith};

fn check(line: &str, frames: &[Expect], weight: u64) {
    let (path, w) = line.rsplit_once(' ').expect("a weight");
    assert_eq!(w.parse::<u64>().unwrap(), weight, "{line}");
    let got: Vec<&str> = path.split(';').collect();
    assert_eq!(got.len(), frames.len(), "{line}");
    for (g, e) in got.iter().zip(frames) {
        match e {
            Is(s) => assert_eq!(g, s, "{line}"),
            StartsWith(s) => assert!(g.starts_with(s), "{g} in {line}"),
        }
    }
}

fn at(needle: &str) -> String {
    at_line("demo_service", needle)
}

#[test]
fn folded_stacks_give_each_distinct_chain_once_root_first_with_how_many_tasks_wait_in_it() {
    let fx = Fixture::start("demo_service", &[]);
    let pid = fx.pid.to_string();
    let out = asyncdump_ok(&["dump", &pid, "--format", "folded"]);
    // `main`'s own future (the fixture's `block_on`, parked) is a chain too, first by its name.
    let (main, lines): (Vec<&str>, Vec<&str>) = out
        .lines()
        .partition(|l| l.starts_with("asyncdump_fixtures::run::"));
    assert_eq!(main.len(), 1, "{out}");
    assert!(
        main[0].ends_with(";tokio::sync::oneshot::Receiver<()> 1"),
        "{out}"
    );
    assert_eq!(lines.len(), 5, "{out}");
    check(
        lines[0],
        &[
            Is(format!(
                "demo_service::consume_queue at {}",
                at("while rx.recv()")
            )),
            StartsWith("mpsc::Receiver::recv at tokio-"),
            Is("poll_fn in tokio::sync::mpsc::bounded::Receiver::recv".into()),
        ],
        1,
    );
    check(
        lines[1],
        &[
            Is(format!(
                "demo_service::flush_metrics at {}",
                at("tick.tick().await")
            )),
            StartsWith("tokio::time::interval::Interval::tick at tokio-"),
            Is("poll_fn in tokio::time::interval::Interval::tick".into()),
        ],
        1,
    );
    check(
        lines[2],
        &[
            Is(format!(
                "demo_service::handle_request at {}",
                at("load_user(db).await")
            )),
            Is(format!(
                "demo_service::load_user at {}",
                at("query_database(db).await")
            )),
            Is(format!(
                "demo_service::query_database at {}",
                at("        .await")
            )),
            Is(format!("oneshot::Receiver<String> at {}", at("db.frame("))),
        ],
        3,
    );
    check(
        lines[3],
        &[
            Is(format!(
                "demo_service::lock_order at {}",
                at("let _ = peer.await")
            )),
            Is("asyncdump_agent::JoinHandle<()>".into()),
        ],
        2,
    );
    check(
        lines[4],
        &[
            Is(format!(
                "demo_service::report at {}",
                at("let _ = request.await")
            )),
            Is("asyncdump_agent::JoinHandle<String>".into()),
        ],
        1,
    );
}

#[test]
fn weighed_by_suspended_time_a_line_holds_its_tasks_microseconds_suspended() {
    let before = Instant::now();
    let fx = Fixture::start("demo_service", &[]);
    let ready = Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = fx.pid.to_string();
    let asked = Instant::now();
    let out = asyncdump_ok(&["dump", &pid, "--format", "folded", "--weight", "suspended"]);
    let answered = Instant::now();
    let handlers = out
        .lines()
        .find(|l| l.starts_with("demo_service::handle_request"))
        .expect(&out);
    let us: u64 = handlers.rsplit_once(' ').unwrap().1.parse().unwrap();
    // Three handlers, each suspended since before the fixture said it was ready.
    let least = 3 * (asked - ready).as_micros() as u64;
    let most = 3 * (answered - before).as_micros() as u64;
    assert!(
        (least..=most).contains(&us),
        "{us} µs not in {least}..={most}"
    );
}

#[test]
fn a_flame_graph_is_an_svg_whose_boxes_name_the_frames_and_their_task_counts() {
    let fx = Fixture::start("demo_service", &[]);
    let svg_dir = tempdir();
    let svg = svg_dir.join("demo.svg");
    asyncdump_ok(&["dump", &fx.pid.to_string(), "--svg", svg.to_str().unwrap()]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let (mut root, mut titles, mut in_title) = (None, Vec::new(), false);
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Start(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                in_title = name == "title";
                root.get_or_insert(name);
            }
            quick_xml::events::Event::Text(t) if in_title => {
                titles.push(t.decode().unwrap().into_owned());
            }
            quick_xml::events::Event::Eof => break,
            _ => in_title = false,
        }
    }
    assert_eq!(root.as_deref(), Some("svg"));
    let handlers = format!(
        "demo_service::handle_request at {} (3 tasks,",
        at("load_user(db).await")
    );
    assert!(
        titles.iter().any(|t| t.starts_with(&handlers)),
        "{handlers} in {titles:?}"
    );
}
