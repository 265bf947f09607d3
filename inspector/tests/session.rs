//! The inspector as a library: a `Session` kept attached across snapshots plans its DWARF once, and
//! plans again when a task of a root type it has not seen appears.

use asyncdump::model::{Dump, Source};
use asyncdump::session::{Session, SessionOptions};
use asyncdump::target::Target;

use crate::support::Fixture;

fn late_task(dump: &Dump) -> Option<&asyncdump::model::TaskView> {
    dump.tasks
        .iter()
        .find(|t| t.name.as_deref() == Some("late"))
}

#[test]
fn a_root_type_that_appears_after_attaching_is_planned_and_decoded() {
    let fx = Fixture::start("plain_tasks", &["--late", "500"]);
    let options = SessionOptions::default();
    let mut session = Session::attach(&Target::Pid(fx.pid), &options).expect("attached");
    let first = session.snapshot(false).expect("snapshot");
    assert!(late_task(&first).is_none(), "spawned 500 ms after ready");
    assert!(first.decoding.enabled);
    let types_before = first.decoding.plan_types;
    let mut later = None;
    for _ in 0..100 {
        let dump = session.snapshot(false).expect("snapshot");
        if late_task(&dump).is_some_and(|t| !t.frames.is_empty()) {
            later = Some(dump);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let later = later.expect("the late task shows with its chain within 5 s");
    let late = late_task(&later).unwrap();
    let top = &late.frames[0].meta;
    assert_eq!(top.name, "plain_tasks::late_arrival");
    assert_eq!(top.source, Source::Decoded);
    assert_eq!(later.decoding.note, None, "every root type is in the plan");
    assert!(later.decoding.plan_types > types_before);
}
