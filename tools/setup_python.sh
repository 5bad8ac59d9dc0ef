#!/usr/bin/env bash
# Sets up the Python side of growtrace's tests. Idempotent and fast when nothing changed.
#
#  1. <repo>/.venv, made with a CPython 3.11 whose executable links libpython3.11.so
#     (the "shared" build: LD_PRELOAD can interpose libpython's exported functions), with
#     tools/python_requirements.txt installed. A stamp file holding the hash of the
#     requirements and of the base interpreter makes re-runs a no-op.
#  2. Checks that Debian's /usr/bin/python3.11 (libpython linked into the executable, the
#     "static" build) runs the stdlib-only test programs. Nothing is installed for it.
#
# Choice of the base interpreter, first that qualifies:
#   $GROWTRACE_PYTHON, pyenv's 3.11.x ($PYENV_ROOT or ~/.pyenv), python3.11 and python3 on PATH.
# "Qualifies" = version 3.11 and the executable itself is dynamically linked against
# libpython3.11.so. sysconfig's Py_ENABLE_SHARED is not enough: Debian's python3.11 reports
# 1 (it also ships libpython3.11.so) but its executable is linked statically.
#
# Usage: tools/setup_python.sh [--force]      (--force: reinstall even if the stamp matches)
# Prints the venv's python path as its last line.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
requirements="$repo/tools/python_requirements.txt"
stamp="$venv/.growtrace-requirements.sha256"
force=0
[[ "${1:-}" == "--force" ]] && force=1

log() { echo "setup_python: $*" >&2; }

# Is "$1" a CPython 3.11 whose executable links libpython dynamically? Prints its real path.
qualifies() {
    local exe="$1" real
    [[ -x "$exe" ]] || return 1
    real="$(readlink -f "$exe")" || return 1
    "$real" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) and sys.implementation.name == "cpython" else 1)' \
        2>/dev/null || return 1
    ldd "$real" 2>/dev/null | grep -q 'libpython3\.11\.so' || return 1
    echo "$real"
}

find_base_python() {
    local candidates=() pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}" c
    [[ -n "${GROWTRACE_PYTHON:-}" ]] && candidates+=("$GROWTRACE_PYTHON")
    # Newest 3.11.x first.
    if [[ -d "$pyenv_root/versions" ]]; then
        while IFS= read -r c; do candidates+=("$c/bin/python3.11"); done \
            < <(ls -d "$pyenv_root"/versions/3.11.* 2>/dev/null | sort -V -r)
    fi
    for c in python3.11 python3; do
        command -v "$c" >/dev/null 2>&1 && candidates+=("$(command -v "$c")")
    done
    # The image's own pyenv, when HOME or PYENV_ROOT point elsewhere.
    for c in /root/.pyenv/versions/3.11.*/bin/python3.11; do
        [[ -x "$c" ]] && candidates+=("$c")
    done
    for c in "${candidates[@]}"; do
        if qualifies "$c"; then return 0; fi
    done
    log "candidates tried: ${candidates[*]:-none}"
    return 1
}

base="$(find_base_python)" || {
    log "no CPython 3.11 with a shared libpython found (tried \$GROWTRACE_PYTHON, pyenv, PATH)"
    exit 1
}

# The stamp covers the requirements, this script's pip options and the base interpreter.
want="$( { sha256sum < "$requirements"; echo "$base"; "$base" -c 'import sys; print(sys.version)'; } \
         | sha256sum | cut -d' ' -f1)"

venv_ok() {
    [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import sys' 2>/dev/null \
        && [[ "$(readlink -f "$venv/bin/python")" == "$base" ]]
}

if [[ $force -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && venv_ok; then
    log "venv up to date ($base)"
else
    if ! venv_ok; then
        log "creating $venv with $base"
        rm -rf "$venv"
        "$base" -m venv "$venv"
        # Keep the venv out of git without touching the repository's .gitignore.
        echo '*' > "$venv/.gitignore"
    fi
    log "installing $(grep -cv '^\s*\(#\|$\)' "$requirements") pinned packages"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input -r "$requirements"
    "$venv/bin/python" -c 'import openai, pydantic, psutil, pytest' \
        || { log "installed packages do not import"; exit 1; }
    echo "$want" > "$stamp"
    log "venv ready"
fi

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

echo "$venv/bin/python"
