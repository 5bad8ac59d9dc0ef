#!/usr/bin/env bash
# Sets up and builds (tools/setup.sh), then runs every test registered with ctest.
# Unit tests run two at a time; the end-to-end tests (label e2e) run one at a time, because
# they trace programs whose behaviour over time is what they check.
#
# Usage: tools/test.sh [extra ctest arguments, e.g. -R Memo]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROWTRACE_BUILD_DIR:-$repo/build}"

"$repo/tools/setup.sh"

status=0
ctest --test-dir "$build" --output-on-failure -j2 -LE e2e "$@" || status=1
ctest --test-dir "$build" --output-on-failure -L e2e "$@" || status=1
exit $status
