//! Chains through the futures that hold futures, in tasks spawned with plain `tokio::spawn`: each
//! future a collection holds is a branch under the collection's line, down to what it awaits.

use crate::support::{Fixture, asyncdump_ok, at_line, has_root};

/// A section's task as edges name it: its title up to the name derived from its chain.
fn label(section: &str) -> &str {
    let title = section.lines().next().unwrap_or_default();
    title
        .split(" · ")
        .next()
        .unwrap()
        .split(" (")
        .next()
        .unwrap()
}

/// The section of the task rooted at `ROOT` (a qualified name).
fn section<'a>(text: &'a str, root: &str) -> &'a str {
    text.split("\n\n")
        .find(|s| has_root(s, root))
        .unwrap_or_else(|| panic!("a task rooted at {root}:\n{text}"))
}

/// `collections::NAME` decoded at `depth`, at the line of the fixture's source containing `needle`.
fn frame(depth: usize, name: &str, needle: &str) -> String {
    let at = at_line("collections", needle);
    format!(
        "{}collections::{name} at {at} [decoded]",
        "  ".repeat(depth)
    )
}

/// How many lines of `section` are exactly `line`.
fn count(section: &str, line: &str) -> usize {
    section.lines().filter(|l| *l == line).count()
}

fn dump() -> (Fixture, String) {
    let fx = Fixture::start("collections", &[]);
    let pid = fx.pid.to_string();
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&["dump", &pid]);
        if text.contains("5 tasks: 5 idle") && !text.contains("(not started;") {
            return (fx, text);
        }
    }
    panic!("the tasks never all waited:\n{text}");
}

#[test]
fn every_future_a_collection_holds_is_a_branch_down_to_what_it_awaits() {
    let (fx, text) = dump();
    let sleep = "awaiting tokio::time::sleep::Sleep";
    // FuturesUnordered, drained with `next()`: the stream the `Next` borrows, then each future.
    let s = section(&text, "collections::drain_unordered");
    assert!(
        s.contains(&format!(
            "{}\n    futures::stream::FuturesUnordered [decoded]\n",
            frame(1, "drain_unordered", "set.next().await")
        )),
        "{s}"
    );
    let fetch = frame(3, "fetch_item", "from_secs(3600 + n)");
    assert_eq!(count(s, &fetch), 3, "{s}");
    assert_eq!(count(s, &format!("        {sleep}")), 3, "{s}");
    // buffer_unordered(2) of four pages, collected: the two in flight.
    let s = section(&text, "collections::crawl");
    assert!(
        s.contains("    futures::stream::FuturesUnordered [decoded]\n"),
        "{s}"
    );
    let page = frame(3, "fetch_page", "rx.await.unwrap_or(0)");
    assert_eq!(count(s, &page), 2, "{s}");
    // join_all of 40: a FuturesOrdered, whose futures are a FuturesUnordered's.
    let s = section(&text, "collections::join_many");
    assert!(s.contains("    futures::future::join_all [decoded]\n      futures::stream::FuturesUnordered [decoded]\n"), "{s}");
    let part = frame(4, "wait_part", "from_secs(7200 + n)");
    // Text shows 16 branches of a frame and counts the rest; the JSON document has them all.
    assert_eq!(count(s, &part), 16, "{s}");
    assert!(
        s.contains("\n        … 24 more branches (40 in all)"),
        "{s}"
    );
    let doc = crate::support::dump_json(fx.pid, &["--type", "join_many"]);
    let task = doc["tasks"][0].to_string();
    assert_eq!(
        task.matches("\"name\":\"collections::wait_part\"").count(),
        40,
        "{task}"
    );
    // select_all over a Vec of boxed futures.
    let s = section(&text, "collections::race");
    assert!(
        s.contains("    futures::future::select_all [decoded]\n"),
        "{s}"
    );
    let racer = frame(3, "wait_part", "from_secs(7200 + n)");
    assert_eq!(count(s, &racer), 3, "{s}");
    // A boxed `dyn Future`: typed by its vtable, walked like any other.
    let s = section(&text, "collections::run_boxed");
    let inner = frame(2, "boxed_inner", "let _ = rx.await;");
    assert!(
        s.contains(&format!(
            "{inner}\n      awaiting tokio::sync::oneshot::Receiver<u64>"
        )),
        "{s}"
    );
}

/// A reqwest client whose server never answers (hyper-util's pool and connection tasks underneath):
/// the crawler's `buffer_unordered` of `fetch_page` calls is followed into each call, through
/// reqwest and hyper-util, down to the channel its request was handed to its connection on, and on
/// to the connection task that holds that channel's sender; the connection tasks hyper-util spawns
/// as boxed futures are named by what their box holds. Before: the crawl ended at
/// `Collect<…>`/`Fold<…>`, the connection tasks read `root core::pin::Pin<…>` over `awaiting
/// futures_util::future::future::Map<…>`, and no edge joined a request to its connection.
#[test]
fn an_http_clients_requests_are_followed_down_to_the_connection_task_serving_each() {
    let fx = Fixture::start("crawler", &[]);
    let pid = fx.pid.to_string();
    let text = (0..50)
        .map(|_| asyncdump_ok(&["dump", &pid]))
        .find(|t| t.matches("UpgradeableConnection<").count() >= 6 && t.contains("4 tasks: 4 idle"))
        .expect("the crawl and its three connections, idle");
    let s = section(&text, "crawler::crawl");
    let page = format!(
        "{}\n",
        crate::support::at_line("crawler", "client.get(&url).send().await")
    );
    let fetch = format!("      crawler::fetch_page at {}", page.trim_end());
    assert_eq!(count(s, &format!("{fetch} [decoded]")), 3, "{s}");
    let chain = [
        "        reqwest::async_impl::client::<HyperService as Service>::call::{async block#0} at reqwest-",
        "          hyper_util::client::legacy::client::Client::send_request<Connector, Body> at hyper-util-",
        "            hyper_util::client::legacy::client::Client::try_send_request<Connector, Body> at hyper-util-",
        "              hyper::client::conn::http1::SendRequest::try_send_request::{async block#0}<Body> at hyper-",
        "                awaiting tokio::sync::oneshot::Receiver<…>",
    ];
    for step in chain {
        assert_eq!(
            s.lines().filter(|l| l.starts_with(step)).count(),
            3,
            "{step}\n{s}"
        );
    }
    assert!(
        !s.contains("awaiting dyn Future"),
        "no trait object that is not a future: {s}"
    );
    let connections: Vec<&str> = text
        .split("\n\n")
        .filter(|t| {
            t.contains("  root hyper::client::conn::http1::upgrades::UpgradeableConnection<")
        })
        .collect();
    assert_eq!(connections.len(), 3, "{text}");
    assert!(!text.contains("root core::pin::Pin<"), "{text}");
    // Each request waits for the connection task holding its response's sender: one edge from each
    // receiver to a different connection, and each connection awaited by the crawl.
    let crawl = label(s);
    let mut served: Vec<&str> = s
        .lines()
        .filter_map(|l| l.strip_prefix("                  → awaits "))
        .collect();
    served.sort_unstable();
    served.dedup();
    assert_eq!(
        served.len(),
        3,
        "three connections serve the three requests: {s}"
    );
    for c in &connections {
        let label = label(c);
        assert!(served.contains(&label), "{label} serves a request: {s}");
        assert!(
            c.contains(&format!("  awaited by {crawl} at crawler::crawl → ")),
            "{c}"
        );
    }
    // The receivers' waker is the `FuturesUnordered`'s, named by the binary's own DWARF.
    assert_eq!(
        (s.matches("holds a waker made by futures_util::stream::futures_unordered::")).count(),
        3,
        "{s}"
    );
}
