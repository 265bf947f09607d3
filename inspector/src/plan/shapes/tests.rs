//! One spec per recognised shape, on type descriptions made by hand: which rule takes the type, what the
//! walker is told to read and follow, and how the decoder will show it.

use asyncdump_protocol::{Case, Discr, Edge, EdgeTarget, TypePlan};

use super::{RULES, any};
use crate::dwarf::synthetic::Types;
use crate::model::FastMap;
use crate::plan::Kind;
use crate::plan::builder::Builder;

/// What the planner made of one type and everything it reached.
struct Planned {
    types: Vec<TypePlan>,
    kinds: Vec<Kind>,
    hand_written: FastMap<u32, std::sync::Arc<crate::model::FrameInfo>>,
    sender_only: crate::model::FastSet<u32>,
    rules: FastMap<u64, &'static str>,
    top: u32,
}

fn planned(types: Types, die: u64) -> Planned {
    let debug = types.build();
    let mut b = Builder::new(&debug);
    let top = b.ty(die);
    Planned {
        types: b.types,
        kinds: b.kinds,
        hand_written: b.hand_written,
        sender_only: b.sender_only_types,
        rules: b.decided_by,
        top,
    }
}

impl Planned {
    fn plan(&self) -> &TypePlan {
        &self.types[self.top as usize]
    }
    fn kind(&self) -> &Kind {
        &self.kinds[self.top as usize]
    }
    /// The rule that decided type `die`.
    fn rule(&self, die: u64) -> &str {
        self.rules.get(&die).copied().unwrap_or("(no rule)")
    }
    /// The kind of the plan type an edge leads to.
    fn kind_at(&self, edge: &Edge) -> &Kind {
        let (EdgeTarget::Inline(t) | EdgeTarget::Pointer(t)) = edge.to else {
            panic!("not a typed edge: {edge:?}")
        };
        &self.kinds[t as usize]
    }
}

/// The shown name of a leaf or combinator kind, and a word for the others.
fn shown(kind: &Kind) -> String {
    match kind {
        Kind::Leaf(i) | Kind::Combinator(i) | Kind::Select(i) | Kind::JoinHandle(i) => {
            i.name.clone()
        }
        Kind::Oneshot(i) => format!("oneshot {}", i.name),
        other => format!("{other:?}")
            .split(['(', ' '])
            .next()
            .unwrap()
            .to_owned(),
    }
}

/// A future the plan reads no further: a struct with no fields.
fn opaque(t: &mut Types, name: &str) -> u64 {
    t.structure(name, 16)
}

/// `svc::{name}::{async_fn_env#0}`, suspended at line 12 on `awaitee` at offset 0.
fn async_fn(t: &mut Types, name: &str, awaitee: u64) -> u64 {
    t.state_machine(
        &format!("svc::{name}::{{async_fn_env#0}}"),
        80,
        72,
        &[(12, 0, awaitee)],
    )
}

/// `Arc<T>` as std lays it out: `Arc { ptr: NonNull { pointer: *const ArcInner { strong, weak, data } } }`.
fn arc(t: &mut Types, data: u64) -> u64 {
    let usize = t.base("usize", 8);
    let inner = t.structure("alloc::sync::ArcInner<T>", 32);
    t.member(inner, "strong", 0, usize)
        .member(inner, "weak", 8, usize)
        .member(inner, "data", 16, data);
    let ptr = t.pointer("*const alloc::sync::ArcInner<T>", inner);
    let non_null = t.structure("core::ptr::non_null::NonNull<alloc::sync::ArcInner<T>>", 8);
    t.member(non_null, "pointer", 0, ptr);
    let a = t.structure("alloc::sync::Arc<T, alloc::alloc::Global>", 8);
    t.member(a, "ptr", 0, non_null);
    a
}

#[test]
fn an_async_fn_is_followed_through_the_awaitee_of_each_suspend_state() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "handler", sleep);
    let p = planned(t, f);
    assert_eq!(p.rule(f), "async state machine");
    assert_eq!(
        p.plan().discr,
        Some(Discr {
            offset: 72,
            size: 1
        })
    );
    let [Case { value, edges }] = &p.plan().cases[..] else {
        panic!("one suspend state: {:?}", p.plan().cases)
    };
    assert_eq!((*value, edges[0].offset), (Some(3), 0));
    assert_eq!(shown(p.kind_at(&edges[0])), "tokio::time::Sleep");
    let Kind::Coroutine(states) = p.kind() else {
        panic!("{:?}", p.kind())
    };
    let suspended = &states[&3].info;
    assert_eq!(suspended.name, "svc::handler");
    assert_eq!(suspended.suspended_at.as_ref().map(|l| l.line), Some(12));
    assert!(states[&1].done && !states[&3].done);
}

#[test]
fn a_box_or_reference_is_followed_to_its_pointee() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "boxed", sleep);
    let b = t.pointer("alloc::boxed::Box<svc::boxed::{async_fn_env#0}>", f);
    let p = planned(t, b);
    assert_eq!(p.rule(b), "pointer");
    assert!(matches!(
        p.plan().always[..],
        [Edge {
            offset: 0,
            to: EdgeTarget::Pointer(_)
        }]
    ));
    assert_eq!(shown(p.kind_at(&p.plan().always[0])), "Coroutine");
}

#[test]
fn a_base_type_is_a_leaf() {
    let mut t = Types::new();
    let u = t.base("u64", 8);
    let p = planned(t, u);
    assert_eq!(
        (p.rule(u), shown(p.kind())),
        ("not a structure", "u64".into())
    );
}

#[test]
fn pin_is_seen_through_and_a_pin_without_its_pointer_is_a_leaf() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let b = t.pointer("alloc::boxed::Box<tokio::time::Sleep>", sleep);
    let pin = t.structure("core::pin::Pin<alloc::boxed::Box<tokio::time::Sleep>>", 8);
    t.member(pin, "__pointer", 0, b);
    let p = planned(t, pin);
    assert_eq!(p.rule(pin), "Pin");
    assert!(matches!(
        p.plan().always[..],
        [Edge {
            offset: 0,
            to: EdgeTarget::Inline(_)
        }]
    ));
    assert_eq!(shown(p.kind()), "Transparent");
    let mut t = Types::new();
    let odd = t.structure("core::pin::Pin<svc::Odd>", 8);
    let p = planned(t, odd);
    assert_eq!(
        (p.rule(odd), shown(p.kind())),
        ("Pin", "Pin<svc::Odd>".into())
    );
}

/// `Box<dyn Future>` with a data pointer and a second member named `second`, both at their place.
fn boxed_dyn(second: &str) -> (Types, u64) {
    let name =
        "alloc::boxed::Box<dyn core::future::future::Future<Output=()>, alloc::alloc::Global>";
    boxed_dyn_as(name, second)
}

/// A fat pointer named `name`, with its data pointer and vtable.
fn boxed_dyn_named(name: &str) -> (Types, u64) {
    boxed_dyn_as(name, "vtable")
}

fn boxed_dyn_as(name: &str, second: &str) -> (Types, u64) {
    let mut t = Types::new();
    let u8_ = t.base("u8", 1);
    let data = t.pointer("*const u8", u8_);
    let b = t.structure(name, 16);
    t.member(b, "pointer", 0, data).member(b, second, 8, data);
    (t, b)
}

/// A boxed trait object that is not a future, though its name mentions one (a tower `Service`
/// whose `Future` is boxed), is no `dyn Future`.
#[test]
fn only_a_pointer_to_dyn_future_itself_is_a_dyn_future() {
    let service = "alloc::boxed::Box<(dyn tower_service::Service<http::uri::Uri, Future=core::pin::Pin<alloc::boxed::Box<(dyn core::future::future::Future<Output=()> + core::marker::Send)>>> + core::marker::Send)>";
    for (name, is) in [
        (
            "alloc::boxed::Box<(dyn core::future::future::Future<Output=()> + core::marker::Send)>",
            true,
        ),
        ("&mut dyn core::future::future::Future<Output=()>", true),
        (
            "*mut (dyn core::future::future::Future<Output=u8> + core::marker::Send)",
            true,
        ),
        (service, false),
    ] {
        let (t, fat) = boxed_dyn_named(name);
        let p = planned(t, fat);
        assert_eq!(p.rule(fat) == "dyn Future", is, "{name}");
    }
}

#[test]
fn a_dyn_future_is_typed_by_its_vtable_and_declined_without_one() {
    let (t, b) = boxed_dyn("vtable");
    let p = planned(t, b);
    assert_eq!(p.rule(b), "dyn Future");
    let to = EdgeTarget::Dyn { vtable_offset: 8 };
    assert_eq!(p.plan().always, [Edge { offset: 0, to }]);
    let (t, b) = boxed_dyn("length");
    let p = planned(t, b);
    assert_eq!(p.rule(b), "struct or enum with future fields", "declined");
}

#[test]
fn a_boxed_slice_gives_each_element_by_its_stride() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let elem = async_fn(&mut t, "each", sleep);
    let data = t.pointer("*const svc::each::{async_fn_env#0}", elem);
    let usize = t.base("usize", 8);
    let s = t.structure("alloc::boxed::Box<[svc::each::{async_fn_env#0}]>", 16);
    t.member(s, "data_ptr", 0, data)
        .member(s, "length", 8, usize);
    let p = planned(t, s);
    assert_eq!(p.rule(s), "boxed slice");
    let [
        Edge {
            offset: 0,
            to:
                EdgeTarget::Slice {
                    len_offset: 8,
                    stride: 80,
                    ..
                },
        },
    ] = p.plan().always[..]
    else {
        panic!("{:?}", p.plan())
    };
}

#[test]
fn a_tuple_of_branches_is_followed_in_branch_order() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let (a, b) = (async_fn(&mut t, "a", sleep), async_fn(&mut t, "b", sleep));
    let tuple = t.structure("(svc::a::{async_fn_env#0}, svc::b::{async_fn_env#0})", 160);
    t.member(tuple, "__1", 80, b).member(tuple, "__0", 0, a);
    let p = planned(t, tuple);
    assert_eq!((p.rule(tuple), shown(p.kind())), ("tuple", "Tuple".into()));
    let offsets: Vec<u32> = p.plan().always.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 80]);
}

#[test]
fn an_annotated_frame_is_known_by_its_node_under_both_agent_paths() {
    for path in [
        "asyncdump_agent::task::frame::Framed",
        "asyncdump_agent::frame::Framed",
    ] {
        let mut t = Types::new();
        let sleep = opaque(&mut t, "tokio::time::Sleep");
        let node = opaque(&mut t, "asyncdump_agent::task::frame::Node");
        let framed = t.structure(&format!("{path}<tokio::time::Sleep>"), 64);
        t.member(framed, "inner", 0, sleep)
            .member(framed, "node", 16, node);
        let p = planned(t, framed);
        assert_eq!(p.rule(framed), "asyncdump_agent::Framed", "{path}");
        assert!(matches!(p.kind(), Kind::Framed { node_offset: 16 }));
        assert_eq!(p.plan().always[0].offset, 0);
    }
}

#[test]
fn the_agents_join_handle_reads_the_joined_tasks_cell() {
    let mut t = Types::new();
    let cell = opaque(&mut t, "asyncdump_agent::task::cell::TaskCell");
    let task = arc(&mut t, cell);
    let h = t.structure("asyncdump_agent::tokio_support::JoinHandle<u32>", 16);
    t.member(h, "inner", 0, cell).member(h, "task", 8, task);
    let p = planned(t, h);
    assert_eq!(p.rule(h), "asyncdump_agent::JoinHandle");
    assert_eq!(shown(p.kind()), "asyncdump_agent::JoinHandle<u32>");
    let edge = &p.plan().always[0];
    assert_eq!(edge.offset, 8);
    assert!(matches!(p.kind_at(edge), Kind::CellRef { plus: 16 }));
    // Without the field it knows, the handle is still named, as a leaf.
    let mut t = Types::new();
    let h = t.structure("asyncdump_agent::tokio_support::JoinHandle<u32>", 16);
    let p = planned(t, h);
    assert!(matches!(p.kind(), Kind::Leaf(_)));
    assert_eq!(shown(p.kind()), "asyncdump_agent::JoinHandle<u32>");
}

/// Through the agent, its task root names the agent's task, whose own walk shows the chain; without
/// it, the future it wraps is followed too (in `ManuallyDrop`, itself around a `MaybeDangling` in newer
/// standard libraries), and only then.
#[test]
fn a_task_root_of_the_agent_reads_which_task_it_is_and_without_it_the_future_inside() {
    let mut t = Types::new();
    let cell = opaque(&mut t, "asyncdump_agent::task::cell::TaskCell");
    let task = arc(&mut t, cell);
    let fut = t.structure("svc::F", 24);
    let dangling = t.structure("core::mem::maybe_dangling::MaybeDangling<svc::F>", 24);
    t.member(dangling, "__0", 0, fut)
        .type_param(dangling, "P", fut);
    let dropped = t.structure("core::mem::manually_drop::ManuallyDrop<svc::F>", 24);
    t.member(dropped, "value", 0, dangling)
        .type_param(dropped, "T", fut);
    let root = t.structure(
        "asyncdump_agent::task::instrument::Instrumented<svc::F>",
        32,
    );
    t.member(root, "inner", 8, dropped)
        .member(root, "task", 0, task);
    let p = planned(t, root);
    assert_eq!(p.rule(root), "asyncdump_agent::Instrumented");
    assert_eq!(
        p.plan().always.len(),
        1,
        "through the agent: the task cell only"
    );
    let Kind::AgentRoot { inner: Some(inner) } = p.kind() else {
        panic!("{:?}", p.kind());
    };
    assert_eq!(inner.offset, 8, "the future, inline in the root");
    assert_eq!(
        shown(p.kind_at(inner)),
        "svc::F",
        "the wrapped future itself"
    );
}

#[test]
fn tokios_join_handle_reads_the_joined_tasks_header() {
    let mut t = Types::new();
    let header = opaque(&mut t, "tokio::runtime::task::core::Header");
    let ptr = t.pointer("*const tokio::runtime::task::core::Header", header);
    let non_null = t.structure(
        "core::ptr::non_null::NonNull<tokio::runtime::task::core::Header>",
        8,
    );
    t.member(non_null, "pointer", 0, ptr);
    let raw = t.structure("tokio::runtime::task::raw::RawTask", 8);
    t.member(raw, "ptr", 0, non_null);
    let h = t.structure("tokio::runtime::task::join::JoinHandle<u32>", 8);
    t.member(h, "raw", 0, raw);
    let p = planned(t, h);
    assert_eq!(p.rule(h), "tokio::task::JoinHandle");
    assert_eq!(shown(p.kind()), "tokio::task::JoinHandle<u32>");
    assert!(matches!(p.kind_at(&p.plan().always[0]), Kind::HeaderRef));
}

#[test]
fn a_runtime_tasks_stage_is_followed_only_while_it_runs() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "spawned", sleep);
    let running = t.structure("tokio::runtime::task::core::Stage<F>::Running", 88);
    t.member(running, "__0", 8, f);
    let finished = opaque(&mut t, "tokio::runtime::task::core::Stage<F>::Finished");
    let stage = t.structure("tokio::runtime::task::core::Stage<F>", 88);
    t.variants(
        stage,
        ("__tag", 0, 4, true),
        &[
            (Some(0), "Running", 0, running),
            (Some(1), "Finished", 0, finished),
        ],
    );
    let p = planned(t, stage);
    assert_eq!(p.rule(stage), "tokio task stage");
    let [
        Case {
            value: Some(0),
            edges,
        },
    ] = &p.plan().cases[..]
    else {
        panic!("{:?}", p.plan().cases)
    };
    assert_eq!(edges[0].offset, 8);
}

/// An enum whose future is in its niche's dataful variant (the one without a value of its own, the
/// walker's default case): the other variants still get a case each, leading nowhere, or their
/// discriminants would select the default and their bytes be read as a future. (actix's
/// `Option<StopSignal>` read as `Some` when `None` gave 512 bogus branches.)
#[test]
fn variants_with_values_of_their_own_are_cases_even_where_they_lead_nowhere() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "spawned", sleep);
    let some = t.structure("core::option::Option<app::Wait>::Some", 24);
    t.member(some, "__0", 0, f);
    let none = opaque(&mut t, "core::option::Option<app::Wait>::None");
    let option = t.structure("core::option::Option<app::Wait>", 24);
    t.variants(
        option,
        ("__tag", 0, 8, true),
        &[
            (Some(0x8000_0000_0000_0001), "None", 0, none),
            (None, "Some", 0, some),
        ],
    );
    let p = planned(t, option);
    let mut cases: Vec<(Option<u64>, usize)> = (p.plan().cases.iter())
        .map(|c| (c.value, c.edges.len()))
        .collect();
    cases.sort_unstable();
    assert_eq!(cases, [(None, 1), (Some(0x8000_0000_0000_0001), 0)]);
}

#[test]
fn a_oneshot_receiver_reads_its_channel_state_and_waker() {
    let mut t = Types::new();
    let usize = t.base("usize", 8);
    let waker = t.structure("core::task::wake::RawWaker", 16);
    t.member(waker, "data", 0, usize)
        .member(waker, "vtable", 8, usize);
    let inner = t.structure("tokio::sync::oneshot::Inner<u32>", 48);
    t.member(inner, "state", 0, usize)
        .member(inner, "rx_task", 16, waker);
    let a = arc(&mut t, inner);
    let some = t.structure("core::option::Option<alloc::sync::Arc<Inner>>::Some", 8);
    t.member(some, "__0", 0, a);
    let none = opaque(
        &mut t,
        "core::option::Option<alloc::sync::Arc<Inner>>::None",
    );
    let option = t.structure("core::option::Option<alloc::sync::Arc<Inner>>", 8);
    t.variants(
        option,
        ("__tag", 0, 8, true),
        &[(Some(0), "None", 0, none), (None, "Some", 0, some)],
    );
    let rx = t.structure("tokio::sync::oneshot::Receiver<u32>", 8);
    t.member(rx, "inner", 0, option);
    let p = planned(t, rx);
    assert_eq!(p.rule(rx), "tokio::sync::oneshot::Receiver");
    assert_eq!(
        shown(p.kind()),
        "oneshot tokio::sync::oneshot::Receiver<u32>"
    );
    let EdgeTarget::Pointer(view) = p.plan().always[0].to else {
        panic!("{:?}", p.plan())
    };
    let view = &p.types[view as usize];
    // The channel's state word, then the waker's vtable and data beside it, from one read.
    assert_eq!(
        view.discr,
        Some(Discr {
            offset: 16,
            size: 8
        })
    );
    let read: Vec<_> = view.always.iter().map(|e| shown(p.kind_at(e))).collect();
    assert_eq!(read, ["WakerVtable", "WakerData"]);
}

/// `PollFn<{closure}>` whose closure captures `captures`.
fn poll_fn(t: &mut Types, path: &str, captures: &[(&str, u64, u64)]) -> u64 {
    let closure = t.structure("svc::main::{async_fn#0}::{closure_env#0}", 32);
    for &(name, off, ty) in captures {
        t.member(closure, name, off, ty);
    }
    let f = t.structure(
        &format!("{path}<svc::main::{{async_fn#0}}::{{closure_env#0}}>"),
        32,
    );
    t.member(f, "f", 0, closure);
    f
}

/// A `PollFn` at `path` over a one-branch tuple, captured by reference, and with `mask` a select's
/// `disabled` byte before it.
fn tokio_macro(path: &str, mask: bool) -> (Types, u64) {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let a = async_fn(&mut t, "a", sleep);
    let tuple = t.structure("(svc::a::{async_fn_env#0},)", 80);
    t.member(tuple, "__0", 0, a);
    let to_tuple = t.pointer("&mut (svc::a::{async_fn_env#0},)", tuple);
    let u8_ = t.base("u8", 1);
    let mut captures = vec![("futures", 8, to_tuple)];
    if mask {
        captures.insert(0, ("disabled", 0, u8_));
    }
    let f = poll_fn(&mut t, path, &captures);
    (t, f)
}

#[test]
fn tokio_join_and_select_show_their_branches_and_select_its_mask() {
    let (t, join) = tokio_macro("core::future::poll_fn::PollFn", false);
    let p = planned(t, join);
    assert_eq!(p.rule(join), "tokio::join! / tokio::select!");
    assert_eq!(shown(p.kind()), "tokio::join!");
    let (t, select) = tokio_macro("tokio::future::poll_fn::PollFn", true);
    let p = planned(t, select);
    assert_eq!(shown(p.kind()), "tokio::select!");
    let read: Vec<_> = p
        .plan()
        .always
        .iter()
        .map(|e| shown(p.kind_at(e)))
        .collect();
    assert_eq!(read, ["SelectMask", "Transparent"], "the mask first");
}

#[test]
fn futures_join_and_select_show_their_numbered_branches_and_other_poll_fns_are_declined() {
    let path = "futures_util::future::poll_fn::PollFn";
    for (captures, label) in [
        (["_fut1", "_fut0"], "futures::join!"),
        (["_ref___1", "_ref___0"], "futures::select!"),
    ] {
        let mut t = Types::new();
        let sleep = opaque(&mut t, "tokio::time::Sleep");
        let (a, b) = (async_fn(&mut t, "a", sleep), async_fn(&mut t, "b", sleep));
        let (pa, pb) = (t.pointer("&mut A", a), t.pointer("&mut B", b));
        let f = poll_fn(&mut t, path, &[(captures[0], 8, pb), (captures[1], 0, pa)]);
        let p = planned(t, f);
        assert_eq!(
            (p.rule(f), shown(p.kind())),
            ("futures::join! / futures::select!", label.into())
        );
        let offsets: Vec<u32> = p.plan().always.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, [0, 8], "branches in order");
    }
    let mut t = Types::new();
    let u8_ = t.base("u8", 1);
    let f = poll_fn(&mut t, path, &[("state", 0, u8_)]);
    let p = planned(t, f);
    assert_eq!(p.rule(f), "struct or enum with future fields");
}

#[test]
fn timeout_and_join_all_are_lines_of_their_own_over_their_future() {
    for (name, field, label) in [
        (
            "tokio::time::timeout::Timeout<F>",
            "value",
            "tokio::time::timeout",
        ),
        (
            "futures_util::future::join_all::JoinAll<F>",
            "kind",
            "futures::future::join_all",
        ),
    ] {
        let mut t = Types::new();
        let sleep = opaque(&mut t, "tokio::time::Sleep");
        let f = async_fn(&mut t, "inner", sleep);
        let c = t.structure(name, 96);
        t.member(c, field, 0, f);
        let p = planned(t, c);
        assert_eq!(shown(p.kind()), label);
        let [edge] = &p.plan().always[..] else {
            panic!("{:?}", p.plan())
        };
        assert_eq!(
            (edge.offset, shown(p.kind_at(edge))),
            (0, "Coroutine".into())
        );
    }
}

#[test]
fn maybe_done_and_futures_wrappers_follow_their_future_even_a_leaf() {
    let wrapper = |name: &str, awaits_fn: bool| {
        let mut t = Types::new();
        let sleep = opaque(&mut t, "tokio::time::Sleep");
        let inner = if awaits_fn {
            async_fn(&mut t, "w", sleep)
        } else {
            sleep
        };
        let holding = t.structure(&format!("{name}::Future"), 88);
        t.member(holding, "__0", 8, inner);
        let done = opaque(&mut t, &format!("{name}::Done"));
        let w = t.structure(name, 88);
        t.variants(
            w,
            ("__tag", 0, 1, true),
            &[(Some(0), "Future", 0, holding), (Some(1), "Done", 0, done)],
        );
        let p = planned(t, w);
        (p.rule(w).to_owned(), p.plan().cases.len())
    };
    let maybe = "futures_util::future::maybe_done::MaybeDone<F>";
    assert_eq!(wrapper(maybe, false), ("MaybeDone".into(), 1));
    assert_eq!(
        wrapper("tokio::future::maybe_done::MaybeDone<F>", false).0,
        "MaybeDone"
    );
    let map = "futures_util::future::future::Map<F>";
    assert_eq!(wrapper(map, true), ("futures_util wrapper".into(), 1));
    assert_eq!(
        wrapper(map, false),
        ("futures_util wrapper".into(), 1),
        "the leaf it wraps is what the task awaits, not the adapter"
    );
}

/// A futures_util struct with more to follow than its inner future (`Fold` holds the stream it
/// folds and, between items, the fold's own future) is any struct: every field that leads on.
#[test]
fn a_futures_struct_with_more_than_its_future_is_followed_through_each_field() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let (set, _, _) = futures_unordered(&mut t, sleep);
    let step = async_fn(&mut t, "step", sleep);
    let fold = t.structure("futures_util::stream::stream::fold::Fold<St, Fut>", 128);
    t.member(fold, "stream", 0, set)
        .member(fold, "future", 24, step);
    let p = planned(t, fold);
    assert_eq!(p.rule(fold), any::FIELDS_LEADING_TO_FUTURES.name);
    let offsets: Vec<u32> = p.plan().always.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 24]);
}

#[test]
fn any_other_struct_is_followed_through_owned_futures_only() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "served", sleep);
    let boxed = t.pointer("alloc::boxed::Box<svc::served::{async_fn_env#0}>", f);
    let shared = arc(&mut t, f);
    let usize = t.base("usize", 8);
    let conn = t.structure("hyper::proto::Conn<T>", 32);
    t.member(conn, "count", 0, usize)
        .member(conn, "shared", 8, shared)
        .member(conn, "fut", 16, boxed);
    let p = planned(t, conn);
    assert_eq!(p.rule(conn), any::FIELDS_LEADING_TO_FUTURES.name);
    let offsets: Vec<u32> = p.plan().always.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [16], "the box it owns, never the Arc it shares");
    let mut t = Types::new();
    let usize = t.base("usize", 8);
    let state = t.structure("hyper::proto::State", 8);
    t.member(state, "count", 0, usize);
    let p = planned(t, state);
    assert!(matches!(p.kind(), Kind::Leaf(_)));
}

/// `tokio::sync::oneshot::Sender<T> { inner: Option<Arc<Inner>> }`, the `Option` a bare pointer.
fn oneshot_sender(t: &mut Types) -> u64 {
    let inner = opaque(t, "alloc::sync::ArcInner<tokio::sync::oneshot::Inner<T>>");
    let ptr = t.pointer("*const ArcInner<Inner<T>>", inner);
    let sender = t.structure("tokio::sync::oneshot::Sender<T>", 8);
    t.member(sender, "inner", 0, ptr);
    sender
}

/// `Option<T>` of `size` bytes with a tag at 0 and `Some`'s payload at `at`.
fn option_of(t: &mut Types, inner: u64, size: u64, at: u64) -> u64 {
    let none = opaque(t, "core::option::Option<T>::None");
    let some = t.structure("core::option::Option<T>::Some", size);
    t.member(some, "__0", at, inner);
    let option = t.structure("core::option::Option<T>", size);
    t.variants(
        option,
        ("__tag", 0, 8, false),
        &[(Some(0), "None", 0, none), (Some(1), "Some", 0, some)],
    );
    option
}

/// A hand-written future that owns a oneshot `Sender` (hyper's connection: its dispatcher's
/// `callback: Option<Callback>`) is read down to the sender, to name who can wake the task awaiting
/// the receiver; holding no future, it is the leaf its task awaits, while a sender-holder inside
/// another hand-written type is state of that type, never a leaf of its own.
#[test]
fn a_hand_written_future_is_read_down_to_the_senders_it_owns() {
    let mut t = Types::new();
    let sender = oneshot_sender(&mut t);
    let callback = option_of(&mut t, sender, 16, 8);
    let usize = t.base("usize", 8);
    let client = t.structure("hyper::proto::h1::dispatch::Client<B>", 24);
    t.member(client, "rx_closed", 0, usize)
        .member(client, "callback", 8, callback);
    let conn = t.structure("hyper::client::conn::http1::Connection<T, B>", 40);
    t.member(conn, "state", 0, usize)
        .member(conn, "dispatch", 16, client);
    let p = planned(t, conn);
    assert_eq!(p.rule(conn), any::FIELDS_LEADING_TO_FUTURES.name);
    let [edge] = &p.plan().always[..] else {
        panic!("one edge, to the dispatch: {:?}", p.plan())
    };
    assert_eq!(edge.offset, 16);
    let EdgeTarget::Inline(client_t) = edge.to else {
        panic!("{edge:?}")
    };
    let option = &p.types[client_t as usize].always;
    assert_eq!(option.iter().map(|e| e.offset).collect::<Vec<_>>(), [8]);
    let EdgeTarget::Inline(option_t) = option[0].to else {
        panic!("{option:?}")
    };
    let some = &p.types[option_t as usize].cases[0].edges[0];
    assert_eq!(
        (some.offset, shown(p.kind_at(some))),
        (8, "OneshotSender".into())
    );
    let (sender_only, hand_written) = (p.sender_only.clone(), p.hand_written.clone());
    for t in [p.top, client_t, option_t] {
        assert!(sender_only.contains(&t), "each holds senders only");
    }
    assert!(
        hand_written.contains_key(&p.top),
        "named where a future is expected"
    );
}

/// A pin-project state enum whose other variants a cargo feature left out (actix-http's connection
/// `State` without HTTP/2) has one variant and no discriminant: it is followed through that variant.
#[test]
fn an_enum_of_one_variant_is_followed_through_its_fields() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "served", sleep);
    let h1 = t.structure("actix_http::service::State::H1", 64);
    t.member(h1, "dispatcher", 8, f);
    let state = t.structure("actix_http::service::State<T>", 64);
    t.sole_variant(state, "H1", 0, h1);
    let p = planned(t, state);
    assert_eq!(p.rule(state), any::FIELDS_LEADING_TO_FUTURES.name);
    let offsets: Vec<u32> = p.plan().always.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [8], "the variant's future, wherever the enum is");
    assert!(p.plan().cases.is_empty() && p.plan().discr.is_none());
}

/// `AtomicPtr<T>` as core lays it out: `AtomicPtr { p: UnsafeCell { value: *mut T } }`.
fn atomic_ptr(t: &mut Types, to: u64) -> u64 {
    let ptr = t.pointer("*mut T", to);
    let cell = t.structure("core::cell::UnsafeCell<*mut T>", 8);
    t.member(cell, "value", 0, ptr);
    let atomic = t.structure("core::sync::atomic::AtomicPtr<T>", 8);
    t.member(atomic, "p", 0, cell);
    atomic
}

/// `FuturesUnordered<F>` over tasks `Task<F> { future: UnsafeCell<Option<F>>, next_all, .. }`, `F` an
/// async fn awaiting `leaf`: the set, the task, and `F`.
fn futures_unordered(t: &mut Types, leaf: u64) -> (u64, u64, u64) {
    let f = async_fn(t, "fetch", leaf);
    let option = option_of(t, f, 88, 8);
    let cell = t.structure("core::cell::UnsafeCell<core::option::Option<F>>", 88);
    t.member(cell, "value", 0, option);
    let task = t.structure(
        "futures_util::stream::futures_unordered::task::Task<F>",
        128,
    );
    let next = atomic_ptr(t, task);
    t.member(task, "future", 0, cell)
        .member(task, "next_all", 88, next);
    let set = t.structure(
        "futures_util::stream::futures_unordered::FuturesUnordered<F>",
        24,
    );
    let usize = t.base("usize", 8);
    let head = atomic_ptr(t, task);
    t.member(set, "ready_to_run_queue", 0, usize)
        .member(set, "head_all", 8, head);
    (set, task, f)
}

/// A `FuturesUnordered` is one line over its futures: from `head_all` through each task's
/// `next_all`, each task's future while it holds one (its `Option` is `Some`).
#[test]
fn futures_unordered_is_a_line_over_the_futures_of_its_task_list() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let (set, task, _) = futures_unordered(&mut t, sleep);
    let p = planned(t, set);
    assert_eq!(p.rule(set), "FuturesUnordered");
    assert_eq!(shown(p.kind()), "futures::stream::FuturesUnordered");
    let [head] = &p.plan().always[..] else {
        panic!("{:?}", p.plan())
    };
    assert_eq!(head.offset, 8);
    assert_eq!(p.rule(task), "FuturesUnordered task");
    let EdgeTarget::Pointer(task_ty) = head.to else {
        panic!("{head:?}")
    };
    let tp = &p.types[task_ty as usize];
    assert!(matches!(p.kinds[task_ty as usize], Kind::Transparent));
    assert_eq!(
        tp.discr,
        Some(Discr { offset: 0, size: 8 }),
        "the Option's tag"
    );
    let [
        Case {
            value: Some(1),
            edges,
        },
    ] = &tp.cases[..]
    else {
        panic!("{tp:?}")
    };
    assert_eq!(edges[0].offset, 8, "the future in `Some`");
    assert!(matches!(p.kind_at(&edges[0]), Kind::Coroutine(_)));
    assert_eq!(
        tp.always,
        [Edge {
            offset: 88,
            to: EdgeTarget::Pointer(task_ty)
        }],
        "the next task, of the same type"
    );
}

/// `next()` on a stream borrows it: the stream is followed behind the `&mut`.
#[test]
fn a_stream_future_follows_the_stream_it_borrows() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let (set, _, _) = futures_unordered(&mut t, sleep);
    let borrowed = t.pointer("&mut FuturesUnordered<F>", set);
    let next = t.structure(
        "futures_util::stream::stream::next::Next<FuturesUnordered<F>>",
        8,
    );
    t.member(next, "stream", 0, borrowed);
    let p = planned(t, next);
    assert_eq!(p.rule(next), "stream future over a borrowed stream");
    let [edge] = &p.plan().always[..] else {
        panic!("{:?}", p.plan())
    };
    assert!(matches!(edge.to, EdgeTarget::Pointer(_)));
    assert_eq!(shown(p.kind_at(edge)), "futures::stream::FuturesUnordered");
}

/// `select_all` holds its futures in a `Vec`: one line, each element a branch by the `Vec`'s `T`.
#[test]
fn select_all_is_a_line_over_each_future_of_its_vec() {
    let mut t = Types::new();
    let sleep = opaque(&mut t, "tokio::time::Sleep");
    let f = async_fn(&mut t, "racer", sleep);
    let byte = t.base("u8", 1);
    let data = t.pointer("*const u8", byte);
    let non_null = t.structure("core::ptr::non_null::NonNull<u8>", 8);
    t.member(non_null, "pointer", 0, data);
    let raw = t.structure("alloc::raw_vec::RawVecInner", 16);
    t.member(raw, "ptr", 0, non_null);
    let buf = t.structure("alloc::raw_vec::RawVec<F>", 16);
    t.member(buf, "inner", 0, raw);
    let usize = t.base("usize", 8);
    let vec = t.structure("alloc::vec::Vec<F, alloc::alloc::Global>", 24);
    t.member(vec, "buf", 0, buf).member(vec, "len", 16, usize);
    t.type_param(vec, "T", f);
    let all = t.structure("futures_util::future::select_all::SelectAll<F>", 24);
    t.member(all, "inner", 0, vec);
    let p = planned(t, all);
    assert_eq!(p.rule(all), "futures::future::select_all");
    assert_eq!(shown(p.kind()), "futures::future::select_all");
    assert_eq!(p.rule(vec), "Vec");
    let EdgeTarget::Inline(v) = p.plan().always[0].to else {
        panic!("{:?}", p.plan())
    };
    let [edge] = &p.types[v as usize].always[..] else {
        panic!("{:?}", p.types[v as usize])
    };
    let EdgeTarget::Slice {
        len_offset,
        elem,
        stride,
    } = edge.to
    else {
        panic!("{edge:?}")
    };
    assert_eq!((edge.offset, len_offset, stride), (0, 16, 80));
    assert!(matches!(p.kinds[elem as usize], Kind::Coroutine(_)));
}

#[test]
fn every_rule_has_its_own_name_and_the_catch_all_comes_last() {
    let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
    assert_eq!(names.last(), Some(&any::FIELDS_LEADING_TO_FUTURES.name));
    names.sort_unstable();
    let len = names.len();
    names.dedup();
    assert_eq!(names.len(), len);
}

/// hyper's `H2Stream { reply: SendResponse, state }` over h2's stream reference, laid out as in
/// h2 0.4 (offsets made up): the types, the `H2Stream` and the `OpaqueStreamRef`.
fn h2_stream_types() -> (Types, u64, u64) {
    let mut t = Types::new();
    let (u32_, usize) = (t.base("u32", 4), t.base("usize", 8));
    let raw = t.structure("core::task::wake::RawWaker", 16);
    t.member(raw, "data", 0, usize)
        .member(raw, "vtable", 8, usize);
    let actions = t.structure("h2::proto::streams::streams::Actions", 64);
    t.member(actions, "recv", 0, usize)
        .member(actions, "task", 40, raw);
    let inner = t.structure("h2::proto::streams::streams::Inner", 128);
    t.member(inner, "counts", 0, usize)
        .member(inner, "actions", 32, actions);
    let cell = t.structure(
        "core::cell::UnsafeCell<h2::proto::streams::streams::Inner>",
        128,
    );
    t.member(cell, "value", 0, inner);
    let mutex = t.structure("std::sync::poison::mutex::Mutex<Inner>", 136);
    t.member(mutex, "inner", 0, u32_)
        .member(mutex, "data", 8, cell);
    let shared = arc(&mut t, mutex);
    let id = t.structure("h2::frame::stream_id::StreamId", 4);
    t.member(id, "__0", 0, u32_);
    let key = t.structure("h2::proto::streams::store::Key", 8);
    t.member(key, "index", 0, u32_)
        .member(key, "stream_id", 4, id);
    let stream = t.structure("h2::proto::streams::streams::OpaqueStreamRef", 16);
    t.member(stream, "inner", 0, shared)
        .member(stream, "key", 8, key);
    let stream_ref = t.structure("h2::proto::streams::streams::StreamRef<B>", 24);
    t.member(stream_ref, "opaque", 0, stream)
        .member(stream_ref, "send_buffer", 16, usize);
    let reply = t.structure("h2::server::SendResponse<B>", 24);
    t.member(reply, "inner", 0, stream_ref);
    let pending = opaque(&mut t, "svc::Pending");
    let handler = async_fn(&mut t, "handle", pending);
    let h2 = t.structure("hyper::proto::h2::server::H2Stream<F, B>", 128);
    t.member(h2, "reply", 0, reply)
        .member(h2, "state", 24, handler);
    (t, h2, stream)
}

/// h2's `OpaqueStreamRef { inner: Arc<Mutex<Inner>>, key: Key { index, stream_id: StreamId(u32) } }`
/// inside hyper's `H2Stream` (through `SendResponse` and `StreamRef`): read, never shown, for the
/// stream's id (the discriminant) and, through the `Arc`, the waker of the connection's task in
/// `Inner.actions.task`; the request's future beside it is followed as before.
#[test]
fn an_h2_stream_reference_reads_its_id_and_the_connection_waker() {
    let (t, h2, stream) = h2_stream_types();
    let p = planned(t, h2);
    assert_eq!(p.rule(stream), super::h2::STREAM_REF.name);
    let offsets: Vec<_> = p.plan().always.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 24], "the reply, then the request's future");
    // Down the reply to the reference: the id 12 bytes in (key 8, stream_id 4).
    let mut edge = &p.plan().always[0];
    while !matches!(p.kind_at(edge), Kind::H2Stream) {
        let EdgeTarget::Inline(t) = edge.to else {
            panic!("{edge:?}")
        };
        edge = &p.types[t as usize].always[0];
    }
    let EdgeTarget::Inline(view) = edge.to else {
        panic!("{edge:?}")
    };
    let view = &p.types[view as usize];
    assert_eq!(
        view.discr,
        Some(Discr {
            offset: 12,
            size: 4
        })
    );
    let [to_shared] = &view.always[..] else {
        panic!("{view:?}")
    };
    assert_eq!(to_shared.offset, 0, "the Arc's pointer");
    assert!(matches!(p.kind_at(to_shared), Kind::H2Connection));
    let EdgeTarget::Pointer(view) = to_shared.to else {
        panic!("{to_shared:?}")
    };
    // The waker: ArcInner's data 16 + the mutex's data 8 + actions 32 + task 40.
    let words: Vec<(String, Option<u32>)> = (p.types[view as usize].always.iter())
        .map(|e| {
            let EdgeTarget::Inline(w) = e.to else {
                panic!("{e:?}")
            };
            (
                shown(p.kind_at(e)),
                p.types[w as usize].discr.map(|d| d.offset),
            )
        })
        .collect();
    assert_eq!(
        words,
        [
            ("WakerVtable".into(), Some(104)),
            ("WakerData".into(), Some(96))
        ]
    );
}
