#!/bin/sh
# check-exports.sh - the shared library exports exactly the public API and the allocator names, nothing
# internal.  Expected: tests/exports.txt (the same on every architecture) plus the C++ operators for the
# platform's size_t, whose type the mangled names spell: tests/exports-cxx-m.txt (unsigned long: amd64,
# arm64, ...) or tests/exports-cxx-j.txt (unsigned int: i386, armhf, ...).  MPROF_EXPECTED_EXPORTS lists
# the files (make check picks them).  Reports TAP.
lib=${MPROF_TEST_LIB:?run through make check}
lists=${MPROF_EXPECTED_EXPORTS:?run through make check}
echo "1..1"
if [ ! -f "$lib" ]; then
  echo "ok 1 - exports # SKIP no shared library was built"
  exit 0
fi
expected=$(mktemp) || exit 1
trap 'rm -f "$expected"' EXIT
# shellcheck disable=SC2086
cat $lists | LC_ALL=C sort -u >"$expected" || exit 1
names=$(for f in $lists; do printf ' %s' "${f##*/}"; done)
actual=$(${NM:-nm} -D --defined-only "$lib" | awk '{ print $NF }' | LC_ALL=C sort -u)
if diff_out=$(printf '%s\n' "$actual" | diff -u "$expected" -); then
  echo "ok 1 - exports: $(printf '%s\n' "$actual" | wc -l) symbols, as in$names"
else
  echo "not ok 1 - exports differ from$names"
  printf '%s\n' "$diff_out" | sed 's/^/# /'
fi
