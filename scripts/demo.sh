#!/bin/sh
# demo.sh - the main job: build libmimalloc-prof, profile a real program from Debian with the
# mimalloc-prof command, and print its top allocation sites.
# Usage: scripts/demo.sh [PROGRAM ARGS...]
#   default: Debian's python3 (PYTHONMALLOC=malloc, so Python's objects come from malloc) running
#   bench/py_workload.py.  The profile is left in ./mimalloc-prof-demo.pb.gz.
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
[ $# -gt 0 ] || set -- env PYTHONMALLOC=malloc /usr/bin/python3 "$top/bench/py_workload.py"
cd "$here"                           # the program runs where the user started the script
out=$here/mimalloc-prof-demo.pb.gz
echo "running: mimalloc-prof run -o $out -- $*"
status=0
"$tool" run -o "$out" -- "$@" || status=$?
echo
"$tool" top -n 15 "$out"
exit $status
