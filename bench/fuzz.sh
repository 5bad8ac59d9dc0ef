#!/bin/sh
# Builds the libFuzzer target over the trace reader and analysis (tests/fuzz/) with clang,
# ASan and UBSan in its own build tree, replays the saved crash inputs, then fuzzes for a
# bounded time starting from the seed corpus of real traces.
#
# usage: bench/fuzz.sh [SECONDS=300] [BUILD_DIR=<repo>/build-fuzz]
# Exit: 0 no crash, 1 a crash (the input is saved under BUILD_DIR/artifacts/; fix it and keep
# it in tests/fuzz/regressions/), 77 clang or libFuzzer not available (ctest: skipped).
set -eu

seconds=${1:-300}
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$repo/build-fuzz}
jobs=${FUZZ_JOBS:-2}

cc=$(command -v clang-14 || command -v clang || true)
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$cc" ] || [ -z "$cxx" ]; then
    echo "fuzz.sh: clang not found; skipping" >&2
    exit 77
fi
# libFuzzer's runtime ships separately (libclang-rt-*-dev on Debian/Ubuntu).
probe=$(mktemp -d)
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cpp"
if ! "$cxx" -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "fuzz.sh: $cxx cannot link -fsanitize=fuzzer (libclang-rt missing?); skipping" >&2
    exit 77
fi
rm -rf "$probe"

mkdir -p "$build"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DGROWTRACE_BUILD_FUZZERS=ON -DGROWTRACE_BUILD_TESTS=OFF >"$build/cmake.log" 2>&1 ||
    { cat "$build/cmake.log" >&2; exit 2; }
cmake --build "$build" -j"$jobs" --target trace_fuzzer >"$build/build.log" 2>&1 ||
    { tail -50 "$build/build.log" >&2; exit 2; }
fuzzer=$build/bin/trace_fuzzer

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Every input that once crashed must now pass.
regressions=$(find "$repo/tests/fuzz/regressions" -type f ! -name '*.md' | sort)
if [ -n "$regressions" ]; then
    # shellcheck disable=SC2086
    "$fuzzer" -runs=1 $regressions >"$build/regressions.log" 2>&1 ||
        { tail -60 "$build/regressions.log" >&2; echo "fuzz.sh: a saved regression input crashes again" >&2; exit 1; }
fi

# New inputs go to a scratch corpus; the seeds in the repository stay as they are.
mkdir -p "$build/corpus" "$build/artifacts"
status=0
"$fuzzer" "$build/corpus" "$repo/tests/fuzz/corpus" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/" 2>"$build/fuzz.log" || status=$?
tail -15 "$build/fuzz.log" >&2
if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: crash; input(s) in $build/artifacts/:" >&2
    ls -l "$build/artifacts" >&2
    exit 1
fi
echo "fuzz.sh: no crash in ${seconds}s" >&2
