//! Value shapes: how the locals a suspended frame holds are read and shown.
//!
//! Every local of every planned state machine's suspend states is planned once, with the rest of
//! the plan (and kept with it in the plan cache), as a [`ValueType`]: its short name, its size and
//! its [`Shape`], which says where its parts are and what they are (an integer, a string's pointer
//! and length, an `Arc`'s counts and pointee, an enum's variants, ...). The shape is decided by the
//! rules of `rules.rs`, tried in order, each with a unit spec: the reading stage
//! (`crate::values`) never sees DWARF, only these shapes and the bytes.
//!
//! A type no rule knows, a library's internals, or anything past the limits here is
//! [`Shape::Opaque`]: shown as its name and address, never guessed at.

use std::sync::Arc;

use asyncdump_protocol::Discr;
use serde::{Deserialize, Serialize};

use crate::model::Loc;
use crate::model::values::LocalInfo;
pub use crate::model::values::PointerKind;

/// Most value types planned per binary; past it, every new type is opaque.
pub(super) const MAX_VALUE_TYPES: usize = 50_000;

/// Deepest nesting of value types planned one inside the other.
pub(super) const MAX_DEPTH: usize = 12;

/// Most fields of a structure shown one by one; a larger one is opaque.
pub const MAX_FIELDS: usize = 16;

/// One local of a suspend state: its name, its offset within the whole state machine, and its type
/// (an index into [`ValueTypes::types`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalPlan {
    pub name: Arc<str>,
    pub offset: u32,
    pub ty: u32,
    /// For a local that may hold a lock guard or permit: the await that took it (the latest lock
    /// acquire awaited before the first await the local lives across), where the state machine says.
    pub acquired: Option<Loc>,
    /// What every local read here shares, made the first time one is.
    #[serde(skip)]
    pub info: Memo<Arc<LocalInfo>>,
}

impl LocalPlan {
    /// What every local read here shares: its name, its type's (from `types`), where it was taken.
    pub fn info(&self, types: &ValueTypes) -> Arc<LocalInfo> {
        let info = self.info.0.get_or_init(|| {
            Arc::new(LocalInfo {
                name: self.name.clone(),
                type_name: (types.get(self.ty)).map_or_else(|| "".into(), |t| t.name.clone()),
                acquired: self.acquired.clone(),
            })
        });
        info.clone()
    }
}

/// A value worked out once from what it is kept beside: no part of what its owner is (equal
/// whatever it holds), and never written to the plan cache.
#[derive(Debug, Clone)]
pub struct Memo<T>(std::sync::OnceLock<T>);

impl<T> Default for Memo<T> {
    fn default() -> Memo<T> {
        Memo(std::sync::OnceLock::new())
    }
}

impl<T> PartialEq for Memo<T> {
    fn eq(&self, _: &Memo<T>) -> bool {
        true
    }
}

impl<T> Eq for Memo<T> {}

/// A `static` of the program whose type may hold a lock guard or a channel's end: read with the
/// wait targets, so that a lock parked in one is named by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticPlan {
    pub name: Arc<str>,
    pub addr: u64,
    pub ty: u32,
}

/// A local of a function body whose type may hold a lock guard, a permit or a channel's end: looked
/// for in the stack frames of the program's threads, so that a thread that holds one is named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameLocalPlan {
    /// The function's qualified name.
    pub function: Arc<str>,
    pub name: Arc<str>,
    /// The code addresses where the local is in scope at `location`, `[start, end)`.
    pub scope: (u64, u64),
    pub location: crate::dwarf::Location,
    /// How many scopes deep in its function it is declared (see `dwarf::FrameVar::depth`).
    pub depth: u16,
    pub ty: u32,
    /// Where it is declared.
    pub declared: Option<Loc>,
}

/// Which part of an `http` request head a [`Shape::Http`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpPart {
    /// `Request<B>`: its `head`.
    Request,
    /// `request::Parts`: its `method` and `uri`.
    Parts,
    /// `Uri`: its `path_and_query`.
    Uri,
    /// `PathAndQuery`: its text, `data`.
    PathAndQuery,
    /// `Method`: the enum of the standard methods, `0`.
    Method,
}

/// Every value type of a plan.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ValueTypes {
    pub types: Vec<ValueType>,
    /// Which types may hold a lock guard, a permit or a channel's end (see [`ValueTypes::may_hold`]),
    /// found on first use.
    #[serde(skip)]
    holding: std::sync::OnceLock<Vec<bool>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueType {
    /// Short: paths cut to their last segment (`Arc<Mutex<u64>>`).
    pub name: Arc<str>,
    /// Bytes of the value itself (not of what it points to).
    pub size: u32,
    pub shape: Shape,
}

/// What a value is, and where its parts are (offsets within the value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    /// A zero-sized value (`()`, `PhantomData`).
    Unit,
    Bool,
    Char,
    Int {
        signed: bool,
    },
    Float,
    /// `String`, `&str`: a pointer to UTF-8 bytes and their length.
    Str {
        ptr: u32,
        len: u32,
    },
    /// `Vec<T>`, `&[T]`: a pointer to `len` items `stride` bytes apart, each of type `elem`.
    Seq {
        ptr: u32,
        len: u32,
        elem: u32,
        stride: u32,
    },
    /// `Box<T>`, `&T`: a thin pointer at offset 0 to a `to`.
    Pointer {
        kind: PointerKind,
        to: u32,
    },
    /// `Arc<T>`, `Rc<T>`: a pointer at `ptr` to the shared block, which holds the counts at
    /// `strong` and `weak` and the value, of type `to`, at `data`.
    Counted {
        kind: PointerKind,
        ptr: u32,
        strong: u32,
        weak: u32,
        data: u32,
        to: u32,
    },
    /// A raw pointer, or a pointer to what cannot be shown (`dyn Trait`): its address.
    Address,
    Duration {
        secs: u32,
        nanos: u32,
    },
    /// `std::time::Instant` (and tokio's): a monotonic `timespec`.
    Instant {
        secs: u32,
        nanos: u32,
    },
    /// `SocketAddrV4`/`V6`: the address's octets at `ip`, the port at `port`.
    Socket {
        v6: bool,
        ip: u32,
        port: u32,
    },
    /// A part of the `http` crate's request head, read for what names the request: `fields`
    /// (named as the type names them) hold the method and the URI's path and query.
    Http {
        part: HttpPart,
        fields: Vec<FieldShape>,
    },
    /// An enum: its discriminant (none for an enum of one variant) and its variants. `bare` shows
    /// the payload alone (`SocketAddr`).
    Enum {
        discr: Option<Discr>,
        variants: Vec<VariantShape>,
        bare: bool,
    },
    /// A structure (or tuple, `tuple` set) shown field by field.
    Struct {
        fields: Vec<FieldShape>,
        tuple: bool,
    },
    /// tokio's semaphore `Acquire`: the semaphore its pointer at `ptr` leads to (its permit word at
    /// `permits`, its wait list's `tail`), and where this acquire's `node` is in that list, followed
    /// from the tail (the next to be served) by each waiter's `prev`.
    Semaphore {
        ptr: u32,
        permits: u32,
        tail: u32,
        node: u32,
        prev: u32,
    },
    /// tokio's `Notified`: the `Notify` its pointer at `ptr` leads to (its state word at `state`,
    /// its wait list's `tail`), where this waiter's `node` is in that list (followed by `prev`, as
    /// a semaphore's), and the waiter's own notification word, `notification` bytes into the value.
    Notify {
        ptr: u32,
        state: u32,
        tail: u32,
        node: u32,
        prev: u32,
        notification: u32,
    },
    /// Chosen words of what the value's pointers lead to, each named (a `watch`'s version, a
    /// `Barrier`'s count): what a wait target says in words, read without a rule per type.
    Words {
        words: Vec<Word>,
    },
    /// A pointer at `ptr` to an I/O object whose file descriptor (an `i32`) is `fd` bytes in.
    Fd {
        ptr: u32,
        fd: u32,
    },
    /// A tokio lock guard or permit (`MutexGuard`, `RwLockWriteGuard`, `OwnedSemaphorePermit`, ...):
    /// a pointer at `ptr` to the lock, whose semaphore is `sem` bytes into what it points at. `lock`
    /// says which lock: `Mutex`, `RwLock` (`write`: a write guard), `Semaphore`.
    Guard {
        ptr: u32,
        sem: u32,
        lock: Arc<str>,
        write: bool,
    },
    /// A tokio `mpsc` sender or receiver: a pointer at `ptr` to the channel's shared block, whose
    /// channel is `data` bytes in (the channel's address is what waits on it name).
    Endpoint {
        ptr: u32,
        data: u32,
        sender: bool,
    },
    /// A tokio `mpsc` channel a leaf waits on, reached through pointers: the word at `hops[0]` of the
    /// value, then the word that many bytes into what it points to for each further hop; the
    /// channel is `data` bytes past the last, less `back` (a send's acquire points into it).
    Channel {
        hops: Vec<u32>,
        data: u32,
        back: u32,
        layout: ChanLayout,
    },
    Opaque,
}

/// One word of a [`Shape::Words`]: from the value, the pointer `hops[0]` bytes in, then the pointer
/// that many bytes into what each points at for each further hop; the word is `at` bytes into the
/// last (into the value itself, with no hops). `size` 0 names the address there, not a word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Word {
    pub name: Arc<str>,
    pub hops: Vec<u32>,
    pub at: u32,
    pub size: u8,
}

/// Where a tokio `mpsc` channel keeps what a wait on it is told by: its permit word (a bounded
/// channel's free slots, an unbounded one's queued messages, shifted left one, the low bit
/// `closed`), its capacity (bounded only), its count of senders, and whether its receiver is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChanLayout {
    pub permits: u32,
    pub bound: Option<u32>,
    pub tx_count: u32,
    pub rx_closed: u32,
}

impl ChanLayout {
    /// Bytes to read from the channel's start to hold every part.
    pub fn span(&self) -> u32 {
        // Saturating: the offsets may come from a damaged plan cache.
        let words = [self.permits, self.tx_count].into_iter().chain(self.bound);
        (words.map(|w| w.saturating_add(8)))
            .chain([self.rx_closed.saturating_add(1)])
            .max()
            .unwrap_or(0)
    }
}

/// What a leaf future of one plan type waits for, and the parts of it read to say so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetPlan {
    pub kind: TargetKind,
    /// Each at its offset within the leaf future.
    pub parts: Arc<[LocalPlan]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TargetKind {
    /// A timer: part `deadline` (an instant).
    Sleep,
    /// A semaphore acquire: parts `wanted` (permits) and `semaphore` ([`Shape::Semaphore`]).
    Permits,
    /// A read or write of an I/O object: part `fd` ([`Shape::Fd`]).
    Io { write: bool },
    /// A channel receive: part `channel` ([`Shape::Channel`]).
    Receive,
    /// A `Notify`'s `notified()`: part `notify` ([`Shape::Notify`]).
    Notify,
    /// A `watch` receiver's `changed()`: part `watch` (words `addr`, `state`, `senders`, `seen`).
    Watch,
    /// A `broadcast` receive: part `broadcast` (words `addr`, `next`, `tail`, `mask`, `closed`,
    /// `senders`, `receivers`).
    Broadcast,
    /// A `Barrier`'s `wait()`: part `barrier` (words `addr`, `arrived`, `n`).
    Barrier,
    /// A listener's `accept()`: part `fd`, as a read's.
    Accept,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantShape {
    /// `None`: the variant taken when no other's value matches (a niche layout's dataful one).
    pub value: Option<u64>,
    pub name: Arc<str>,
    /// A state machine's state: the await it stands for (`src/main.rs:12`; a fn's header before it
    /// starts). A value in one is a future, and what it holds is held by whoever holds the future,
    /// whether or not anything polls it.
    pub at: Option<Loc>,
    /// Of a state machine's state: where each lock guard among its fields was taken (see
    /// `LocalPlan::acquired`).
    pub acquired: Vec<(Arc<str>, Loc)>,
    /// Offsets within the whole enum.
    pub fields: Vec<FieldShape>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldShape {
    pub name: Arc<str>,
    pub offset: u32,
    pub ty: u32,
}

impl ValueTypes {
    pub fn new(types: Vec<ValueType>) -> ValueTypes {
        ValueTypes {
            types,
            holding: Default::default(),
        }
    }

    pub fn get(&self, ty: u32) -> Option<&ValueType> {
        self.types.get(ty as usize)
    }

    /// Whether a value of type `ty` may hold a lock guard or permit, or a channel's sender or
    /// receiver: is one, or holds one in a field, a variant, an item or a `Box` (not behind a shared
    /// pointer: what an `Arc` points to is not held by its holder alone).
    pub fn may_hold(&self, ty: u32) -> bool {
        let holding = self.holding.get_or_init(|| holding(&self.types));
        holding.get(ty as usize).copied().unwrap_or(false)
    }

    /// Whether a value of type `ty` names an HTTP request: is an `http` request head, its URI or
    /// its method, or points at one.
    pub fn may_name_request(&self, ty: u32) -> bool {
        match self.get(ty).map(|t| &t.shape) {
            Some(Shape::Http { .. }) => true,
            Some(Shape::Pointer { to, .. }) => {
                matches!(self.get(*to).map(|t| &t.shape), Some(Shape::Http { .. }))
            }
            _ => false,
        }
    }
}

/// [`ValueTypes::may_hold`] of every type: guards, then whatever holds a type already found, until
/// nothing changes (types nest at most [`MAX_DEPTH`] deep, so few rounds).
fn holding(types: &[ValueType]) -> Vec<bool> {
    let mut holds: Vec<bool> = (types.iter())
        .map(|t| matches!(t.shape, Shape::Guard { .. } | Shape::Endpoint { .. }))
        .collect();
    let field_holds = |holds: &[bool], fields: &[FieldShape]| {
        (fields.iter()).any(|f| holds.get(f.ty as usize).copied().unwrap_or(false))
    };
    for _ in 0..=MAX_DEPTH {
        let mut changed = false;
        for (i, t) in types.iter().enumerate() {
            if holds[i] {
                continue;
            }
            let h = match &t.shape {
                Shape::Struct { fields, .. } => field_holds(&holds, fields),
                Shape::Enum { variants, .. } => {
                    (variants.iter()).any(|v| field_holds(&holds, &v.fields))
                }
                Shape::Pointer {
                    kind: PointerKind::Box,
                    to,
                }
                | Shape::Seq { elem: to, .. } => holds.get(*to as usize).copied().unwrap_or(false),
                _ => false,
            };
            if h {
                holds[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    holds
}

/// The value types a plan's builder has planned so far (the planning is `shapes/values.rs`'s).
#[derive(Default)]
pub(super) struct ValueBuilder {
    pub(super) types: Vec<ValueType>,
    pub(super) by_die: crate::model::FastMap<u64, u32>,
    /// How many types are being planned, one inside the other.
    pub(super) depth: usize,
    /// The rule that decided each type, by DIE, for the unit specs.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) decided_by: crate::model::FastMap<u64, &'static str>,
    /// What each leaf future waits for, by plan type, where a target rule knows its type.
    pub(super) targets: crate::model::FastMap<u32, TargetPlan>,
    /// What the state word of the program's once-cell statics starts at, once looked for.
    pub(super) once_starts_at: Option<Option<u64>>,
}
