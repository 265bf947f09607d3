//! The table of value shapes (see `crate::plan::values`): the rules of [`RULES`] are tried in order on a local's type, and the
//! first that matches and does not decline gives its [`Shape`]. Filed as the future shapes are: the
//! compiler's and the standard library's first, then any enum, then any structure of the program's.
//! Adding a shape is one rule here, one line in [`RULES`] and one spec in `tests.rs`. A rule that meets
//! a layout it does not know declines, and the type ends opaque.

use asyncdump_walker::bytes::uint;
use gimli::constants;

use std::sync::Arc;

use crate::dwarf::{State, StateMachine};
use crate::model::Loc;
use crate::plan::builder::{Builder, is_generic, loc};
use crate::plan::values::{
    FieldShape, FrameLocalPlan, HttpPart, LocalPlan, MAX_DEPTH, MAX_FIELDS, MAX_VALUE_TYPES,
    PointerKind, Shape, StaticPlan, ValueType, VariantShape,
};

/// What the rules look at: one type, read once.
pub(super) struct VTy {
    pub(super) die: u64,
    pub(super) name: String,
    pub(super) tag: constants::DwTag,
    /// Whether the DWARF gives its size as zero (not merely none).
    pub(super) zero: bool,
    pub(super) pointee: Option<u64>,
    pub(super) members: Vec<(String, u64, u64)>,
}

pub(super) struct ValueRule {
    pub(super) name: &'static str,
    pub(super) matches: fn(&VTy) -> bool,
    /// `None`: declined, the next rule is tried.
    pub(super) shape: fn(&mut Builder<'_>, &VTy) -> Option<Shape>,
}

pub(super) const RULES: &[&ValueRule] = &[
    &ZERO_SIZED,
    &BASE,
    &STR,
    &STRING,
    &VEC,
    &SLICE,
    &COUNTED,
    &DURATION,
    &INSTANT,
    &SOCKET,
    &HTTP_TEXT,
    &HTTP_HEAD,
    &GUARD,
    &STD_GUARD,
    &OTHER_GUARD,
    &ENDPOINT,
    &POINTER,
    &FAT_POINTER,
    &ENUM,
    &STD_LOCK,
    &STD_ONCE,
    &ONCE_CELL,
    &LIBRARY,
    &STRUCT,
];

/// `()`, `PhantomData<T>`, an empty closure: nothing to read.
const ZERO_SIZED: ValueRule = ValueRule {
    name: "zero-sized",
    matches: |t| t.zero,
    shape: |_, _| Some(Shape::Unit),
};

/// Integers, `bool`, `char`, floats.
const BASE: ValueRule = ValueRule {
    name: "base type",
    matches: |t| t.tag == constants::DW_TAG_base_type,
    shape: |_, t| match t.name.as_str() {
        "bool" => Some(Shape::Bool),
        "char" => Some(Shape::Char),
        "f32" | "f64" => Some(Shape::Float),
        "()" => Some(Shape::Unit),
        n if n.starts_with('u') && n[1..].chars().all(|c| c.is_ascii_digit()) || n == "usize" => {
            Some(Shape::Int { signed: false })
        }
        n if n.starts_with('i') && n[1..].chars().all(|c| c.is_ascii_digit()) || n == "isize" => {
            Some(Shape::Int { signed: true })
        }
        _ => None,
    },
};

/// `&str`: rustc's fat pointer structure, `data_ptr` and `length`.
const STR: ValueRule = ValueRule {
    name: "&str",
    matches: |t| matches!(t.name.as_str(), "&str" | "&mut str"),
    shape: |_, t| {
        let (ptr, len) = (field(t, "data_ptr")?, field(t, "length")?);
        Some(Shape::Str { ptr, len })
    },
};

/// `String`: its `Vec<u8>`'s data pointer and length.
const STRING: ValueRule = ValueRule {
    name: "String",
    matches: |t| t.name == "alloc::string::String",
    shape: |b, t| {
        let (at, vec) = t
            .members
            .iter()
            .find(|m| m.0 == "vec")
            .map(|m| (m.1, m.2))?;
        let (ptr, _) = b.vec_data(b.strip(vec))?;
        let (len, _) = b.member(b.strip(vec), &["len"])?;
        Some(Shape::Str {
            ptr: u32::try_from(at + ptr).ok()?,
            len: u32::try_from(at + len).ok()?,
        })
    },
};

/// `Vec<T>`: its data pointer (through `RawVec`), its length, and `T` from its type parameter (the
/// pointer itself may be a `u8` one).
const VEC: ValueRule = ValueRule {
    name: "Vec",
    matches: |t| is_generic(&t.name, "alloc::vec::Vec"),
    shape: |b, t| {
        let (ptr, _) = b.vec_data(t.die)?;
        let len = field(t, "len")?;
        let elem = b.debug.type_param_of(t.die, "T")?;
        seq(b, ptr, len, elem)
    },
};

/// `&[T]`, `&mut [T]`: `data_ptr` (to `T`) and `length`.
const SLICE: ValueRule = ValueRule {
    name: "slice",
    matches: |t| t.name.starts_with("&[") || t.name.starts_with("&mut ["),
    shape: |b, t| {
        let (ptr, len) = (field(t, "data_ptr")?, field(t, "length")?);
        let data = t.members.iter().find(|m| m.0 == "data_ptr")?.2;
        let elem = b.debug.node(b.strip(data))?.type_ref?;
        seq(b, u64::from(ptr), len, elem)
    },
};

/// `Arc<T>`, `Rc<T>`: the pointer to the shared block, whose counts and value are shown.
const COUNTED: ValueRule = ValueRule {
    name: "Arc/Rc",
    matches: |t| is_generic(&t.name, "alloc::sync::Arc") || is_generic(&t.name, "alloc::rc::Rc"),
    shape: |b, t| {
        let kind = match t.name.starts_with("alloc::sync") {
            true => PointerKind::Arc,
            false => PointerKind::Rc,
        };
        let (ptr, inner) = b.pointer_to(t.die, "ptr")?;
        let (strong, _) = b.member(inner, &["strong"])?;
        let (weak, _) = b.member(inner, &["weak"])?;
        let (data, ty) = b.member(inner, &["data", "value"])?;
        Some(Shape::Counted {
            kind,
            ptr: u32::try_from(ptr).ok()?,
            strong: u32::try_from(strong).ok()?,
            weak: u32::try_from(weak).ok()?,
            data: u32::try_from(data).ok()?,
            to: b.value(ty),
        })
    },
};

/// `Duration`: whole seconds and nanoseconds (a `Nanoseconds(u32)` in newer std).
const DURATION: ValueRule = ValueRule {
    name: "Duration",
    matches: |t| t.name == "core::time::Duration",
    shape: |_, t| {
        Some(Shape::Duration {
            secs: field(t, "secs")?,
            nanos: field(t, "nanos")?,
        })
    },
};

/// `std::time::Instant` and tokio's: a `timespec` of the monotonic clock, some layers down.
const INSTANT: ValueRule = ValueRule {
    name: "Instant",
    matches: |t| {
        matches!(
            t.name.as_str(),
            "std::time::Instant" | "tokio::time::instant::Instant"
        )
    },
    shape: |b, t| {
        Some(Shape::Instant {
            secs: u32::try_from(b.find_member(t.die, "tv_sec", 6)?).ok()?,
            nanos: u32::try_from(b.find_member(t.die, "tv_nsec", 6)?).ok()?,
        })
    },
};

/// `SocketAddrV4` / `SocketAddrV6`: the address's octets and the port.
const SOCKET: ValueRule = ValueRule {
    name: "socket address",
    matches: |t| t.name.ends_with("::SocketAddrV4") || t.name.ends_with("::SocketAddrV6"),
    shape: |b, t| {
        Some(Shape::Socket {
            v6: t.name.ends_with('6'),
            ip: u32::try_from(b.find_member(t.die, "octets", 2)?).ok()?,
            port: field(t, "port")?,
        })
    },
};

/// The `http` crate's text (a `ByteStr`: a URI's path and query): the UTF-8 its `Bytes` point
/// at.
const HTTP_TEXT: ValueRule = ValueRule {
    name: "http text",
    matches: |t| t.name == "http::byte_str::ByteStr",
    shape: |b, t| {
        let (at, bytes) = b.member(t.die, &["bytes"])?;
        let bytes = b.strip(bytes);
        let (ptr, _) = b.member(bytes, &["ptr"])?;
        let (len, _) = b.member(bytes, &["len"])?;
        Some(Shape::Str {
            ptr: u32::try_from(at + ptr).ok()?,
            len: u32::try_from(at + len).ok()?,
        })
    },
};

/// The request head of the `http` crate (hyper's, axum's and tonic's requests), as far as it
/// names the request: its method and its URI's path and query, not its headers, extensions or
/// body.
const HTTP_HEAD: ValueRule = ValueRule {
    name: "http request head",
    matches: |t| http_head_fields(&t.name).is_some(),
    shape: |b, t| {
        let (part, wanted) = http_head_fields(&t.name)?;
        // Only the wanted fields' types are planned: a request's headers are never read.
        let fields = fields_where(b, t.die, 0, |name| wanted.contains(&name));
        (fields.len() == wanted.len()).then_some(Shape::Http { part, fields })
    },
};

/// The part of a request head an `http` type is, by its name (generic arguments left out), and
/// the fields [`HTTP_HEAD`] reads of it.
fn http_head_fields(name: &str) -> Option<(HttpPart, &'static [&'static str])> {
    Some(match crate::names::base_name(name) {
        "http::request::Request" => (HttpPart::Request, &["head"]),
        "http::request::Parts" => (HttpPart::Parts, &["method", "uri"]),
        "http::uri::Uri" => (HttpPart::Uri, &["path_and_query"]),
        "http::uri::path::PathAndQuery" => (HttpPart::PathAndQuery, &["data"]),
        // `Method(Inner)`: the enum of the standard methods.
        "http::method::Method" => (HttpPart::Method, &["0"]),
        _ => return None,
    })
}

/// tokio's lock guards and permits: the lock they hold, as the address of its semaphore (which a
/// waiter's acquire points at too), through the guard's pointer (`&` or `Arc`) to the lock.
const GUARD: ValueRule = ValueRule {
    name: "tokio lock guard",
    matches: |t| guard_of(&t.name).is_some(),
    shape: |b, t| {
        let (lock, write) = guard_of(&t.name)?;
        let field = ["lock", "s", "sem"]
            .into_iter()
            .find(|f| t.members.iter().any(|m| m.0 == *f))?;
        let (ptr, to) = b.pointer_to(t.die, field)?;
        let sem = b.offset_of_type(to, "tokio::sync::batch_semaphore::Semaphore", 4)?;
        Some(Shape::Guard {
            ptr: u32::try_from(ptr).ok()?,
            sem: u32::try_from(sem).ok()?,
            lock: lock.into(),
            write,
        })
    },
};

/// The standard library's `MutexGuard`: the lock it holds, as the address of the futex word a
/// thread waiting for the lock sleeps on (the system mutex inside the `Mutex`), through the guard's
/// `lock` reference.
const STD_GUARD: ValueRule = ValueRule {
    name: "std mutex guard",
    matches: |t| crate::dwarf::is_std_mutex_guard(&t.name),
    shape: |b, t| {
        let (ptr, to) = b.pointer_to(t.die, "lock")?;
        let futex = b.offset_of_type(to, "std::sys::sync::mutex::futex::Mutex", 3)?;
        Some(Shape::Guard {
            ptr: u32::try_from(ptr).ok()?,
            sem: u32::try_from(futex).ok()?,
            lock: crate::model::threads::STD_MUTEX.into(),
            write: false,
        })
    },
};

/// The other blocking locks' guards: std's `RwLock` guards (the lock word a waiting thread sleeps
/// on, in the system `RwLock` the guard's reference reaches) and `lock_api`'s (parking_lot's
/// `Mutex` and `RwLock`: the raw lock, whose address is the key a waiting thread parks on), as the
/// address of that inner lock.
const OTHER_GUARD: ValueRule = ValueRule {
    name: "blocking lock guard",
    matches: |t| other_guard_of(&t.name).is_some(),
    shape: |b, t| {
        let (lock, raw, write) = other_guard_of(&t.name)?;
        let field = ["inner_lock", "lock", "mutex", "rwlock", "raw"]
            .into_iter()
            .find(|f| t.members.iter().any(|m| m.0 == *f))?;
        let (ptr, to) = b.pointer_to(t.die, field)?;
        let inner = b.offset_of_type(to, raw, 4)?;
        Some(Shape::Guard {
            ptr: u32::try_from(ptr).ok()?,
            sem: u32::try_from(inner).ok()?,
            lock: lock.into(),
            write,
        })
    },
};

/// The lock a guard type named `name` holds, the inner lock type its address is that of, and
/// whether it holds it to write.
pub(super) fn other_guard_of(name: &str) -> Option<(&'static str, &'static str, bool)> {
    use crate::model::threads::{PARKING_LOT_MUTEX, PARKING_LOT_RWLOCK, STD_RWLOCK};
    const STD: &[(&str, bool)] = &[("RwLockReadGuard<", false), ("RwLockWriteGuard<", true)];
    const LOCK_API: &[(&str, bool)] = &[
        ("mutex::MutexGuard<", false),
        ("mutex::ArcMutexGuard<", false),
        ("mutex::MappedMutexGuard<", false),
        ("rwlock::RwLockReadGuard<", false),
        ("rwlock::ArcRwLockReadGuard<", false),
        ("rwlock::RwLockUpgradableReadGuard<", false),
        ("rwlock::RwLockWriteGuard<", true),
        ("rwlock::ArcRwLockWriteGuard<", true),
        ("rwlock::MappedRwLockWriteGuard<", true),
    ];
    let std = (name.strip_prefix("std::sync::poison::rwlock::"))
        .or_else(|| name.strip_prefix("std::sync::rwlock::"));
    if let Some(rest) = std {
        let &(_, write) = STD.iter().find(|g| rest.starts_with(g.0))?;
        return Some((STD_RWLOCK, "std::sys::sync::rwlock::futex::RwLock", write));
    }
    let rest = name.strip_prefix("lock_api::")?;
    let &(guard, write) = LOCK_API.iter().find(|g| rest.starts_with(g.0))?;
    let raw = &rest[guard.len()..];
    [
        (PARKING_LOT_MUTEX, "parking_lot::raw_mutex::RawMutex"),
        (PARKING_LOT_RWLOCK, "parking_lot::raw_rwlock::RawRwLock"),
    ]
    .into_iter()
    .find(|(_, r)| raw.starts_with(r))
    .map(|(lock, raw)| (lock, raw, write))
}

/// tokio's `mpsc` senders and receivers: the channel they are an end of, through their `Arc`.
const ENDPOINT: ValueRule = ValueRule {
    name: "tokio channel end",
    matches: |t| endpoint_of(&t.name).is_some(),
    shape: |b, t| {
        let sender = endpoint_of(&t.name)?;
        let (at, arc) = b.find_member_typed(t.die, "inner", 3)?;
        let (ptr, shared) = b.pointer_to(b.strip(arc), "ptr")?;
        let (data, _) = b.member(shared, &["data"])?;
        Some(Shape::Endpoint {
            ptr: u32::try_from(at + ptr).ok()?,
            data: u32::try_from(data).ok()?,
            sender,
        })
    },
};

/// Whether a tokio `mpsc` type is a sender (`Some(true)`) or a receiver (`Some(false)`), by name; a
/// weak sender keeps no channel open and is neither.
fn endpoint_of(name: &str) -> Option<bool> {
    const ENDS: &[(&str, bool)] = &[
        ("bounded::Sender<", true),
        ("bounded::Receiver<", false),
        ("unbounded::UnboundedSender<", true),
        ("unbounded::UnboundedReceiver<", false),
    ];
    let rest = name.strip_prefix("tokio::sync::mpsc::")?;
    (ENDS.iter())
        .find(|(prefix, _)| rest.starts_with(prefix))
        .map(|&(_, sender)| sender)
}

/// The lock a tokio guard or permit type holds, and whether it holds it to write, by the type's name.
fn guard_of(name: &str) -> Option<(&'static str, bool)> {
    const GUARDS: &[(&str, &str, bool)] = &[
        ("mutex::MutexGuard<", "Mutex", false),
        ("mutex::OwnedMutexGuard<", "Mutex", false),
        ("mutex::MappedMutexGuard<", "Mutex", false),
        ("mutex::OwnedMappedMutexGuard<", "Mutex", false),
        ("rwlock::read_guard::RwLockReadGuard<", "RwLock", false),
        (
            "rwlock::owned_read_guard::OwnedRwLockReadGuard<",
            "RwLock",
            false,
        ),
        ("rwlock::write_guard::RwLockWriteGuard<", "RwLock", true),
        (
            "rwlock::write_guard_mapped::RwLockMappedWriteGuard<",
            "RwLock",
            true,
        ),
        (
            "rwlock::owned_write_guard::OwnedRwLockWriteGuard<",
            "RwLock",
            true,
        ),
        (
            "rwlock::owned_write_guard_mapped::OwnedRwLockMappedWriteGuard<",
            "RwLock",
            true,
        ),
        ("semaphore::SemaphorePermit", "Semaphore", false),
        ("semaphore::OwnedSemaphorePermit", "Semaphore", false),
    ];
    let rest = name.strip_prefix("tokio::sync::")?;
    (GUARDS.iter())
        .find(|(prefix, _, _)| {
            rest.strip_prefix(prefix)
                .is_some_and(|r| prefix.ends_with('<') || r.is_empty())
        })
        .map(|&(_, lock, write)| (lock, write))
}

/// `Box<T>`, `&T`, `&mut T` (thin): the pointee; raw pointers: the address.
const POINTER: ValueRule = ValueRule {
    name: "pointer",
    matches: |t| {
        matches!(
            t.tag,
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type
        )
    },
    shape: |b, t| {
        let pointee = b.debug.node(b.strip(t.pointee?))?;
        // A `fn` item is zero-sized however its DWARF reads: nothing of it is read.
        if pointee.tag == constants::DW_TAG_subroutine_type {
            return Some(Shape::Opaque);
        }
        let kind = if t.name.starts_with('*') {
            return Some(Shape::Address);
        } else if is_generic(&t.name, "alloc::boxed::Box") {
            PointerKind::Box
        } else {
            PointerKind::Ref
        };
        Some(Shape::Pointer {
            kind,
            to: b.value(t.pointee?),
        })
    },
};

/// `Box<dyn Trait>`, `&dyn Trait`: a data pointer beside a vtable, shown as the address.
const FAT_POINTER: ValueRule = ValueRule {
    name: "trait object",
    matches: |t| t.members.len() == 2 && t.members.iter().any(|m| m.0 == "vtable"),
    shape: |_, t| (field(t, "pointer")? == 0).then_some(Shape::Address),
};

/// Any enum (`Option`, `Result`, the program's): its variant and that variant's fields.
const ENUM: ValueRule = ValueRule {
    name: "enum",
    matches: |t| t.tag == constants::DW_TAG_structure_type && t.members.is_empty(),
    shape: |b, t| {
        let (discr, variants) = match b.variants(t.die) {
            Some((discr, variants)) => (Some(discr), variants),
            None => (None, vec![b.sole_variant(t.die)?]),
        };
        // A state machine held as a value (a future not awaited): each suspend state's await (an
        // unresumed one's header).
        let machine = (t.name.contains("{async_fn_env#") || t.name.contains("{async_block_env#"))
            .then(|| b.debug.machine(t.die))
            .flatten();
        let state_of =
            |value: Option<u64>| (machine.as_ref()?.states.iter()).find(|s| Some(s.discr) == value);
        let variants = variants
            .into_iter()
            .map(|(value, name, die, at)| {
                let fields = fields(b, die, at);
                let state = state_of(value);
                let acquired = match (&machine, state) {
                    (Some(m), Some(_)) => (fields.iter())
                        .filter(|f| b.is_guard(f.ty))
                        .filter_map(|f| Some((f.name.clone(), acquired(m, &f.name)?)))
                        .collect(),
                    _ => Vec::new(),
                };
                VariantShape {
                    value,
                    // A state machine's variants are named by number; their states are not.
                    name: state.map_or(name, |s| s.name.clone()).into(),
                    at: state.map(|s| loc(&s.file, s.line)),
                    acquired,
                    fields,
                }
            })
            .collect();
        Some(Shape::Enum {
            discr,
            variants,
            bare: t.name.ends_with("::SocketAddr"),
        })
    },
};

/// The standard library's `Mutex<T>` and `RwLock<T>`: the value they keep, as field `data` (what a
/// `static` parks behind one), read without the lock: a reader that never writes cannot take it.
const STD_LOCK: ValueRule = ValueRule {
    name: "std lock",
    matches: |t| {
        const LOCKS: &[&str] = &[
            "std::sync::poison::mutex::Mutex<",
            "std::sync::mutex::Mutex<",
            "std::sync::poison::rwlock::RwLock<",
            "std::sync::rwlock::RwLock<",
        ];
        LOCKS.iter().any(|l| t.name.starts_with(l))
    },
    shape: |b, t| {
        let (at, cell) = b.member(t.die, &["data"])?;
        let (inside, ty) = b.member(b.strip(cell), &["value"])?;
        Some(Shape::Struct {
            fields: vec![FieldShape {
                name: "data".into(),
                offset: u32::try_from(at + inside).ok()?,
                ty: b.value(ty),
            }],
            tuple: false,
        })
    },
};

/// The standard library's `OnceLock<T>` and `LazyLock<T, F>`, and `lazy_static!`'s `Lazy<T>` (where
/// a `static` keeps what it makes at first use): the value, once its `Once` says it is complete, as
/// that value; `uninit` before. What complete is depends on the std the program was built with (see
/// [`ONCE_ENCODINGS`]); where that is not known for sure, the cell declines.
const STD_ONCE: ValueRule = ValueRule {
    name: "std once cell",
    matches: |t| is_once_cell(&t.name),
    shape: |b, t| {
        let (state, field) = once_state(b, t.die)?;
        let encoding = once_encoding(b, field)?;
        // `OnceLock`'s `value`, `LazyLock`'s `data` (a union of the value and the function).
        let (cell, mut ty) = b.member(t.die, &["value", "data", "__0"])?;
        let mut at = cell;
        // Through `UnsafeCell`, `MaybeUninit` (a union), `ManuallyDrop`, `MaybeDangling`: a few,
        // and no more however the DWARF nests them.
        for _ in 0..8 {
            if !is_cell(&b.debug.qualified_name(b.strip(ty))) {
                break;
            }
            let (off, inside) = b.member(b.strip(ty), &["value", "__0"])?;
            (at, ty) = (at + off, inside);
        }
        let discr = asyncdump_protocol::Discr {
            offset: u32::try_from(state).ok()?,
            size: encoding.size,
        };
        let value = (u32::try_from(at).ok()?, b.value(ty));
        Some(set_or_uninit(discr, (Some(encoding.complete), None), value))
    },
};

/// The `once_cell` crate's cells, each an `Option<T>` inside: `sync::OnceCell<T>`, whose `queue`
/// word is complete (2) once the value is set, and `unsync::OnceCell<T>`, the `Option` alone; and
/// each one's `Lazy<T, F>`, by its `cell`. Shown as std's are: the value once set, `uninit` before.
const ONCE_CELL: ValueRule = ValueRule {
    name: "once_cell cell",
    matches: |t| {
        const CELLS: &[&str] = &[
            "once_cell::sync::OnceCell<",
            "once_cell::unsync::OnceCell<",
            "once_cell::sync::Lazy<",
            "once_cell::unsync::Lazy<",
        ];
        CELLS.iter().any(|c| t.name.starts_with(c))
    },
    shape: |b, t| {
        let (mut at, mut die) = (0, t.die);
        if t.name.contains("::Lazy<") {
            let (off, cell) = b.member(die, &["cell"])?;
            (at, die) = (at + off, b.strip(cell));
        }
        // `sync::OnceCell` wraps its implementation; only the one over std's threads (a `queue`
        // word) is known.
        let mut queue = None;
        if let Some((off, imp)) = b.member(die, &["__0"]) {
            (at, die) = (at + off, b.strip(imp));
            queue = Some(at + b.member(die, &["queue"])?.0);
        }
        let (off, cell) = b.member(die, &["value", "inner"])?;
        let (inside, option) = b.member(b.strip(cell), &["value"])?;
        let option_at = at + off + inside;
        let (discr, variants) = b.variants(b.strip(option))?;
        let variant = |name: &str| variants.iter().find(|v| v.1 == name);
        let (some, none) = (variant("Some")?, variant("None")?);
        let (payload, ty) = b.member(b.strip(some.2), &["__0"])?;
        let value = (
            u32::try_from(option_at + some.3 + payload).ok()?,
            b.value(ty),
        );
        let (discr, values) = match queue {
            // Set before the word says complete: the word alone tells, never a value half written.
            Some(q) => {
                let word = asyncdump_protocol::Discr {
                    offset: u32::try_from(q).ok()?,
                    size: 8,
                };
                (word, (Some(2), None))
            }
            None => {
                let tag = asyncdump_protocol::Discr {
                    offset: u32::try_from(option_at).ok()? + discr.offset,
                    size: discr.size,
                };
                (tag, (some.0, none.0))
            }
        };
        Some(set_or_uninit(discr, values, value))
    },
};

/// A once cell's shape: `set`, its value (at an offset, of a type) when `discr` reads the first of
/// `values`, `uninit` when it reads the second (`None`: any other value), shown bare.
fn set_or_uninit(
    discr: asyncdump_protocol::Discr,
    (set, uninit): (Option<u64>, Option<u64>),
    (offset, ty): (u32, u32),
) -> Shape {
    let variant = |value, name: &str, fields| VariantShape {
        value,
        name: name.into(),
        at: None,
        acquired: Vec::new(),
        fields,
    };
    let value = FieldShape {
        name: "value".into(),
        offset,
        ty,
    };
    Shape::Enum {
        discr: Some(discr),
        variants: vec![
            variant(set, "set", vec![value]),
            variant(uninit, "uninit", Vec::new()),
        ],
        bare: true,
    }
}

fn is_once_cell(name: &str) -> bool {
    name.starts_with("std::sync::once_lock::OnceLock<")
        || name.starts_with("std::sync::lazy_lock::LazyLock<")
        || name.starts_with("lazy_static::lazy::Lazy<")
}

/// How one std's `Once` says it is complete: the name and size of its state word, the value a new
/// one starts at, and the value of complete (exactly: waiters are marked only while not complete).
pub(super) struct OnceEncoding {
    field: &'static str,
    size: u8,
    starts: u64,
    complete: u64,
}

/// Every `Once` std has had on Linux, by its state word. The last two share a name and swap their
/// values: which one a program has is told by what its once-cell statics start at in the file.
pub(super) const ONCE_ENCODINGS: &[OnceEncoding] = &[
    // Before the futex `Once`: the state in the low bits of a pointer to the queue of waiters.
    OnceEncoding {
        field: "state_and_queue",
        size: 8,
        starts: 0,
        complete: 3,
    },
    // The first futex `Once`: five states, queued (3) one of them.
    OnceEncoding {
        field: "state",
        size: 4,
        starts: 0,
        complete: 4,
    },
    // Queued as a bit (4) beside four states.
    OnceEncoding {
        field: "state_and_queued",
        size: 4,
        starts: 0,
        complete: 3,
    },
    // The same, complete made the all-zero state.
    OnceEncoding {
        field: "state_and_queued",
        size: 4,
        starts: 3,
        complete: 0,
    },
];

/// Where the state word of the `Once` in once cell `die` lies in it, and its name.
fn once_state(b: &Builder<'_>, die: u64) -> Option<(u64, &'static str)> {
    // `Lazy` is a tuple: its cell, then its `Once`.
    let (once, once_ty) = b.member(die, &["once", "__1"])?;
    let (inner, inner_ty) = b.member(b.strip(once_ty), &["inner"])?;
    let inner_ty = b.strip(inner_ty);
    ONCE_ENCODINGS.iter().find_map(|e| {
        let (state, _) = b.member(inner_ty, &[e.field])?;
        Some((once + inner + state, e.field))
    })
}

/// The one encoding of the program's `Once` whose state word is `field`; `None` if none, or if more
/// than one fits what the once-cell statics start at.
fn once_encoding(b: &mut Builder<'_>, field: &str) -> Option<&'static OnceEncoding> {
    let starts = b.once_starts_at();
    let mut fits = (ONCE_ENCODINGS.iter())
        .filter(|e| e.field == field && starts.is_none_or(|s| s == e.starts));
    let first = fits.next()?;
    fits.next().is_none().then_some(first)
}

/// A static's name as the program declares it: `lazy_static!` keeps the value of `static ref X` in a
/// static `LAZY` inside `<X as Deref>::deref`, named here `app::X`.
pub(super) fn declared_name(name: &str) -> String {
    let hidden = name
        .strip_suffix(" as Deref>::deref::__stability::LAZY")
        .and_then(|rest| rest.rsplit_once('<'));
    match hidden {
        Some((path, declared)) => format!("{path}{declared}"),
        None => name.to_owned(),
    }
}

/// The cells between a `OnceLock`, `LazyLock` or `Lazy` and its value.
fn is_cell(name: &str) -> bool {
    const CELLS: &[&str] = &[
        "core::cell::Cell<",
        "core::cell::UnsafeCell<",
        "core::mem::maybe_uninit::MaybeUninit<",
        "core::mem::manually_drop::ManuallyDrop<",
        "core::mem::maybe_dangling::MaybeDangling<",
        "std::sync::lazy_lock::Data<",
    ];
    CELLS.iter().any(|c| name.starts_with(c))
}

/// The standard library's and the runtime crates' other types: their insides are theirs (a `Mutex`'s
/// semaphore, a `HashMap`'s table); shown by name and address.
const LIBRARY: ValueRule = ValueRule {
    name: "library type",
    matches: |t| {
        let krate = t.name.split("::").next().unwrap_or("");
        LIBRARY_CRATES.iter().any(|l| {
            krate
                .strip_prefix(l)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
        })
    },
    shape: |_, _| Some(Shape::Opaque),
};

/// Crates (and their `_` siblings: `tokio_util`, `axum_core`) whose types are shown opaque unless a
/// rule above knows them.
const LIBRARY_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "tokio",
    "futures",
    "hyper",
    "h2",
    "http",
    "mio",
    "bytes",
    "tower",
    "axum",
    "tracing",
    "parking_lot",
    "crossbeam",
    "hashbrown",
    "indexmap",
    "smallvec",
    "serde",
    "reqwest",
    "tonic",
    "pin_project",
    "async_std",
    "smol",
];

/// A structure or tuple of the program's, up to [`MAX_FIELDS`] fields.
const STRUCT: ValueRule = ValueRule {
    name: "structure",
    matches: |t| t.tag == constants::DW_TAG_structure_type && t.members.len() <= MAX_FIELDS,
    shape: |b, t| {
        Some(Shape::Struct {
            fields: fields(b, t.die, 0),
            tuple: t.name.starts_with('('),
        })
    },
};

impl Builder<'_> {
    /// The statics whose type names a tokio guard, permit or channel end (they are
    /// `tokio::sync` types, and a type holding one names it among its parameters), planned: which of
    /// them may hold one, the planned types say.
    pub(in crate::plan) fn holding_statics(&mut self) -> Vec<StaticPlan> {
        let found = self.debug.statics_where(|ty| ty.contains("tokio::sync::"));
        (found.into_iter())
            .map(|(name, addr, ty)| StaticPlan {
                name: declared_name(&name).into(),
                addr,
                ty: self.value(ty),
            })
            .collect()
    }

    /// The value the state word of the program's once-cell statics starts at, read from the file
    /// (a `static` is made at compile time, its `Once` new); `None` if it has none, or if they
    /// disagree. Found once per plan.
    fn once_starts_at(&mut self) -> Option<u64> {
        if let Some(found) = self.values.once_starts_at {
            return found;
        }
        let mut seen = None;
        let mut agree = true;
        for (_, addr, ty) in self.debug.statics_where(is_once_cell) {
            let Some((state, field)) = once_state(self, self.strip(ty)) else {
                continue;
            };
            let size = ONCE_ENCODINGS
                .iter()
                .find(|e| e.field == field)
                .map_or(4, |e| e.size);
            let bytes =
                (addr.checked_add(state)).and_then(|at| self.debug.initial(at, size.into()));
            let Some(v) = bytes.and_then(|b| uint(&b, 0, size)) else {
                continue;
            };
            agree &= seen.is_none_or(|s| s == v);
            seen = Some(v);
        }
        let found = seen.filter(|_| agree);
        self.values.once_starts_at = Some(found);
        found
    }

    /// The locals of function bodies that may hold a guard, a permit or a channel's end, by scope;
    /// their types planned (the caller keeps those that [`ValueTypes::may_hold`]).
    pub(in crate::plan) fn holding_frame_locals(&mut self) -> Vec<FrameLocalPlan> {
        let vars = &self.debug.frame_vars;
        let mut out = Vec::with_capacity(vars.len());
        for v in vars {
            out.push(FrameLocalPlan {
                function: v.function.as_str().into(),
                name: v.name.as_str().into(),
                scope: v.scope,
                location: v.location.clone(),
                depth: v.depth,
                ty: self.value(v.ty),
                declared: (v.file.as_deref()).zip(v.line).map(|(f, l)| loc(f, l)),
            });
        }
        out
    }

    /// The value type of DIE `die`, planned on first sight.
    pub(in crate::plan) fn value(&mut self, die: u64) -> u32 {
        let die = self.strip(die);
        if let Some(&t) = self.values.by_die.get(&die) {
            return t;
        }
        let t = self.values.types.len() as u32;
        self.values.by_die.insert(die, t);
        let name = Arc::from(crate::names::brief(&self.debug.qualified_name(die)));
        let node = self.debug.node(die);
        // rustc gives pointer types (`Box<T>` is one) no size.
        let pointer = node.is_some_and(|n| n.tag == gimli::constants::DW_TAG_pointer_type);
        let size = node
            .and_then(|n| n.byte_size)
            .unwrap_or(if pointer { 8 } else { 0 });
        let size = u32::try_from(size).unwrap_or(0);
        // A placeholder while planning, so that a type reached through its own pointer terminates.
        let opaque = ValueType {
            name,
            size,
            shape: Shape::Opaque,
        };
        self.values.types.push(opaque);
        if self.values.types.len() > MAX_VALUE_TYPES || self.values.depth >= MAX_DEPTH {
            return t;
        }
        self.values.depth += 1;
        let shape = self.value_shape(die);
        self.values.depth -= 1;
        self.values.types[t as usize].shape = shape;
        t
    }

    /// The locals of suspend state `s` of state machine `m`, planned; a lock guard among them with
    /// the await that took it.
    pub(in crate::plan) fn locals(&mut self, m: &StateMachine, s: &State) -> Arc<[LocalPlan]> {
        (s.locals.iter())
            .filter_map(|(name, offset, die)| {
                let ty = self.value(*die);
                let acquired = self.is_guard(ty).then(|| acquired(m, name)).flatten();
                Some(LocalPlan {
                    name: Arc::from(name.as_str()),
                    offset: u32::try_from(*offset).ok()?,
                    ty,
                    acquired,
                    info: Default::default(),
                })
            })
            .collect()
    }

    /// A guard, or an enum with one in a variant (`Option<MutexGuard<T>>`).
    fn is_guard(&self, ty: u32) -> bool {
        let guard = |t: u32| {
            (self.values.types.get(t as usize))
                .is_some_and(|t| matches!(t.shape, Shape::Guard { .. }))
        };
        match self.values.types.get(ty as usize).map(|t| &t.shape) {
            Some(Shape::Guard { .. }) => true,
            Some(Shape::Enum { variants, .. }) => {
                (variants.iter()).any(|v| v.fields.iter().any(|f| guard(f.ty)))
            }
            _ => false,
        }
    }

    /// The shape of value type `die`, by the first rule that takes it.
    pub(super) fn value_shape(&mut self, die: u64) -> Shape {
        let Some(node) = self.debug.node(die) else {
            return Shape::Opaque;
        };
        let t = VTy {
            die,
            name: self.debug.qualified_name(die),
            tag: node.tag,
            zero: node.byte_size == Some(0),
            pointee: node.type_ref,
            members: self.members(die),
        };
        for rule in RULES {
            if !(rule.matches)(&t) {
                continue;
            }
            if let Some(shape) = (rule.shape)(self, &t) {
                self.values.decided_by.insert(die, rule.name);
                return shape;
            }
        }
        Shape::Opaque
    }
}

/// The offset of member `name`, if it fits the shape's offsets.
fn field(t: &VTy, name: &str) -> Option<u32> {
    let m = t.members.iter().find(|m| m.0 == name)?;
    u32::try_from(m.1).ok()
}

fn seq(b: &mut Builder<'_>, ptr: u64, len: u32, elem: u64) -> Option<Shape> {
    let stride = b.debug.node(b.strip(elem))?.byte_size?;
    Some(Shape::Seq {
        ptr: u32::try_from(ptr).ok()?,
        len,
        elem: b.value(elem),
        stride: u32::try_from(stride).ok()?,
    })
}

/// The fields of structure `die` placed `at` bytes into the value: tuple members `__0` named `0`.
fn fields(b: &mut Builder<'_>, die: u64, at: u64) -> Vec<FieldShape> {
    fields_where(b, die, at, |_| true)
}

/// [`fields`], of the members whose name (without its `__` prefix) `keep` keeps: only theirs
/// are planned.
fn fields_where(
    b: &mut Builder<'_>,
    die: u64,
    at: u64,
    keep: impl Fn(&str) -> bool,
) -> Vec<FieldShape> {
    b.members(die)
        .into_iter()
        .filter(|(name, _, _)| keep(name.strip_prefix("__").unwrap_or(name)))
        .filter_map(|(name, off, ty)| {
            Some(FieldShape {
                name: name.strip_prefix("__").unwrap_or(&name).into(),
                offset: u32::try_from(at + off).ok()?,
                ty: b.value(ty),
            })
        })
        .collect()
}

/// Where the lock guard `name` of state machine `m` was taken: the latest await of a tokio lock
/// acquire (`lock`, `read`, `write`, `acquire`, ...) at or before the first await `name` lives across,
/// in a state it does not live in. `None` where no such await is (a `try_lock`, a guard returned by
/// a function of the program's): nothing is guessed.
pub(super) fn acquired(m: &StateMachine, name: &str) -> Option<Loc> {
    let suspend = |s: &&State| s.name.starts_with("Suspend");
    let lives = |s: &State| s.locals.iter().any(|l| l.0 == name);
    let first = (m.states.iter().filter(suspend))
        .filter(|s| lives(s))
        .map(|s| s.line)
        .min()?;
    (m.states.iter().filter(suspend))
        .filter(|s| !lives(s) && s.line <= first)
        .filter(|s| (s.awaitee.as_ref()).is_some_and(|a| is_lock_acquire(&a.type_name)))
        .max_by_key(|s| s.line)
        .map(|s| loc(&s.file, s.line))
}

/// Whether a future of type `name` acquires a tokio lock or permits.
fn is_lock_acquire(name: &str) -> bool {
    const ACQUIRES: &[&str] = &[
        "::lock::",
        "::lock_owned::",
        "::read::",
        "::read_owned::",
        "::write::",
        "::write_owned::",
        "::acquire::",
        "::acquire_many::",
        "::acquire_owned::",
        "::acquire_many_owned::",
    ];
    name == "tokio::sync::batch_semaphore::Acquire"
        || (name.starts_with("tokio::sync::mutex::")
            || name.starts_with("tokio::sync::rwlock::")
            || name.starts_with("tokio::sync::semaphore::"))
            && ACQUIRES.iter().any(|a| name.contains(a))
}
