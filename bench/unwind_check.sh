#!/bin/sh
# unwind_check.sh - the table unwinder against libunwind, sample by sample, over real programs: every
# sample is unwound by both (MIMALLOC_PROF_UNWIND=table with MIMALLOC_PROF_UNWIND_CHECK=1; the library
# reports at each process's exit how many stacks were identical, frame by frame, and shows the first ones
# that differ with their frames named), and this script adds the reports up.
#
# Programs: Debian's python3 (bench/py_workload.py), perl (bench/pl_workload.pl), sqlite3
# (bench/sqlite_workload.sql), git (log --stat and grep over this repository), g++ compiling a C++ file
# (the cc1plus process is preloaded too), bench/unwind_check_cxx.cc (exceptions through many frames,
# destructors allocating while unwinding, a signal handler allocating; no frame pointers), all under
# LD_PRELOAD=LIB at MIMALLOC_PROF_SAMPLE_RATE (default 4096); then the test suite's probes from a build
# tree (TESTS_BUILD, default _build/pprof; skipped when absent): chains with and without frame pointers,
# threads, signal handlers on the thread's and alternate stacks, makecontext stacks, a library loaded and
# unloaded in a loop, two modules swapped at one address, fork storms.
#
# Usage: bench/unwind_check.sh [LIB]   (LIB: libmimalloc-prof.so.0; default: builds _build/bench)
# Environment: RATE (default 4096), TESTS_BUILD (default _build/pprof), PYTHON (default /usr/bin/python3),
# OUT (the logs; default a temporary directory, removed).  Needs the library built with libunwind.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
rate=${RATE:-4096}
tests_build=${TESTS_BUILD:-_build/pprof}
python=${PYTHON:-/usr/bin/python3}

lib=${1:-}
[ -n "$lib" ] || lib=$(bench/build.sh _build/bench)
case $lib in /*) ;; *) lib=$top/$lib ;; esac
[ -f "$lib" ] || { echo "no library at $lib" >&2; exit 1; }
if [ -n "${OUT:-}" ]; then out=$OUT; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
g++ -O2 -fomit-frame-pointer -o "$out/unwind_check_cxx" bench/unwind_check_cxx.cc -pthread

export MIMALLOC_PROF_UNWIND=table MIMALLOC_PROF_UNWIND_CHECK=1
# run NAME CMD...: CMD with the profiler preloaded and sampling, its stderr (the reports) in $out/NAME.err
run() {
  name=$1; shift
  env MIMALLOC_PROF=1 MIMALLOC_PROF_SAMPLE_RATE="$rate" PYTHONMALLOC=malloc PYTHONHASHSEED=0 \
    LD_PRELOAD="$lib" "$@" >/dev/null 2>"$out/$name.err" || echo "note: $name exited with status $?" >&2
}
# probe NAME CMD...: a test probe (linked with the library it was built with), its own rates
probe() {
  name=$1; shift
  "$@" >/dev/null 2>"$out/$name.err" || echo "note: $name exited with status $?" >&2
}

run python3 "$python" bench/py_workload.py
run perl perl bench/pl_workload.pl
run sqlite3 sh -c "sqlite3 :memory: < bench/sqlite_workload.sql"
run git-log git log --stat -n 2000
run git-grep git grep -n -e malloc -e unwind -- '*.c' '*.h'
run g++ g++ -O2 -std=c++17 -c bench/unwind_check_cxx.cc -o "$out/x.o"
run cxx "$out/unwind_check_cxx" 3000

t=$tests_build/tests
if [ -x "$t/table_probe" ]; then
  probe stack_chain "$t/stack_probe" chain
  probe stack_chain_thread "$t/stack_probe" chain thread
  probe stack_deep "$t/stack_probe" deep 300
  probe stack_own "$t/stack_probe" own 1400
  probe stack_coroutine "$t/stack_probe" coroutine
  probe stack_distinct "$t/stack_probe" distinct 3000 4
  probe stack_dlloop "$t/stack_probe" dlloop "$t/.libs/dl_module.so" 300 256
  probe unwind_hybrid "$t/unwind_probe" hybrid
  probe unwind_altstack "$t/unwind_probe" altstack 16384
  probe unwind_tinystack "$t/unwind_probe" tinystack 8192 4096 2048
  probe table_chain "$t/table_probe" chain
  probe table_signal "$t/table_probe" signal
  probe table_signal_alt "$t/table_probe" signal alt
  probe table_threads "$t/table_probe" threads 16
  probe table_dlmix "$t/table_probe" dlmix "$t/.libs/dl_mix1.so" "$t/.libs/dl_mix2.so" 200
  probe table_odd "$t/table_probe" odd
  TABLE_PROBE_LIBGCC=1 probe table_odd_libgcc "$t/table_probe" odd
  probe fork_storm "$t/fork_probe" forkstorm 20 4096
else
  echo "note: no test probes in $tests_build (TESTS_BUILD): Debian programs only"
fi

echo "library: $lib; MIMALLOC_PROF_SAMPLE_RATE=$rate for the preloaded programs"
echo "samples: compared with libunwind (unchecked: where libunwind's stack need did not fit, the tiny stacks)"
printf "%-20s %9s %9s %7s %7s %7s %7s %9s %9s\n" program samples identical differ shorter longer frame \
  fallback unchecked
for f in "$out"/*.err; do
  name=$(basename "$f" .err)
  # Each process reports two lines; a program that runs others (g++, git, fork children) reports several.
  awk -v name="$name" '
    /unwind check: pid .* samples,/ {
      s += $6; i += $8
      if (match($0, /[0-9]+ unchecked/)) un += substr($0, RSTART, RLENGTH - 10)
      if (match($0, /table shorter [0-9]+/)) sh += substr($0, RSTART + 14, RLENGTH - 14)
      if (match($0, /longer [0-9]+/)) lo += substr($0, RSTART + 7, RLENGTH - 7)
      if (match($0, /a frame differs [0-9]+/)) fr += substr($0, RSTART + 16, RLENGTH - 16)
    }
    /unwind check: walks ended:/ {
      if (match($0, /fallback [0-9]+/)) fb += substr($0, RSTART + 9, RLENGTH - 9)
    }
    END {
      printf "%-20s %9d %9d %7d %7d %7d %7d %9d %9d\n", name, s - un, i, s - un - i, sh, lo, fr, fb, un
    }' "$f"
done | tee "$out/table.txt"
awk '{ s += $2; i += $3 }
     END { printf "%-20s %9d %9d %7d   identical: %.4f%%\n", "all", s, i, s - i, s ? 100 * i / s : 0 }' \
  "$out/table.txt"
echo "the first differing samples of each process, their frames named: $out/*.err"
