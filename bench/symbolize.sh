#!/bin/sh
# symbolize.sh - times `mimalloc-prof symbolize` on a profile of 100,000 distinct locations spread over
# Debian's python3.11 (with python3.11-dbg: DWARF of an LTO build, the heavy case), and prints the CPU
# time (user + system, less sensitive than wall time to other load on the machine) and the wall time.
# Usage: sh bench/symbolize.sh [BUILD_DIR] [N]   (BUILD_DIR: a configured, built tree; default _build/dev)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/_build/dev}" && pwd)
n=${2:-100000}
elf=/usr/bin/python3.11
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$build" -I"$build/proto" -I"$top/tools" -I"$top/proto" -I"$top/include" -o "$tmp/synth" \
  "$top/bench/synth_profile.c" "$top/tools/profile.c" "$top/tools/pbuild.c" "$top/tools/outfile.c" \
  "$build/proto/profile.pb-c.c" \
  -lprotobuf-c -lz
id=$(readelf -nW "$elf" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
# The executable PT_LOAD: offset, vaddr, memsz.
set -- $(readelf -lW "$elf" | awk '$1 == "LOAD" && / R?W?E / { print $2, $3, $6; exit }')
"$tmp/synth" "$elf" "$id" "$1" "$2" "$3" "$n" "$tmp/p.pb.gz"
/usr/bin/time -f "symbolize: %U s user, %S s system, %e s wall, %M KiB max RSS" \
  "$build/tools/mimalloc-prof" symbolize "$tmp/p.pb.gz"
