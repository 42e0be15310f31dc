#!/bin/sh
# run.sh - the benchmark report of libmimalloc-prof, from a fresh clone of a Debian 12 machine.
#
# Installs what it needs (apt-get, as root or through sudo): the build dependencies
# (scripts/install-deps.sh), valgrind, Debian's jemalloc (libjemalloc2), gperftools' tcmalloc
# (libgoogle-perftools4), sqlite3 and perl.  Builds the library out of tree in _build/bench
# (bench/build.sh), the planted control, and the workloads and microbenchmarks of bench/ into
# _build/bench/bin.  Then bench/harness.py measures every workload under every configuration:
#
#   glibc, mimalloc (LD_PRELOAD=libmimalloc.so.2), stopped (ours, not sampling), aa (the same again: an
#   A/A control), fp / libunwind / libgcc (ours sampling at 524288 with that MIMALLOC_PROF_UNWIND),
#   plant (ours stopped with a deliberate extra cost: the planted control the report must flag),
#   jemalloc and jemalloc-prof (MALLOC_CONF=prof:true,lg_prof_sample:19), tcmalloc and
#   tcmalloc-sample (TCMALLOC_SAMPLE_PARAMETER=524288)
#
# on the workloads malloc_loop, mixed_live, xthread, realloc_heavy, aligned, thread_churn, stdio_lines,
# thread_short, rptest_like, mstress_like, xmalloc_like (bench/*.c) and python3, sqlite3, perl (Debian's
# programs on bench/py_workload.py, sqlite_workload.sql, pl_workload.pl): instructions (callgrind), wall
# and CPU time and peak RSS (interleaved rounds), samples and memory per run (bench/stats_report.c), the
# acceptance checks (bench/harness_accept.py), and runs the microbenchmarks (cost per sample, dump
# time, profiler memory).  Writes
# OUT/results.json and OUT/results.md and prints the markdown.  See bench/README.md.
#
# Usage: bench/run.sh [LIB]   (LIB: a built libmimalloc-prof.so.0 to measure instead of building one)
# Environment:
#   QUICK=1     about 5.5 minutes (the full run about 37): workloads at a tenth of their size, 3 rounds,
#               shorter microbenchmarks
#   REPS=N      timed rounds (default 12; QUICK: 3)
#   MEM_REPS=N  rounds of peak RSS only: threaded workloads, the memory criteria's configurations
#               (default 30; QUICK: 0)
#   NOISY_MEM_REPS=N  memory rounds in all for a threaded workload whose paired differences over stopped
#               have an SD above 1 MiB (default 150; QUICK: 0)
#   JOBS=N      callgrind runs at a time (default: the number of cores)
#   PLANT=N     nops the planted control adds per call (default 4)
#   WORKLOADS   a subset, e.g. "malloc_loop python3"
#   PHASES      a subset of "callgrind timing samples micro"
#   OUT         report directory (default _build/bench/report)
#   NO_INSTALL=1  do not run apt-get
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
start=$(date +%s)
plant=${PLANT:-4}
out=${OUT:-$top/_build/bench/report}
bin=$top/_build/bench/bin
python=/usr/bin/python3

# --- packages --------------------------------------------------------------------------------------
if [ "${NO_INSTALL:-0}" != 1 ]; then
  scripts/install-deps.sh
  missing=
  for p in valgrind libjemalloc2 libgoogle-perftools4 sqlite3 perl python3 libmimalloc2.0; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
    echo "run.sh: installing$missing"
    # Other installs may hold the dpkg lock (a shared machine, CI): wait for it instead of failing.
    $sudo apt-get -o DPkg::Lock::Timeout=900 update -qq
    # shellcheck disable=SC2086  # $missing is a list of package names
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends \
      $missing >/dev/null
  fi
fi

# --- the library and the planted control -----------------------------------------------------------
lib=${1:-}
if [ -z "$lib" ]; then
  echo "run.sh: building the library in _build/bench"
  lib=$(bench/build.sh _build/bench)
fi
case $lib in /*) ;; *) lib=$top/$lib ;; esac
[ -f "$lib" ] || { echo "run.sh: no library at $lib" >&2; exit 1; }
libdir=$(dirname "$lib")
mkdir -p "$bin"

# With the hook in lib/inline.h (MPROF_BENCH_PLANT: nops in the fast-path helpers) the control is the
# library built with it; without, an LD_PRELOAD shim in front of the library (bench/plant_shim.c).
if grep -q MPROF_BENCH_PLANT lib/inline.h; then
  echo "run.sh: building the planted control in _build/bench-plant$plant (-DMPROF_BENCH_PLANT=$plant)"
  plant_lib=$(bench/build.sh "_build/bench-plant$plant" CPPFLAGS="-DMPROF_BENCH_PLANT=$plant")
  plant_method=build
  plant_preload=$plant_lib
else
  cc -O2 -fno-builtin -fno-plt -fPIC -shared -Wall -DPLANT="$plant" -o "$bin/plant_shim.so" bench/plant_shim.c -ldl
  plant_method=shim
  plant_preload="$bin/plant_shim.so $lib"
fi

# --- workloads and microbenchmarks -----------------------------------------------------------------
# The workloads are built as README.md tells programs to be built for stack traces: with frame pointers.
fpflags="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
for w in malloc_loop mixed_live xthread realloc_heavy aligned thread_churn stdio_lines thread_short rptest_like \
         mstress_like xmalloc_like; do
  # shellcheck disable=SC2086  # $fpflags is a list of flags
  cc -O2 -fno-builtin $fpflags -Wall -pthread -o "$bin/$w" "bench/$w.c"
done
for m in sample_cost prof_scale; do
  # shellcheck disable=SC2086
  cc -O2 -fno-builtin $fpflags -fno-optimize-sibling-calls -Wall -Iinclude -o "$bin/$m" "bench/$m.c" \
    "$lib" -Wl,-rpath,"$libdir"
done
cc -O2 -fPIC -shared -Iinclude -o "$bin/unwind_report.so" bench/unwind_report.c -ldl -lm
cc -O2 -fPIC -shared -Iinclude -o "$bin/stats_report.so" bench/stats_report.c -ldl
cc -O2 -fPIC -shared -o "$bin/empty_object.so" bench/empty_object.c
cc -O2 -fPIC -shared -o "$bin/hwm_probe.so" bench/hwm_probe.c
cc -O2 -fPIC -shared -o "$bin/pause_shim.so" bench/pause_shim.c -ldl -lm   # bench/hwm_rounds.py's controls
# stdio_lines' input: 1,000,000 lines (65 MB; QUICK reads a tenth), the same text every time.
"$bin/stdio_lines" gen "$bin/lines.txt" 1000000
cc -O2 -Wall -o "$bin/runone" bench/runone.c

# libunwind: a build without it falls back to libgcc (and says so); the report notes it.
have_libunwind=1
if MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=libunwind LD_PRELOAD="$lib" "$bin/malloc_loop" 1000 2>&1 >/dev/null |
   grep -q 'no libunwind'; then
  have_libunwind=0
  echo "run.sh: note: this build has no libunwind; the libunwind configuration measures libgcc"
fi
# jemalloc must have been built with profiling, or prof:true is refused ("Invalid conf pair").
je=$(find /usr/lib -name libjemalloc.so.2 | head -n 1)
if MALLOC_CONF=prof:true,lg_prof_sample:19 LD_PRELOAD="$je" "$bin/malloc_loop" 1000 2>&1 >/dev/null | grep -q .; then
  echo "run.sh: $je refuses prof:true (built without --enable-prof?)" >&2
  exit 1
fi

echo "run.sh: built in $(($(date +%s) - start)) s; measuring"
cmd="bench/run.sh"
[ "${QUICK:-0}" = 1 ] && cmd="QUICK=1 $cmd"
exec "$python" bench/harness.py --top "$top" --lib "$lib" --bin "$bin" --out "$out" --plant "$plant" \
  --plant-method "$plant_method" --plant-preload "$plant_preload" --quick "${QUICK:-0}" \
  --rounds "${REPS:-0}" --memory-rounds "${MEM_REPS:--1}" --noisy-memory-rounds "${NOISY_MEM_REPS:--1}" \
  --jobs "${JOBS:-$(nproc)}" --workloads "${WORKLOADS:-}" \
  --phases "${PHASES:-callgrind timing samples micro}" --python "$python" --have-libunwind "$have_libunwind" \
  --command "$cmd"
