#!/usr/bin/env python3
"""Checks the include graph of the sources against the architecture (docs/architecture.md).

- The analyzer's layers are linked only downward: read < model < analysis < report. A file
  includes headers of its own layer and of the layers below, never above, and never tools/.
- The preload library's layers the same way: support < capture < cpython < record < write <
  session < python < intercept (preload/CMakeLists.txt says what each holds).
- No include cycle between modules anywhere (a module is a .h with its .cpp/.c: a cycle is
  two modules that reach each other through their includes).

Usage: check_layers.py REPO_ROOT. Exit 0 when the graph holds, 1 with one line per breach.
"""
import os
import re
import sys

SOURCE_DIRS = ["analyzer", "tools", "preload", "format", "contracts", "pyagent", "tests/unit"]
EXTENSIONS = (".h", ".hpp", ".cpp", ".c", ".cc")
# Each part with layers: its folder and its layers' folders, lowest first.
LAYERED_PARTS = {
    "analyzer": ["read", "model", "analysis", "report"],
    "preload": ["support", "capture", "cpython", "record", "write", "session", "python", "intercept"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root):
    for top in SOURCE_DIRS:
        for base, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(base, name), root)


def module_of(path):
    return os.path.splitext(path)[0]


def layer_of(path):
    """(part, index of its layer) of a file in a layered part, else None. A file of the part
    outside every layer folder (none is allowed) has no layer and is reported."""
    parts = path.split("/")
    layers = LAYERED_PARTS.get(parts[0])
    if layers is None or len(parts) < 3:
        return None
    return (parts[0], layers.index(parts[1])) if parts[1] in layers else None


def unlayered_files(root):
    for path in sources(root):
        parts = path.split("/")
        if parts[0] in LAYERED_PARTS and len(parts) >= 2 and path.endswith(EXTENSIONS) and layer_of(path) is None:
            yield f"{path} is in no layer of {parts[0]}/ (one of: {', '.join(LAYERED_PARTS[parts[0]])})"


def resolve(root, including, name):
    for candidate in (name, os.path.join(os.path.dirname(including), name)):
        if os.path.isfile(os.path.join(root, candidate)):
            return os.path.normpath(candidate)
    return None


def include_graph(root):
    edges = {}
    for path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            target = resolve(root, path, name)
            if target:
                edges.setdefault(path, set()).add(target)
    return edges


def layer_breaches(edges):
    for path, targets in sorted(edges.items()):
        for target in sorted(targets):
            if path.startswith("analyzer/") and target.startswith("tools/"):
                yield f"{path} includes {target}: the analyzer never depends on the command line"
            here, there = layer_of(path), layer_of(target)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                layers = LAYERED_PARTS[here[0]]
                yield (f"{path} includes {target}: layer {layers[here[1]]} may not depend on "
                       f"layer {layers[there[1]]} above it")


def module_cycles(edges):
    graph = {}
    for path, targets in edges.items():
        for target in targets:
            a, b = module_of(path), module_of(target)
            if a != b:
                graph.setdefault(a, set()).add(b)
                graph.setdefault(b, set())
    # Tarjan's strongly connected components, iteratively (no recursion limit on deep graphs).
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop(); on_stack.discard(top); component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]; counter[0] += 1
                stack.append(child); on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    edges = include_graph(root)
    problems = list(unlayered_files(root)) + list(layer_breaches(edges))
    problems += ["include cycle between modules: " + " <-> ".join(c) for c in module_cycles(edges)]
    for p in problems:
        print(p)
    print(f"{sum(len(t) for t in edges.values())} includes in {len(edges)} files checked: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
