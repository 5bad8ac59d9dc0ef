#!/usr/bin/env bash
# Sets up the Python side of growtrace's tests. Idempotent and fast when nothing changed.
#
#  1. One venv per CPython version growtrace reads, each made with a CPython whose executable
#     links libpython3.X.so (the "shared" build: LD_PRELOAD can interpose libpython's exported
#     functions), with tools/python_requirements.txt and tools/python_extensions_requirements.txt (compiled
#     extensions, for the test that imports them traced) installed: <repo>/.venv for 3.11 (the
#     default: the demo, the benchmarks) and <repo>/.venv-3.10, .venv-3.12, .venv-3.13. A stamp
#     file holding the hash of the requirements and of the base interpreter makes re-runs a
#     no-op. A version with no such interpreter here is skipped (its tests say so); 3.11 is
#     required.
#  2. Checks that Debian's /usr/bin/python3.11 (libpython linked into the executable, the
#     "static" build) runs the stdlib-only test programs. Nothing is installed for it.
#
# Choice of each base interpreter, first that qualifies:
#   $GROWTRACE_PYTHON (3.11 only), pyenv's 3.X.y ($PYENV_ROOT or ~/.pyenv, newest first),
#   python3.X and python3 on PATH, the image's /root/.pyenv.
# "Qualifies" = version 3.X and the executable itself is dynamically linked against
# libpython3.X.so. sysconfig's Py_ENABLE_SHARED is not enough: Debian's python3.11 reports
# 1 (it also ships libpython3.11.so) but its executable is linked statically.
#
# Usage: tools/setup_python.sh [--force] [--only-default | --all-but-default]
#   --force: reinstall even if the stamp matches. --only-default: the 3.11 venv alone (what
#   configuring the build needs); --all-but-default: the other versions and the static check
#   (tools/setup.sh makes these while the build compiles).
# Prints the 3.11 venv's python path as its last line.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo/tools/python_requirements.txt"
# Compiled extensions for the test that imports them under the tracer; installed the same way.
extensions="$repo/tools/python_extensions_requirements.txt"
force=0 default=1 others=1
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --only-default) others=0 ;;
        --all-but-default) default=0 ;;
        *) echo "setup_python: unknown argument $arg" >&2; exit 2 ;;
    esac
done

log() { echo "setup_python: $*" >&2; }

# Is "$2" a CPython 3.$1 whose executable links libpython dynamically? Prints its real path.
qualifies() {
    local minor="$1" exe="$2" real
    [[ -x "$exe" ]] || return 1
    real="$(readlink -f "$exe")" || return 1
    "$real" -c "import sys; sys.exit(0 if sys.version_info[:2] == (3, $minor) and sys.implementation.name == 'cpython' else 1)" \
        2>/dev/null || return 1
    ldd "$real" 2>/dev/null | grep -q "libpython3\.$minor\.so" || return 1
    echo "$real"
}

find_base_python() {
    local minor="$1" candidates=() pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}" c
    [[ $minor == 11 && -n "${GROWTRACE_PYTHON:-}" ]] && candidates+=("$GROWTRACE_PYTHON")
    if [[ -d "$pyenv_root/versions" ]]; then
        while IFS= read -r c; do candidates+=("$c/bin/python3.$minor"); done \
            < <(ls -d "$pyenv_root"/versions/3."$minor".* 2>/dev/null | sort -V -r)
    fi
    for c in "python3.$minor" python3; do
        command -v "$c" >/dev/null 2>&1 && candidates+=("$(command -v "$c")")
    done
    for c in /root/.pyenv/versions/3."$minor".*/bin/python3."$minor"; do
        [[ -x "$c" ]] && candidates+=("$c")
    done
    for c in "${candidates[@]}"; do
        if qualifies "$minor" "$c"; then return 0; fi
    done
    log "3.$minor: candidates tried: ${candidates[*]:-none}"
    return 1
}

# make_venv MINOR VENV: the venv for CPython 3.MINOR, made or brought up to date.
make_venv() {
    local minor="$1" venv="$2" base want stamp="$2/.growtrace-requirements.sha256"
    base="$(find_base_python "$minor")" || return 1
    # The stamp covers the requirements, this script's pip options and the base interpreter.
    want="$( { sha256sum < "$requirements"; sha256sum < "$extensions"; echo "$base"; "$base" -c 'import sys; print(sys.version)'; } \
             | sha256sum | cut -d' ' -f1)"
    venv_ok() {
        [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import sys' 2>/dev/null \
            && [[ "$(readlink -f "$venv/bin/python")" == "$base" ]]
    }
    if [[ $force -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && venv_ok; then
        log "3.$minor: venv up to date ($base)"
        return 0
    fi
    if ! venv_ok; then
        log "3.$minor: creating $venv with $base"
        rm -rf "$venv"
        "$base" -m venv "$venv"
        # Keep the venv out of git without touching the repository's .gitignore.
        echo '*' > "$venv/.gitignore"
    fi
    log "3.$minor: installing $(grep -cv '^\s*\(#\|$\)' "$requirements") pinned packages"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input -r "$requirements"
    # A missing wheel only skips the tests of that package (they say so), not the venv; the
    # stamp then does not match, so the next run tries again.
    local extensions_ok=1
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input --only-binary=:all: -r "$extensions" \
        || { extensions_ok=0; log "3.$minor: warning: $extensions did not install; their tests will be skipped"; }
    "$venv/bin/python" -c 'import openai, pydantic, psutil, pytest' \
        || { log "3.$minor: installed packages do not import"; return 1; }
    if ((extensions_ok)); then echo "$want" > "$stamp"; else rm -f "$stamp"; fi
    log "3.$minor: venv ready"
}

if ((default)); then
    make_venv 11 "$repo/.venv" || { log "no CPython 3.11 with a shared libpython found (tried \$GROWTRACE_PYTHON, pyenv, PATH)"; exit 1; }
fi
if ((!others)); then
    echo "$repo/.venv/bin/python"
    exit 0
fi
# The other versions growtrace reads: those with a layout file (preload/cpython/).
for layout in "$repo"/preload/cpython/version_3*.cpp; do
    minor="${layout##*/version_3}"
    minor="${minor%.cpp}"
    [[ $minor == 11 ]] && continue
    make_venv "$minor" "$repo/.venv-3.$minor" || log "note: no venv for CPython 3.$minor: its tests will be skipped"
done

# Debian's static build: only the standard library is used, so just check it runs.
static_py=/usr/bin/python3.11
if [[ -x "$static_py" ]]; then
    if ldd "$static_py" 2>/dev/null | grep -q 'libpython3\.11\.so'; then
        log "note: $static_py links libpython dynamically here (not the static build)"
    elif "$static_py" -I -c 'import functools, re, typing, threading, gc, ctypes, json' 2>/dev/null; then
        log "static build ok: $static_py ($("$static_py" -c 'import platform; print(platform.python_version())'))"
    else
        log "warning: $static_py cannot import the stdlib modules the test programs need"
    fi
else
    log "note: $static_py not found; static-build tests will be skipped"
fi

echo "$repo/.venv/bin/python"
