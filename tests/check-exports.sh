#!/bin/sh
# check-exports.sh - the shared library exports exactly the public API and the allocator names
# (tests/exports.txt), nothing internal.  Reports TAP.
lib=${MPROF_TEST_LIB:?run through make check}
expected=${MPROF_EXPECTED_EXPORTS:?run through make check}
echo "1..1"
if [ ! -f "$lib" ]; then
  echo "ok 1 - exports # SKIP no shared library was built"
  exit 0
fi
actual=$(${NM:-nm} -D --defined-only "$lib" | awk '{ print $NF }' | LC_ALL=C sort -u)
if diff_out=$(printf '%s\n' "$actual" | diff -u "$expected" -); then
  echo "ok 1 - exports: $(printf '%s\n' "$actual" | wc -l) symbols, as in tests/exports.txt"
else
  echo "not ok 1 - exports differ from tests/exports.txt"
  printf '%s\n' "$diff_out" | sed 's/^/# /'
fi
