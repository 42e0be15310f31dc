#!/bin/sh
# sleeps.sh - where a program's threads sleep: voluntary context switches (a thread that leaves its CPU
# waiting: a lock, the kernel's address-space lock, I/O) counted by the frames they sleep in.
#
# Usage: bench/sleeps.sh RUNS PROGRAM [ARGS...]   (the environment, LD_PRELOAD included, is the program's)
# Runs PROGRAM RUNS times under `perf record -e sched:sched_switch --call-graph dwarf` (root, or
# perf_event_paranoid <= 1; Debian's linux-perf) and prints each distinct innermost stack (DEPTH frames,
# default 6, the wait's own glibc and kernel frames left out) with how often threads slept in it, over
# all runs, most often first; a sched_yield that gave the CPU away counts as a sleep.  Waits in
# pthread_join and on condition variables (glibc's timed futex wait) are left out: the program's own, or
# a thread with nothing to do.  A sleep hands the CPU to another thread, which is what lifts a threaded
# program's peak (doc/performance.md, issue 24).
set -eu
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
runs=$1
shift
data=$(mktemp)
trap 'rm -f "$data"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
  perf record -q -o "$data" -e sched:sched_switch --call-graph dwarf,8192 -- "$@" >/dev/null 2>&1
  perf script -i "$data" 2>/dev/null | awk -v depth="${DEPTH:-6}" '
    function flush() { if (key != "" && (slept || key ~ /sched_yield/)) print key; key = "" }
    /sched:sched_switch/ { flush(); slept = ($0 ~ /prev_state=[SD]/); n = 0; next }
    NF >= 2 && $1 !~ /^ffffffff/ {
      f = $2; sub(/\+0x[0-9a-f]+$/, "", f)
      if (f ~ /^(futex_wait|__GI___lll_lock_wait|lll_mutex_lock_optimized|___pthread_mutex_lock)$/) next
      if (n < depth) { key = key " " f; n++ }
    }
    END { flush() }'
  i=$((i + 1))
done | grep -v -e pthread_join -e __pthread_clockjoin -e __futex_abstimed_wait | sort | uniq -c | sort -rn
