#!/usr/bin/env bash
# Installs what growtrace needs (Debian 12 packages), sets up the Python side if its script is
# there, and builds everything into build/. Idempotent: apt runs only if a package is missing,
# and the build is incremental.
#
# Usage: tools/setup.sh            (GROWTRACE_BUILD_DIR overrides build/)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROWTRACE_BUILD_DIR:-$repo/build}"
log() { echo "setup: $*" >&2; }

packages=(build-essential cmake pkg-config libunwind-dev libdw-dev libzstd-dev libfmt-dev
          nlohmann-json3-dev libcli11-dev robin-map-dev libboost-stacktrace-dev libgtest-dev
          zlib1g-dev               # gzip of pprof exports
          chromium libxml2-utils   # the HTML/SVG report tests (headless browser, xmllint)
          golang-go)               # go tool pprof reads the pprof exports in the tests

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    log "installing ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
else
    log "all ${#packages[@]} packages present"
fi

# The Python side (owned by its own script) must not stop the C++ build and tests: if it
# fails, its tests fail and say why. Configuring looks for the 3.11 venv (the agent's pytest
# runs from it); the other versions' venvs, mostly downloads and unpacking, are made while the
# build compiles.
python_setup="$repo/tools/setup_python.sh"
other_venvs=""
if [[ -f "$python_setup" ]]; then
    bash "$python_setup" --only-default >/dev/null \
        || log "warning: tools/setup_python.sh failed; the Python tests will not find their venv"
    bash "$python_setup" --all-but-default >/dev/null &
    other_venvs=$!
fi

log "building into $build"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
build_status=0
cmake --build "$build" -j2 || build_status=$?
if [[ -n "$other_venvs" ]]; then
    wait "$other_venvs" || log "warning: the venvs of the other CPython versions failed; their tests will say so"
fi
exit "$build_status"
