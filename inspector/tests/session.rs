//! The inspector as a library: a `Session` kept attached across snapshots plans once, for every root
//! type of the binary, so a task of a root type first seen later is decoded without planning again.

use asyncdump::attach::target::Target;
use asyncdump::model::{Dump, Source};
use asyncdump::session::{Session, SessionOptions};

use crate::support::Fixture;

fn late_task(dump: &Dump) -> Option<&asyncdump::model::TaskView> {
    dump.tasks
        .iter()
        .find(|t| t.name.as_deref() == Some("late"))
}

#[test]
fn a_root_type_that_appears_after_attaching_is_decoded_with_the_plan_made_at_attach() {
    let fx = Fixture::start("plain_tasks", &["--late", "2000"]);
    let options = SessionOptions::default();
    let mut session = Session::attach(&Target::Pid(fx.pid), &options).expect("attached");
    let first = session.snapshot(false).expect("snapshot");
    assert!(late_task(&first).is_none(), "spawned 2 s after ready");
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
    assert_eq!(later.decoding.plan_types, types_before, "not planned again");
    assert_eq!(
        later.decoding.plan_ns, first.decoding.plan_ns,
        "not planned again"
    );
}

#[test]
fn a_subscription_decodes_a_root_type_that_appears_later() {
    let fx = Fixture::start("plain_tasks", &["--late", "2000"]);
    let mut session = Session::attach(&Target::Pid(fx.pid), &SessionOptions::default()).unwrap();
    session.subscribe(100, false).expect("subscribed");
    let (first, _) = session.next_update().expect("the full state");
    assert!(late_task(&first).is_none(), "spawned 2 s after ready");
    for _ in 0..100 {
        let (dump, _) = session.next_update().expect("an update");
        if let Some(late) = late_task(&dump).filter(|t| !t.frames.is_empty()) {
            assert_eq!(late.frames[0].meta.name, "plain_tasks::late_arrival");
            assert_eq!(late.frames[0].meta.source, Source::Decoded);
            assert_eq!(dump.decoding.note, None, "every root type is in the plan");
            return;
        }
    }
    panic!("the late task never showed decoded within 100 updates");
}
