//! One spec per value rule, on type descriptions made by hand: which rule takes the type and the
//! shape it gives (where the parts are, what they are).

use asyncdump_protocol::Discr;

use crate::dwarf::synthetic::Types;
use crate::plan::builder::Builder;
use crate::plan::values::{FieldShape, PointerKind, Shape, ValueType, VariantShape};

/// What the value planner made of type `die`: its shape, the rule that took it, and every type.
struct Planned {
    types: Vec<ValueType>,
    rule: &'static str,
    top: u32,
}

fn planned(types: Types, die: u64) -> Planned {
    let debug = types.build();
    let mut b = Builder::new(&debug);
    let top = b.value(die);
    Planned {
        rule: b
            .values
            .decided_by
            .get(&die)
            .copied()
            .unwrap_or("(no rule)"),
        types: b.values.types,
        top,
    }
}

impl Planned {
    fn shape(&self) -> &Shape {
        &self.types[self.top as usize].shape
    }
    fn name_of(&self, ty: u32) -> &str {
        &self.types[ty as usize].name
    }
}

/// `u64` and `usize`, as every layout below uses them.
fn words(t: &mut Types) -> (u64, u64) {
    (t.base("u64", 8), t.base("usize", 8))
}

#[test]
fn a_zero_sized_type_is_a_unit() {
    let mut t = Types::new();
    let s = t.structure("core::marker::PhantomData<u8>", 0);
    let p = planned(t, s);
    assert_eq!((p.rule, p.shape()), ("zero-sized", &Shape::Unit));
}

#[test]
fn base_types_are_integers_bools_chars_and_floats() {
    for (name, size, shape) in [
        ("u16", 2, Shape::Int { signed: false }),
        ("isize", 8, Shape::Int { signed: true }),
        ("bool", 1, Shape::Bool),
        ("char", 4, Shape::Char),
        ("f32", 4, Shape::Float),
    ] {
        let mut t = Types::new();
        let b = t.base(name, size);
        let p = planned(t, b);
        assert_eq!((p.rule, p.shape()), ("base type", &shape), "{name}");
    }
}

#[test]
fn a_str_reference_is_its_data_pointer_and_length() {
    let mut t = Types::new();
    let u8_ = t.base("u8", 1);
    let ptr = t.pointer("*const u8", u8_);
    let (_, usize_) = words(&mut t);
    let s = t.structure("&str", 16);
    t.member(s, "data_ptr", 0, ptr)
        .member(s, "length", 8, usize_);
    let p = planned(t, s);
    assert_eq!(
        (p.rule, p.shape()),
        ("&str", &Shape::Str { ptr: 0, len: 8 })
    );
}

/// `Vec<T>` as std lays it out: `buf: RawVec { inner: RawVecInner { ptr: Unique<u8>, cap } }, len`.
fn vec_of(t: &mut Types, elem: u64, elem_name: &str) -> u64 {
    let u8_ = t.base("u8", 1);
    let (_, usize_) = words(t);
    let raw = t.pointer("*const u8", u8_);
    let unique = t.structure("core::ptr::unique::Unique<u8>", 8);
    t.member(unique, "pointer", 0, raw);
    let inner = t.structure("alloc::raw_vec::RawVecInner<alloc::alloc::Global>", 16);
    t.member(inner, "ptr", 0, unique)
        .member(inner, "cap", 8, usize_);
    let buf = t.structure(
        &format!("alloc::raw_vec::RawVec<{elem_name}, alloc::alloc::Global>"),
        16,
    );
    t.member(buf, "inner", 0, inner);
    let v = t.structure(
        &format!("alloc::vec::Vec<{elem_name}, alloc::alloc::Global>"),
        24,
    );
    t.member(v, "buf", 0, buf).member(v, "len", 16, usize_);
    t.type_param(v, "T", elem);
    v
}

#[test]
fn a_vec_is_its_buffers_pointer_its_length_and_its_element_type() {
    let mut t = Types::new();
    let u32_ = t.base("u32", 4);
    let v = vec_of(&mut t, u32_, "u32");
    let p = planned(t, v);
    let Shape::Seq {
        ptr: 0,
        len: 16,
        elem,
        stride: 4,
    } = *p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!((p.rule, p.name_of(elem)), ("Vec", "u32"));
}

#[test]
fn a_string_is_its_vecs_pointer_and_length() {
    let mut t = Types::new();
    let u8_ = t.base("u8", 1);
    let v = vec_of(&mut t, u8_, "u8");
    let s = t.structure("alloc::string::String", 24);
    t.member(s, "vec", 0, v);
    let p = planned(t, s);
    assert_eq!(
        (p.rule, p.shape()),
        ("String", &Shape::Str { ptr: 0, len: 16 })
    );
}

#[test]
fn a_slice_reference_is_a_sequence_of_what_its_pointer_points_at() {
    let mut t = Types::new();
    let (u64_, usize_) = words(&mut t);
    let ptr = t.pointer("*const u64", u64_);
    let s = t.structure("&[u64]", 16);
    t.member(s, "data_ptr", 0, ptr)
        .member(s, "length", 8, usize_);
    let p = planned(t, s);
    let Shape::Seq {
        ptr: 0,
        len: 8,
        elem,
        stride: 8,
    } = *p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!((p.rule, p.name_of(elem)), ("slice", "u64"));
}

#[test]
fn an_arc_shows_its_counts_and_its_value() {
    let mut t = Types::new();
    let (u64_, usize_) = words(&mut t);
    let atomic = t.structure("core::sync::atomic::AtomicUsize", 8);
    t.member(atomic, "v", 0, usize_);
    let inner = t.structure("alloc::sync::ArcInner<u64>", 24);
    t.member(inner, "strong", 0, atomic)
        .member(inner, "weak", 8, atomic)
        .member(inner, "data", 16, u64_);
    let ptr = t.pointer("*const alloc::sync::ArcInner<u64>", inner);
    let non_null = t.structure(
        "core::ptr::non_null::NonNull<alloc::sync::ArcInner<u64>>",
        8,
    );
    t.member(non_null, "pointer", 0, ptr);
    let arc = t.structure("alloc::sync::Arc<u64, alloc::alloc::Global>", 8);
    t.member(arc, "ptr", 0, non_null);
    let p = planned(t, arc);
    let Shape::Counted {
        kind: PointerKind::Arc,
        ptr: 0,
        strong: 0,
        weak: 8,
        data: 16,
        to,
    } = *p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!((p.rule, p.name_of(to)), ("Arc/Rc", "u64"));
}

#[test]
fn a_duration_is_its_seconds_and_nanoseconds() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let u32_ = t.base("u32", 4);
    let nanos = t.structure("core::time::Nanoseconds", 4);
    t.member(nanos, "__0", 0, u32_);
    let d = t.structure("core::time::Duration", 16);
    t.member(d, "secs", 0, u64_).member(d, "nanos", 8, nanos);
    let p = planned(t, d);
    assert_eq!(
        (p.rule, p.shape()),
        ("Duration", &Shape::Duration { secs: 0, nanos: 8 })
    );
}

/// std's `Timespec` (`tv_sec` at 0, `tv_nsec` at 8), as every `Instant` holds it.
pub(super) fn timespec(t: &mut Types) -> u64 {
    let i64_ = t.base("i64", 8);
    let u32_ = t.base("u32", 4);
    let ts = t.structure("std::sys::pal::unix::time::Timespec", 16);
    t.member(ts, "tv_sec", 0, i64_)
        .member(ts, "tv_nsec", 8, u32_);
    ts
}

#[test]
fn an_instant_is_the_timespec_inside_it() {
    let mut t = Types::new();
    let ts = timespec(&mut t);
    let inner = t.structure("std::sys::pal::unix::time::Instant", 16);
    t.member(inner, "t", 0, ts);
    let i = t.structure("std::time::Instant", 16);
    t.member(i, "__0", 0, inner);
    let p = planned(t, i);
    assert_eq!(
        (p.rule, p.shape()),
        ("Instant", &Shape::Instant { secs: 0, nanos: 8 })
    );
}

#[test]
fn a_socket_address_is_its_octets_and_port() {
    let mut t = Types::new();
    let u16_ = t.base("u16", 2);
    let u8_ = t.base("u8", 1);
    let ip = t.structure("core::net::ip_addr::Ipv4Addr", 4);
    t.member(ip, "octets", 0, u8_);
    let a = t.structure("core::net::socket_addr::SocketAddrV4", 6);
    t.member(a, "ip", 0, ip).member(a, "port", 4, u16_);
    let p = planned(t, a);
    let want = Shape::Socket {
        v6: false,
        ip: 0,
        port: 4,
    };
    assert_eq!((p.rule, p.shape()), ("socket address", &want));
}

#[test]
fn a_box_or_reference_shows_its_pointee_and_a_raw_pointer_its_address() {
    let mut t = Types::new();
    let i32_ = t.base("i32", 4);
    let boxed = t.pointer("alloc::boxed::Box<i32, alloc::alloc::Global>", i32_);
    let reference = t.pointer("&i32", i32_);
    let raw = t.pointer("*mut i32", i32_);
    let f = t.subroutine("fn(i32) -> i32");
    let fn_item = t.pointer("fn(i32) -> i32", f);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let shapes: Vec<Shape> = [boxed, reference, raw, fn_item]
        .iter()
        .map(|&d| {
            let ty = b.value(d);
            b.values.types[ty as usize].shape.clone()
        })
        .collect();
    let pointee = |s: &Shape| match s {
        Shape::Pointer { kind, to } => (*kind, b.values.types[*to as usize].name.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(pointee(&shapes[0]), (PointerKind::Box, "i32".into()));
    assert_eq!(pointee(&shapes[1]), (PointerKind::Ref, "i32".into()));
    // A fn item is zero-sized whatever its DWARF says: nothing is read of it.
    assert_eq!(shapes[2..], [Shape::Address, Shape::Opaque]);
    let boxed = b.value(boxed);
    assert_eq!(b.values.types[boxed as usize].size, 8);
}

#[test]
fn a_trait_object_shows_its_data_pointer() {
    let mut t = Types::new();
    let u8_ = t.base("u8", 1);
    let data = t.pointer("*const dyn core::any::Any", u8_);
    let vtable = t.pointer("&[usize; 3]", u8_);
    let s = t.structure(
        "alloc::boxed::Box<dyn core::any::Any, alloc::alloc::Global>",
        16,
    );
    t.member(s, "pointer", 0, data)
        .member(s, "vtable", 8, vtable);
    let p = planned(t, s);
    assert_eq!((p.rule, p.shape()), ("trait object", &Shape::Address));
}

/// A variant as the enum spec compares it: its value, name and fields' (name, offset).
type Named<'a> = (Option<u64>, &'a str, Vec<(&'a str, u32)>);

/// The `http` crate's `Parts` as it lays it out: `ByteStr` text in a `PathAndQuery` in a `Uri`,
/// a `Method` around its enum of standard methods; the `PathAndQuery`'s die too.
fn http_parts(t: &mut Types) -> (u64, u64) {
    let (u64_, usize_) = words(t);
    let u8_ = t.base("u8", 1);
    let ptr = t.pointer("*const u8", u8_);
    let bytes = t.structure("bytes::bytes::Bytes", 32);
    (t.member(bytes, "ptr", 0, ptr)
        .member(bytes, "len", 8, usize_))
    .member(bytes, "data", 16, u64_);
    let text = t.structure("http::byte_str::ByteStr", 32);
    t.member(text, "bytes", 0, bytes);
    let pq = t.structure("http::uri::path::PathAndQuery", 40);
    t.member(pq, "data", 0, text).member(pq, "query", 32, u64_);
    let uri = t.structure("http::uri::Uri", 88);
    t.member(uri, "scheme", 0, u64_)
        .member(uri, "path_and_query", 48, pq);
    let get = t.structure("http::method::Inner::Get", 24);
    let post = t.structure("http::method::Inner::Post", 24);
    let inner = t.structure("http::method::Inner", 24);
    t.variants(
        inner,
        ("tag", 0, 1, false),
        &[(Some(1), "Get", 0, get), (Some(2), "Post", 0, post)],
    );
    let method = t.structure("http::method::Method", 24);
    t.member(method, "__0", 0, inner);
    let parts = t.structure("http::request::Parts", 224);
    t.member(parts, "method", 0, method)
        .member(parts, "uri", 24, uri)
        .member(parts, "headers", 112, u64_);
    (parts, pq)
}

#[test]
fn http_text_is_the_utf8_its_bytes_point_at() {
    let mut t = Types::new();
    let (_, pq) = http_parts(&mut t);
    let p = planned(t, pq);
    let Shape::Http { fields, .. } = p.shape() else {
        panic!("{:?}", p.shape())
    };
    let text = &p.types[fields[0].ty as usize];
    assert_eq!(text.shape, Shape::Str { ptr: 0, len: 8 });
}

#[test]
fn an_http_request_head_is_its_method_and_its_uris_path_and_query_only() {
    use crate::plan::values::HttpPart;
    let mut t = Types::new();
    let (parts, _) = http_parts(&mut t);
    let p = planned(t, parts);
    let Shape::Http { part, fields } = p.shape() else {
        panic!("{:?}", p.shape())
    };
    let named: Vec<(&str, u32)> = fields.iter().map(|f| (&*f.name, f.offset)).collect();
    assert_eq!(
        (p.rule, *part, named),
        (
            "http request head",
            HttpPart::Parts,
            vec![("method", 0), ("uri", 24)]
        ),
        "the headers are not read"
    );
    let uri = &p.types[fields[1].ty as usize].shape;
    let Shape::Http { part, fields } = uri else {
        panic!("{uri:?}")
    };
    assert_eq!((*part, &*fields[0].name), (HttpPart::Uri, "path_and_query"));
    let method = &p.types[p.types.iter().position(|t| &*t.name == "Method").unwrap()];
    assert!(
        matches!(&method.shape, Shape::Http { part: HttpPart::Method, fields } if &*fields[0].name == "0"),
        "{method:?}"
    );
}

#[test]
fn an_enum_is_its_discriminant_and_each_variants_fields() {
    let mut t = Types::new();
    let u32_ = t.base("u32", 4);
    let some = t.structure("core::option::Option<u32>::Some", 8);
    t.member(some, "__0", 4, u32_);
    let none = t.structure("core::option::Option<u32>::None", 8);
    let opt = t.structure("core::option::Option<u32>", 8);
    t.variants(
        opt,
        ("tag", 0, 4, false),
        &[(Some(0), "None", 0, none), (Some(1), "Some", 0, some)],
    );
    let p = planned(t, opt);
    let Shape::Enum {
        discr,
        variants,
        bare: false,
    } = p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!(
        (p.rule, *discr),
        ("enum", Some(Discr { offset: 0, size: 4 }))
    );
    let named: Vec<Named<'_>> = variants
        .iter()
        .map(
            |VariantShape {
                 value,
                 name,
                 fields,
                 ..
             }| {
                let f = fields
                    .iter()
                    .map(|FieldShape { name, offset, .. }| (&**name, *offset));
                (*value, &**name, f.collect())
            },
        )
        .collect();
    assert_eq!(
        named,
        [(Some(0), "None", vec![]), (Some(1), "Some", vec![("0", 4)])]
    );
}

#[test]
fn an_enum_of_one_variant_keeps_no_discriminant() {
    let mut t = Types::new();
    let u32_ = t.base("u32", 4);
    let waiting = t.structure("app::Phase::Waiting", 4);
    t.member(waiting, "since_ms", 0, u32_);
    let phase = t.structure("app::Phase", 4);
    t.sole_variant(phase, "Waiting", 0, waiting);
    let p = planned(t, phase);
    let Shape::Enum {
        discr: None,
        variants,
        ..
    } = p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!(
        (p.rule, variants.len(), variants[0].value),
        ("enum", 1, None)
    );
}

#[test]
fn a_librarys_type_is_opaque_and_the_programs_own_is_shown_field_by_field() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let sem = t.structure("tokio::sync::batch_semaphore::Semaphore", 8);
    t.member(sem, "permits", 0, u64_);
    let mutex = t.structure("tokio_util::sync::Thing", 8);
    t.member(mutex, "s", 0, sem);
    let req = t.structure("app::Request", 16);
    t.member(req, "id", 0, u64_).member(req, "lock", 8, mutex);
    let debug = t.build();
    let mut b = Builder::new(&debug);
    let top = b.value(req);
    assert_eq!(b.values.decided_by.get(&req), Some(&"structure"));
    assert_eq!(b.values.decided_by.get(&mutex), Some(&"library type"));
    let Shape::Struct {
        fields,
        tuple: false,
    } = &b.values.types[top as usize].shape
    else {
        panic!()
    };
    let lock = fields.iter().find(|f| &*f.name == "lock").unwrap();
    assert_eq!(b.values.types[lock.ty as usize].shape, Shape::Opaque);
}

#[test]
fn a_type_reached_through_its_own_pointer_is_planned_once() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let node = t.structure("app::Node", 16);
    let next = t.pointer("alloc::boxed::Box<app::Node, alloc::alloc::Global>", node);
    t.member(node, "value", 0, u64_)
        .member(node, "next", 8, next);
    let p = planned(t, node);
    assert_eq!(p.types.len(), 3, "{:?}", p.types);
}

/// tokio's batch semaphore, as the guard specs place it inside their locks.
fn semaphore(t: &mut Types) -> u64 {
    let (_, usize_) = words(t);
    let sem = t.structure("tokio::sync::batch_semaphore::Semaphore", 40);
    t.member(sem, "permits", 32, usize_);
    sem
}

/// An `Arc<{name}>` of `data` (`size` bytes) as rustc lays it out: a `NonNull` to an `ArcInner` with
/// its counts at 0 and 8 and its value at 16.
pub(super) fn arc(t: &mut Types, name: &str, data: u64, size: u64) -> u64 {
    let (_, usize_) = words(t);
    let inner = t.structure(&format!("alloc::sync::ArcInner<{name}>"), 16 + size);
    t.member(inner, "strong", 0, usize_)
        .member(inner, "weak", 8, usize_)
        .member(inner, "data", 16, data);
    let raw = t.pointer(&format!("*const alloc::sync::ArcInner<{name}>"), inner);
    let non_null = t.structure(
        &format!("core::ptr::non_null::NonNull<ArcInner<{name}>>"),
        8,
    );
    t.member(non_null, "pointer", 0, raw);
    let arc = t.structure(&format!("alloc::sync::Arc<{name}>"), 8);
    t.member(arc, "ptr", 0, non_null);
    arc
}

#[test]
fn a_lock_guard_is_the_semaphore_of_the_lock_it_points_at() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let sem = semaphore(&mut t);
    let mutex = t.structure("tokio::sync::mutex::Mutex<u64>", 48);
    t.member(mutex, "c", 0, u64_).member(mutex, "s", 8, sem);
    let ptr = t.pointer("&tokio::sync::mutex::Mutex<u64>", mutex);
    let guard = t.structure("tokio::sync::mutex::MutexGuard<u64>", 8);
    t.member(guard, "lock", 0, ptr);
    let p = planned(t, guard);
    assert_eq!(p.rule, "tokio lock guard");
    let want = Shape::Guard {
        ptr: 0,
        sem: 8,
        lock: "Mutex".into(),
        write: false,
    };
    assert_eq!(*p.shape(), want);
}

#[test]
fn a_std_mutex_guard_is_the_futex_word_of_the_mutex_it_points_at() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let u32_ = t.base("core::sync::atomic::AtomicU32", 4);
    let sys = t.structure("std::sys::sync::mutex::futex::Mutex", 4);
    t.member(sys, "futex", 0, u32_);
    let mutex = t.structure("std::sync::poison::mutex::Mutex<u64>", 16);
    t.member(mutex, "inner", 0, sys)
        .member(mutex, "data", 8, u64_);
    let ptr = t.pointer("&std::sync::poison::mutex::Mutex<u64>", mutex);
    let guard = t.structure("std::sync::poison::mutex::MutexGuard<u64>", 16);
    t.member(guard, "lock", 0, ptr);
    let p = planned(t, guard);
    let want = Shape::Guard {
        ptr: 0,
        sem: 0,
        lock: "std::sync::Mutex".into(),
        write: false,
    };
    assert_eq!((p.rule, p.shape()), ("std mutex guard", &want));
}

/// A std `RwLock<u64>` whose system lock lies 8 bytes in, as rustc may lay it out.
fn std_rwlock(t: &mut Types) -> (u64, u64) {
    let (u64_, _) = words(t);
    let u32_ = t.base("core::sync::atomic::AtomicU32", 4);
    let sys = t.structure("std::sys::sync::rwlock::futex::RwLock", 8);
    t.member(sys, "state", 0, u32_)
        .member(sys, "writer_notify", 4, u32_);
    let lock = t.structure("std::sync::poison::rwlock::RwLock<u64>", 24);
    t.member(lock, "data", 0, u64_)
        .member(lock, "inner", 8, sys);
    (sys, lock)
}

#[test]
fn a_std_rwlock_read_guard_is_the_system_lock_it_points_at() {
    let mut t = Types::new();
    let (sys, _) = std_rwlock(&mut t);
    let ptr = t.pointer("&std::sys::sync::rwlock::futex::RwLock", sys);
    let guard = t.structure("std::sync::poison::rwlock::RwLockReadGuard<u64>", 16);
    t.member(guard, "inner_lock", 8, ptr);
    let p = planned(t, guard);
    let want = Shape::Guard {
        ptr: 8,
        sem: 0,
        lock: "std::sync::RwLock".into(),
        write: false,
    };
    assert_eq!((p.rule, p.shape()), ("blocking lock guard", &want));
}

#[test]
fn a_std_rwlock_write_guard_is_the_system_lock_inside_the_rwlock_it_points_at() {
    let mut t = Types::new();
    let (_, lock) = std_rwlock(&mut t);
    let ptr = t.pointer("&std::sync::poison::rwlock::RwLock<u64>", lock);
    let guard = t.structure("std::sync::poison::rwlock::RwLockWriteGuard<u64>", 16);
    t.member(guard, "lock", 0, ptr);
    let p = planned(t, guard);
    let want = Shape::Guard {
        ptr: 0,
        sem: 8,
        lock: "std::sync::RwLock".into(),
        write: true,
    };
    assert_eq!((p.rule, p.shape()), ("blocking lock guard", &want));
}

#[test]
fn a_parking_lot_guard_is_the_raw_lock_inside_the_lock_it_points_at() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let u8_ = t.base("core::sync::atomic::AtomicU8", 1);
    let raw = t.structure("parking_lot::raw_mutex::RawMutex", 1);
    t.member(raw, "state", 0, u8_);
    let name = "lock_api::mutex::Mutex<parking_lot::raw_mutex::RawMutex, u64>";
    let lock = t.structure(name, 16);
    t.member(lock, "data", 0, u64_).member(lock, "raw", 8, raw);
    let ptr = t.pointer(
        "&lock_api::mutex::Mutex<parking_lot::raw_mutex::RawMutex, u64>",
        lock,
    );
    let guard = t.structure(
        "lock_api::mutex::MutexGuard<parking_lot::raw_mutex::RawMutex, u64>",
        8,
    );
    t.member(guard, "mutex", 0, ptr);
    let p = planned(t, guard);
    let want = Shape::Guard {
        ptr: 0,
        sem: 8,
        lock: "parking_lot::Mutex".into(),
        write: false,
    };
    assert_eq!((p.rule, p.shape()), ("blocking lock guard", &want));
}

#[test]
fn the_other_blocking_locks_guards_are_known_by_their_names() {
    use super::values::other_guard_of;
    let (pl_mutex, pl_rwlock) = (
        "parking_lot::raw_mutex::RawMutex",
        "parking_lot::raw_rwlock::RawRwLock",
    );
    let std_raw = "std::sys::sync::rwlock::futex::RwLock";
    let cases = [
        (
            "std::sync::poison::rwlock::RwLockReadGuard<u64>",
            Some(("std::sync::RwLock", std_raw, false)),
        ),
        (
            "std::sync::rwlock::RwLockWriteGuard<u64>",
            Some(("std::sync::RwLock", std_raw, true)),
        ),
        (
            "lock_api::mutex::ArcMutexGuard<parking_lot::raw_mutex::RawMutex, u64>",
            Some(("parking_lot::Mutex", pl_mutex, false)),
        ),
        (
            "lock_api::rwlock::RwLockUpgradableReadGuard<parking_lot::raw_rwlock::RawRwLock, u64>",
            Some(("parking_lot::RwLock", pl_rwlock, false)),
        ),
        (
            "lock_api::rwlock::MappedRwLockWriteGuard<parking_lot::raw_rwlock::RawRwLock, u64>",
            Some(("parking_lot::RwLock", pl_rwlock, true)),
        ),
        // Another raw lock under lock_api (spin's): its waiters are not parking_lot's.
        (
            "lock_api::mutex::MutexGuard<spin::mutex::Mutex<()>, u64>",
            None,
        ),
        ("std::sync::poison::rwlock::RwLock<u64>", None),
    ];
    for (name, want) in cases {
        assert_eq!(other_guard_of(name), want, "{name}");
    }
}

#[test]
fn an_owned_write_guard_reaches_its_rwlock_through_the_arc() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let u32_ = t.base("u32", 4);
    let sem = semaphore(&mut t);
    let rwlock = t.structure("tokio::sync::rwlock::RwLock<u64>", 56);
    t.member(rwlock, "mr", 0, u32_)
        .member(rwlock, "s", 8, sem)
        .member(rwlock, "c", 48, u64_);
    let arc = arc(&mut t, "tokio::sync::rwlock::RwLock<u64>", rwlock, 56);
    let name = "tokio::sync::rwlock::owned_write_guard::OwnedRwLockWriteGuard<u64>";
    let guard = t.structure(name, 24);
    t.member(guard, "permits_acquired", 0, u32_)
        .member(guard, "lock", 8, arc);
    let p = planned(t, guard);
    let want = Shape::Guard {
        ptr: 8,
        sem: 24,
        lock: "RwLock".into(),
        write: true,
    };
    assert_eq!((p.rule, p.shape()), ("tokio lock guard", &want));
}

#[test]
fn a_guard_whose_lock_holds_no_semaphore_is_opaque() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let mutex = t.structure("tokio::sync::mutex::Mutex<u64>", 8);
    t.member(mutex, "c", 0, u64_);
    let ptr = t.pointer("&tokio::sync::mutex::Mutex<u64>", mutex);
    let guard = t.structure("tokio::sync::mutex::MutexGuard<u64>", 8);
    t.member(guard, "lock", 0, ptr);
    let p = planned(t, guard);
    assert_eq!(*p.shape(), Shape::Opaque);
}

/// A state machine whose Suspend0 awaits a `Mutex::lock` (line 10) and whose Suspend1 awaits a
/// sleep (line 11) holding `guard`, the guard type number `guard`'s die.
fn locking_machine(t: &mut Types, guard: u64) -> u64 {
    let lock_fut = t.structure("tokio::sync::mutex::Mutex<u64>::lock::{async_fn_env#0}", 64);
    let sleep = t.structure("tokio::time::sleep::Sleep", 64);
    let sm = t.state_machine(
        "app::update::{async_fn_env#0}",
        96,
        88,
        &[(10, 8, lock_fut), (11, 16, sleep)],
    );
    let s1 = t.suspend_state(sm, 1);
    t.member(s1, "guard", 0, guard);
    sm
}

fn mutex_guard(t: &mut Types) -> u64 {
    let sem = semaphore(t);
    let mutex = t.structure("tokio::sync::mutex::Mutex<u64>", 40);
    t.member(mutex, "s", 0, sem);
    let ptr = t.pointer("&tokio::sync::mutex::Mutex<u64>", mutex);
    let guard = t.structure("tokio::sync::mutex::MutexGuard<u64>", 8);
    t.member(guard, "lock", 0, ptr);
    guard
}

#[test]
fn a_guard_local_was_acquired_at_the_lock_awaited_before_it_lives() {
    let mut t = Types::new();
    let guard = mutex_guard(&mut t);
    let sm = locking_machine(&mut t, guard);
    let debug = t.build();
    let machine = debug.machine(sm).expect("a state machine");
    let at = super::values::acquired(&machine, "guard").expect("an acquisition site");
    assert_eq!(at.line, 10);
    // A name no lock await precedes has none: nothing is guessed.
    assert!(super::values::acquired(&machine, "other").is_none());
}

#[test]
fn a_state_machine_held_as_a_value_names_its_states_and_where_its_guards_were_taken() {
    let mut t = Types::new();
    let guard = mutex_guard(&mut t);
    let sm = locking_machine(&mut t, guard);
    let p = planned(t, sm);
    let Shape::Enum { variants, .. } = p.shape() else {
        panic!("{:?}", p.shape())
    };
    let suspend1 = variants
        .iter()
        .find(|v| v.value == Some(4))
        .expect("Suspend1");
    assert_eq!(&*suspend1.name, "Suspend1");
    assert_eq!(suspend1.at.as_ref().map(|l| l.line), Some(11));
    let acquired: Vec<(&str, u32)> = (suspend1.acquired.iter())
        .map(|(n, l)| (&**n, l.line))
        .collect();
    assert_eq!(acquired, [("guard", 10)]);
}

#[test]
fn a_channel_end_is_the_channel_its_arc_points_at() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let arc = arc(&mut t, "Chan<u64>", u64_, 8);
    let tx = t.structure("tokio::sync::mpsc::chan::Tx<u64, bounded::Semaphore>", 8);
    t.member(tx, "inner", 0, arc);
    let sender = t.structure("tokio::sync::mpsc::bounded::Sender<u64>", 8);
    t.member(sender, "chan", 0, tx);
    let p = planned(t, sender);
    let want = Shape::Endpoint {
        ptr: 0,
        data: 16,
        sender: true,
    };
    assert_eq!((p.rule, p.shape()), ("tokio channel end", &want));
}

#[test]
fn a_std_mutex_shows_the_value_it_keeps() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let cell = t.structure("core::cell::UnsafeCell<u64>", 8);
    t.member(cell, "value", 0, u64_);
    let mutex = t.structure("std::sync::poison::mutex::Mutex<u64>", 16);
    t.member(mutex, "inner", 0, u64_)
        .member(mutex, "data", 8, cell);
    let p = planned(t, mutex);
    let Shape::Struct { fields, .. } = p.shape() else {
        panic!("{:?}", p.shape())
    };
    assert_eq!(p.rule, "std lock");
    assert_eq!((&*fields[0].name, fields[0].offset), ("data", 8));
    assert_eq!(p.name_of(fields[0].ty), "u64");
}

/// std's `Once`, its state word (`field`, of `size` bytes) at 0: `Once { inner: imp::Once { field } }`.
fn once_of(t: &mut Types, field: &str, size: u64) -> u64 {
    let word = t.base(&format!("u{}", size * 8), size);
    let atomic = t.structure(&format!("core::sync::atomic::AtomicU{}", size * 8), size);
    t.member(atomic, "v", 0, word);
    let imp = t.structure("std::sys::sync::once::futex::Once", size);
    t.member(imp, field, 0, atomic);
    let once = t.structure("std::sync::once::Once", size);
    t.member(once, "inner", 0, imp);
    once
}

/// The futex `Once` of today's std: `state_and_queued`, which starts at 3 and is 0 once complete.
fn once(t: &mut Types) -> u64 {
    once_of(t, "state_and_queued", 4)
}

/// A static of once-cell type `cell` (24 bytes, its `Once` at 16) whose state word starts at
/// `starts` in the file: what tells the planner which `state_and_queued` the program's std has.
fn a_static_of(t: &mut Types, cell: u64, name: &str, addr: u64, starts: u32) {
    let mut bytes = [0u8; 24];
    bytes[16..20].copy_from_slice(&starts.to_le_bytes());
    let bytes = (starts != 0).then_some(&bytes[..]);
    t.static_var(name, cell, addr, bytes);
}

/// The shape of a once cell whose `Once` is at 16, `size` bytes, `complete` when set, and whose
/// value is at `at`, of type `ty`.
fn set_or_uninit(at: u32, ty: u32, complete: u64, size: u8) -> Shape {
    Shape::Enum {
        discr: Some(Discr { offset: 16, size }),
        variants: vec![
            VariantShape {
                value: Some(complete),
                name: "set".into(),
                at: None,
                acquired: Vec::new(),
                fields: vec![FieldShape {
                    name: "value".into(),
                    offset: at,
                    ty,
                }],
            },
            VariantShape {
                value: None,
                name: "uninit".into(),
                at: None,
                acquired: Vec::new(),
                fields: Vec::new(),
            },
        ],
        bare: true,
    }
}

/// `p` is a once cell's shape by the `std once cell` rule, its `u64` value at `at`, set when its
/// `Once`'s state word (`size` bytes) is `complete`.
fn assert_once_cell(p: &Planned, at: u32, complete: u64, size: u8) {
    let Shape::Enum { variants, .. } = p.shape() else {
        panic!("{:?}", p.shape())
    };
    let ty = variants[0].fields[0].ty;
    assert_eq!(
        (p.rule, p.shape()),
        ("std once cell", &set_or_uninit(at, ty, complete, size))
    );
    assert_eq!(p.name_of(ty), "u64");
}

/// A `OnceLock<u64>` whose `Once` is `once`, at 16.
fn once_lock(t: &mut Types, once: u64) -> u64 {
    let u64_ = t.base("u64", 8);
    let dangling = t.structure("core::mem::maybe_dangling::MaybeDangling<u64>", 8);
    t.member(dangling, "__0", 0, u64_);
    let manual = t.structure("core::mem::manually_drop::ManuallyDrop<u64>", 8);
    t.member(manual, "value", 0, dangling);
    let unit = t.structure("()", 0);
    let uninit = t.union("core::mem::maybe_uninit::MaybeUninit<u64>", 8);
    t.member(uninit, "uninit", 0, unit)
        .member(uninit, "value", 0, manual);
    let cell = t.structure(
        "core::cell::UnsafeCell<core::mem::maybe_uninit::MaybeUninit<u64>>",
        8,
    );
    t.member(cell, "value", 0, uninit);
    let lock = t.structure("std::sync::once_lock::OnceLock<u64>", 24);
    t.member(lock, "value", 0, cell)
        .member(lock, "once", 16, once);
    lock
}

#[test]
fn a_once_lock_shows_its_value_once_its_once_is_complete() {
    let mut t = Types::new();
    let once = once(&mut t);
    let lock = once_lock(&mut t, once);
    a_static_of(&mut t, lock, "app::CELL", 0x1000, 3);
    assert_once_cell(&planned(t, lock), 0, 0, 4);
}

#[test]
fn a_lazy_lock_shows_its_value_once_forced_and_not_its_function() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let once = once(&mut t);
    let f = t.subroutine("fn() -> u64");
    let manual_f = t.structure("core::mem::manually_drop::ManuallyDrop<fn() -> u64>", 8);
    t.member(manual_f, "value", 0, f);
    let manual = t.structure("core::mem::manually_drop::ManuallyDrop<u64>", 8);
    t.member(manual, "value", 0, u64_);
    let data = t.union("std::sync::lazy_lock::Data<u64, fn() -> u64>", 8);
    t.member(data, "f", 0, manual_f)
        .member(data, "value", 0, manual);
    let cell = t.structure(
        "core::cell::UnsafeCell<std::sync::lazy_lock::Data<u64, fn() -> u64>>",
        8,
    );
    t.member(cell, "value", 0, data);
    let lazy = t.structure("std::sync::lazy_lock::LazyLock<u64, fn() -> u64>", 24);
    t.member(lazy, "once", 16, once)
        .member(lazy, "data", 8, cell);
    a_static_of(&mut t, lazy, "app::LAZY", 0x1000, 3);
    assert_once_cell(&planned(t, lazy), 8, 0, 4);
}

#[test]
fn a_std_whose_once_starts_at_zero_is_complete_at_three() {
    // The same `state_and_queued`, of a std before complete was made zero: a static's `Once`
    // starts at 0 (in `.bss`), so complete is 3.
    let mut t = Types::new();
    let once = once(&mut t);
    let lock = once_lock(&mut t, once);
    a_static_of(&mut t, lock, "app::CELL", 0x1000, 0);
    assert_once_cell(&planned(t, lock), 0, 3, 4);
}

#[test]
fn a_once_cell_is_opaque_where_no_static_tells_which_state_and_queued_it_has() {
    let mut t = Types::new();
    let once = once(&mut t);
    let lock = once_lock(&mut t, once);
    let p = planned(t, lock);
    assert_eq!((p.rule, p.shape()), ("library type", &Shape::Opaque));
}

#[test]
fn a_once_cell_is_opaque_where_its_statics_disagree_on_where_a_once_starts() {
    let mut t = Types::new();
    let once = once(&mut t);
    let lock = once_lock(&mut t, once);
    a_static_of(&mut t, lock, "app::ONE", 0x1000, 3);
    a_static_of(&mut t, lock, "app::OTHER", 0x2000, 0);
    let p = planned(t, lock);
    assert_eq!((p.rule, p.shape()), ("library type", &Shape::Opaque));
}

#[test]
fn earlier_stds_once_words_are_known_by_their_names() {
    // The five-state futex `Once` (complete 4), and the queue `Once` before it (complete 3, a
    // word as wide as a pointer): no static needed to tell them apart.
    for (field, size, complete) in [("state", 4, 4), ("state_and_queue", 8, 3)] {
        let mut t = Types::new();
        let once = once_of(&mut t, field, size);
        let lock = once_lock(&mut t, once);
        assert_once_cell(&planned(t, lock), 0, complete, size as u8);
    }
}

#[test]
fn a_once_cell_whose_once_is_of_an_unknown_kind_is_opaque() {
    let mut t = Types::new();
    let once = once_of(&mut t, "word", 4);
    let lock = once_lock(&mut t, once);
    a_static_of(&mut t, lock, "app::CELL", 0x1000, 3);
    let p = planned(t, lock);
    assert_eq!((p.rule, p.shape()), ("library type", &Shape::Opaque));
}

#[test]
fn a_lazy_static_is_named_as_declared_not_as_its_hidden_static() {
    use super::values::declared_name;
    let hidden = "app::config::<CONFIG as Deref>::deref::__stability::LAZY";
    assert_eq!(declared_name(hidden), "app::config::CONFIG");
    assert_eq!(declared_name("app::FEED"), "app::FEED");
    assert_eq!(declared_name("<odd as Deref>"), "<odd as Deref>");
}

#[test]
fn a_lazy_static_shows_its_value_once_its_once_is_complete() {
    let mut t = Types::new();
    let (u64_, _) = words(&mut t);
    let once = once(&mut t);
    let uninit = t.union("core::mem::maybe_uninit::MaybeUninit<u64>", 8);
    t.member(uninit, "value", 0, u64_);
    let cell = t.structure(
        "core::cell::Cell<core::mem::maybe_uninit::MaybeUninit<u64>>",
        8,
    );
    t.member(cell, "value", 0, uninit);
    // `lazy_static::lazy::Lazy<T>(Cell<MaybeUninit<T>>, Once)`.
    let lazy = t.structure("lazy_static::lazy::Lazy<u64>", 24);
    t.member(lazy, "__0", 0, cell).member(lazy, "__1", 16, once);
    let name = "app::<FEED as Deref>::deref::__stability::LAZY";
    a_static_of(&mut t, lazy, name, 0x1000, 3);
    assert_once_cell(&planned(t, lazy), 0, 0, 4);
}

/// `Option<u64>` (a tag at 0, the value at 8) and `UnsafeCell` of it, as `once_cell` keeps a value.
fn option_cell(t: &mut Types) -> u64 {
    let u64_ = t.base("u64", 8);
    let some = t.structure("core::option::Option<u64>::Some", 16);
    t.member(some, "__0", 8, u64_);
    let none = t.structure("core::option::Option<u64>::None", 16);
    let opt = t.structure("core::option::Option<u64>", 16);
    t.variants(
        opt,
        ("tag", 0, 8, false),
        &[(Some(0), "None", 0, none), (Some(1), "Some", 0, some)],
    );
    let cell = t.structure("core::cell::UnsafeCell<core::option::Option<u64>>", 16);
    t.member(cell, "value", 0, opt);
    cell
}

/// `once_cell::sync::OnceCell<u64>`: its implementation, a `queue` word at 0, the `Option` at 8.
fn sync_once_cell(t: &mut Types) -> u64 {
    let cell = option_cell(t);
    let queue = t.structure("core::sync::atomic::AtomicPtr<once_cell::imp::Waiter>", 8);
    let imp = t.structure("once_cell::imp::OnceCell<u64>", 24);
    t.member(imp, "queue", 0, queue)
        .member(imp, "value", 8, cell);
    let sync = t.structure("once_cell::sync::OnceCell<u64>", 24);
    t.member(sync, "__0", 0, imp);
    sync
}

/// `p` is a `once_cell` cell by its rule: its `u64` value at `at`, set when the word at `discr`
/// (`size` bytes) is `set`, else `uninit` when it is `uninit`.
fn assert_crate_once_cell(
    p: &Planned,
    at: u32,
    discr: Discr,
    set: Option<u64>,
    uninit: Option<u64>,
) {
    let Shape::Enum {
        discr: d,
        variants,
        bare: true,
    } = p.shape()
    else {
        panic!("{:?}", p.shape())
    };
    assert_eq!((p.rule, *d), ("once_cell cell", Some(discr)));
    let named: Vec<_> = (variants.iter())
        .map(|v| {
            (
                v.value,
                &*v.name,
                v.fields.iter().map(|f| (&*f.name, f.offset)).collect(),
            )
        })
        .collect();
    let want: Vec<Named<'_>> = vec![
        (set, "set", vec![("value", at)]),
        (uninit, "uninit", vec![]),
    ];
    assert_eq!(named, want);
    assert_eq!(p.name_of(variants[0].fields[0].ty), "u64");
}

#[test]
fn a_once_cell_crate_sync_cell_is_set_once_its_queue_word_says_complete() {
    let mut t = Types::new();
    let sync = sync_once_cell(&mut t);
    // Complete is 2 in the queue word; the value is the `Option`'s payload, at 8 + 8.
    let queue = Discr { offset: 0, size: 8 };
    assert_crate_once_cell(&planned(t, sync), 16, queue, Some(2), None);
}

#[test]
fn a_once_cell_crate_unsync_cell_is_its_option() {
    let mut t = Types::new();
    let cell = option_cell(&mut t);
    let unsync = t.structure("once_cell::unsync::OnceCell<u64>", 16);
    t.member(unsync, "inner", 0, cell);
    let tag = Discr { offset: 0, size: 8 };
    assert_crate_once_cell(&planned(t, unsync), 8, tag, Some(1), Some(0));
}

#[test]
fn a_once_cell_crate_lazy_is_its_cell_and_not_its_function() {
    let mut t = Types::new();
    let sync = sync_once_cell(&mut t);
    let init = t.structure("core::cell::Cell<core::option::Option<fn() -> u64>>", 8);
    let lazy = t.structure("once_cell::sync::Lazy<u64, fn() -> u64>", 32);
    t.member(lazy, "init", 0, init)
        .member(lazy, "cell", 8, sync);
    let queue = Discr { offset: 8, size: 8 };
    assert_crate_once_cell(&planned(t, lazy), 24, queue, Some(2), None);
}
