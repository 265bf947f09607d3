#!/usr/bin/env python3
"""Import cycles between the modules of each crate: the check that data flows one way.

At every level of a crate's module tree, the children of one module are the nodes of a graph, and an
edge A -> B means code somewhere under A names an item somewhere under B (through `crate::`, `super::`
or `self::` paths, in `use` lines or in code, and through the crate root's and modules' `pub use`
re-exports). A parent naming its child, or a child its parent, is no edge: that is how Rust modules
are built. Every strongly connected set of two or more siblings is a cycle.

Any cycle fails the check, printed with the lines that make each of its edges.

    checks/module_cycles.py              check the workspace
    checks/module_cycles.py --self-test  prove on made-up crates that a cycle is found and fails
    checks/module_cycles.py --graph      print every level's edges
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

CRATES = ["walker/src", "protocol/src", "agent/src", "agent/macros/src", "inspector/src"]
# Folders whose modules are one unit by design, checked as one node from outside and not inside: the
# agent's poll path (a task cell holds its root frame, a frame points at its cell, a poll marks its
# cell changed).
ONE_NODE = ["agent/src/task"]
HERE = os.path.dirname(os.path.abspath(__file__))


def strip(src: str) -> str:
    """The source with comments, string and char literals blanked (newlines kept, for line numbers)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not src[i - 1].isalnum()):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", src[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := re.compile(r"'(\\.[^']*|[^\\'\n])'").match(src, i)):
            out.append(" " * (m.end() - i))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*([;{])")


def without_tests(code: str) -> str:
    """`code` with its `#[cfg(test)]` modules blanked: tests may use any module's fixtures, and the
    one-way rule is for the code that ships."""
    out, at = [], 0
    for m in TEST_MOD.finditer(code):
        if m.start() < at:
            continue
        end = m.end()
        if m.group(1) == "{":
            depth = 1
            while end < len(code) and depth:
                depth += {"{": 1, "}": -1}.get(code[end], 0)
                end += 1
        out.append(code[at : m.start()])
        out.append(re.sub(r"[^\n]", " ", code[m.start() : end]))
        at = end
    out.append(code[at:])
    return "".join(out)
REEXPORT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+")
PATH_START = re.compile(r"(?<![\w:])(crate|super|self)(?=::)")


@dataclass
class Module:
    path: tuple[str, ...]
    file: str
    code: str = ""
    children: list[str] = field(default_factory=list)
    # Re-exported name -> the absolute path it names.
    exports: dict[str, tuple[str, ...]] = field(default_factory=dict)


def load(root_dir: str, root_file: str) -> dict[tuple[str, ...], Module]:
    """Every file module of the crate whose root file is `root_file`, by module path."""
    mods: dict[tuple[str, ...], Module] = {}

    def visit(path: tuple[str, ...], file: str) -> None:
        with open(file, encoding="utf-8") as f:
            code = without_tests(strip(f.read()))
        m = Module(path, file, code)
        mods[path] = m
        base = os.path.basename(file)
        folder = (
            os.path.dirname(file)
            if base in ("mod.rs", "lib.rs", "main.rs")
            else os.path.join(os.path.dirname(file), base[:-3])
        )
        for name in MOD_DECL.findall(code):
            for cand in (os.path.join(folder, name + ".rs"), os.path.join(folder, name, "mod.rs")):
                if os.path.exists(cand):
                    m.children.append(name)
                    visit(path + (name,), cand)
                    break

    visit((), os.path.join(root_dir, root_file))
    return mods


def parse_tree(code: str, i: int) -> tuple[list[list[str]], int]:
    """The paths of the use-tree starting at `code[i]` (`a::b`, `a::{b, c::d}`, `a as x`, `*`)."""
    paths: list[list[str]] = []
    segs: list[str] = []
    while i < len(code):
        while i < len(code) and code[i].isspace():
            i += 1
        if code.startswith("{", i):
            i += 1
            while True:
                subs, i = parse_tree(code, i)
                paths += [segs + s for s in subs]
                while i < len(code) and code[i] in " \t\r\n":
                    i += 1
                if code.startswith(",", i):
                    i += 1
                    while i < len(code) and code[i].isspace():
                        i += 1
                    if code.startswith("}", i):
                        return paths, i + 1
                    continue
                return paths, i + 1 if code.startswith("}", i) else i
        m = re.compile(r"[A-Za-z_]\w*|\*").match(code, i)
        if not m:
            break
        segs.append(m.group(0))
        i = m.end()
        if code.startswith("::", i):
            i += 2
            continue
        break
    if segs:
        paths.append(segs)
    am = re.compile(r"\s+as\s+\w+").match(code, i)
    return paths, am.end() if am else i


def absolute(mod: tuple[str, ...], segs: list[str]) -> tuple[str, ...] | None:
    """`crate::`/`super::`/`self::` segments, as an absolute path; None if they climb past the root."""
    head, rest = segs[0], list(segs[1:])
    if head == "crate":
        base: list[str] = []
    elif head == "self":
        base = list(mod)
    else:
        base = list(mod[:-1]) if mod else None
        while base is not None and rest and rest[0] == "super":
            base = base[:-1] if base else None
            rest = rest[1:]
        if base is None:
            return None
    return tuple(base + rest)


def references(m: Module) -> list[tuple[tuple[str, ...], int]]:
    """Each absolute path the module names, with its line."""
    out = []
    for start in PATH_START.finditer(m.code):
        for segs in parse_tree(m.code, start.start())[0]:
            p = absolute(m.path, [s for s in segs if s != "*"])
            if p is not None:
                out.append((p, m.code.count("\n", 0, start.start()) + 1))
    return out


def collect_exports(mods: dict[tuple[str, ...], Module]) -> None:
    """Each module's `pub use` names, as absolute paths (relative ones resolved against its children)."""
    for m in mods.values():
        for r in REEXPORT.finditer(m.code):
            for segs in parse_tree(m.code, r.end())[0]:
                if segs[0] in ("crate", "super", "self"):
                    p = absolute(m.path, segs)
                elif segs[0] in m.children:
                    p = m.path + tuple(segs)
                else:
                    continue
                if p and p[-1] != "*":
                    m.exports[p[-1]] = p


def owner(mods: dict[tuple[str, ...], Module], path: tuple[str, ...], depth: int = 0) -> tuple[str, ...]:
    """The module that defines what `path` names, following re-exports."""
    k = len(path)
    while k > 0 and path[:k] not in mods:
        k -= 1
    mod = path[:k]
    if k < len(path) and depth < 8:
        target = mods[mod].exports.get(path[k])
        if target and target != path:
            return owner(mods, target + path[k + 1 :], depth + 1)
    return mod


def edges(mods: dict[tuple[str, ...], Module]) -> dict[tuple[str, ...], dict[tuple[str, str], list[str]]]:
    """For each parent module: sibling edges (from, to) with the lines that make them."""
    collect_exports(mods)
    out: dict[tuple[str, ...], dict[tuple[str, str], list[str]]] = {}
    for m in mods.values():
        for path, line in references(m):
            target = owner(mods, path)
            common = 0
            while common < min(len(m.path), len(target)) and m.path[common] == target[common]:
                common += 1
            if common == len(m.path) or common == len(target):
                continue  # one contains the other
            parent = m.path[:common]
            key = (m.path[common], target[common])
            out.setdefault(parent, {}).setdefault(key, []).append(f"{m.file}:{line}")
    return out


def cycles(level: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Strongly connected sets of two or more nodes (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for a, b in level:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def crate_cycles(src: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each cycle of the crate at `src`, named `src/parent: {a, b}`, with the lines of its edges."""
    found = {}
    for root in ("lib.rs", "main.rs"):
        if not os.path.exists(os.path.join(src, root)):
            continue
        for parent, level in edges(load(src, root)).items():
            where = "/".join((src,) + parent)
            if any(where == n or where.startswith(n + "/") for n in ONE_NODE):
                continue
            for comp in cycles(level):
                name = f"{where}: {{{', '.join(comp)}}}"
                lines = [
                    f"  {a} -> {b}: {', '.join(sites[:3])}{' …' if len(sites) > 3 else ''}"
                    for (a, b), sites in sorted(level.items())
                    if a in comp and b in comp
                ]
                found[name] = (comp, lines)
    return found


def check(top: str) -> int:
    os.chdir(top)
    found = {}
    for src in CRATES:
        found.update(crate_cycles(src))
    for name, (_, lines) in sorted(found.items()):
        print(f"import cycle: {name}", *lines, sep="\n")
    print(f"module cycles: {len(found)}")
    return 1 if found else 0


def self_test() -> int:
    """Made-up crates: a sibling cycle through a `pub use` re-export and a `super::` path is found; a
    parent and child naming each other, comments, strings and test modules are not edges."""
    files = {
        "lib.rs": "pub mod a;\npub mod b;\nmod c;\npub use b::Thing;\n",
        "a.rs": "use crate::Thing; // b, through the root's re-export\npub fn h() { crate::c::g(); }\n",
        "b/mod.rs": "mod inner;\npub use inner::Thing;\nfn f() { inner::g(); }\n",
        "b/inner.rs": "pub struct Thing;\npub fn g() { super::super::a::h(); }\nuse super::*;\n",
        # c names a only in a comment, a string and its test modules: a -> c makes no cycle.
        "c.rs": '// crate::a::x\nconst S: &str = "crate::a::y";\nfn f() { let _ = \'c\'; }\n'
        '#[cfg(test)]\nmod tests {\n    use crate::a::h;\n    fn t() { if true { crate::a::h(); } }\n}\n'
        "#[cfg(test)]\nmod more;\npub fn g() {}\n",
        "c/more.rs": "use crate::a::h;\n",
    }
    with tempfile.TemporaryDirectory(prefix="asyncdump-cycles-") as d:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        found = crate_cycles(d)
        comps = [comp for comp, _ in found.values()]
        ok = comps == [["a", "b"]]
        files["b/inner.rs"] = "pub struct Thing;\n"
        with open(os.path.join(d, "b/inner.rs"), "w", encoding="utf-8") as f:
            f.write(files["b/inner.rs"])
        ok = ok and crate_cycles(d) == {}
    print("module cycles self-test:", "ok" if ok else f"FAILED (found {comps})")
    return 0 if ok else 1


def graph(top: str) -> int:
    os.chdir(top)
    for src in CRATES:
        for root in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(src, root)):
                for parent, level in sorted(edges(load(src, root)).items()):
                    for (a, b) in sorted(level):
                        print(f"{'/'.join((src,) + parent)}: {a} -> {b}")
    return 0


if __name__ == "__main__":
    top = os.path.dirname(HERE)
    if "--self-test" in sys.argv:
        sys.exit(self_test())
    if "--graph" in sys.argv:
        sys.exit(graph(top))
    sys.exit(check(top))
