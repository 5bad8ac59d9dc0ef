#!/usr/bin/env bash
# Builds growtrace, traces a program with an unbounded memo table, and shows the report.
#
# Usage: tools/demo.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROWTRACE_BUILD_DIR:-$repo/build}"

"$repo/tools/setup.sh"

work="$(mktemp -d /tmp/growtrace-demo.XXXXXX)"
trace="$work/memo_table.gtrace"
echo
echo "\$ growtrace run -o $trace -- memo_table 1000"
"$build/bin/growtrace" run -o "$trace" -- "$build/bin/memo_table" 1000
echo
echo "\$ growtrace analyze $trace"
status=0
"$build/bin/growtrace" analyze "$trace" || status=$?
echo
echo "(trace kept in $work)"
exit $status
