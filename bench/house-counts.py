#!/usr/bin/env python3
"""The counted goals of issue 23 ("the house"), so they can be checked:

- the binary's share: non-test lines of crates/storbench/src against those
  of every crates/*/src (a file's non-test lines are those before its first
  `#[cfg(test)]`), goal under 10 %;
- functions over 120 lines outside tests (from the `fn` line to its closing
  brace, in code before a file's first `#[cfg(test)]`), goal none;
- import circles inside each crate: the module graph of `crate::` and
  `super::` paths in non-test code (a module's file is one node; a path to
  an item of a module is an edge to it), goal none. Each circle is printed
  as one cycle through its modules.

Not a measurement: it reads the source only.

    bench/house-counts.sh            # prints the counts
    bench/house-counts.sh --check    # and exits 1 when a goal is missed
    bench/house-counts.sh --edges    # and each circle's edges first
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = os.path.join(ROOT, "crates")
BINARY = "storbench"
SHARE_GOAL = 10.0
FN_LIMIT = 120


def rust_files(src):
    for d, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def non_test(path):
    """The lines before the file's first `#[cfg(test)]`."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip() == "#[cfg(test)]":
                break
            out.append(line.rstrip("\n"))
    return out


FN = re.compile(r"^(\s*)(?:pub(?:\([a-z:]+\))? )?(?:const )?(?:async )?(?:unsafe )?(?:extern \"C\" )?fn (\w+)")


def long_functions(path, lines):
    """(lines, name, first line) of each function longer than FN_LIMIT."""
    found = []
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", "{}")):
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{"):
            # A declaration (`fn f();`) or an empty body (`fn f() {}`).
            i = j + 1
            continue
        k = j + 1
        closing = " " * indent + "}"
        while k < len(lines) and not (
            lines[k].startswith(closing) and len(lines[k]) - len(lines[k].lstrip()) == indent
        ):
            k += 1
        n = k - i + 1
        if n > FN_LIMIT:
            found.append((n, m.group(2), i + 1))
        i += 1
    return found


def module_of(src, path):
    """The module path of a file: `` for the crate root, `a::b` otherwise."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel in (["lib"], ["main"]):
        return ""
    if rel[-1] == "mod":
        rel = rel[:-1]
    return "::".join(rel)


def strip_comments(lines):
    text = "\n".join(l for l in lines if not l.lstrip().startswith("//"))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # String literals can name paths in messages: drop them.
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def expand(tree):
    """The paths of a use tree: `a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e."""
    tree = tree.strip()
    m = re.match(r"^([\w:]*?)(?:::)?\{(.*)\}$", tree, flags=re.S)
    if not m:
        return [re.sub(r"\s+as\s+\w+$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        for e in expand(p):
            out.append(prefix + "::" + e if prefix and e != "self" else prefix if e == "self" else e)
    return out


def resolve(mod, path, modules):
    """The module a `crate::…`/`super::…` path lands in (its longest
    module prefix), seen from module `mod`."""
    segs = path.split("::")
    if segs[0] == "crate":
        base, rest = [], segs[1:]
    else:
        base = mod.split("::") if mod else []
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    best = "::".join(base)
    for n in range(1, len(rest) + 1):
        cand = "::".join(base + rest[:n])
        if cand in modules:
            best = cand
    return best


def edges_of(mod, lines, modules):
    text = strip_comments(lines)
    # `mod x;` declarations are not edges; `pub use` re-exports are.
    paths = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", text, flags=re.S):
        paths.extend(expand(m.group(1)))
    rest = re.sub(r"\buse\s+[^;]*;", "", text, flags=re.S)
    paths.extend(re.findall(r"\b((?:crate|super)(?:::\w+)+)", rest))
    # A module imported by name (`use crate::cmd;`, `use super::plan;`)
    # and then used through it (`cmd::tpcc::TpccArgs`).
    for p in list(paths):
        if not p.startswith(("crate", "super", "self")):
            continue
        last = p.split("::")[-1]
        target = resolve(mod, p, modules)
        if target and target.split("::")[-1] == last and last not in ("crate", "super", "self"):
            for m in re.finditer(r"(?<![\w:])" + re.escape(last) + r"((?:::\w+)+)", rest):
                paths.append(p + m.group(1))
    out = set()
    for p in paths:
        if not p.startswith(("crate", "super")):
            continue
        to = resolve(mod, p, modules)
        if to != mod:
            out.add(to)
    return out


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
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
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def one_cycle(graph, comp):
    """One cycle through the component's first module, for the message."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def name(mod):
    return mod or "(root)"


def main():
    check = "--check" in sys.argv[1:]
    show_edges = "--edges" in sys.argv[1:]
    total = binary = 0
    long_fns = []
    circles = []
    for crate in sorted(os.listdir(CRATES)):
        src = os.path.join(CRATES, crate, "src")
        if not os.path.isdir(src):
            continue
        files = {}
        for path in rust_files(src):
            lines = non_test(path)
            files[path] = lines
            total += len(lines)
            if crate == BINARY:
                binary += len(lines)
            for n, fname, at in long_functions(path, lines):
                long_fns.append((n, os.path.relpath(path, ROOT), fname, at))
        modules = {module_of(src, p) for p in files}
        graph = {module_of(src, p): edges_of(module_of(src, p), l, modules) for p, l in files.items()}
        for comp in cycles(graph):
            circles.append((crate, comp, one_cycle(graph, comp)))
            if show_edges:
                for v in comp:
                    back = sorted(w for w in graph[v] if w in comp)
                    print(f"{crate}: {name(v)} -> {', '.join(name(w) for w in back)}")
    share = 100.0 * binary / total if total else 0.0
    print(f"binary share: {binary} of {total} non-test lines = {share:.2f} % (goal under {SHARE_GOAL:.0f} %)")
    print(f"functions over {FN_LIMIT} lines outside tests: {len(long_fns)}")
    for n, path, fname, at in sorted(long_fns, reverse=True):
        print(f"  {n:4} {path}:{at} {fname}")
    print(f"import circles inside crates: {len(circles)}")
    for crate, comp, cyc in circles:
        print(f"  {crate}: {len(comp)} modules ({', '.join(name(m) for m in comp)})")
        print(f"    e.g. {' -> '.join(name(m) for m in cyc)}")
    missed = share >= SHARE_GOAL or long_fns or circles
    if check and missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
