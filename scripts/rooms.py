#!/usr/bin/env python3
"""Checks a crate's imports, read from its source: no circle between files, and with
--order no import from a lower room (a folder under src/) to a higher one.

    scripts/rooms.py server/src --order error,drives,records,assemble,run,export,ops,control,service
    scripts/rooms.py cli/src
    scripts/rooms.py engine/src --order error,crc,format,checksum,parity,placement,layout,hybrid,capacity,stripe_table,l2p,pool,config,drive_command,recovery,engine,shard,cpu_cost,sim,sim_shards

An edge is a `use` line (`crate::`, `super::`, `self::`, or a child module's name) or a
`crate::` path in code, from the file it is in to the file of the module it names; a
file's own inline modules (`mod tests { use super::*; }`) name the file itself and are
not edges, and test modules (`#[cfg(test)] mod tests { ... }`) are left out. lib.rs and
main.rs (the root, which only declares the rooms) are left out of the room order. Exits
1 and says each circle and each upward import, else 0.
"""

import argparse
import re
import sys
from pathlib import Path


def module_files(src):
    """Module path (tuple of names) -> file, for every .rs file under src."""
    files = {}
    for path in src.rglob("*.rs"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts in (["lib"], ["main"]):
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        files[tuple(parts)] = path
    return files


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] if "//" in line and '"' not in line else line for line in text.split("\n"))


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (aliases and `self` kept as is)."""
    tree = tree.strip()
    depth = 0
    for i, ch in enumerate(tree):
        if ch == "{" and depth == 0:
            prefix = tree[:i]
            inner = tree[i + 1 : tree.rindex("}")]
            parts, depth_inner, start = [], 0, 0
            for j, c in enumerate(inner):
                if c == "{":
                    depth_inner += 1
                elif c == "}":
                    depth_inner -= 1
                elif c == "," and depth_inner == 0:
                    parts.append(inner[start:j])
                    start = j + 1
            parts.append(inner[start:])
            out = []
            for part in parts:
                if part.strip():
                    out += expand(prefix + part.strip())
            return out
    return [re.split(r"\s+as\s+", tree)[0].strip()]


def resolve(segments, files):
    """The file of the longest module prefix of `segments`."""
    for n in range(len(segments), -1, -1):
        if tuple(segments[:n]) in files:
            return files[tuple(segments[:n])]
    return None


def strip_test_modules(text):
    """Drops `#[cfg(test)] mod NAME { ... }` blocks: a file's tests may drive the crate
    from above (a simulator test of a part of the simulator), which is not what the file
    itself takes from other rooms."""
    out, at = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < at:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth > 0:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[at : m.start()])
        at = i
    out.append(text[at:])
    return "".join(out)


def imports(path, module, files):
    # A visibility (`pub(in crate::engine)`) names where an item may be used, not a module
    # the file takes anything from.
    text = re.sub(r"\bpub\(in [^)]*\)", "pub", strip_test_modules(strip_comments(path.read_text())))
    children = {m[-1] for m in files if len(m) == len(module) + 1 and m[: len(module)] == module}
    targets = set()
    for m in re.finditer(r"^([ \t]*)(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text, flags=re.M):
        indented, tree = m.group(1) != "", m.group(2)
        for p in expand(tree):
            segs = [s for s in p.split("::") if s]
            if not segs:
                continue
            if indented and segs[0] == "super":
                continue  # an inline module's `super` is this file
            if segs[0] == "crate":
                full = segs[1:]
            elif segs[0] == "super":
                base = list(module)
                while segs and segs[0] == "super":
                    base, segs = base[:-1], segs[1:]
                full = base + segs
            elif segs[0] == "self":
                full = list(module) + segs[1:]
            elif segs[0] in children:
                full = list(module) + segs
            else:
                continue  # another crate, or std
            target = resolve([s for s in full if s not in ("*", "self")], files)
            if target is not None and target != path:
                targets.add(target)
    for m in re.finditer(r"\bcrate((?:::\w+)+)", text):
        target = resolve([s for s in m.group(1).split("::") if s], files)
        if target is not None and target != path:
            targets.add(target)
    return targets


def circles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path)
    parser.add_argument("--order", help="the rooms from the bottom up, comma-separated")
    args = parser.parse_args()
    files = module_files(args.src)
    by_file = {f: m for m, f in files.items()}
    graph = {f: imports(f, m, files) for m, f in files.items()}
    problems = []
    for comp in circles(graph):
        names = ", ".join(str(f.relative_to(args.src)) for f in comp)
        problems.append(f"circle of {len(comp)} files: {names}")
    if args.order:
        order = {room: i for i, room in enumerate(args.order.split(","))}
        for f, targets in graph.items():
            module = by_file[f]
            if not module:
                continue
            for t in targets:
                room_from, room_to = module[0], by_file[t][0] if by_file[t] else None
                if room_from not in order:
                    problems.append(f"{f.relative_to(args.src)}: room {room_from} is not in --order")
                    break
                if room_to in order and order[room_to] > order[room_from]:
                    problems.append(
                        f"upward import: {f.relative_to(args.src)} ({room_from}) takes from "
                        f"{t.relative_to(args.src)} ({room_to})"
                    )
    for p in sorted(set(problems)):
        print(p)
    edges = sum(len(t) for t in graph.values())
    print(f"{args.src}: {len(files)} files, {edges} imports between them, {len(set(problems))} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
