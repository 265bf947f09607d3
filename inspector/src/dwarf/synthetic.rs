//! Type descriptions made by hand, as a [`Debug`] that the planner reads like a binary's: the unit
//! specs of recognised shapes and of decoding describe the types they need in a few lines, without a
//! compiler. A type's DIE offset is its index plus one; names are split into namespaces at `::`
//! outside generic arguments, as rustc nests them.

use gimli::constants;

use super::{Debug, Node, Offsets};

/// The types of one made-up compile unit.
pub(crate) struct Types {
    nodes: Vec<Node>,
    initial: Vec<super::InitialData>,
}

impl Types {
    pub(crate) fn new() -> Types {
        let mut t = Types {
            nodes: Vec::new(),
            initial: Vec::new(),
        };
        t.push(None, constants::DW_TAG_compile_unit, None);
        t
    }

    fn push(&mut self, parent: Option<usize>, tag: constants::DwTag, name: Option<&str>) -> usize {
        let i = self.nodes.len();
        self.nodes.push(Node {
            offset: i as u64 + 1,
            unit: 0,
            tag,
            name: name.map(str::to_owned),
            parent,
            byte_size: None,
            alignment: 0,
            member_offset: None,
            type_ref: None,
            discr_ref: None,
            discr_value: None,
            decl_file: None,
            decl_line: None,
            low_pc: None,
            anchor: false,
            task_poll: false,
            wake_clone: false,
            artificial: false,
            containing_type: None,
            addr: None,
            children: Vec::new(),
        });
        if let Some(p) = parent {
            self.nodes[p].children.push(i);
        }
        i
    }

    fn index(die: u64) -> usize {
        die as usize - 1
    }

    /// The namespace node for `path` (`a::b`), made as needed; the unit for an empty path.
    fn namespace(&mut self, path: &[&str]) -> usize {
        let mut at = 0;
        for part in path {
            let found = self.nodes[at].children.iter().copied().find(|&c| {
                self.nodes[c].tag == constants::DW_TAG_namespace
                    && self.nodes[c].name.as_deref() == Some(part)
            });
            at = match found {
                Some(c) => c,
                None => self.push(Some(at), constants::DW_TAG_namespace, Some(part)),
            };
        }
        at
    }

    /// A type of `tag` named by its qualified name, `size` bytes.
    fn named(&mut self, tag: constants::DwTag, qualified: &str, size: Option<u64>) -> u64 {
        let parts = split_path(qualified);
        let (name, path) = parts.split_last().expect("a name");
        let parent = self.namespace(path);
        let i = self.push(Some(parent), tag, Some(name));
        self.nodes[i].byte_size = size;
        self.nodes[i].offset
    }

    /// A structure of `size` bytes, without members yet (see [`Types::member`]).
    pub(crate) fn structure(&mut self, qualified: &str, size: u64) -> u64 {
        self.named(constants::DW_TAG_structure_type, qualified, Some(size))
    }

    /// A union type: its path, as [`Types::structure`]'s.
    pub(crate) fn union(&mut self, qualified: &str, size: u64) -> u64 {
        self.named(constants::DW_TAG_union_type, qualified, Some(size))
    }

    /// A base type (`u8`, `usize`) of `size` bytes.
    pub(crate) fn base(&mut self, name: &str, size: u64) -> u64 {
        self.named(constants::DW_TAG_base_type, name, Some(size))
    }

    /// A thin pointer type named `name` (`alloc::boxed::Box<T>`, `&mut T`) to `to`: in the unit, whole,
    /// as rustc names pointer types.
    pub(crate) fn pointer(&mut self, name: &str, to: u64) -> u64 {
        let i = self.push(Some(0), constants::DW_TAG_pointer_type, Some(name));
        (self.nodes[i].byte_size, self.nodes[i].type_ref) = (Some(8), Some(to));
        self.nodes[i].offset
    }

    /// A function type (`fn(u8) -> u8`), as a `fn` item or pointer points at.
    pub(crate) fn subroutine(&mut self, name: &str) -> u64 {
        let i = self.push(Some(0), constants::DW_TAG_subroutine_type, Some(name));
        self.nodes[i].offset
    }

    /// Adds a member `name` of type `ty` at `offset` to structure `of`.
    pub(crate) fn member(&mut self, of: u64, name: &str, offset: u64, ty: u64) -> &mut Types {
        let m = self.push(Some(Self::index(of)), constants::DW_TAG_member, Some(name));
        self.nodes[m].member_offset = Some(offset);
        self.nodes[m].type_ref = Some(ty);
        self
    }

    /// Makes structure `of` an enum: its discriminant `discr` (a member name, its offset and size in
    /// bytes, and whether it is artificial, as a state machine's `__state` is), and per variant its
    /// discriminant value (`None`: the default of a niche layout), member name, offset and type.
    pub(crate) fn variants(
        &mut self,
        of: u64,
        discr: (&str, u64, u64, bool),
        variants: &[(Option<u64>, &str, u64, u64)],
    ) -> &mut Types {
        let (name, offset, size, artificial) = discr;
        let ty = self.base(&format!("u{}", size * 8), size);
        let part = self.push(Some(Self::index(of)), constants::DW_TAG_variant_part, None);
        let d = self.push(Some(part), constants::DW_TAG_member, Some(name));
        let node = &mut self.nodes[d];
        (node.member_offset, node.type_ref, node.artificial) = (Some(offset), Some(ty), artificial);
        self.nodes[part].discr_ref = Some(self.nodes[d].offset);
        for &(value, vname, voffset, vty) in variants {
            let v = self.push(Some(part), constants::DW_TAG_variant, None);
            self.nodes[v].discr_value = value;
            let m = self.push(Some(v), constants::DW_TAG_member, Some(vname));
            (self.nodes[m].member_offset, self.nodes[m].type_ref) = (Some(voffset), Some(vty));
        }
        self
    }

    /// Gives type `of` the template type parameter `name` = `ty` (`T` of `Vec<T>`).
    pub(crate) fn type_param(&mut self, of: u64, name: &str, ty: u64) -> &mut Types {
        let p = self.push(
            Some(Self::index(of)),
            constants::DW_TAG_template_type_parameter,
            Some(name),
        );
        self.nodes[p].type_ref = Some(ty);
        self
    }

    /// Makes structure `of` an enum of one variant, which keeps no discriminant: the variant's
    /// member `name` at `offset`, of type `ty`.
    pub(crate) fn sole_variant(&mut self, of: u64, name: &str, offset: u64, ty: u64) -> &mut Types {
        let part = self.push(Some(Self::index(of)), constants::DW_TAG_variant_part, None);
        let v = self.push(Some(part), constants::DW_TAG_variant, None);
        let m = self.push(Some(v), constants::DW_TAG_member, Some(name));
        (self.nodes[m].member_offset, self.nodes[m].type_ref) = (Some(offset), Some(ty));
        self
    }

    /// An async fn's state machine `qualified` (`svc::handler::{async_fn_env#0}`) of `size` bytes, its
    /// `__state` byte at `state_at`: unresumed, returned and panicked, and one suspend state per
    /// `(await line, awaitee offset, awaitee type)`, numbered from 3 as rustc does.
    pub(crate) fn state_machine(
        &mut self,
        qualified: &str,
        size: u64,
        state_at: u64,
        suspends: &[(u64, u64, u64)],
    ) -> u64 {
        let sm = self.structure(qualified, size);
        let mut states = Vec::new();
        for (value, name) in [(0, "Unresumed"), (1, "Returned"), (2, "Panicked")] {
            let s = self.structure(&format!("{qualified}::{name}"), size);
            states.push((value, s, 1));
        }
        for (n, &(line, at, awaitee)) in suspends.iter().enumerate() {
            let s = self.structure(&format!("{qualified}::Suspend{n}"), size);
            self.member(s, "__awaitee", at, awaitee);
            states.push((3 + n as u64, s, line));
        }
        let variants: Vec<(Option<u64>, String, u64, u64)> = states
            .iter()
            .map(|&(value, s, _)| (Some(value), value.to_string(), 0, s))
            .collect();
        let borrowed: Vec<(Option<u64>, &str, u64, u64)> = variants
            .iter()
            .map(|(v, n, o, t)| (*v, n.as_str(), *o, *t))
            .collect();
        self.variants(sm, ("__state", state_at, 1, true), &borrowed);
        // Each state's member carries the line of its await (or of the fn, for the others).
        let part = self.nodes[Self::index(sm)].children[0];
        let members: Vec<usize> = self.nodes[part]
            .children
            .iter()
            .filter(|&&v| self.nodes[v].tag == constants::DW_TAG_variant)
            .map(|&v| self.nodes[v].children[0])
            .collect();
        for (m, &(_, _, line)) in members.into_iter().zip(&states) {
            (self.nodes[m].decl_file, self.nodes[m].decl_line) = (Some(0), Some(line));
        }
        sm
    }

    /// The structure of suspend state `n` (from 0) of state machine `sm`, to add locals to.
    pub(crate) fn suspend_state(&self, sm: u64, n: usize) -> u64 {
        let part = self.nodes[Self::index(sm)].children[0];
        let variants = (self.nodes[part].children.iter())
            .filter(|&&v| self.nodes[v].tag == constants::DW_TAG_variant);
        let v = *variants.clone().nth(3 + n).expect("a suspend state");
        let member = self.nodes[v].children[0];
        self.nodes[member].type_ref.expect("its structure")
    }

    /// A static `qualified` of type `ty` at `addr`, whose bytes in the file are `bytes` (all zero, in
    /// `.bss`, for `None`).
    pub(crate) fn static_var(&mut self, qualified: &str, ty: u64, addr: u64, bytes: Option<&[u8]>) {
        let parts = split_path(qualified);
        let (name, path) = parts.split_last().expect("a name");
        let parent = self.namespace(path);
        let i = self.push(Some(parent), constants::DW_TAG_variable, Some(name));
        (self.nodes[i].type_ref, self.nodes[i].addr) = (Some(ty), Some(addr));
        let size = (self.nodes[Self::index(ty)].byte_size).unwrap_or(0);
        self.initial.push(super::InitialData {
            addr,
            size,
            bytes: bytes.map(|b| b.to_vec()),
        });
    }

    /// The [`Debug`] of these types, as if read from `src/main.rs`'s unit.
    pub(crate) fn build(self) -> Debug {
        let offsets = self.nodes.iter().map(|n| n.offset).collect();
        Debug {
            path: "synthetic".into(),
            build_id: None,
            debug_info_bytes: 0,
            vaddr_at_zero: None,
            code_words: Vec::new(),
            waker_vtables: Vec::new(),
            nodes: self.nodes,
            by_offset: Offsets(offsets),
            files: vec![vec!["src/main.rs".into()]],
            vtables: Vec::new(),
            frame_vars: Vec::new(),
            pinned_futures: Vec::new(),
            executor_code: Vec::new(),
            initial: self.initial,
        }
    }
}

/// `a::b::C<x::Y>` → `["a", "b", "C<x::Y>"]`: split at `::` outside `<…>`.
fn split_path(qualified: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    let bytes = qualified.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' | b'{' | b'(' => depth += 1,
            b'>' | b'}' | b')' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                parts.push(&qualified[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&qualified[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_nest_as_rustc_nests_them_and_read_back_whole() {
        assert_eq!(
            split_path("tokio::sync::oneshot::Receiver<alloc::string::String>"),
            [
                "tokio",
                "sync",
                "oneshot",
                "Receiver<alloc::string::String>"
            ]
        );
        assert_eq!(
            split_path("svc::f::{async_fn_env#0}"),
            ["svc", "f", "{async_fn_env#0}"]
        );
        let mut t = Types::new();
        let rx = t.structure("tokio::sync::oneshot::Receiver<u32>", 8);
        let other = t.structure("tokio::sync::Mutex<u32>", 16);
        let debug = t.build();
        assert_eq!(
            debug.qualified_name(rx),
            "tokio::sync::oneshot::Receiver<u32>"
        );
        assert_eq!(debug.qualified_name(other), "tokio::sync::Mutex<u32>");
    }

    #[test]
    fn a_state_machine_reads_back_as_one() {
        let mut t = Types::new();
        let leaf = t.structure("tokio::time::Sleep", 64);
        let sm = t.state_machine("svc::f::{async_fn_env#0}", 80, 72, &[(12, 0, leaf)]);
        let m = t.build().machine(sm).expect("a state machine");
        assert_eq!((m.state_offset, m.state_size), (72, 1));
        let suspend = m.states.iter().find(|s| s.discr == 3).unwrap();
        assert_eq!((suspend.line, &suspend.file[..]), (12, "src/main.rs"));
        assert_eq!(
            suspend.awaitee.as_ref().unwrap().type_name,
            "tokio::time::Sleep"
        );
    }
}
