#!/usr/bin/env bash
# Sets up and builds (tools/setup.sh), then runs every test registered with ctest in one pass,
# four at a time: the end-to-end tests wait on the programs they run far more than they
# compute, and the fuzzer's own build and the conformance run fill the time they leave. Those
# whose outcome depends on time itself (native attach, stress, signals, pools) are marked
# RUN_SERIAL in tests/e2e/CMakeLists.txt, and ctest runs each of them alone; the other attach
# tests run one at a time beside the rest (docs/testing.md).
#
# Where ccache is installed, a fresh build dir (CI's clean clone) is configured to compile
# through it, unless CMAKE_C(XX)_COMPILER_LAUNCHER is set already (CMake reads both from the
# environment at first configure; bench/fuzz.sh's own build tree gets it too).
#
# Usage: tools/test.sh [extra ctest arguments, e.g. -R Memo]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROWTRACE_BUILD_DIR:-$repo/build}"

if command -v ccache >/dev/null; then
    export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
    export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi

"$repo/tools/setup.sh"

# The pip installs (label pip) build the whole tree again inside pip, once per CPython version:
# about ten minutes each on 2 cores, which would take the suite past its half hour. They run
# when GROWTRACE_TEST_PIP=1 (docs/testing.md); the install and .deb tests always run.
run_pip=0
[[ "${GROWTRACE_TEST_PIP:-0}" == 1 ]] && run_pip=1

status=0
ctest --test-dir "$build" --output-on-failure -j4 -LE pip "$@" || status=1
if ((run_pip)); then
    ctest --test-dir "$build" --output-on-failure -L pip "$@" || status=1
fi
exit $status
