#!/bin/sh
# libfuzzer.sh TARGET [BUILD_DIR] [LIBFUZZER_OPTION...] - a long run of one fuzz target (tests/fuzz/target.c)
# under libFuzzer, for developers: builds it with clang -fsanitize=fuzzer,address,undefined from the
# command's sources (and the generated ones of BUILD_DIR, a configured and built tree; default
# _build/pprof) into BUILD_DIR/tests/fuzz/libfuzzer-TARGET, then runs it on a working copy of the seed
# corpus (BUILD_DIR/tests/fuzz/libfuzzer-corpus/TARGET, kept between runs: libFuzzer adds the inputs that
# reach new code) with the options given, by default -max_total_time=600.  What it finds is written to
# BUILD_DIR/tests/fuzz/libfuzzer-crash-TARGET-*; replay one with `fuzz_TARGET -n 0 FILE` (the driver of
# make check) or the libFuzzer binary itself.  Needs clang and libclang-rt-14-dev (Debian 12), or any
# clang with its compiler-rt, and the command's own build dependencies.  See tests/fuzz/README.md.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: tests/fuzz/libfuzzer.sh TARGET [BUILD_DIR] [LIBFUZZER_OPTION...]" >&2
  exit 2
fi
target=$1
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/_build/pprof
if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then build=$(cd "$1" && pwd); shift; fi
case $target in
  decode | diff | flame | folded | merge | symbolize | timeline | top | tree) ;;
  *) echo "libfuzzer.sh: unknown target '$target'" \
          "(decode, diff, flame, folded, merge, symbolize, timeline, top, tree)" >&2
     exit 2 ;;
esac
if [ ! -f "$build/config.h" ] || [ ! -f "$build/proto/profile.pb-c.c" ] ||
   [ ! -f "$build/tools/flame_js.h" ]; then
  echo "libfuzzer.sh: $build is not a built tree (run make there first)" >&2
  exit 2
fi
CC=${CC:-clang}
CXX=${CXX:-clang++}
out=$build/tests/fuzz
mkdir -p "$out/libfuzzer-obj-$target" "$out/libfuzzer-corpus/$target"
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
inc="-I$build -I$build/proto -I$build/tools -I$top/tools -I$top/lib -I$top/proto -I$top/include \
  $(pkg-config --cflags libprotobuf-c zlib libdw libdebuginfod)"
objs=
for src in lib/ctldir.c lib/options.c lib/warn.c tools/calltree.c tools/cli.c tools/client.c tools/diff.c \
           tools/dwarf.c tools/escape.c tools/flame.c tools/folded.c tools/labels.c tools/merge.c \
           tools/outfile.c tools/pbuild.c tools/peak.c tools/profile.c tools/symbolize.c tools/timeline.c \
           tools/timeline_svg.c tools/top.c tools/tree.c tools/view.c \
           "$build/proto/profile.pb-c.c" tests/fuzz/target.c; do
  case $src in /*) path=$src ;; *) path=$top/$src ;; esac
  obj=$out/libfuzzer-obj-$target/$(basename "$src" .c).o
  # shellcheck disable=SC2086
  $CC $flags $inc -DMPROF_FUZZ_TARGET="\"$target\"" -c "$path" -o "$obj"
  objs="$objs $obj"
done
# shellcheck disable=SC2086
$CXX $flags $inc -c "$top/tools/demangle.cc" -o "$out/libfuzzer-obj-$target/demangle.o"
# shellcheck disable=SC2046,SC2086
$CXX -fsanitize=fuzzer,address,undefined -o "$out/libfuzzer-$target" $objs \
  "$out/libfuzzer-obj-$target/demangle.o" $(pkg-config --libs libprotobuf-c zlib libdw libdebuginfod) -liberty
cp -n "$top/tests/fuzz/corpus/$target"/* "$out/libfuzzer-corpus/$target/" 2>/dev/null || true
[ $# -gt 0 ] || set -- -max_total_time=600
cd "$out"
exec "./libfuzzer-$target" -artifact_prefix="libfuzzer-crash-$target-" -max_len=65536 -close_fd_mask=3 \
  -rss_limit_mb=2048 -malloc_limit_mb=200 -timeout=30 "$@" "libfuzzer-corpus/$target"
