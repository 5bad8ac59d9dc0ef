#!/usr/bin/env bash
# pip: a wheel built from this tree (`pip wheel`, scikit-build-core driving the same
# CMake build) and `pip install <tree>` each go into a fresh venv of BASE_PYTHON; then that
# venv's `growtrace`, in a clean environment that names nothing of the build tree, must find
# a growing lru_cache in `python app.py` and a growing native program.
#
# Usage: pip_install_test.sh SOURCE_DIR BASE_PYTHON NATIVE_PROGRAM
#   BASE_PYTHON: a CPython 3.10 to 3.13 with a shared libpython (pyenv's builds).
#   NATIVE_PROGRAM: test_programs' memo_table.
# Exits 77 (skipped) when BASE_PYTHON is missing. Needs PyPI for scikit-build-core.
set -euo pipefail

source="$1" base="$2" memo_table="$3"
fail() { echo "pip_install_test: FAIL: $*" >&2; exit 1; }
[[ -x "$base" ]] || { echo "pip_install_test: $base is missing: skipped" >&2; exit 77; }

work="$(mktemp -d "${TMPDIR:-/tmp}/gt-pip-XXXXXX")"
trap 'rm -rf "$work"' EXIT
log="$work/pip.log"

# One CMake build tree for both: the second build is incremental.
"$base" -m venv "$work/builder"
"$work/builder/bin/pip" wheel -q --no-deps -w "$work/wheels" -C build-dir="$work/cmake-build" "$source" >"$log" 2>&1 \
    || { tail -40 "$log" >&2; fail "pip wheel failed"; }
wheel="$(ls "$work"/wheels/growtrace-*.whl)"

"$base" -m venv "$work/from-wheel"
"$work/from-wheel/bin/pip" install -q "$wheel" >>"$log" 2>&1 || { tail -40 "$log" >&2; fail "pip install of $wheel failed"; }
"$base" -m venv "$work/from-tree"
"$work/from-tree/bin/pip" install -q -C build-dir="$work/cmake-build" "$source" >>"$log" 2>&1 \
    || { tail -40 "$log" >&2; fail "pip install of $source failed"; }
rm -rf "$work/cmake-build" "$work/builder"

mkdir "$work/app"
cp "$memo_table" "$work/app/memo_table"
cat >"$work/app/app.py" <<'PY'
import functools
import time


@functools.lru_cache(maxsize=None)
def render(page):
    # Each page's rendering is kept for ever: the cache only grows.
    return [bytearray(4096) for _ in range(8)] + [str(page) * 100]


for page in range(600):
    render(page)
    time.sleep(0.004)
print("rendered", render.cache_info().currsize)
PY

minor="$("$base" -c 'import sys; print(sys.version_info[1])')"
for venv in from-wheel from-tree; do
    bin="$work/$venv/bin"
    # The venv's command alone: PATH has the venv (its python) and the system, nothing else.
    clean() { (cd "$work/app" && env -i HOME="$work/app" PATH="$bin:/usr/bin:/bin" LANG=C.UTF-8 "$@"); }
    version="$(clean growtrace --version)"
    grep -q "^CPython agents: .*3\.$minor\b.*($work/$venv/lib/python3\.$minor/site-packages/growtrace/_native/share/growtrace/python)\$" \
        <<<"$version" || fail "$venv: --version: $version"

    status=0
    clean growtrace check --json python.json -- python app.py >"$work/app/python.out" 2>&1 || status=$?
    [[ $status -eq 3 ]] || { cat "$work/app/python.out" >&2; fail "$venv: check of app.py exited $status, not 3"; }
    clean /usr/bin/python3 - python.json <<'PY' || fail "$venv: no cache_growth finding for render"
import json, sys
report = json.load(open(sys.argv[1]))
caches = [f for f in report["findings"] if f.get("kind") == "cache_growth"]
sys.exit(0 if any(c["cache"]["name"] == "__main__.render" for c in caches) else 1)
PY

    status=0
    clean growtrace check -- ./memo_table 2000 1000 >"$work/app/native.out" 2>&1 || status=$?
    [[ $status -eq 3 ]] || { cat "$work/app/native.out" >&2; fail "$venv: check of memo_table exited $status, not 3"; }
    rm -f "$work"/app/*.gtrace
done
echo "pip_install_test: CPython 3.$minor: the wheel and pip install of the tree both found the growths"
