#!/bin/sh
# make-corpus.sh HOSTILE - writes the seed corpus of the fuzz targets, tests/fuzz/corpus/TARGET/, with
# HOSTILE (tests/fuzz/hostile, which make check builds): the two typical profiles to mutate from, and
# every hostile profile of the tool_hostile tests that is small (or compresses small), gzip-compressed or
# not (a gzip bomb only for decode: it stops in the reader, whatever the command).  diff and merge take
# two profiles in one input: 4 bytes (little-endian) give the length of the first.  The corpus is in
# git: run this after a change to hostile.c, then commit what changed.
set -eu
hostile=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in typical typical-b repeated-frames deep-stack long-names values ids empty-parts comments time-max \
         time-min order-a order-b mangled; do
  "$hostile" "$k" "$tmp/$k.pb"
done
"$hostile" small-bomb "$tmp/small-bomb.pb.gz"
rm -rf corpus
for t in decode top tree flame folded symbolize timeline; do
  mkdir -p "corpus/$t"
  for k in typical repeated-frames deep-stack values ids time-max mangled; do
    cp "$tmp/$k.pb" "corpus/$t/$k.pb"
  done
  for k in typical long-names empty-parts comments; do gzip -9n <"$tmp/$k.pb" >"corpus/$t/$k.pb.gz"; done
done
cp "$tmp/small-bomb.pb.gz" corpus/decode/          # it stops in the reader, whatever the command
# pair A B NAME: the input of diff and merge that holds A and B.
pair() {
  n=$(wc -c <"$1")
  octal=$(printf '\\%03o\\%03o\\%03o\\%03o' $((n & 255)) $((n >> 8 & 255)) $((n >> 16 & 255)) \
           $((n >> 24 & 255)))
  # shellcheck disable=SC2059
  printf "$octal" >"$tmp/$3"                         # the 4 bytes
  cat "$1" "$2" >>"$tmp/$3"
  for t in diff merge; do mkdir -p "corpus/$t" && cp "$tmp/$3" "corpus/$t/$3"; done
}
gzip -9n <"$tmp/typical.pb" >"$tmp/typical.pb.gz"
pair "$tmp/typical.pb" "$tmp/typical-b.pb" typical+typical-b
pair "$tmp/typical.pb.gz" "$tmp/typical-b.pb" typical.gz+typical-b
pair "$tmp/order-a.pb" "$tmp/order-b.pb" order-a+order-b
pair "$tmp/time-max.pb" "$tmp/time-min.pb" time-max+time-min
pair "$tmp/values.pb" "$tmp/ids.pb" values+ids
pair "$tmp/deep-stack.pb" "$tmp/repeated-frames.pb" deep-stack+repeated-frames
gzip -9n <"$tmp/long-names.pb" >"$tmp/long-names.pb.gz"
pair "$tmp/long-names.pb.gz" "$tmp/values.pb" long-names.gz+values
