#!/bin/sh
# build.sh - builds libmimalloc-prof for bench/'s scripts, out of tree, and prints the absolute path of
# its libmimalloc-prof.so.0 on stdout (progress and errors go to stderr).
#
# Usage: bench/build.sh [DIR [CONFIGURE-ARGS...]]
#   DIR: build directory, absolute or relative to the top of the source tree (default _build/bench); configured once
#   with CONFIGURE-ARGS (a directory that has a Makefile is only re-made: use a new DIR for new args).
# Runs autoreconf first when there is no configure script (a fresh clone).
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
dir=${1:-_build/bench}
[ $# -eq 0 ] || shift
if [ -f config.status ]; then
  echo "build.sh: the source tree is configured in place; out-of-tree builds need 'make distclean' first" >&2
  exit 1
fi
if [ ! -x configure ]; then
  autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi >&2; exit 1; }
fi
case $dir in /*) ;; *) dir=$top/$dir ;; esac
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ]; then
  "$top/configure" "$@" >configure.log 2>&1 || { tail -n 30 configure.log >&2; exit 1; }
fi
make -j"$(nproc)" >build.log 2>&1 || { tail -n 30 build.log >&2; exit 1; }
lib=$dir/lib/.libs/libmimalloc-prof.so.0
[ -f "$lib" ] || { echo "build.sh: no $lib after the build" >&2; exit 1; }
echo "$lib"
