//! Values per frame (`dump -v`, `--fields`): the locals a suspended async fn holds across its await,
//! read from the process (through its agent or without it) or from a core, each formatted as Rust
//! writes it, and in `--json` as data.

use crate::agentless::dump_settled;
use crate::support::{Fixture, asyncdump_ok, dump_json, tempdir};

/// The locals lines of the `locals::handle` frame, in order.
fn locals_of_handle(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = (lines.iter())
        .position(|l| l.trim_start().starts_with("locals::handle at "))
        .unwrap_or_else(|| panic!("no handle frame:\n{text}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.contains("awaiting ") && !l.contains("[decoded]"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// A dump of the fixture with its values, once its handler is suspended.
fn dumped(fx: &Fixture, args: &[&str]) -> Vec<String> {
    let mut all = vec!["-v"];
    all.extend_from_slice(args);
    locals_of_handle(&dump_settled(fx.pid, &all, 1))
}

/// Every local the fixture's handler holds, as it must print (an `Instant`'s age and the
/// addresses vary, so those lines are checked by shape).
fn assert_the_handlers_locals(locals: &[String]) {
    let exact = [
        r#"req: Request = Request { id: 42, path: "/users/42", retries: 3 }"#,
        "peer: SocketAddr = 127.0.0.1:5432",
        r#"tags: Vec<&str> = ["a", "b", "c"]"#,
        "limit: Option<u32> = Some(10)",
        "timeout: Duration = 1.5s",
        r#"user: String = "user-42""#,
        r#"label: &str = "line\nbreak \u{1b}[31mred""#,
        "boxed: Box<i32> = Box(-42)",
        "ratio: f64 = 0.25",
        "letter: char = 'λ'",
        r#"verdict: Result<u16, String> = Err("refused")"#,
        "phase: Phase = Waiting { since_ms: 7 }",
    ];
    for want in exact {
        assert!(
            locals.iter().any(|l| l == want),
            "no `{want}` in {locals:#?}"
        );
    }
    let shared = locals
        .iter()
        .find(|l| l.starts_with("shared: Arc<Mutex<u64>> = Arc(Mutex<u64> @ 0x"));
    let shared = shared.unwrap_or_else(|| panic!("no shared in {locals:#?}"));
    assert!(shared.ends_with(") [strong 2, weak 1]"), "{shared}");
    assert!(
        locals
            .iter()
            .any(|l| l.starts_with("reply: Receiver<()> @ 0x")),
        "{locals:#?}"
    );
    assert_eq!(locals.len(), exact.len() + 3, "{locals:#?}");
}

#[test]
fn every_local_a_suspended_frame_holds_is_printed_with_its_value() {
    let fx = Fixture::start("locals", &[]);
    let locals = dumped(&fx, &[]);
    assert_the_handlers_locals(&locals);
    let started = locals
        .iter()
        .find(|l| l.starts_with("started: Instant = Instant("))
        .unwrap();
    assert!(started.ends_with("s ago)"), "{started}");
    // Text from the target never reaches the terminal raw.
    assert!(locals.iter().all(|l| !l.chars().any(char::is_control)));
}

#[test]
fn through_the_agent_the_values_are_the_same_as_read_from_outside() {
    let fx = Fixture::start("locals", &["--agent"]);
    let through_agent = dumped(&fx, &[]);
    let from_outside = dumped(&fx, &["--no-agent"]);
    assert_the_handlers_locals(&through_agent);
    let no_age = |ls: &[String]| -> Vec<String> {
        ls.iter()
            .filter(|l| !l.starts_with("started:"))
            .cloned()
            .collect()
    };
    assert_eq!(no_age(&through_agent), no_age(&from_outside));
}

/// Where the kernel lets the inspector read the process, it reads the values itself, which costs the
/// process nothing; where the kernel refuses (here strace makes every `process_vm_readv` fail, as a
/// security module would), they come over the agent's socket, the same.
#[test]
fn values_are_read_from_outside_where_the_kernel_allows_it_and_through_the_agent_where_not() {
    let fx = Fixture::start("locals", &["--agent"]);
    dump_settled(fx.pid, &[], 1);
    let traced = |refused: bool| {
        let mut strace = std::process::Command::new("strace");
        strace.args(["-f", "-e", "trace=process_vm_readv", "-o", "/dev/stderr"]);
        if refused {
            strace.args(["-e", "inject=process_vm_readv:error=EPERM"]);
        }
        let out = (strace.arg(env!("CARGO_BIN_EXE_asyncdump")))
            .args(["dump", &fx.pid.to_string(), "-v"])
            .env("XDG_CACHE_HOME", crate::support::plan_cache_of_this_run())
            .output()
            .expect("strace is installed");
        assert!(out.status.success(), "{out:?}");
        let calls = String::from_utf8_lossy(&out.stderr)
            .matches("process_vm_readv(")
            .count();
        (String::from_utf8_lossy(&out.stdout).into_owned(), calls)
    };
    let (text, calls) = traced(false);
    assert_the_handlers_locals(&locals_of_handle(&text));
    assert!(calls > 1, "the values read from outside: {calls} reads");
    let (text, calls) = traced(true);
    assert_the_handlers_locals(&locals_of_handle(&text));
    assert_eq!(
        calls, 1,
        "one refused read, then none: the rest through the agent"
    );
}

#[test]
fn stopped_threads_give_the_same_values() {
    let fx = Fixture::start("locals", &[]);
    assert_the_handlers_locals(&dumped(&fx, &["--stop"]));
}

#[test]
fn fields_chooses_locals_by_name_and_json_carries_them_as_data() {
    let fx = Fixture::start("locals", &[]);
    dump_settled(fx.pid, &[], 1);
    let doc = dump_json(fx.pid, &["--fields", "user,limit,tags,started"]);
    let frame = &doc["tasks"][0]["frames"][0];
    let locals = frame["locals"].as_array().expect("locals");
    let names: Vec<&str> = locals.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tags", "limit", "started", "user"]);
    assert_eq!(locals[0]["type"], "Vec<&str>");
    assert_eq!(locals[0]["value"]["seq"]["len"], 3);
    assert_eq!(locals[0]["value"]["seq"]["items"][2]["str"]["text"], "c");
    assert_eq!(locals[1]["value"]["variant"]["name"], "Some");
    assert_eq!(
        locals[1]["value"]["variant"]["fields"][0]["value"]["uint"],
        10
    );
    let age = locals[2]["value"]["instant"]["age_ns"]
        .as_i64()
        .expect("an age");
    assert!(age > 0, "{age}");
    assert_eq!(locals[3]["value"]["str"]["text"], "user-42");
    assert_eq!(locals[3]["value"]["str"]["len"], 7);
    // Without --values or --fields, no frame carries locals.
    let plain = dump_json(fx.pid, &[]);
    assert!(plain["tasks"][0]["frames"][0].get("locals").is_none());
}

#[test]
fn a_core_keeps_the_values_and_its_instants_have_no_age() {
    let fx = Fixture::start("locals", &[]);
    dump_settled(fx.pid, &[], 1);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "-v", "--core", core.to_str().unwrap()]);
    let locals = locals_of_handle(&text);
    assert_the_handlers_locals(&locals);
    let started = locals
        .iter()
        .find(|l| l.starts_with("started: Instant = Instant("))
        .unwrap();
    assert!(started.contains("monotonic"), "{started}");
}
