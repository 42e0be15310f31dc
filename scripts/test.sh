#!/bin/sh
# test.sh - the whole test suite, from a fresh clone of a Debian 12 machine:
#   installs the build dependencies, then builds and runs the Check suite in each configuration
#   (default, --disable-pprof), builds --with-libunwind=no and =yes, runs make distcheck, and prints
#   one "N passed, N failed" line for all of it.  Exit status 0 only if everything passed.
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
scripts/install-deps.sh || exit 1
# Out-of-tree builds need a source tree that was not configured in place.
[ ! -f config.status ] || make distclean >/dev/null 2>&1 || rm -f config.status
autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }

status=0
failed_steps=0
checked=
summary() {   # summary DIR...: "N passed, N failed, N skipped" over the DIRs' TAP results
  find "$@" -name '*.trs' -exec cat {} + 2>/dev/null | awk '
    /^:test-result:/ { t[$2]++ }
    END { printf "%d passed, %d failed, %d skipped\n", t["PASS"] + t["XFAIL"],
                  t["FAIL"] + t["ERROR"] + t["XPASS"], t["SKIP"] }'
}
step() {      # step NAME CMD...: runs CMD, notes a failure
  step_name=$1; shift
  echo "== $step_name: $*"
  if ! "$@"; then echo "== $step_name: FAILED"; status=1; failed_steps=$((failed_steps + 1)); fi
}
check_build() {   # check_build NAME CONFIGURE-ARGS...: out-of-tree build + make check
  name=$1; shift
  rm -rf "_build/$name"; mkdir -p "_build/$name"
  (cd "_build/$name" && "$top/configure" --enable-tests "$@" >configure.log 2>&1) \
    || { echo "== $name: configure failed"; tail -n 30 "_build/$name/configure.log"; status=1;
         failed_steps=$((failed_steps + 1)); return; }
  step "$name build" sh -c "make -C '_build/$name' -j2 >'_build/$name/build.log' 2>&1 || { tail -n 30 '_build/$name/build.log'; exit 1; }"
  if ! make -C "_build/$name" -j2 check >"_build/$name/check.out" 2>&1; then
    status=1
    grep -E '^(FAIL|ERROR)' "_build/$name/check.out" || true
    cat "_build/$name/test-suite.log" 2>/dev/null | tail -n 60
  fi
  echo "$name: $(summary "_build/$name")"
  checked="$checked _build/$name"
}

check_build pprof
check_build nopprof --disable-pprof
for u in no yes; do
  rm -rf "_build/unwind-$u"; mkdir -p "_build/unwind-$u"
  step "libunwind=$u build" sh -c "cd _build/unwind-$u && '$top/configure' --with-libunwind=$u >configure.log 2>&1 && make -j2 >/dev/null"
done
step distcheck sh -c "cd _build/pprof && make -j2 distcheck >distcheck.log 2>&1 || { tail -n 40 distcheck.log; exit 1; }"

# The closing line counts each failed build step (configure, build, distcheck) as a failed test too.
# Only this script's builds: _build/ also holds scripts/cross-test.sh's (_build/cross-ARCH).
# shellcheck disable=SC2086
total=$(summary ${checked:-/dev/null})
passed=$(echo "$total" | awk '{ print $1 }')
failed=$(echo "$total" | awk -v s="$failed_steps" '{ print $3 + s }')
[ "$failed" = 0 ] || status=1
[ "$status" = 0 ] || echo "some step failed (see above)"
echo "$passed passed, $failed failed"
exit $status
