//! Naming code and data addresses of a process: the function a code address is in, with the calls
//! inlined there and their source lines (from the DWARF of the file mapped there, or its separate
//! debug file), else the symbol table's name; and the static a data address lies in.
//!
//! Each file is read once, on first use, and only for the threads whose stacks are shown: a dump
//! that shows no native stack reads none. Only the executable's DWARF is read; a shared library's
//! frames are named by its symbol table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gimli::{EndianArcSlice, RunTimeEndian};

use crate::dwarf::CodeSections;
use crate::model::FastMap;
use crate::model::threads::NativeFrame;

type Lines = addr2line::Context<EndianArcSlice<RunTimeEndian>>;

/// The names of the files of one process, each loaded on first use.
pub struct Symbols {
    files: FastMap<PathBuf, Option<Named>>,
    /// The executable, whose frames carry no library name, and its debug file when one was given.
    exe: Option<PathBuf>,
    debug_file: Option<PathBuf>,
}

struct Named {
    sections: CodeSections,
    lines: Option<Lines>,
}

/// Most frames one code address gives (a call and the calls inlined into it).
const MAX_INLINED: usize = 32;

impl Symbols {
    /// For a process whose executable is `exe` (as its mappings name it), with `debug_file` for its
    /// DWARF where the user gave one.
    pub fn new(exe: Option<PathBuf>, debug_file: Option<PathBuf>) -> Symbols {
        Symbols {
            files: FastMap::default(),
            exe,
            debug_file,
        }
    }

    fn named(&mut self, path: &Path) -> Option<&Named> {
        if !self.files.contains_key(path) {
            let debug = (self.exe.as_deref() == Some(path))
                .then_some(self.debug_file.as_deref())
                .flatten();
            // A library's frames are named by its symbols: its lines are not the program's, and
            // its debug info (a distribution's, compressed) would cost a dump more than all else.
            let exe = self.exe.as_deref() == Some(path);
            let named = crate::dwarf::code_sections(path, debug, exe).map(|mut sections| {
                let lines = sections
                    .dwarf
                    .take()
                    .and_then(|d| addr2line::Context::from_dwarf(d).ok());
                Named { sections, lines }
            });
            self.files.insert(path.to_owned(), named);
        }
        self.files.get(path)?.as_ref()
    }

    /// The frames at code address `pc` of the file at `path`, whose offset 0 is mapped at `base`:
    /// the calls inlined there innermost first, then the function itself. One frame named `??`
    /// where nothing names it.
    pub fn frames(&mut self, path: &Path, base: u64, pc: u64) -> Vec<NativeFrame> {
        let library = (self.exe.as_deref() != Some(path))
            .then(|| {
                path.file_name()
                    .map(|n| Arc::from(n.to_string_lossy().as_ref()))
            })
            .flatten();
        let unnamed = |function: Arc<str>| NativeFrame {
            function,
            file: None,
            line: 0,
            inlined: false,
            library: library.clone(),
            own: false,
        };
        let Some(named) = self.named(path) else {
            return vec![unnamed("??".into())];
        };
        let vaddr = pc
            .wrapping_sub(base)
            .wrapping_add(named.sections.vaddr_at_zero);
        let mut out = named
            .lines
            .as_ref()
            .map(|l| dwarf_frames(l, vaddr))
            .unwrap_or_default();
        if out.is_empty() {
            let name = (named.sections.functions.at(vaddr))
                .map_or_else(|| "??".into(), |(_, name)| demangled(name));
            return vec![unnamed(name)];
        }
        let last = out.len() - 1;
        for (i, f) in out.iter_mut().enumerate() {
            f.inlined = i < last;
            // A library's code is not the program's, whatever its sources' paths look like.
            f.own &= library.is_none();
            f.library = library.clone();
        }
        out
    }

    /// Where the function containing code address `pc` starts, in the process (`base` as for
    /// [`Symbols::frames`]), by the symbol table.
    pub fn function_start(&mut self, path: &Path, base: u64, pc: u64) -> Option<u64> {
        let named = self.named(path)?;
        let at_zero = named.sections.vaddr_at_zero;
        let vaddr = pc.wrapping_sub(base).wrapping_add(at_zero);
        let (start, _) = named.sections.functions.at(vaddr)?;
        Some(start.wrapping_sub(at_zero).wrapping_add(base))
    }

    /// The static of the executable that data address `addr` lies in, demangled, where the
    /// executable is among `modules`.
    pub fn static_in_exe(&mut self, modules: &super::Modules, addr: u64) -> Option<Arc<str>> {
        let exe = self.exe.clone()?;
        let base = modules.base_of(&exe)?;
        self.static_at(&exe, base, addr)
    }

    /// The static data address `addr` lies in, by the symbol table of the file at `path` mapped at
    /// `base`, demangled.
    pub fn static_at(&mut self, path: &Path, base: u64, addr: u64) -> Option<Arc<str>> {
        let named = self.named(path)?;
        let vaddr = addr
            .wrapping_sub(base)
            .wrapping_add(named.sections.vaddr_at_zero);
        named
            .sections
            .data
            .at(vaddr)
            .map(|(_, name)| demangled(name))
    }
}

/// A symbol's name as a reader knows it: demangled, without its hash.
pub fn demangled(name: &str) -> Arc<str> {
    Arc::from(format!("{:#}", rustc_demangle::demangle(name)).as_str())
}

/// The frames the DWARF gives code address `vaddr`, innermost first.
fn dwarf_frames(lines: &Lines, vaddr: u64) -> Vec<NativeFrame> {
    let mut out = Vec::new();
    // The program's files as its chains name them: relative to where they were compiled.
    let comp_dir: Option<String> = match lines.find_dwarf_and_unit(vaddr).skip_all_loads() {
        Some(unit) => (unit.comp_dir.as_ref()).and_then(|d| {
            gimli::Reader::to_string_lossy(d)
                .ok()
                .map(|d| d.trim_end_matches('/').to_owned())
        }),
        None => None,
    };
    let relative = |file: &str| -> Arc<str> {
        let inside = comp_dir
            .as_deref()
            .and_then(|d| file.strip_prefix(d)?.strip_prefix('/'));
        match inside {
            Some(rest) => crate::names::in_unit(rest.to_owned(), comp_dir.as_deref()).into(),
            None => file.into(),
        }
    };
    let Ok(mut frames) = lines.find_frames(vaddr).skip_all_loads() else {
        return out;
    };
    while let Ok(Some(frame)) = frames.next() {
        if out.len() == MAX_INLINED {
            break;
        }
        let function = frame
            .function
            .as_ref()
            .and_then(|f| f.raw_name().ok().map(|n| demangled(&n)))
            .unwrap_or_else(|| "??".into());
        let (file, line) = match &frame.location {
            Some(l) => (l.file.map(relative), l.line.unwrap_or(0)),
            None => (None, 0),
        };
        let own = file
            .as_deref()
            .is_some_and(|f: &str| crate::names::short_path(f).len() == f.len());
        out.push(NativeFrame {
            function,
            file,
            line,
            inlined: false,
            library: None,
            own,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binarys_own_code_is_named_with_its_file_and_line() {
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mappings = super::super::registers::mappings(&maps);
        let base = (mappings.iter())
            .find(|m| m.path == exe && m.offset == 0)
            .unwrap()
            .start;
        let mut symbols = Symbols::new(Some(exe.clone()), None);
        let pc = this_test_binarys_own_code_is_named_with_its_file_and_line as *const () as u64;
        let frames = symbols.frames(&exe, base, pc);
        let outer = frames.last().unwrap();
        assert!(
            outer
                .function
                .ends_with("this_test_binarys_own_code_is_named_with_its_file_and_line"),
            "{frames:?}"
        );
        assert!(outer.file.as_deref().unwrap().ends_with("symbols.rs"));
        assert!(outer.line > 0 && outer.own && outer.library.is_none());
        assert_eq!(symbols.function_start(&exe, base, pc + 1), Some(pc));
    }
}
