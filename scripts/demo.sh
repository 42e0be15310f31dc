#!/bin/sh
# demo.sh - the main job: build libmimalloc-prof, profile real programs with the mimalloc-prof command,
# and print what they allocate, named (symbolized with elfutils; python3.11-dbg gives python3's names).
# Usage: scripts/demo.sh [PROGRAM ARGS...]
#   default: Debian's python3 (PYTHONMALLOC=malloc, so Python's objects come from malloc) running
#   bench/py_workload.py, then the bundled C++ example (examples/cxx_demo.cc).  The profiles are left in
#   ./mimalloc-prof-demo.pb.gz (and ./mimalloc-prof-cxx.pb.gz), with flame graphs beside them (.svg) and
#   python3's heap over time (./mimalloc-prof-demo-time.svg).
set -eu
here=$(pwd)
cd "$(dirname "$0")/.."
top=$(pwd)
scripts/install-deps.sh
[ -x configure ] || autoreconf -fi >/dev/null 2>&1
mkdir -p _build/demo
cd _build/demo
[ -f Makefile ] || "$top/configure" >configure.log 2>&1 || { cat configure.log; exit 1; }
make -j2 >build.log 2>&1 || { tail -n 30 build.log; exit 1; }
tool=$(pwd)/tools/mimalloc-prof
cxx=$(pwd)/examples/cxx_demo
cd "$here"                           # the programs run where the user started the script

profile() {   # profile OUT -- PROGRAM ARGS...: run, then the top sites (allocated) and a flame graph
  out=$1; shift 2
  echo "running: mimalloc-prof run --lifetimes -o $out -- $*"
  "$tool" run --lifetimes -o "$out" -- "$@" || status=$?
  echo
  "$tool" top -n 15 -s alloc_space --fold-alloc "$out"
  "$tool" flame -s alloc_space -o "${out%.pb.gz}.svg" "$out"
  echo "flame graph: ${out%.pb.gz}.svg"
  echo
}

status=0
if [ $# -gt 0 ]; then
  profile "$here/mimalloc-prof-demo.pb.gz" -- "$@"
else
  profile "$here/mimalloc-prof-demo.pb.gz" -- env PYTHONMALLOC=malloc /usr/bin/python3 "$top/bench/py_workload.py"
  # The heap over time: its peak, the sites at the peak, the allocations that lived less than 1 ms.
  "$tool" timeline -n 3 "$here/mimalloc-prof-demo.pb.gz"
  "$tool" timeline -o "$here/mimalloc-prof-demo-time.svg" "$here/mimalloc-prof-demo.pb.gz"
  echo "heap over time: $here/mimalloc-prof-demo-time.svg"
  echo
  "$tool" top -n 5 --temporary --fold-alloc "$here/mimalloc-prof-demo.pb.gz"
  echo
  profile "$here/mimalloc-prof-cxx.pb.gz" -- "$cxx"
  "$tool" tree -n 2 --min 5 --fold-alloc "$here/mimalloc-prof-cxx.pb.gz"
fi
exit $status
