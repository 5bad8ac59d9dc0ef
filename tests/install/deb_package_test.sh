#!/usr/bin/env bash
# The .deb that `cpack` makes: its control fields (the dependencies dpkg-shlibdeps found, among
# them the libraries the command and the preload library link), its files under /usr, and,
# unpacked into a scratch directory (no root needed), a growing native program found by its
# command alone in a clean environment.
#
# Usage: deb_package_test.sh BUILD_DIR
# Exits 77 (skipped) without dpkg-deb.
set -euo pipefail

build="$1"
fail() { echo "deb_package_test: FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "deb_package_test: no dpkg-deb: skipped" >&2; exit 77; }

work="$(mktemp -d "${TMPDIR:-/tmp}/gt-deb-XXXXXX")"
trap 'rm -rf "$work"' EXIT

(cd "$work" && cpack -B "$work/out" --config "$build/CPackConfig.cmake" >cpack.log 2>&1) \
    || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb="$(ls "$work"/out/growtrace_*_amd64.deb)"

control="$(dpkg-deb -I "$deb")"
for field in "Package: growtrace" "Architecture: amd64" "Recommends: gdb"; do
    grep -q "^ $field\$" <<<"$control" || fail "no '$field' in: $control"
done
depends="$(sed -n 's/^ Depends: //p' <<<"$control")"
for library in libc6 libstdc++6 libdw1 libzstd1 libfmt9; do
    grep -q "\\b$library\\b" <<<"$depends" || fail "Depends lacks $library: $depends"
done

contents="$(dpkg-deb -c "$deb")"
for file in ./usr/bin/growtrace ./usr/lib/libgrowtrace.so ./usr/share/growtrace/python/startup/sitecustomize.py \
            ./usr/share/doc/growtrace/install.md; do
    grep -q " $file\$" <<<"$contents" || fail "$file is not in the package"
done
grep -q " ./usr/share/growtrace/python/_growtrace_agent.cpython-3[0-9]*-x86_64-linux-gnu.so\$" <<<"$contents" \
    || fail "no CPython agent in the package"

dpkg-deb -x "$deb" "$work/root"
cp "$build/bin/memo_table" "$work/memo_table"
cd "$work"
status=0
env -i HOME="$work" PATH=/usr/bin:/bin "$work/root/usr/bin/growtrace" check -- ./memo_table 2000 1000 >check.out 2>&1 \
    || status=$?
[[ $status -eq 3 ]] || { cat check.out >&2; fail "the packaged command's check exited $status, not 3"; }
grep -q "remember_result" check.out || { cat check.out >&2; fail "no finding at remember_result"; }
echo "deb_package_test: $(basename "$deb"): Depends: $depends"
