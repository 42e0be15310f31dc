#!/bin/sh
# deb.sh - builds the Debian packages of this working tree on Debian 12 and checks them.
# Usage: scripts/deb.sh [--test [--remove]] [-a ARCH] [-o DIR]   (or `make deb`, DEB_FLAGS='--test ...')
#   1. installs the tools (dpkg-dev, debhelper, lintian, fakeroot) and debian/control's Build-Depends;
#   2. copies the working tree (tracked files plus untracked ones that .gitignore does not ignore, so
#      uncommitted work is packaged too; never _build/ or generated files) to a temporary directory;
#   3. dpkg-buildpackage -us -uc -b there (symbols checked at level 4: new symbols fail too); with -a ARCH
#      a cross build for that Debian architecture (its build dependencies, as scripts/cross-test.sh
#      installs them, must be there already; the Check suite is then not run, as when Debian cross-builds);
#   4. lintian -I --pedantic on the result: any tag fails;
#   5. leaves the .deb files (with the .changes, .buildinfo and the build and lintian logs) in DIR,
#      _build/deb/ by default, and prints the command that installs them;
#   6. --test: runs the package's autopkgtests (debian/tests) with the real runner on this machine,
#      `autopkgtest ... -- null`, which installs the three packages (and the tests' dependencies) first:
#      they stay installed afterwards unless --remove is given too (then the ones that were not
#      installed before are purged; the tests' dependencies stay).
# Progress: a line as each step (and each phase of the build) ends, with its duration, and a running count
# of the Check suite's results while it runs.
# Last line: "deb: ok" or "deb: FAILED (reason)".  Exit status 0 only on "deb: ok".
# Environment: DEB_BUILD_OPTIONS is passed to dpkg-buildpackage (e.g. nocheck to skip the Check suite).
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
start=$(date +%s)
pkgs="libmimalloc-prof0 libmimalloc-prof-dev mimalloc-prof"

fail() {
  echo "deb: FAILED ($1)"
  exit 1
}
usage() {
  echo "usage: scripts/deb.sh [--test [--remove]] [-a ARCH] [-o DIR]" >&2
  exit 2
}
test=0
remove=0
out=$top/_build/deb
arch=$(dpkg --print-architecture)
cross=
while [ $# -gt 0 ]; do
  case $1 in
    --test) test=1 ;;
    --remove) remove=1 ;;
    -a) [ $# -ge 2 ] || usage; [ "$2" = "$arch" ] || cross=$2; shift ;;
    -o) [ $# -ge 2 ] || usage; out=$2; shift ;;
    *) usage ;;
  esac
  shift
done
[ $remove = 0 ] || [ $test = 1 ] || { echo "deb: --remove only goes with --test" >&2; usage; }
[ -z "$cross" ] || [ $test = 0 ] || { echo "deb: --test runs the packages here: not with -a" >&2; usage; }
[ -z "$cross" ] || arch=$cross
elapsed() { echo "$(($(date +%s) - start))s"; }
# step_done NAME T0: one line per step as it ends, with its duration.
step_done() { echo "deb: $1 done in $(($(date +%s) - $2))s"; }
# watch_build LOG PID: while dpkg-buildpackage (PID) writes LOG, one line as each of its phases (debhelper's
# dh_auto_* commands, which dh echoes indented, or their debian/rules overrides) ends, with its duration, and a running count of the Check
# suite's results (the TAP driver's PASS:/FAIL:/SKIP: lines) every 25 tests or 30 seconds.
watch_build() {
  phase= t_phase=$(date +%s) done_n=0 shown_n=0 t_shown=$t_phase
  while :; do
    alive=1
    kill -0 "$2" 2>/dev/null || alive=0
    now=$(date +%s)
    cur=$(grep -o -E '^ *(debian/rules override_)?dh_auto_(configure|build|test|install)' "$1" 2>/dev/null \
          | tail -n 1 | sed 's/.*dh_auto_//')
    [ $alive = 1 ] || cur=end
    if [ "$cur" != "$phase" ]; then
      [ -z "$phase" ] || echo "deb:   $phase: $((now - t_phase))s"
      phase=$cur t_phase=$now
    fi
    if [ "$phase" = test ] || [ $alive = 0 ]; then
      # distinct lines: a failed make check prints test-suite.log, which repeats them
      done_n=$(grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): ' "$1" 2>/dev/null | sort -u | wc -l)
      if [ "$done_n" != "$shown_n" ] && { [ $((done_n - shown_n)) -ge 25 ] || [ $((now - t_shown)) -ge 30 ] \
           || [ $alive = 0 ]; }; then
        failed_n=$(grep -E '^(FAIL|XPASS|ERROR): ' "$1" 2>/dev/null | sort -u | wc -l)
        echo "deb:   make check: $done_n tests done, $failed_n failed ($((now - t_phase))s)"
        shown_n=$done_n t_shown=$now
      fi
    fi
    [ $alive = 1 ] || return 0
    sleep 2
  done
}
if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
apt_get() { DEBIAN_FRONTEND=noninteractive $sudo apt-get -y -qq -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 "$@"; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

[ -f debian/control ] || fail "no debian/ directory in $top"
command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
  || fail "$top is not a git work tree (the file list comes from git ls-files)"

tmp=$(mktemp -d /tmp/mimalloc-prof-deb.XXXXXX) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
build_pid=
trap '[ -z "$build_pid" ] || kill "$build_pid" 2>/dev/null; exit 130' INT TERM
mkdir -p "$out" || fail "mkdir $out"
out=$(cd "$out" && pwd)

# --- 1. dependencies -------------------------------------------------------------------------------
t_step=$(date +%s)
tools="dpkg-dev debhelper lintian fakeroot build-essential"
[ $test = 0 ] || tools="$tools autopkgtest"
missing=
for p in $tools; do installed "$p" || missing="$missing $p"; done
builddeps=0
[ -n "$cross" ] || dpkg-checkbuilddeps debian/control >/dev/null 2>&1 || builddeps=1
if [ -n "$missing" ] || [ $builddeps = 1 ]; then
  echo "deb: installing build dependencies"
  apt_get update >"$tmp/apt.log" 2>&1 || echo "deb: warning: apt-get update failed for some indexes"
  apt_get install --no-install-recommends $tools >>"$tmp/apt.log" 2>&1 \
    || { tail -n 20 "$tmp/apt.log"; fail "apt-get install $tools"; }
  # apt-get build-dep reads debian/control itself (arch lists and build profiles included).
  [ $builddeps = 0 ] || apt_get build-dep --no-install-recommends "$top" >>"$tmp/apt.log" 2>&1 \
    || { tail -n 20 "$tmp/apt.log"; fail "apt-get build-dep"; }
fi
if [ -n "$cross" ]; then
  dpkg-checkbuilddeps -a"$cross" debian/control \
    || fail "build dependencies for $cross (scripts/cross-test.sh $cross installs them)"
fi

# A `make install` into /usr/local would shadow the packages (PATH, pkg-config and ld.so look there first).
if [ $test = 1 ]; then
  shadow=$(ls -d /usr/local/bin/mimalloc-prof /usr/local/lib/libmimalloc-prof* \
    /usr/local/lib/*/libmimalloc-prof* /usr/local/lib/pkgconfig/mimalloc-prof.pc \
    /usr/local/lib/*/pkgconfig/mimalloc-prof.pc 2>/dev/null | tr '\n' ' ')
  [ -z "$shadow" ] || fail "remove the /usr/local copies first, they shadow the packages: $shadow"
fi
step_done "dependencies" "$t_step"

# --- 2. a copy of the working tree -----------------------------------------------------------------
t_step=$(date +%s)
version=$(dpkg-parsechangelog -l debian/changelog -S Version) || fail "dpkg-parsechangelog"
src=$tmp/mimalloc-prof-${version%%-*}
mkdir -p "$src"
# Skipped: files deleted from the work tree, and out-of-tree build directories that .gitignore does not
# know about (a top-level directory with a config.status in it).
git ls-files -z --cached --others --exclude-standard \
  | xargs -0 sh -c 'for f; do
      case $f in */*) [ ! -f "${f%%/*}/config.status" ] || continue ;; esac
      if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\0" "$f"; fi
    done' sh \
  | tar --null -T - -cf - | tar -xf - -C "$src" || fail "copying the working tree"
# The autopkgtest runner gets the tree as it is before the build (it only reads debian/).
cp -a "$src" "$tmp/tests-src" || fail "copying the tree for autopkgtest"
step_done "copy of the tree" "$t_step"

# --- 3. build --------------------------------------------------------------------------------------
t_step=$(date +%s)
a_flag=${cross:+-a$cross}
echo "deb: dpkg-buildpackage -us -uc -b${a_flag:+ $a_flag} (log: ${out#$top/}/build.log) ..."
jobs=$(nproc 2>/dev/null || echo 1)
# shellcheck disable=SC2086
(cd "$src" && TMPDIR=$tmp DPKG_GENSYMBOLS_CHECK_LEVEL=4 dpkg-buildpackage -us -uc -b $a_flag -j"$jobs") \
  >"$out/build.log" 2>&1 &
build_pid=$!
watch_build "$out/build.log" "$build_pid"
if ! wait "$build_pid"; then
  # The Check suite's failures, or else the end of the log.
  if grep -q -E '^(FAIL|ERROR):' "$out/build.log"; then
    grep -E '^(FAIL|ERROR):' "$out/build.log" | sort -u | head -n 40
    grep -E '^# (TOTAL|PASS|FAIL|ERROR):' "$out/build.log" | tr '\n' ' ' | sed 's/^/deb: make check: /; s/ $/\n/'
    fail "dpkg-buildpackage: make check failed"
  fi
  tail -n 40 "$out/build.log"
  fail "dpkg-buildpackage"
fi
grep -E '^# (TOTAL|PASS|FAIL|SKIP|ERROR):' "$out/build.log" | tr '\n' ' ' | sed 's/^/deb: make check: /; s/ $/\n/'
changes_name=mimalloc-prof_${version}_$arch.changes
[ -f "$tmp/$changes_name" ] || fail "no $changes_name"
# The build's results, replacing those of an earlier build of the same version.
cp "$tmp"/*.deb "$tmp"/*.buildinfo "$tmp/$changes_name" "$out/" || fail "copying the results to $out"
debs=
for p in $pkgs; do
  debs="$debs $out/${p}_${version}_$arch.deb"
  [ -f "$out/${p}_${version}_$arch.deb" ] || fail "no ${p}_${version}_$arch.deb"
done
step_done "build (dpkg-buildpackage)" "$t_step"

# --- 4. lintian ------------------------------------------------------------------------------------
t_step=$(date +%s)
# TMPDIR: lintian leaves MLDBM scratch files behind; keep them in $tmp.
TMPDIR=$tmp lintian -I --pedantic "$out/$changes_name" >"$out/lintian.log" 2>"$tmp/lintian.err"
lrc=$?
# (lintian's stderr: only its "running with root privileges is not recommended" note, unless it broke.)
grep -v 'running with root privileges' "$tmp/lintian.err" | sed 's/^/lintian: /'
if [ -s "$out/lintian.log" ]; then sed 's/^/lintian: /' "$out/lintian.log"; fi
[ $lrc -eq 0 ] || fail "lintian exited with $lrc"
tags=$(grep -c -E '^[A-Z]: ' "$out/lintian.log")
[ "$tags" = 0 ] || fail "lintian -I --pedantic: $tags tags"
echo "deb: lintian -I --pedantic: 0 tags"
echo "deb: built in ${out#$top/}/:"
for f in $debs; do echo "deb:   ${f##*/}"; done
step_done "lintian" "$t_step"

# --- 5. the autopkgtests, by the real runner on this machine ---------------------------------------
if [ $test = 1 ]; then
  t_step=$(date +%s)
  installed_before=
  for p in $pkgs; do installed "$p" && installed_before="$installed_before $p"; done
  echo "deb: autopkgtest (null testbed: installs the packages here; log: ${out#$top/}/autopkgtest/log) ..."
  rm -rf "$out/autopkgtest"
  # shellcheck disable=SC2086
  autopkgtest --output-dir="$out/autopkgtest" --summary-file="$tmp/summary" -B $debs "$tmp/tests-src/" \
    -- null >"$tmp/autopkgtest.out" 2>&1
  arc=$?
  sed 's/^/deb: autopkgtest: /' "$tmp/summary" 2>/dev/null
  if [ $remove = 1 ]; then
    purge=
    for p in $pkgs; do
      case " $installed_before " in *" $p "*) ;; *) installed "$p" && purge="$purge $p" ;; esac
    done
    if [ -n "$purge" ]; then
      apt_get purge $purge >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "apt-get purge$purge"; }
      echo "deb: removed$purge (--remove)"
    fi
  else
    echo "deb: installed$(for p in $pkgs; do printf ' %s=%s' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"; done)"
  fi
  if [ $arc -ne 0 ]; then
    # The null testbed's clean-up runs apt-get update on this machine, which fails when an index does
    # (say a foreign architecture's, mid-sync): not the package's fault once every test passed.
    if grep -q -E '^[^ ]+ +PASS' "$tmp/summary" && ! grep -q -v -E '^[^ ]+ +PASS' "$tmp/summary" \
       && grep -q 'error cleaning up' "$tmp/autopkgtest.out"; then
      echo "deb: warning: every autopkgtest passed, but the runner's clean-up failed (exit $arc):"
      grep -E '^E: ' "$tmp/autopkgtest.out" | sort -u | sed 's/^/deb:   /'
    else
      tail -n 60 "$tmp/autopkgtest.out"
      fail "autopkgtest exited with $arc"
    fi
  fi
  step_done autopkgtest "$t_step"
fi

# --- 6. done ---------------------------------------------------------------------------------------
echo "deb: install them with: apt install$(for f in $debs; do
  case $f in "$top"/*) printf ' ./%s' "${f#"$top"/}" ;; *) printf ' %s' "$f" ;; esac; done)"
echo "deb: all steps passed in $(elapsed)"
echo "deb: ok"
