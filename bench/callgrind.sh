#!/bin/sh
# callgrind.sh - instruction counts of libmimalloc-prof against plain mimalloc, on the same binaries.
#
# For each workload it runs, interleaved and REPS times:
#   base     LD_PRELOAD=libmimalloc.so.2        (Debian's mimalloc alone)
#   stopped  LD_PRELOAD=libmimalloc-prof.so.0   (profiling compiled in, not running)
#   running  the same with MIMALLOC_PROF=1      (sampling at MIMALLOC_PROF_SAMPLE_RATE, default 524288)
# The loop runs twice: through malloc/free, and through mimalloc's own mi_malloc/mi_free (which this
# library exports too: their stopped cost per call must not exceed malloc's).
# and prints the median instruction count (valgrind --tool=callgrind, whole process) and the ratio to
# base.  PYTHONMALLOC=malloc is set for every run (it only affects python3).  Instruction counts are repeatable, so REPS=1 is enough; seeds are fixed for the same reason.
#
# Usage: bench/callgrind.sh [LIB]   (LIB: path to libmimalloc-prof.so.0; default: builds _build/bench)
# Environment: REPS (default 1), LOOP_N (malloc_loop iterations, default 2000000), PYTHON (default
# /usr/bin/python3: the real interpreter, not a wrapper script such as a pyenv shim).
set -eu
cd "$(dirname "$0")/.."
reps=${REPS:-1}
loop_n=${LOOP_N:-2000000}
python=${PYTHON:-/usr/bin/python3}
# The native architecture's copy: cross-testing installs other architectures' (i386, arm64) beside it.
base_lib=/usr/lib/$(cc -print-multiarch)/libmimalloc.so.2
[ -f "$base_lib" ] || base_lib=
[ -n "$base_lib" ] || { echo "libmimalloc.so.2 not found (apt-get install libmimalloc2.0)"; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)"; exit 1; }

lib=${1:-}
[ -n "$lib" ] || lib=$(bench/build.sh _build/bench)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -fno-builtin -o "$tmp/malloc_loop" bench/malloc_loop.c
cc -O2 -fno-builtin -DMI_API -o "$tmp/mi_malloc_loop" bench/malloc_loop.c -lmimalloc

# count NAME PRELOAD [VAR=VALUE...] -- CMD...: prints the instruction count of one run
count() {
  name=$1; preload=$2; shift 2
  vars=
  while [ "$1" != "--" ]; do vars="$vars $1"; shift; done
  shift
  out="$tmp/cg.out"
  # shellcheck disable=SC2086  # $vars is a list of assignments
  env $vars LD_PRELOAD="$preload" MIMALLOC_PROF_SEED=1 PYTHONHASHSEED=0 PYTHONMALLOC=malloc \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>"$tmp/vg.err" \
    || { cat "$tmp/vg.err"; exit 1; }
  n=$(sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$tmp/vg.err")
  [ -n "$n" ] || { echo "no instruction count for $name: $*" >&2; cat "$tmp/vg.err" >&2; exit 1; }
  echo "$n"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run_workload() {   # run_workload LABEL CMD...
  label=$1; shift
  : >"$tmp/base"; : >"$tmp/stopped"; : >"$tmp/running"
  r=0
  while [ $r -lt "$reps" ]; do
    count base "$base_lib" X=1 -- "$@" >>"$tmp/base"
    count stopped "$lib" X=1 -- "$@" >>"$tmp/stopped"
    count running "$lib" MIMALLOC_PROF=1 -- "$@" >>"$tmp/running"
    r=$((r + 1))
  done
  b=$(median <"$tmp/base"); s=$(median <"$tmp/stopped"); u=$(median <"$tmp/running")
  awk -v l="$label" -v b="$b" -v s="$s" -v u="$u" 'BEGIN {
    printf "%-28s %15d %15d %15d   %.4f   %.4f\n", l, b, s, u, s / b, u / b }'
}

echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "library: $lib"
echo "base:    $base_lib"
printf "%-28s %15s %15s %15s   %6s   %6s\n" workload base stopped running stopped running
run_workload "malloc_loop 16-256B x$loop_n" "$tmp/malloc_loop" "$loop_n"
run_workload "mi_malloc_loop (mi_malloc/mi_free)" "$tmp/mi_malloc_loop" "$loop_n"
run_workload "python3 json script" "$python" bench/py_workload.py
run_workload "python3 startup" "$python" -c pass
run_workload "python3 imports" "$python" -c 'import email, json, http.client, argparse, decimal, xml.dom.minidom, unittest'
run_workload "python3 sum(range(10**6))" "$python" -c 'print(sum(range(10**6)))'
