//! Reading DIEs: every DIE outside function bodies, with the few attributes `decode` needs, into
//! [`Debug`]'s flat node table, from DWARF sections given as bytes. Subprograms are skipped but for the
//! ones whose addresses the plans need (root anchors, tokio's `raw::poll` and `clone_arc_raw`), and impl
//! blocks are named after what they implement, from their functions' demangled linkage names.

use std::borrow::Cow;
use std::path::Path;

use gimli::{AttributeValue, EndianSlice, RunTimeEndian, constants};

use super::bodies::{At, Bodies};
use super::{Debug, DwarfError, FastMap, Node, Offsets, Reader, decl_file, die_ref, qualified};

/// The DWARF sections of one file, by name (`.debug_info`, ...), decompressed; `None` for a section the
/// file lacks. Kept apart from file I/O (`load`) so that the DIE reading works on any bytes.
pub(crate) type Sections<'d> = dyn Fn(&str) -> Option<Cow<'d, [u8]>> + 'd;

impl Debug {
    /// Reads the DIEs of `sections` (in `endian` byte order) into the node table. `path` names the file
    /// in errors; `build_id` is the executable's.
    pub(crate) fn from_sections(
        path: &Path,
        endian: RunTimeEndian,
        sections: &Sections<'_>,
        build_id: Option<String>,
    ) -> Result<Debug, DwarfError> {
        let debug_info_bytes = std::cell::Cell::new(0u64);
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
            let data = sections(id.name()).unwrap_or(Cow::Borrowed(&[]));
            if id == gimli::SectionId::DebugInfo {
                debug_info_bytes.set(data.len() as u64);
            }
            Ok(data)
        };
        let bad = |e: gimli::Error| DwarfError::Dwarf {
            path: path.to_owned(),
            detail: e.to_string(),
        };
        let sections = gimli::DwarfSections::load(load).map_err(bad)?;
        let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
        let debug_info_bytes = debug_info_bytes.get();
        let mut table = Table::with_room_for(debug_info_bytes);
        let mut units = dwarf.units();
        while let Some(header) = units.next().map_err(bad)? {
            let unit = dwarf.unit(header).map_err(bad)?;
            table.read_unit(&dwarf, &unit, endian).map_err(bad)?;
        }
        let bodies = std::mem::take(&mut table.bodies);
        rename_impls(&mut table.nodes, &table.mention_impls, &table.impls);
        if !table.saw_types {
            return Err(DwarfError::NoTypes {
                path: path.to_owned(),
            });
        }
        let vtables = future_vtables(&table.nodes, &table.by_offset);
        let mut debug = Debug {
            path: path.to_owned(),
            build_id,
            debug_info_bytes,
            vaddr_at_zero: None,
            code_words: Vec::new(),
            waker_vtables: Vec::new(),
            nodes: table.nodes,
            by_offset: table.by_offset,
            files: table.files,
            vtables,
            frame_vars: Vec::new(),
            pinned_futures: Vec::new(),
            executor_code: Vec::new(),
            initial: Vec::new(),
        };
        debug.executor_code = bodies.executor_code(&debug, &dwarf.debug_str);
        (debug.frame_vars, debug.pinned_futures) = bodies.finish(&debug, &dwarf.debug_str);
        Ok(debug)
    }
}

/// The node table while it is read.
struct Table {
    nodes: Vec<Node>,
    by_offset: Offsets,
    files: Vec<Vec<String>>,
    saw_types: bool,
    /// Impl blocks' names, from their functions' linkage names (see `name_impl`).
    impls: FastMap<String, String>,
    /// Impl namespaces (`{impl#3}`) and the DIEs whose names mention one (types and functions spell
    /// their generic arguments as text), by index: what [`rename_impls`] renames, found as the DIEs are
    /// read rather than by another pass over them all.
    mention_impls: Vec<usize>,
    /// The locals of the function bodies skipped.
    bodies: Bodies,
}

type Dwarf<'a> = gimli::Dwarf<Reader<'a>>;
type Unit<'a> = gimli::Unit<Reader<'a>>;
type Entry<'a> = gimli::DebuggingInformationEntry<Reader<'a>>;

/// What marks a subprogram whose address the plans need.
#[derive(Clone, Copy, Default)]
struct Marks {
    anchor: bool,
    task_poll: bool,
    wake_clone: bool,
}

/// The most DIEs reserved for at once: a large service's `.debug_info` (tens of MB) has a few million.
const MAX_RESERVED_DIES: u64 = 8 << 20;

impl Table {
    fn with_room_for(debug_info_bytes: u64) -> Table {
        // About one DIE per 10 bytes of .debug_info: reserve once rather than grow (and copy) a huge
        // table; a section that says it holds more than any real one is grown into, not reserved
        // for (a gigabyte of zeros would ask for tens of gigabytes here).
        let dies = (debug_info_bytes / 10).min(MAX_RESERVED_DIES) as usize;
        Table {
            nodes: Vec::with_capacity(dies),
            by_offset: Offsets(Vec::with_capacity(dies)),
            files: Vec::new(),
            saw_types: false,
            impls: FastMap::default(),
            mention_impls: Vec::new(),
            bodies: Bodies::default(),
        }
    }

    /// Reads one unit's DIEs, skipping the insides of every subprogram the plans do not need.
    fn read_unit(
        &mut self,
        dwarf: &Dwarf<'_>,
        unit: &Unit<'_>,
        endian: RunTimeEndian,
    ) -> Result<(), gimli::Error> {
        let unit_index = self.files.len();
        self.files.push(unit_files(dwarf, unit));
        let mut stack: Vec<usize> = Vec::new();
        // Inside a subprogram that is not an anchor (its parameters, locals, blocks, inlined calls:
        // most DIEs of a binary), nothing is of use: skip down to this depth.
        let mut skip_below: Option<usize> = None;
        let mut entries = unit.entries();
        let base = unit.header.offset().0 as u64;
        let at = At {
            dwarf,
            unit,
            index: unit_index,
            base,
        };
        while let Some(entry) = entries.next_dfs()? {
            let depth = entry.depth().max(0) as usize;
            match skip_below {
                Some(d) if depth > d => {
                    self.bodies.inside(&at, entry, depth);
                    continue;
                }
                _ => skip_below = None,
            }
            stack.truncate(depth);
            let string = |at| {
                let value = entry.attr_value(at)?;
                dwarf.attr_string(unit, value).ok()
            };
            let marks = self.marks(entry, &stack, &string);
            if marks.task_poll {
                self.bodies.task_poll(&at, entry);
            }
            if entry.tag() == constants::DW_TAG_subprogram
                && !(marks.anchor || marks.task_poll || marks.wake_clone)
            {
                skip_below = Some(depth);
                self.bodies.begin(&at, entry, depth, stack.last().copied());
                name_impl(&self.nodes, &stack, &mut self.impls, || {
                    string(constants::DW_AT_linkage_name).map(|s| s.to_string_lossy().into_owned())
                });
                continue;
            }
            let name = string(constants::DW_AT_name).map(|s| s.to_string_lossy().into_owned());
            let node = node_of(
                entry,
                base,
                unit_index,
                stack.last().copied(),
                name,
                marks,
                endian,
            );
            self.saw_types |= node.tag == constants::DW_TAG_structure_type;
            // Every DIE, whatever its tag: a task's `poll<T, S>` must spell `T` as its `Cell<T, S>`
            // does, to be matched with it.
            let mentions_impl = node.name.as_deref().is_some_and(|s| s.contains("{impl#"));
            let idx = self.push(node);
            if mentions_impl {
                self.mention_impls.push(idx);
            }
            stack.push(idx);
        }
        self.bodies.end_unit(&at);
        Ok(())
    }

    /// What marks the entry, if it is a subprogram the plans need.
    #[inline(always)]
    fn marks<'a>(
        &self,
        entry: &Entry<'a>,
        stack: &[usize],
        string: &dyn Fn(constants::DwAt) -> Option<Reader<'a>>,
    ) -> Marks {
        if entry.tag() != constants::DW_TAG_subprogram {
            return Marks::default();
        }
        let named =
            |prefix: &[u8]| string(constants::DW_AT_name).is_some_and(|s| s.starts_with(prefix));
        let anchor = string(constants::DW_AT_linkage_name).is_some_and(|s| is_anchor(&s));
        Marks {
            anchor,
            task_poll: !anchor && in_namespace(&self.nodes, stack, TOKIO_RAW) && named(b"poll<"),
            wake_clone: !anchor
                && in_namespace(&self.nodes, stack, TOKIO_WAKE)
                && named(b"clone_arc_raw<"),
        }
    }

    /// Adds `node` under its parent; its index.
    #[inline(always)]
    fn push(&mut self, node: Node) -> usize {
        let idx = self.nodes.len();
        if let Some(p) = node.parent {
            self.nodes[p].children.push(idx);
        }
        self.by_offset.0.push(node.offset);
        self.nodes.push(node);
        idx
    }
}

/// The node of one entry, with the attributes the plans need.
#[inline(always)]
fn node_of(
    entry: &Entry<'_>,
    base: u64,
    unit: usize,
    parent: Option<usize>,
    name: Option<String>,
    marks: Marks,
    endian: RunTimeEndian,
) -> Node {
    let attr = |at| entry.attr_value(at);
    let unit_ref = |v| die_ref(v, base);
    let udata = |v: Option<AttributeValue<Reader<'_>>>| v.and_then(|v| v.udata_value());
    Node {
        offset: base + entry.offset().0 as u64,
        unit,
        tag: entry.tag(),
        name,
        parent,
        byte_size: udata(attr(constants::DW_AT_byte_size)),
        alignment: udata(attr(constants::DW_AT_alignment)).map_or(0, |a| a.min(1 << 16) as u32),
        member_offset: udata(attr(constants::DW_AT_data_member_location)),
        type_ref: unit_ref(attr(constants::DW_AT_type)),
        discr_ref: unit_ref(attr(constants::DW_AT_discr)),
        discr_value: udata(attr(constants::DW_AT_discr_value)),
        decl_file: decl_file(entry),
        decl_line: udata(attr(constants::DW_AT_decl_line)),
        low_pc: match attr(constants::DW_AT_low_pc) {
            Some(AttributeValue::Addr(a)) if a != 0 => Some(a),
            _ => None,
        },
        anchor: marks.anchor,
        task_poll: marks.task_poll,
        wake_clone: marks.wake_clone,
        artificial: matches!(
            attr(constants::DW_AT_artificial),
            Some(AttributeValue::Flag(true))
        ),
        containing_type: unit_ref(attr(constants::DW_AT_containing_type)),
        addr: static_address(entry, endian),
        children: Vec::new(),
    }
}

/// A static's address, from the plain `DW_OP_addr X` location statics use.
fn static_address(entry: &Entry<'_>, endian: RunTimeEndian) -> Option<u64> {
    let Some(AttributeValue::Exprloc(e)) = entry.attr_value(constants::DW_AT_location) else {
        return None;
    };
    let b = e.0.slice();
    if entry.tag() != constants::DW_TAG_variable || b.len() != 9 || b[0] != constants::DW_OP_addr.0
    {
        return None;
    }
    let a: [u8; 8] = b[1..9].try_into().ok()?;
    Some(match endian {
        RunTimeEndian::Little => u64::from_le_bytes(a),
        RunTimeEndian::Big => u64::from_be_bytes(a),
    })
}

/// The `<T as Future>::{vtable}` statics: their address and the DIE of `T`.
fn future_vtables(nodes: &[Node], by_offset: &Offsets) -> Vec<(u64, u64)> {
    nodes
        .iter()
        .filter(|n| {
            n.tag == constants::DW_TAG_variable
                && n.name
                    .as_deref()
                    .is_some_and(|s| s.ends_with(" as core::future::future::Future>::{vtable}"))
        })
        .filter_map(|n| {
            let ty = &nodes[by_offset.get(&n.type_ref?)?];
            Some((n.addr?, ty.containing_type?))
        })
        .collect()
}

/// The namespaces of tokio's `raw::poll`, innermost last.
const TOKIO_RAW: &[&str] = &["tokio", "runtime", "task", "raw"];
/// The namespaces of tokio's wakers made from an `Arc`.
const TOKIO_WAKE: &[&str] = &["tokio", "util", "wake"];

/// Whether the DIEs on `stack` (the current DIE's ancestors, outermost first) end in the namespaces `path`.
fn in_namespace(nodes: &[Node], stack: &[usize], path: &[&str]) -> bool {
    stack.len() > path.len()
        && stack[stack.len() - path.len()..]
            .iter()
            .zip(path)
            .all(|(&i, want)| {
                nodes[i].tag == constants::DW_TAG_namespace
                    && nodes[i].name.as_deref() == Some(*want)
            })
}

/// Whether a linkage (mangled) name is `<asyncdump_agent::task::instrument::Instrumented<F> as Future>::poll`,
/// under legacy or v0 mangling. Only names that mention both the crate and the type are demangled.
fn is_anchor(linkage: &[u8]) -> bool {
    let has = |needle: &[u8]| linkage.windows(needle.len()).any(|w| w == needle);
    if !has(b"asyncdump_agent") || !has(b"Instrumented") {
        return false;
    }
    let Ok(linkage) = std::str::from_utf8(linkage) else {
        return false;
    };
    rustc_demangle::try_demangle(linkage)
        .is_ok_and(|d| asyncdump_protocol::agent_names::is_anchor(&format!("{d:#}")))
}

/// File names of a unit's line program, by DWARF file index (directory joined when relative).
fn unit_files(dwarf: &gimli::Dwarf<Reader<'_>>, unit: &gimli::Unit<Reader<'_>>) -> Vec<String> {
    let Some(program) = &unit.line_program else {
        return Vec::new();
    };
    let header = program.header();
    let string = |v| {
        dwarf
            .attr_string(unit, v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let comp_dir = unit
        .comp_dir
        .as_ref()
        .map(|d| d.to_string_lossy().into_owned());
    // DWARF 5 numbers files from 0, earlier versions from 1: ask for each index the header can answer.
    let count = header.file_names().len() as u64 + 1;
    (0..count)
        .map(|i| {
            header
                .file(i)
                .and_then(|f| {
                    let name = string(f.path_name())?;
                    let name = match f.directory(header).and_then(string) {
                        Some(dir) if !name.starts_with('/') => format!("{dir}/{name}"),
                        _ => name,
                    };
                    Some(crate::names::in_unit(name, comp_dir.as_deref()))
                })
                .unwrap_or_default()
        })
        .collect()
}

/// Finds the name of an impl block's namespace (`{impl#3}`, which says nothing): what it implements, as
/// people write it: `Mutex` for `impl<T> Mutex<T>`, `<F as Handler>` for `impl Handler for F`. The
/// demangled linkage name of a function inside it (`linkage`, asked for only while the namespace is
/// still unnamed) says which: `tokio::sync::mutex::Mutex<T>::lock`, `<F as axum::handler::Handler<..>>::call`.
fn name_impl(
    nodes: &[Node],
    stack: &[usize],
    impls: &mut FastMap<String, String>,
    linkage: impl FnOnce() -> Option<String>,
) {
    // The nearest enclosing impl namespace, through namespaces only: the function may be the impl's
    // own (`{impl#3}::f`) or an async fn's poll inside it (`{impl#3}::f::{async_fn#0}`).
    let is_impl = |n: &Node| n.name.as_deref().is_some_and(|s| s.starts_with("{impl#"));
    let Some(&ns) = stack
        .iter()
        .rev()
        .take_while(|&&i| nodes[i].tag == constants::DW_TAG_namespace)
        .find(|&&i| is_impl(&nodes[i]))
    else {
        return;
    };
    // By qualified path: the same impl's namespace appears again in every unit that uses its types,
    // often without any of its functions.
    let path = qualified(nodes, ns);
    if impls.contains_key(&path) {
        return;
    }
    let Some(mangled) = linkage() else { return };
    let demangled = format!("{:#}", rustc_demangle::demangle(&mangled));
    let prefix = path
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| format!("{p}::"));
    if let Some(name) = impl_name(&demangled, &prefix) {
        impls.insert(path, name);
    }
}

/// Applies the names [`name_impl`] found to every unit's copy of each impl namespace.
fn rename_impls(nodes: &mut [Node], mention: &[usize], impls: &FastMap<String, String>) {
    let is_impl = |n: &Node| {
        n.tag == constants::DW_TAG_namespace
            && n.name.as_deref().is_some_and(|s| s.starts_with("{impl#"))
    };
    let renames: Vec<(usize, String)> = (mention.iter().copied())
        .filter(|&i| is_impl(&nodes[i]))
        .filter_map(|i| Some((i, impls.get(&qualified(nodes, i))?.clone())))
        .collect();
    for (i, name) in renames {
        nodes[i].name = Some(name);
    }
    // Names spell their generic arguments as text, impl paths and all
    // (`PollFn<tokio::sync::mpsc::bounded::{impl#0}::recv::{closure_env#0}<u64>>`): named there too,
    // in types and functions alike, so that names that matched before still match.
    for &i in mention {
        if nodes[i].tag == constants::DW_TAG_namespace {
            continue;
        }
        if let Some(name) = nodes[i].name.as_mut() {
            *name = impls_named_in(name, impls);
        }
    }
}

/// `text` with every `path::{impl#N}` that [`name_impl`] named replaced by `path::NAME`.
fn impls_named_in(text: &str, impls: &FastMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{impl#") {
        let Some(close) = rest[at..].find('}').map(|c| at + c + 1) else {
            break;
        };
        let path_start = rest[..at]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        out.push_str(&rest[..path_start]);
        let path = &rest[path_start..close];
        match impls.get(path) {
            Some(name) => {
                out.push_str(&rest[path_start..at]);
                out.push_str(name);
            }
            None => out.push_str(path),
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// What an impl block implements, from the demangled path of a function in it (legacy or v0 mangling):
/// `<T as Trait>` with both named by their last segment, or the inherent type's last segment, without
/// generic arguments.
fn impl_name(demangled: &str, namespace: &str) -> Option<String> {
    // A path's last segment without its generic arguments, where the path may start with a
    // qualified one of its own: a type declared inside a trait method
    // (`<OrdersServer<T> as Service<R>>::call::PlaceOrderSvc<T>`, as tonic generates) is
    // `PlaceOrderSvc`.
    let last = |path: &str| {
        let path = crate::names::base_name(path.trim());
        let mut depth = 0i32;
        let mut start = 0;
        for (i, c) in path.char_indices() {
            match c {
                '<' => depth += 1,
                '>' if !path[..i].ends_with('-') => depth -= 1,
                ':' if depth == 0 && path[i..].starts_with("::") => start = i + 2,
                _ => {}
            }
        }
        path[start..].to_owned()
    };
    if let Some(rest) = demangled.strip_prefix('<') {
        let inner = &rest[..crate::names::matching_close(rest)?];
        return Some(match split_top_level(inner, " as ") {
            Some((ty, tr)) => format!("<{} as {}>", last(ty), last(tr)),
            // v0 mangling spells an inherent impl's path `<Type<Args>>::f`.
            None => last(inner),
        });
    }
    let rest = demangled.strip_prefix(namespace)?;
    let end = rest.find(['<', ':']).unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_owned())
}

/// `s` split at the first `sep` outside any `<...>`.
fn split_top_level<'s>(s: &'s str, sep: &str) -> Option<(&'s str, &'s str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if !s[..i].ends_with('-') => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(sep) => {
                return Some((&s[..i], &s[i + sep.len()..]));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{FastMap, impl_name, impls_named_in};

    #[test]
    fn impl_paths_inside_a_type_names_generic_arguments_are_named_too() {
        let impls: FastMap<String, String> = [(
            "tokio::sync::mpsc::bounded::{impl#0}".to_owned(),
            "Receiver".to_owned(),
        )]
        .into_iter()
        .collect();
        assert_eq!(
            impls_named_in(
                "PollFn<tokio::sync::mpsc::bounded::{impl#0}::recv::{closure_env#0}<u64>, a::{impl#3}::f>",
                &impls
            ),
            "PollFn<tokio::sync::mpsc::bounded::Receiver::recv::{closure_env#0}<u64>, a::{impl#3}::f>",
            "an impl nobody named stays as it is"
        );
    }

    #[test]
    fn an_impl_of_a_type_declared_inside_a_trait_method_is_named_after_that_type() {
        // tonic's generated servers declare each RPC's service type inside `call`.
        let demangled = "<<shop::orders_server::OrdersServer<T> as tower_service::Service<http::request::Request<B>>>::call::PlaceOrderSvc<T> as tonic::server::service::UnaryService<shop::OrderRequest>>::call::{{closure}}";
        assert_eq!(
            impl_name(demangled, "shop::orders_server::{impl#1}::call::"),
            Some("<PlaceOrderSvc as UnaryService>".into())
        );
    }

    #[test]
    fn impl_blocks_are_named_after_what_they_implement() {
        assert_eq!(
            impl_name(
                "tokio::sync::mutex::Mutex<T>::lock::{{closure}}",
                "tokio::sync::mutex::"
            ),
            Some("Mutex".into())
        );
        assert_eq!(
            impl_name(
                "<F as axum::handler::Handler<(M, T1), S>>::call::{{closure}}",
                "axum::handler::"
            ),
            Some("<F as Handler>".into())
        );
        assert_eq!(
            impl_name("<fn() -> u8 as core::ops::Fn<()>>::call", "core::ops::"),
            Some("<fn() -> u8 as Fn>".into()),
            "a `->` is not a closing bracket"
        );
        assert_eq!(
            impl_name(
                "<tokio::sync::mpsc::bounded::Receiver<()>>::recv::{closure#0}",
                "tokio::sync::mpsc::bounded::"
            ),
            Some("Receiver".into()),
            "v0 mangling"
        );
        assert_eq!(impl_name("other::path::f", "mini_redis::server::"), None);
    }
}

#[cfg(test)]
mod built {
    use std::borrow::Cow;
    use std::path::Path;
    use std::process::Command;

    use gimli::RunTimeEndian;
    use object::{Object, ObjectSection};

    use crate::dwarf::Debug;

    const SOURCE: &str = "\
struct Wait;
impl Wait {
    async fn on(&self) { leaf().await }
}
async fn leaf() {}
async fn outer() {
    Wait.on().await;
}
fn main() {
    use std::future::Future;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let _ = std::pin::pin!(outer()).poll(&mut cx);
}
";

    /// Compiles `SOURCE` with full debug info into a fresh directory and reads its DWARF sections
    /// straight from the file's bytes, without `load`'s file handling.
    fn parsed() -> Debug {
        let scratch = crate::testing::scratch();
        let dir = scratch.path();
        std::fs::write(dir.join("tiny.rs"), SOURCE).unwrap();
        let status = Command::new("rustc")
            .args(["--edition", "2021", "-C", "debuginfo=2", "-o"])
            .arg(dir.join("tiny"))
            .arg(dir.join("tiny.rs"))
            .status()
            .expect("run rustc");
        assert!(status.success());
        let bytes = std::fs::read(dir.join("tiny")).unwrap();
        let obj = object::File::parse(&*bytes).unwrap();
        let sections = |name: &str| -> Option<Cow<'_, [u8]>> {
            obj.section_by_name(name)
                .and_then(|s| s.uncompressed_data().ok())
        };
        Debug::from_sections(Path::new("tiny"), RunTimeEndian::Little, &sections, None).unwrap()
    }

    #[test]
    fn the_dies_of_a_small_built_binary_give_its_state_machines_and_impl_names() {
        let debug = parsed();
        let index = debug.index();
        let outer = index
            .machines
            .iter()
            .find(|m| m.name == "tiny::outer::{async_fn_env#0}")
            .expect("outer's state machine");
        let suspend = outer
            .states
            .iter()
            .find(|s| s.name == "Suspend0")
            .expect("outer's one await");
        assert_eq!((suspend.file.ends_with("tiny.rs"), suspend.line), (true, 7));
        let awaits = suspend.awaitee.as_ref().expect("what it awaits");
        // The impl block is named after its type, not `{impl#0}`.
        assert_eq!(awaits.type_name, "tiny::Wait::on::{async_fn_env#0}");
    }
}
