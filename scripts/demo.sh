#!/bin/sh
# demo.sh - the main job: build the library and run a program with it preloaded, sampling
# (MIMALLOC_PROF=1; set MIMALLOC_PROF_SAMPLE_RATE to change the rate).
# Usage: scripts/demo.sh [COMMAND ARGS...]   (default: the bundled examples/alloc_demo, 2000000 operations)
set -eu
here=$(pwd)
cd "$(dirname "$0")/.."
top=$(pwd)
scripts/install-deps.sh
[ -x configure ] || autoreconf -fi >/dev/null 2>&1
mkdir -p _build/demo
cd _build/demo
[ -f Makefile ] || "$top/configure" >configure.log 2>&1 || { cat configure.log; exit 1; }
make -j2 >/dev/null
make examples/alloc_demo >/dev/null
lib=$(pwd)/lib/.libs/libmimalloc-prof.so.0
[ $# -gt 0 ] || set -- "$(pwd)/examples/alloc_demo" 2000000
cd "$here"                           # the command runs where the user started the script
echo "running: MIMALLOC_PROF=1 LD_PRELOAD=$lib $*"
MIMALLOC_PROF=1 LD_PRELOAD=$lib "$@"
