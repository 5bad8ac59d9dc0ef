#!/usr/bin/env bash
# The demo: the real openai-python #2672 leak (responses.parse with text_format from a new
# thread per request; openai and pydantic pinned, a local mock server, no network, no API
# key) traced with growtrace and analysed. Sets up and builds first (tools/setup.sh).
#
# Usage: tools/demo.sh [REQUESTS]     (default 30; about a minute on 2 cores)
#        GROWTRACE_DEMO_PYTHON=3.12 tools/demo.sh    (another CPython: 3.10, 3.11, 3.12, 3.13)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GROWTRACE_BUILD_DIR:-$repo/build}"
requests="${1:-30}"

"$repo/tools/setup.sh"

work="$(mktemp -d /tmp/growtrace-demo.XXXXXX)"
trace="$work/openai.gtrace"
version="${GROWTRACE_DEMO_PYTHON:-3.11}"
venv="$repo/.venv"
[[ $version == 3.11 ]] || venv="$repo/.venv-$version"
[[ -x "$venv/bin/python" ]] || { echo "demo: no venv for CPython $version ($venv)" >&2; exit 2; }
program=("$venv/bin/python" "$repo/test_programs/python/openai_repro/repro.py" --mode threads --requests "$requests")
echo
echo "\$ growtrace run -o $trace -- python repro.py --mode threads --requests $requests"
"$build/bin/growtrace" run -o "$trace" -- "${program[@]}"
echo
echo "\$ growtrace analyze $trace --html $work/report.html"
status=0
"$build/bin/growtrace" analyze "$trace" --html "$work/report.html" || status=$?
echo
echo "(trace and HTML report kept in $work)"
exit $status
