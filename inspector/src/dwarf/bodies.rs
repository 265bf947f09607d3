//! The locals of function bodies that may keep a tokio lock guard, a permit or a channel's end: where
//! a thread (a `spawn_blocking` closure, any thread of the program) holds one, found on its stack.
//!
//! `parse` skips the insides of functions for its node table; while it does, [`Bodies`] notes each
//! local and parameter whose location is one `locations` can follow: at an offset from the frame
//! base (what unoptimised code gives every local), or, in optimised code, in a register, at an
//! offset from one, or in pieces, over the ranges of its location list. Each is kept with the code
//! range where it is so. Optimised code inlines: a local of an inlined function names that function
//! (the inlined call's origin), and its name and type come from its abstract origin, read when its
//! unit ends. Once every type is known, [`Bodies::finish`] keeps those whose type's name mentions
//! `tokio::sync::` or is a std `MutexGuard`, itself or through the members of a structure (a
//! closure's captures), and names them; and, apart, the `Pin<&mut F>` locals of `block_on`
//! functions: where an executor keeps the future it runs ([`is_block_on`]), or, where optimised
//! code placed no such local, the variable of type `F` it pins, by value.

use gimli::{AttributeValue, constants};

use super::locations::{self, FrameBase, Location};
use super::{Debug, FastMap, Reader, decl_file, die_ref, qualified};

/// A local of a function body that may hold a guard, a permit or a channel's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameVar {
    /// The function's qualified name (the inlined function's, for a local of one).
    pub function: String,
    pub name: String,
    /// The code addresses (in the file) where the local is in scope at `location`, `[start, end)`.
    pub scope: (u64, u64),
    pub location: Location,
    /// How many scopes (lexical blocks, inlined calls) deep in its function it is declared: of two
    /// locals of one frame that hold the same thing, the deeper one is the one in use.
    pub depth: u16,
    /// Its type's DIE.
    pub ty: u64,
    /// Where it is declared.
    pub file: Option<String>,
    pub line: Option<u64>,
}

/// A name as the DIE gives it: most are offsets into `.debug_str`, read only for the locals kept.
#[derive(Debug, Clone, Default)]
enum Name {
    Str(gimli::DebugStrOffset<usize>),
    Own(Box<str>),
    #[default]
    None,
}

#[derive(Debug)]
struct Function {
    name: Name,
    /// Its code, out of line, where it has any.
    ranges: Vec<(u64, u64)>,
    /// The namespace node the function is declared in.
    parent: Option<usize>,
    /// The DIE of its declaration, for a definition that names none itself (`DW_AT_specification`).
    declared: Option<u64>,
}

#[derive(Debug)]
struct Candidate {
    function: u32,
    /// The origin of the inlined call it is a local of, if any.
    inlined: Option<u64>,
    name: Name,
    scope: (u64, u64),
    location: Location,
    depth: u16,
    ty: Option<u64>,
    /// Its abstract origin, where its name and type are when it has none of its own.
    origin: Option<u64>,
    unit: usize,
    file: Option<u64>,
    line: Option<u64>,
    /// A parameter, not a variable: a moved-from one keeps stale bytes.
    param: bool,
}

/// What a local's abstract origin says of it.
#[derive(Default)]
struct Origin {
    name: Name,
    ty: Option<u64>,
    file: Option<u64>,
    line: Option<u64>,
}

/// The function body being read: its depth and frame base, and the code ranges of the lexical
/// scopes open inside it, its own first (none: ranges that cannot be read, whose locals are left
/// out rather than given a wider scope than they have), each with the origin of the inlined call
/// it is, if it is one.
struct Open {
    depth: usize,
    function: u32,
    base: Option<FrameBase>,
    scopes: Vec<Scope>,
}

struct Scope {
    depth: usize,
    ranges: Vec<(u64, u64)>,
    inlined: Option<u64>,
}

/// The locals of every function body, while `parse` reads the units.
#[derive(Default)]
pub(super) struct Bodies {
    functions: Vec<Function>,
    /// Every function's index by its DIE, declarations included.
    by_die: FastMap<u64, u32>,
    candidates: Vec<Candidate>,
    open: Option<Open>,
    /// The code of tokio's task polls (`raw::poll<T, S>`), which `parse` keeps as nodes.
    task_polls: Vec<(u64, u64)>,
}

type Entry<'a> = gimli::DebuggingInformationEntry<Reader<'a>>;
type Unit<'a> = gimli::Unit<Reader<'a>>;

/// Where a DIE is read from: its unit, the unit's index in the node table, and its offset.
pub(super) struct At<'u, 'a> {
    pub dwarf: &'u gimli::Dwarf<Reader<'a>>,
    pub unit: &'u Unit<'a>,
    pub index: usize,
    pub base: u64,
}

impl Bodies {
    /// A function whose body `parse` skips begins at `depth`, declared in node `parent`.
    pub(super) fn begin(
        &mut self,
        at: &At<'_, '_>,
        entry: &Entry<'_>,
        depth: usize,
        parent: Option<usize>,
    ) {
        self.open = None;
        let function = self.functions.len() as u32;
        self.by_die
            .insert(at.base + entry.offset().0 as u64, function);
        // A definition out of line names its declaration, or the abstract function it is a copy of.
        let declared = die_ref(entry.attr_value(constants::DW_AT_specification), at.base)
            .or_else(|| die_ref(entry.attr_value(constants::DW_AT_abstract_origin), at.base));
        let ranges = code_ranges(at, entry);
        self.functions.push(Function {
            name: name_of(entry),
            ranges: ranges.clone(),
            parent,
            declared,
        });
        if ranges.is_empty() {
            return;
        }
        let base = match entry.attr_value(constants::DW_AT_frame_base) {
            Some(AttributeValue::Exprloc(e)) => frame_base(e.0.slice()),
            _ => None,
        };
        self.open = Some(Open {
            depth,
            function,
            base,
            scopes: vec![Scope {
                depth,
                ranges,
                inlined: None,
            }],
        });
    }

    /// A task poll function (`tokio::runtime::task::raw::poll<T, S>`), whose body `parse` does
    /// not skip: its code, for [`Bodies::executor_code`].
    pub(super) fn task_poll(&mut self, at: &At<'_, '_>, entry: &Entry<'_>) {
        self.task_polls.extend(code_ranges(at, entry));
    }

    /// One DIE inside the body begun last (`depth` below it).
    pub(super) fn inside(&mut self, at: &At<'_, '_>, entry: &Entry<'_>, depth: usize) {
        let Some(open) = &mut self.open else {
            return;
        };
        if depth <= open.depth {
            self.open = None;
            return;
        }
        while open.scopes.last().is_some_and(|s| s.depth >= depth) {
            open.scopes.pop();
        }
        match entry.tag() {
            constants::DW_TAG_lexical_block | constants::DW_TAG_inlined_subroutine => {
                let inlined = match entry.tag() {
                    constants::DW_TAG_inlined_subroutine => {
                        die_ref(entry.attr_value(constants::DW_AT_abstract_origin), at.base)
                    }
                    _ => open.scopes.last().and_then(|s| s.inlined),
                };
                open.scopes.push(Scope {
                    depth,
                    ranges: code_ranges(at, entry),
                    inlined,
                });
            }
            constants::DW_TAG_variable | constants::DW_TAG_formal_parameter => {
                let Some(scope) = open.scopes.last() else {
                    return;
                };
                let ty = die_ref(entry.attr_value(constants::DW_AT_type), at.base);
                let origin = die_ref(entry.attr_value(constants::DW_AT_abstract_origin), at.base);
                if ty.is_none() && origin.is_none() {
                    return;
                }
                let (name, file) = (name_of(entry), decl_file(entry));
                let line =
                    (entry.attr_value(constants::DW_AT_decl_line)).and_then(|v| v.udata_value());
                let depth = u16::try_from(open.scopes.len()).unwrap_or(u16::MAX);
                let param = entry.tag() == constants::DW_TAG_formal_parameter;
                let candidates = &mut self.candidates;
                placed(
                    at,
                    entry,
                    open.base,
                    &scope.ranges,
                    &mut |range, location| {
                        candidates.push(Candidate {
                            function: open.function,
                            inlined: scope.inlined,
                            name: name.clone(),
                            scope: range,
                            location,
                            depth,
                            ty,
                            origin,
                            unit: at.index,
                            file,
                            line,
                            param,
                        });
                    },
                );
            }
            _ => {}
        }
    }

    /// The unit `at` is read: its candidates' names, types and declarations are taken from their
    /// abstract origins where they have none of their own.
    pub(super) fn end_unit(&mut self, at: &At<'_, '_>) {
        let end = at.base + at.unit.header.length_including_self() as u64;
        let read = |die: u64| {
            let offset = gimli::UnitOffset(usize::try_from(die.checked_sub(at.base)?).ok()?);
            (die < end).then(|| at.unit.entry(offset).ok()).flatten()
        };
        let from = (self.candidates.iter())
            .rposition(|c| c.unit != at.index)
            .map_or(0, |i| i + 1);
        // A location list gives a local one candidate per range, all of one origin: read once.
        let mut seen: FastMap<u64, Origin> = FastMap::default();
        for c in &mut self.candidates[from..] {
            let Some(first) = c.origin else {
                continue;
            };
            let o = seen.entry(first).or_insert_with(|| {
                let mut o = Origin::default();
                let mut next = Some(first);
                // An origin may have one of its own: two steps at most.
                for _ in 0..2 {
                    let Some(entry) = next.and_then(read) else {
                        break;
                    };
                    if matches!(o.name, Name::None) {
                        o.name = name_of(&entry);
                    }
                    o.ty =
                        o.ty.or_else(|| die_ref(entry.attr_value(constants::DW_AT_type), at.base));
                    o.file = o.file.or_else(|| decl_file(&entry));
                    o.line = o.line.or_else(|| {
                        (entry.attr_value(constants::DW_AT_decl_line)).and_then(|v| v.udata_value())
                    });
                    next = die_ref(entry.attr_value(constants::DW_AT_abstract_origin), at.base);
                }
                o
            });
            if matches!(c.name, Name::None) {
                c.name = o.name.clone();
            }
            (c.ty, c.file, c.line) = (c.ty.or(o.ty), c.file.or(o.file), c.line.or(o.line));
            c.origin = None;
        }
    }

    /// The code of the functions [`crate::names::code`] names an executor's own (between two
    /// polls of a `block_on`'s future) or a task's poll, out of line: `[start, end)`, and whether it
    /// polls a task; sorted. Only the crates the rules name are looked at.
    pub(super) fn executor_code(
        &self,
        debug: &Debug,
        strings: &gimli::DebugStr<Reader<'_>>,
    ) -> Vec<(u64, u64, bool)> {
        use crate::names::code::{Says, between_polls, may_say, says};
        let mut paths: FastMap<usize, Option<String>> = FastMap::default();
        let mut out = Vec::new();
        for f in self.functions.iter().filter(|f| !f.ranges.is_empty()) {
            let mut named = f;
            if let Some(d) = f.declared.and_then(|d| self.by_die.get(&d)) {
                named = &self.functions[*d as usize];
            }
            let Some(parent) = named.parent else {
                continue;
            };
            let path = paths.entry(parent).or_insert_with(|| {
                let path = qualified(&debug.nodes, parent);
                may_say(&path).then_some(path)
            });
            let Some(path) = path else {
                continue;
            };
            let own = match &named.name {
                Name::Str(o) => strings
                    .get_str(*o)
                    .map(|s| s.to_string_lossy().into_owned()),
                Name::Own(s) => Ok(s.to_string()),
                Name::None => continue,
            };
            let Ok(own) = own else {
                continue;
            };
            let function = format!("{path}::{own}");
            let polls = says(&function) == Some(Says::PollsTask);
            if polls || between_polls(&function) {
                out.extend(f.ranges.iter().map(|&(lo, hi)| (lo, hi, polls)));
            }
        }
        out.extend(self.task_polls.iter().map(|&(lo, hi)| (lo, hi, true)));
        out.sort_unstable();
        out
    }

    /// The locals whose type may hold a guard, a permit or a channel's end, named; then the
    /// futures pinned by a `block_on` (see [`is_block_on`]); each sorted by scope.
    pub(super) fn finish(
        self,
        debug: &Debug,
        strings: &gimli::DebugStr<Reader<'_>>,
    ) -> (Vec<FrameVar>, Vec<FrameVar>) {
        let mut memo = FastMap::default();
        let mut pins = FastMap::default();
        let text = |n: &Name| match n {
            Name::Str(o) => strings
                .get_str(*o)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Name::Own(s) => s.to_string(),
            Name::None => String::new(),
        };
        let function = |c: &Candidate| {
            let inlined = c.inlined.and_then(|d| self.by_die.get(&d));
            let mut f = &self.functions[*inlined.unwrap_or(&c.function) as usize];
            // A definition out of line names itself by its declaration.
            if let Some(d) = f.declared.and_then(|d| self.by_die.get(&d)) {
                f = &self.functions[*d as usize];
            }
            let own = text(&f.name);
            match f.parent.map(|p| qualified(&debug.nodes, p)) {
                Some(path) if !path.is_empty() => format!("{path}::{own}"),
                _ => own,
            }
        };
        let var = |c: &Candidate, ty: u64, function: String| {
            let files = debug.files.get(c.unit);
            FrameVar {
                function,
                name: text(&c.name),
                scope: c.scope,
                location: c.location.clone(),
                depth: c.depth,
                ty,
                file: c.file.and_then(|i| files?.get(i as usize).cloned()),
                line: c.line,
            }
        };
        let mut holding = Vec::new();
        let mut pinned = Vec::new();
        for (c, ty) in (self.candidates.iter()).filter_map(|c| Some((c, c.ty?))) {
            // A future may hold a lock guard or a channel's end: it is both.
            if mentions_sync(debug, ty, 3, &mut memo) {
                holding.push(var(c, ty, function(c)));
            }
            if *(pins.entry(ty)).or_insert_with(|| pinned_mut(debug, ty).is_some()) {
                let f = function(c);
                if is_block_on(&f) {
                    pinned.push(var(c, ty, f));
                }
            } else if !c.param && matches!(c.location, Location::Whole(ref p) if p.in_memory()) {
                // Optimised code may place no `Pin` at all, only the future it pins, by value:
                // a variable of the `block_on`'s own type parameter, in memory.
                let f = function(c);
                if is_block_on(&f) && runs(&f, &debug.qualified_name(ty)) {
                    pinned.push(var(c, ty, f));
                }
            }
        }
        holding.sort_by_key(|v| v.scope);
        pinned.sort_by_key(|v| v.scope);
        (holding, pinned)
    }
}

/// Whether the type at `die` names a `tokio::sync` type or is a guard of another blocking lock
/// ([`is_std_mutex_guard`], [`is_other_lock_guard`]), or (for a
/// structure, `depth` levels down) one of its members' types does.
fn mentions_sync(debug: &Debug, die: u64, depth: u32, memo: &mut FastMap<u64, bool>) -> bool {
    if let Some(&m) = memo.get(&die) {
        return m;
    }
    memo.insert(die, false);
    let Some(i) = debug.by_offset.get(&die) else {
        return false;
    };
    let nodes = &debug.nodes;
    let n = &nodes[i];
    let name = qualified(nodes, i);
    let mut found =
        name.contains("tokio::sync::") || is_std_mutex_guard(&name) || is_other_lock_guard(&name);
    if !found && depth > 0 && n.tag == constants::DW_TAG_structure_type {
        found = (n.children.iter())
            .map(|&c| &nodes[c])
            .filter(|c| c.tag == constants::DW_TAG_member)
            .filter_map(|c| c.type_ref)
            .any(|t| mentions_sync(debug, t, depth - 1, memo));
    }
    memo.insert(die, found);
    found
}

/// The type a `Pin<&mut T>` at `die` points to: `T`'s DIE. `None` for any other type.
pub(crate) fn pinned_mut(debug: &Debug, die: u64) -> Option<u64> {
    let i = debug.by_offset.get(&die)?;
    let nodes = &debug.nodes;
    if !qualified(nodes, i).starts_with("core::pin::Pin<&mut ") {
        return None;
    }
    let member = (nodes[i].children.iter())
        .map(|&c| &nodes[c])
        .find(|c| c.tag == constants::DW_TAG_member)?;
    let pointer = &nodes[debug.by_offset.get(&member.type_ref?)?];
    match pointer.tag {
        constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type => pointer.type_ref,
        _ => None,
    }
}

/// Whether function `name` (qualified, as DWARF names it) is a `block_on`, or a closure in one:
/// where an executor keeps the future it runs to its end pinned on its thread's stack
/// (`tokio::runtime::park::CachedParkThread::block_on<F>`, `futures_executor::local_pool::block_on<F>`,
/// `pollster::block_on<F>`, current_thread's `CoreGuard::block_on::{{closure}}<F>`).
pub(crate) fn is_block_on(name: &str) -> bool {
    let plain = crate::names::path_of(name);
    let mut segments = plain.rsplit("::");
    // A closure is `{{closure}}`, or in optimised code's DWARF `{closure#0}`.
    let closure = |s: &str| s == "{{closure}}" || s.starts_with("{closure#");
    match segments.next() {
        Some("block_on") => true,
        Some(s) if closure(s) => segments.find(|s| !closure(s)) == Some("block_on"),
        _ => false,
    }
}

/// Whether `name` is the standard library's `MutexGuard` (either of its paths).
pub(crate) fn is_std_mutex_guard(name: &str) -> bool {
    [
        "std::sync::poison::mutex::MutexGuard<",
        "std::sync::mutex::MutexGuard<",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Whether `block_on`, a function's name, is the instance of it for future type `future` (its one
/// generic argument).
fn runs(block_on: &str, future: &str) -> bool {
    (block_on.strip_suffix('>'))
        .and_then(|b| b.strip_suffix(future))
        .is_some_and(|b| b.ends_with("block_on<"))
}

/// Whether `name` is a guard of a blocking lock other than std's `Mutex` whose holders are found:
/// std's `RwLock` guards, and `lock_api`'s over parking_lot's raw locks.
pub(crate) fn is_other_lock_guard(name: &str) -> bool {
    let std = ["std::sync::poison::rwlock::", "std::sync::rwlock::"];
    let std_guard =
        |rest: &str| rest.starts_with("RwLockReadGuard<") || rest.starts_with("RwLockWriteGuard<");
    std.iter()
        .any(|p| name.strip_prefix(p).is_some_and(std_guard))
        || name
            .strip_prefix("lock_api::")
            .is_some_and(|rest| rest.contains("Guard<parking_lot::"))
}

fn name_of(entry: &Entry<'_>) -> Name {
    match entry.attr_value(constants::DW_AT_name) {
        Some(AttributeValue::DebugStrRef(o)) => Name::Str(o),
        Some(AttributeValue::String(s)) => Name::Own(s.to_string_lossy().into()),
        _ => Name::None,
    }
}

/// A DIE's code ranges: `DW_AT_low_pc` with `DW_AT_high_pc` (an address, or a length from the
/// low one), or `DW_AT_ranges`. None where neither can be read.
fn code_ranges(at: &At<'_, '_>, entry: &Entry<'_>) -> Vec<(u64, u64)> {
    if let Some(AttributeValue::Addr(lo)) = entry.attr_value(constants::DW_AT_low_pc) {
        let hi = match entry.attr_value(constants::DW_AT_high_pc) {
            Some(AttributeValue::Addr(hi)) => Some(hi),
            Some(other) => other.udata_value().and_then(|n| lo.checked_add(n)),
            None => None,
        };
        return hi
            .filter(|&hi| lo != 0 && hi > lo)
            .map(|hi| vec![(lo, hi)])
            .unwrap_or_default();
    }
    let Some(value) = entry.attr_value(constants::DW_AT_ranges) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Ok(Some(mut ranges)) = at.dwarf.attr_ranges(at.unit, value) else {
        return out;
    };
    // A damaged list ends the scope's ranges where it breaks: fewer scopes, never wider ones.
    while let Ok(Some(r)) = ranges.next() {
        if r.begin != 0 && r.end > r.begin {
            out.push((r.begin, r.end));
        }
    }
    out
}

/// Where a local is, over which ranges of code, each given to `found`: its one location over its
/// scope's ranges, or each entry of its location list (within the scope). None where the location
/// is not one [`locations::parse`] follows.
fn placed(
    at: &At<'_, '_>,
    entry: &Entry<'_>,
    base: Option<FrameBase>,
    scope: &[(u64, u64)],
    found: &mut dyn FnMut((u64, u64), Location),
) {
    match entry.attr_value(constants::DW_AT_location) {
        Some(AttributeValue::Exprloc(e)) => {
            if let Some(l) = locations::parse(e.0, base) {
                scope.iter().for_each(|&r| found(r, l.clone()));
            }
        }
        Some(value @ (AttributeValue::LocationListsRef(_) | AttributeValue::SecOffset(_))) => {
            let Ok(Some(mut list)) = at.dwarf.attr_locations(at.unit, value) else {
                return;
            };
            // A damaged list ends where it breaks: fewer places, never wrong ones.
            while let Ok(Some(l)) = list.next() {
                let Some(location) = locations::parse(l.data.0, base) else {
                    continue;
                };
                for &(lo, hi) in scope {
                    let (lo, hi) = (lo.max(l.range.begin), hi.min(l.range.end));
                    if lo < hi {
                        found((lo, hi), location.clone());
                    }
                }
            }
        }
        _ => {}
    }
}

/// The DWARF register numbers of the stack and frame pointers.
#[cfg(target_arch = "aarch64")]
const SP_FP: (u8, u8) = (31, 29);
#[cfg(not(target_arch = "aarch64"))]
const SP_FP: (u8, u8) = (7, 6);

/// A frame base that is one register or the CFA.
fn frame_base(expr: &[u8]) -> Option<FrameBase> {
    let reg = |n: u8| constants::DW_OP_reg0.0 + n;
    match expr {
        [op] if *op == reg(SP_FP.0) => Some(FrameBase::Sp),
        [op] if *op == reg(SP_FP.1) => Some(FrameBase::Fp),
        [op] if *op == constants::DW_OP_call_frame_cfa.0 => Some(FrameBase::Cfa),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_by_value_is_taken_only_in_the_block_on_of_its_own_type() {
        let env = "app::main::{async_block_env#0}";
        let cases = [
            (
                "tokio::runtime::park::CachedParkThread::block_on<app::main::{async_block_env#0}>",
                true,
            ),
            ("pollster::block_on<app::main::{async_block_env#0}>", true),
            // Another generic argument, or another function: not the future it pins.
            (
                "tokio::runtime::park::CachedParkThread::block_on<app::serve::{async_fn_env#0}>",
                false,
            ),
            (
                "futures_executor::local_pool::run_executor<(), app::main::{async_block_env#0}>",
                false,
            ),
            ("app::block_on_all<app::main::{async_block_env#0}>", false),
        ];
        for (function, want) in cases {
            assert_eq!(runs(function, env), want, "{function}");
        }
    }

    #[test]
    fn a_frame_base_is_one_register_or_the_cfa() {
        assert_eq!(frame_base(&[0x50 + SP_FP.0]), Some(FrameBase::Sp));
        assert_eq!(frame_base(&[0x50 + SP_FP.1]), Some(FrameBase::Fp));
        assert_eq!(frame_base(&[0x9c]), Some(FrameBase::Cfa));
        assert_eq!(frame_base(&[0x50]), None, "another register");
        assert_eq!(frame_base(&[0x9c, 0x9c]), None, "an expression");
    }
}
