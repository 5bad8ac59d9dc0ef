#!/usr/bin/env python3
"""Checks the preload library's layers at the link level: no layer's objects use a symbol that
only a layer above it defines. The include check (check_layers.py) cannot see a variable
declared in a low header and defined in a high source file; this one reads the object files.

Symbols that libc defines too are left out: the hooks (malloc, free, exit, dlclose...) are
defined by the top layer on purpose, and every layer calls libc's names.

Usage: check_layer_symbols.py OBJECT_DIR LAYER... (lowest first), where OBJECT_DIR holds one
growtrace_preload_<layer>.dir per layer (CMake's object library folders). Exit 0 when no
layer reaches up, 1 with one line per symbol that does.
"""
import glob
import os
import subprocess
import sys


def symbols(objects, *flags):
    if not objects:
        return set()
    out = subprocess.run(["nm", "--format=posix", *flags, *objects], capture_output=True, text=True, check=True)
    names = set()
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and not line.endswith(":"):
            names.add(fields[0].split("@")[0])
    return names


def demangled(name):
    out = subprocess.run(["c++filt", name], capture_output=True, text=True)
    return out.stdout.strip() or name


def libc_symbols():
    paths = glob.glob("/lib/*/libc.so.6") + glob.glob("/usr/lib/*/libc.so.6")
    if not paths:
        sys.exit("check_layer_symbols: libc.so.6 not found")
    return symbols(paths[:1], "-D", "--defined-only")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    object_dir, layers = sys.argv[1], sys.argv[2:]
    objects = {}
    for layer in layers:
        found = glob.glob(os.path.join(object_dir, f"growtrace_preload_{layer}.dir", "**", "*.o"), recursive=True)
        if not found:
            sys.exit(f"check_layer_symbols: no objects for layer {layer} under {object_dir} (build first)")
        objects[layer] = found
    defined = {layer: symbols(objects[layer], "--defined-only") for layer in layers}
    libc = libc_symbols()
    problems = []
    for i, layer in enumerate(layers):
        needed = symbols(objects[layer], "--undefined-only") - libc
        for above in layers[i + 1:]:
            for name in sorted(needed & defined[above]):
                problems.append(f"layer {layer} uses {demangled(name)}, defined only in layer {above} above it")
    for p in problems:
        print(p)
    print(f"{sum(len(o) for o in objects.values())} objects in {len(layers)} layers checked: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
