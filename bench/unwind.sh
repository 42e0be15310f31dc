#!/bin/sh
# unwind.sh - depth reached and cost per sample of each stack unwinder (MIMALLOC_PROF_UNWIND).
#
# Two workloads: deep_calls (bench/deep_calls.c, built here with frame pointers: malloc/free from the
# bottom of a chain of 20 of its own frames) and Debian's python3 running bench/py_workload.py with
# PYTHONMALLOC=malloc (no frame pointers in the interpreter or libc).  Each runs, interleaved and
# ROUNDS times (the order of the configurations rotates every round), under
#   stopped    LD_PRELOAD=libmimalloc-prof.so.0, MIMALLOC_PROF=0 (not sampling)
#   fp, table, libunwind, libgcc
#              MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=<it>, sampling every RATE bytes on average (table: where
#              the library has it, x86-64 and aarch64)
# with bench/unwind_report.c preloaded after the library: it times the run in-process (from its
# constructor to its destructor: no exec or dynamic loading), then reads mi_prof_stats and walks every
# stack with mi_prof_visit (MIMALLOC_PROF_ACCUM=1, so stacks whose blocks were all freed count too).
#
# Columns: samples (median over rounds; seeds are fixed, so each run takes the same samples); the
# depth (frames per stack) weighted per sample (estimated from each stack's counters, see
# unwind_report.c; est/smp is how close the weights add up to the true sample count): its median
# dMed and mean dMean; dStk the (lower) median over distinct stacks; maxD the deepest stack; at_cap
# the share of samples cut off at MIMALLOC_PROF_BT_MAX; the median wall time, its interquartile range
# (iqr) and its ratio to stopped; the cost per sample = (median time of the unwinder - median time
# stopped) / samples, from wall time (ns/smp) and from process CPU time (cpu_ns/smp).  The cost is the
# whole sampling path (unwinding, stack interning, the sampled-block heap, the record, and freeing the
# sampled block later), not the unwinder alone: there is no unwinder-less sampling mode to subtract.
#
# Usage: bench/unwind.sh [LIB]   (LIB: path to libmimalloc-prof.so.0; default: builds _build/bench)
# Environment: ROUNDS (default 21), RATE (MIMALLOC_PROF_SAMPLE_RATE, default 4096), BT_MAX
# (MIMALLOC_PROF_BT_MAX, default 64), LOOP_N (deep_calls iterations, default 3000000), PYTHON (default
# /usr/bin/python3: the real interpreter, not a wrapper script such as a pyenv shim).
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
rounds=${ROUNDS:-21}
rate=${RATE:-4096}
bt_max=${BT_MAX:-64}
loop_n=${LOOP_N:-3000000}
python=${PYTHON:-/usr/bin/python3}

lib=${1:-}
[ -n "$lib" ] || lib=$(bench/build.sh _build/bench)
case $lib in /*) ;; *) lib=$top/$lib ;; esac
[ -f "$lib" ] || { echo "no library at $lib" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -fno-builtin -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-optimize-sibling-calls \
  -o "$tmp/deep_calls" bench/deep_calls.c
cc -O2 -fPIC -shared -Iinclude -o "$tmp/unwind_report.so" bench/unwind_report.c -ldl -lm

# Which unwinders this build has: a build without libunwind (or a platform without the table unwinder)
# says so once and uses another.
unwinders="fp"
if ! MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=table LD_PRELOAD="$lib" "$tmp/deep_calls" 1000 2>&1 >/dev/null |
   grep -q 'MIMALLOC_PROF_UNWIND=table'; then
  unwinders="$unwinders table"
else
  echo "note: no table unwinder on this platform; skipping it"
fi
if MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=libunwind LD_PRELOAD="$lib" "$tmp/deep_calls" 1000 2>&1 >/dev/null |
   grep -q 'no libunwind'; then
  echo "note: this build has no libunwind; skipping it"
else
  unwinders="$unwinders libunwind"
fi
unwinders="$unwinders libgcc"
configs="stopped $unwinders"

# run WORKLOAD CONFIG: one run, its report line appended to $tmp/WORKLOAD.CONFIG
run() {
  wl=$1; cfg=$2
  case $cfg in
    stopped) prof="MIMALLOC_PROF=0" ;;
    *) prof="MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=$cfg" ;;
  esac
  case $wl in
    deep) set -- "$tmp/deep_calls" "$loop_n" ;;
    python) set -- "$python" bench/py_workload.py ;;
  esac
  # shellcheck disable=SC2086  # $prof is a list of assignments
  env $prof MIMALLOC_PROF_SAMPLE_RATE="$rate" MIMALLOC_PROF_BT_MAX="$bt_max" MIMALLOC_PROF_ACCUM=1 \
    MIMALLOC_PROF_SEED=1 PYTHONHASHSEED=0 PYTHONMALLOC=malloc UNWIND_REPORT_OUT="$tmp/$wl.$cfg" \
    LD_PRELOAD="$lib $tmp/unwind_report.so" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
}

# rotate N WORDS...: the words, starting with the (N mod count)th
rotate() {
  n=$1; shift
  k=$((n % $#))
  while [ "$k" -gt 0 ]; do first=$1; shift; set -- "$@" "$first"; k=$((k - 1)); done
  echo "$@"
}

r=0
while [ "$r" -lt "$rounds" ]; do
  for wl in deep python; do
    # shellcheck disable=SC2086  # $configs is a list of words
    for cfg in $(rotate "$r" $configs); do run "$wl" "$cfg"; done
  done
  r=$((r + 1))
done

# field FILE KEY [Q]: the median (or the Q-quantile, lower) of KEY=value over the lines of FILE
field() {
  sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1" | sort -g |
    awk -v q="${3:-0.5}" '{ v[NR] = $1 } END { i = int(q * (NR - 1)) + 1; print v[i] }'
}

echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "library: $lib"
echo "rounds $rounds, MIMALLOC_PROF_SAMPLE_RATE=$rate, MIMALLOC_PROF_BT_MAX=$bt_max, deep_calls $loop_n iterations," \
  "python: $python bench/py_workload.py"
echo "depth: frames per stack; per sample = weighted by each stack's estimated sample count; times: medians"
printf "%-10s %-9s %7s %7s %5s %5s %5s %5s %6s %8s %6s %6s %7s %10s\n" workload unwinder samples \
  est/smp dMed dMean dStk maxD at_cap wall_ms iqr ratio ns/smp cpu_ns/smp
for wl in deep python; do
  sw=$(field "$tmp/$wl.stopped" wall_ns); sc=$(field "$tmp/$wl.stopped" cpu_ns)
  for cfg in $configs; do
    f=$tmp/$wl.$cfg
    awk -v wl="$wl" -v cfg="$cfg" -v sw="$sw" -v sc="$sc" -v w="$(field "$f" wall_ns)" \
        -v c="$(field "$f" cpu_ns)" -v n="$(field "$f" samples)" -v est="$(field "$f" est_samples)" \
        -v dm="$(field "$f" med_sample)" -v da="$(field "$f" mean_sample)" -v ds="$(field "$f" med_stack)" \
        -v mx="$(field "$f" max)" -v cap="$(field "$f" at_cap)" \
        -v q1="$(field "$f" wall_ns 0.25)" -v q3="$(field "$f" wall_ns 0.75)" 'BEGIN {
      if (n > 0)
        printf "%-10s %-9s %7d %7.2f %5d %5.1f %5d %5d %6.3f %8.1f %6.1f %6.3f %7.0f %10.0f\n", wl, cfg, n,
               est / n, dm, da, ds, mx, cap, w / 1e6, (q3 - q1) / 1e6, w / sw, (w - sw) / n, (c - sc) / n
      else
        printf "%-10s %-9s %7d %7s %5s %5s %5s %5s %6s %8.1f %6.1f %6.3f %7s %10s\n", wl, cfg, n, "-", "-",
               "-", "-", "-", "-", w / 1e6, (q3 - q1) / 1e6, w / sw, "-", "-"
    }'
  done
done
