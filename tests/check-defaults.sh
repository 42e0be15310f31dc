#!/bin/sh
# check-defaults.sh - every default of a MIMALLOC_PROF_* variable that the documentation states is the
# library's: README.md's environment table, mimalloc_prof(3)'s ENVIRONMENT section and the library
# agree, variable by variable.  The library's own default is read from its warning: each variable is set
# to a malformed value ("@") for a program linked with the library (tests/prof_probe: its options are
# read when the library loads, before the program's usage message), and the warning says which
# value is used instead.  A string option has no malformed value (MIMALLOC_PROF_PREFIX): its two
# documents are compared with each other.  Reports TAP, one test per variable of README's table.
probe=${MPROF_TEST_PROF_PROBE:?run through make check}
if [ "${MPROF_PPROF:-1}" = 0 ]; then
  echo "1..1"
  echo "ok 1 - documented defaults # SKIP built with --disable-pprof: no MIMALLOC_PROF_* variable is read"
  exit 0
fi
top=${srcdir:-.}
readme=$top/README.md
man=$top/man/mimalloc_prof.3

# A default as one canonical word: byte counts with a binary suffix as numbers, anything else as it is.
canon() {
  case $1 in
    *[0-9][kK]) echo $((${1%?} << 10)) ;;
    *[0-9][mM]) echo $((${1%?} << 20)) ;;
    *[0-9][gG]) echo $((${1%?} << 30)) ;;
    *[0-9][tT]) echo $((${1%?} << 40)) ;;
    *) echo "$1" ;;
  esac
}

# A default that differs on 32-bit platforms is documented as "D (32-bit: D32)" (README) or "D (...;
# 32-bit platforms: D32, ...)" (the man page): on such a platform D32 counts.  The library's ELF class
# tells which this is.
bits=64
[ "$(od -An -tx1 -j4 -N1 "${MPROF_TEST_LIB:-/dev/null}" 2>/dev/null | tr -d ' ')" = 01 ] && bits=32
documented() {   # documented FIRST_WORD TEXT: the default for this platform
  alt=
  [ $bits = 32 ] && alt=$(printf '%s\n' "$2" | grep -o -E '32-bit( platforms)?: [0-9]+[kmgt]?' | head -n 1 \
                          | sed 's/.*: //')
  canon "${alt:-$1}"
}

# The ENVIRONMENT section, one entry per line: "NAME text" with the man markup removed.
entries=$(mktemp) || exit 1
trap 'rm -f "$entries"' EXIT
awk '
  /^\.SH / { inside = ($2 == "ENVIRONMENT") }
  !inside { next }
  /^\.TP/ { if (name != "") print name, text; name = ""; text = ""; want = 1; next }
  want && /^\.B MIMALLOC_PROF[A-Z_]*$/ { name = $2; want = 0; next }
  { want = 0; if (name == "") next
    line = $0; sub(/^\.(B|I|BR|IR|RB|RI) /, "", line); gsub(/\\ /, " ", line); gsub(/\\-/, "-", line)
    gsub(/"/, "", line); text = text " " line }
  END { if (name != "") print name, text }
' "$man" >"$entries"

rows=$(grep -E '^\| `MIMALLOC_PROF[A-Z_]*` \|' "$readme" | sed -E 's/^\| `([A-Z_]+)` \| ([^|]*) \|.*/\1 \2/')
n=$(printf '%s\n' "$rows" | grep -c .)
[ "$n" -gt 0 ] || { echo "1..0 # SKIP no environment table in $readme"; exit 0; }
echo "1..$n"
i=0
printf '%s\n' "$rows" | {
  while read -r name readme_default; do
    i=$((i + 1))
    readme_value=$(documented "${readme_default%% *}" "$readme_default")
    readme_default=${readme_default%% *}
    man_text=$(grep -E "^$name " "$entries" | head -n 1)
    man_default=$(printf '%s\n' "$man_text" | grep -o -E '[Dd]efault [^ ;,.():]+' | head -n 1 | cut -d' ' -f2)
    man_value=$(documented "${man_default:-}" "$man_text")
    warning=$(env "$name=@" "$probe" 2>&1 >/dev/null | grep -F "$name=" | head -n 1)
    lib_value=$(printf '%s\n' "$warning" | sed -n 's/.*; using \(.*\)$/\1/p' | tr -d '"')
    if [ -z "$man_default" ]; then
      echo "not ok $i - $name: no \"default\" in its mimalloc_prof(3) entry"
    elif [ "$readme_value" != "$man_value" ]; then
      echo "not ok $i - $name: README says $readme_default, mimalloc_prof(3) says $man_default"
    elif [ -z "$warning" ] && [ "$name" = MIMALLOC_PROF_PREFIX ]; then
      echo "ok $i - $name: $readme_default in README and mimalloc_prof(3) (a string: nothing is malformed)"
    elif [ -z "$lib_value" ]; then
      echo "not ok $i - $name=@ gave no warning naming the value used: '$warning'"
    elif [ "$lib_value" != "$readme_value" ]; then
      echo "not ok $i - $name: documented default $readme_default, the library uses $lib_value"
    else
      echo "ok $i - $name: default $readme_default in README, mimalloc_prof(3) and the library"
    fi
  done
}
