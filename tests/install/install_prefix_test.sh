#!/usr/bin/env bash
# `cmake --install` into a fresh prefix, the prefix then moved elsewhere, and the installed
# command alone, in an environment that names nothing of the build tree, traces a native
# program and a Python program that keep growing: `growtrace check` must find both.
#
# Usage: install_prefix_test.sh BUILD_DIR SOURCE_DIR PYTHON
#   PYTHON: a CPython with a shared libpython whose version has an agent in the build.
# Exits 77 (skipped) when PYTHON is missing.
set -euo pipefail

build="$1" source="$2" python="$3"
fail() { echo "install_prefix_test: FAIL: $*" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/gt-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/staged" >/dev/null
# Relocatable: nothing in it may depend on where it was installed.
mv "$work/staged" "$work/prefix"
prefix="$work/prefix"
growtrace="$prefix/bin/growtrace"

for part in bin/growtrace lib/libgrowtrace.so share/growtrace/python/startup/sitecustomize.py \
            share/growtrace/python/startup/growtrace-agent.py share/growtrace/python/startup/growtrace-loader.py \
            share/doc/growtrace/README.md share/doc/growtrace/install.md; do
    [[ -f "$prefix/$part" ]] || fail "$part was not installed"
done
ls "$prefix"/share/growtrace/python/_growtrace_agent.cpython-3*-x86_64-linux-gnu.so >/dev/null 2>&1 \
    || fail "no CPython agent was installed"
for elf in "$growtrace" "$prefix/lib/libgrowtrace.so"; do
    if readelf -d "$elf" | grep -E 'R(UN)?PATH' | grep -q "$build"; then fail "$elf still looks into $build"; fi
done

# The programs and the analysis run with the installed command only: a clean environment
# (no GROWTRACE_* variables, a PATH without the build tree), in a directory of their own.
clean() { env -i HOME="$work" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"; }
cd "$work"
cp "$build/bin/memo_table" "$work/memo_table"
cp "$source/test_programs/python/lru_growth.py" "$source/test_programs/python/_common.py" "$work/"

version="$(clean "$growtrace" --version)"
grep -qx "preload library: $prefix/lib/libgrowtrace.so" <<<"$version" || fail "--version: $version"
grep -q "^CPython agents: .*3\.[0-9]* ($prefix/share/growtrace/python)\$" <<<"$version" || fail "--version: $version"

status=0
clean "$growtrace" check --json native.json -- ./memo_table 2000 1000 >native.out 2>&1 || status=$?
[[ $status -eq 3 ]] || { cat native.out >&2; fail "check of a growing native program exited $status, not 3"; }
clean /usr/bin/python3 - native.json <<'PY' || fail "no finding at remember_result in the native program"
import json, sys
report = json.load(open(sys.argv[1]))
frames = [f.get("function", "") for f in report["findings"][0]["frames"]]
sys.exit(0 if any("remember_result" in f for f in frames) else 1)
PY

if [[ ! -x "$python" ]]; then
    echo "install_prefix_test: $python is missing (tools/setup_python.sh): the Python half is skipped" >&2
    exit 77
fi
status=0
clean "$growtrace" check --json python.json -- "$python" lru_growth.py --requests 200 --interval 0.01 \
    >python.out 2>&1 || status=$?
[[ $status -eq 3 ]] || { cat python.out >&2; fail "check of a growing lru_cache exited $status, not 3"; }
clean /usr/bin/python3 - python.json <<'PY' || fail "no cache_growth finding for the growing lru_cache"
import json, sys
report = json.load(open(sys.argv[1]))
caches = [f for f in report["findings"] if f.get("kind") == "cache_growth"]
sys.exit(0 if caches and caches[0]["cache"]["name"] == "__main__.adapter_for" else 1)
PY
echo "install_prefix_test: the installed command found both growths"
