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
          nlohmann-json3-dev libcli11-dev libboost-stacktrace-dev libgtest-dev
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
# fails, its tests fail and say why.
if [[ -f "$repo/tools/setup_python.sh" ]]; then
    bash "$repo/tools/setup_python.sh" >/dev/null \
        || log "warning: tools/setup_python.sh failed; the Python tests will not find their venv"
fi

log "building into $build"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2
