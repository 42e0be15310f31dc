#!/bin/sh
# unwind_cost.sh - what each stack unwinder costs, in instructions (callgrind: repeatable on a shared
# machine), on the three measures the table unwinder is held to:
#
#   1. sampling / stopped: bench/run.sh's workloads (its callgrind sizes; the C ones built with frame
#      pointers, as run.sh builds them; python3, sqlite3 and perl are Debian's, without) under
#      LD_PRELOAD=LIB at MIMALLOC_PROF_SAMPLE_RATE=524288, seed 1: stopped, then sampling with each
#      unwinder; the ratio per workload and the geometric means over all of them and over the C ones;
#   2. own work per sample: bench/sample_cost (callgrind mode: one batch of N samples, each allocation
#      sampled, minus the same batch stopped, divided by the samples) at depths 8 and 32, built with frame
#      pointers for fp and without them for the others (the programs the table unwinder is for);
#   3. starting a session: /bin/true and `python3 -c pass` whole, MIMALLOC_PROF=1 (a session from the
#      constructor to exit) per unwinder against MIMALLOC_PROF=0.
#
# Usage: bench/unwind_cost.sh [LIB]   (LIB: libmimalloc-prof.so.0; default: builds _build/bench)
# Environment: UNWINDERS (default "fp table libunwind"), JOBS (callgrind runs at a time, default the cores),
# N (sample_cost's samples per batch, default 3000: bench/harness.py's), PARTS (default "1 2 3"), OUT
# (raw callgrind logs; default a temporary directory, removed).
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
unwinders=${UNWINDERS:-fp table libunwind}
jobs=${JOBS:-$(nproc)}
n=${N:-3000}
parts=${PARTS:-1 2 3}
python=/usr/bin/python3

lib=${1:-}
[ -n "$lib" ] || lib=$(bench/build.sh _build/bench)
case $lib in /*) ;; *) lib=$top/$lib ;; esac
[ -f "$lib" ] || { echo "no library at $lib" >&2; exit 1; }
libdir=$(dirname "$lib")
if [ -n "${OUT:-}" ]; then out=$OUT; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
bin=$out/bin
mkdir -p "$bin"

fpflags="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
for w in malloc_loop mixed_live xthread realloc_heavy aligned thread_churn stdio_lines thread_short \
         rptest_like mstress_like xmalloc_like; do
  # shellcheck disable=SC2086  # $fpflags is a list of flags
  cc -O2 -fno-builtin $fpflags -Wall -pthread -o "$bin/$w" "bench/$w.c"
done
# shellcheck disable=SC2086
cc -O2 -fno-builtin $fpflags -fno-optimize-sibling-calls -Iinclude -o "$bin/sample_cost_fp" \
  bench/sample_cost.c "$lib" -Wl,-rpath,"$libdir"
cc -O2 -fno-builtin -fomit-frame-pointer -fno-optimize-sibling-calls -Iinclude -o "$bin/sample_cost_nofp" \
  bench/sample_cost.c "$lib" -Wl,-rpath,"$libdir"
"$bin/stdio_lines" gen "$bin/lines.txt" 100000

# The jobs: NAME<TAB>ENV...<TAB>COMMAND... lines; each runs once under callgrind, its count in $out/NAME.n.
jobfile=$out/jobs
: >"$jobfile"
job() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$jobfile"; }
base="PATH=/usr/bin:/bin LC_ALL=C PYTHONMALLOC=malloc PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
      PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 MIMALLOC_PROF_SAMPLE_RATE=524288 MIMALLOC_PROF_SEED=1
      LD_PRELOAD=$lib"
base=$(echo $base)
workloads="malloc_loop mixed_live xthread realloc_heavy aligned thread_churn stdio_lines thread_short
           rptest_like mstress_like xmalloc_like python3 sqlite3 perl"
cmd_of() {
  case $1 in
    malloc_loop) echo "$bin/malloc_loop 2000000" ;;
    mixed_live) echo "$bin/mixed_live 1000000" ;;
    xthread) echo "$bin/xthread 1000000" ;;
    realloc_heavy) echo "$bin/realloc_heavy 1000000" ;;
    aligned) echo "$bin/aligned 500000" ;;
    thread_churn) echo "$bin/thread_churn 400" ;;
    stdio_lines) echo "$bin/stdio_lines $bin/lines.txt 100000" ;;
    thread_short) echo "$bin/thread_short 500" ;;
    rptest_like) echo "$bin/rptest_like 1000000" ;;
    mstress_like) echo "$bin/mstress_like 4" ;;
    xmalloc_like) echo "$bin/xmalloc_like 500000" ;;
    python3) echo "$python $top/bench/py_workload.py 0.5" ;;
    sqlite3)
      echo "/usr/bin/sqlite3 -batch -cmd .parameter\\ set\\ @n\\ 15000 :memory:" \
        ".read\\ $top/bench/sqlite_workload.sql" ;;
    perl) echo "/usr/bin/perl $top/bench/pl_workload.pl 0.35" ;;
  esac
}
case " $parts " in *" 1 "*)
  for w in $workloads; do
    job "w.$w.stopped" "$base MIMALLOC_PROF=0" "$(cmd_of "$w")"
    for u in $unwinders; do
      job "w.$w.$u" "$base MIMALLOC_PROF=1 MIMALLOC_PROF_UNWIND=$u" "$(cmd_of "$w")"
    done
  done ;;
esac
case " $parts " in *" 2 "*)
  for d in 8 32; do
    for u in $unwinders; do
      prog=$bin/sample_cost_nofp
      [ "$u" = fp ] && prog=$bin/sample_cost_fp
      for mode in on off; do
        job "c.$u.$d.$mode" "MIMALLOC_PROF_UNWIND=$u CG_ARGS=--collect-atstart=no" \
          "$prog callgrind $mode $n $d"
      done
    done
  done ;;
esac
case " $parts " in *" 3 "*)
  for p in true python; do
    c=/bin/true
    [ $p = python ] && c="$python -c pass"
    job "s.$p.stopped" "MIMALLOC_PROF=0 MIMALLOC_PROF_SEED=1 LD_PRELOAD=$lib" "$c"
    for u in $unwinders; do
      job "s.$p.$u" "MIMALLOC_PROF=1 MIMALLOC_PROF_SEED=1 MIMALLOC_PROF_UNWIND=$u LD_PRELOAD=$lib" "$c"
    done
  done ;;
esac

# run_job LINE: callgrind on the command with its environment; the count (and sample_cost's output) saved
run_job() {
  name=$(printf '%s' "$1" | cut -f1); envs=$(printf '%s' "$1" | cut -f2); cmd=$(printf '%s' "$1" | cut -f3)
  cg=
  case $envs in *CG_ARGS=*) cg=--collect-atstart=no ;; esac
  # shellcheck disable=SC2086  # lists of assignments and words
  eval "env $envs valgrind --tool=callgrind $cg --callgrind-out-file=/dev/null $cmd" \
    >"$out/$name.out" 2>"$out/$name.err" || true
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/$name.err" >"$out/$name.n"
}
export out
total=$(wc -l <"$jobfile")
echo "unwind_cost: $total callgrind runs, $jobs at a time (library $lib)"
i=0
while IFS= read -r line; do
  run_job "$line" &
  i=$((i + 1))
  [ $((i % jobs)) -ne 0 ] || wait
done <"$jobfile"
wait

val() { cat "$out/$1.n" 2>/dev/null || echo 0; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(uname -m), $(nproc) cores, $cpu"
case " $parts " in *" 1 "*)
  echo
  echo "1. instructions, sampling at 524288 / stopped (whole process; geomean over the workloads)"
  printf "%-14s %14s" workload stopped
  for u in $unwinders; do printf " %10s" "$u"; done
  echo
  for w in $workloads; do
    s=$(val "w.$w.stopped")
    printf "%-14s %14d" "$w" "$s"
    for u in $unwinders; do
      awk -v a="$(val "w.$w.$u")" -v b="$s" 'BEGIN { printf " %10.5f", b ? a / b : 0 }'
    done
    echo
  done | tee "$out/part1.txt"
  for set in all C; do
    printf "%-14s %14s" "geomean $set" ""
    for u in $unwinders; do
      col=$(( $(echo "$unwinders" | tr ' ' '\n' | grep -n -x "$u" | cut -d: -f1) + 2 ))
      awk -v c="$col" -v set="$set" '($1 != "python3" && $1 != "sqlite3" && $1 != "perl") || set == "all" {
        if ($c > 0) { s += log($c); k++ } } END { printf " %10.5f", k ? exp(s / k) : 0 }' "$out/part1.txt"
    done
    echo
  done ;;
esac
case " $parts " in *" 2 "*)
  echo
  echo "2. own work per sample, bench/sample_cost, $n samples a batch (fp: built with frame pointers;" \
    "others: without)"
  for d in 8 32; do
    for u in $unwinders; do
      on=$(val "c.$u.$d.on"); off=$(val "c.$u.$d.off")
      smp=$(sed -n 's/.*samples=\([0-9]*\).*/\1/p' "$out/c.$u.$d.on.out")
      frames=$(sed -n 's/.*frames=\([0-9]*\).*/\1/p' "$out/c.$u.$d.on.out")
      awk -v u="$u" -v d="$d" -v on="$on" -v off="$off" -v s="$smp" -v f="$frames" \
        'BEGIN { printf "depth %2d %-10s frames %2d  %8.0f instructions per sample\n", d, u, f,
                 s ? (on - off) / s : 0 }'
    done
  done ;;
esac
case " $parts " in *" 3 "*)
  echo
  echo "3. starting a session: the whole process, MIMALLOC_PROF=1 minus MIMALLOC_PROF=0 (seed 1)"
  for p in true python; do
    s=$(val "s.$p.stopped")
    for u in $unwinders; do
      awk -v p="$p" -v u="$u" -v a="$(val "s.$p.$u")" -v b="$s" \
        'BEGIN { printf "%-7s %-10s %12d instructions, %+10d over stopped\n", p, u, a, a - b }'
    done
  done ;;
esac
