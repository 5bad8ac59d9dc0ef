#!/usr/bin/env bash
# Builds the agent's C extension for a CPython 3.11 and checks py311_frames.h's offsets
# against that installation's internal headers.
#   pyagent/build.sh [PYTHON] [OUTDIR]
# PYTHON defaults to python3; OUTDIR to pyagent/build. One extension serves every 3.11
# build on x86_64 Linux (same ABI: pyenv's shared 3.11.7 and Debian's static 3.11.2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${1:-python3}"
out="${2:-$here/build}"
read -r inc platinc suffix < <("$py" -c 'import sysconfig as s; print(s.get_paths()["include"], s.get_paths()["platinclude"], s.get_config_var("EXT_SUFFIX"))')
cc="${CC:-cc}"
mkdir -p "$out"
# Layout check, against this installation's headers (compile and run).
"$cc" -O0 -I"$inc" -I"$platinc" -I"$here/src" "$here/src/check_layout.c" -o "$out/check_layout" -ldl
"$out/check_layout"
# -fvisibility=hidden: the only exported symbol is PyInit__growtrace_agent.
"$cc" -O2 -g -Wall -Wextra -Wno-missing-field-initializers -Wno-cast-function-type \
    -fPIC -shared -fvisibility=hidden \
    -I"$inc" -I"$platinc" -I"$here/include" -I"$here/src" \
    "$here/src/_growtrace_agent.c" -o "$out/_growtrace_agent$suffix.tmp" -ldl
mv "$out/_growtrace_agent$suffix.tmp" "$out/_growtrace_agent$suffix"
echo "$out/_growtrace_agent$suffix"
