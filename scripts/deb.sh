#!/bin/sh
# deb.sh - builds the Debian packages of this working tree and checks them, on Debian 12:
#   1. installs the tools (dpkg-dev, debhelper, lintian, fakeroot) and debian/control's Build-Depends;
#   2. copies the working tree (tracked files plus untracked ones that .gitignore does not ignore, so
#      uncommitted work is packaged too; never _build/ or generated files) to a temporary directory;
#   3. dpkg-buildpackage -us -uc -b there (symbols checked at level 4: new symbols fail too);
#   4. lintian -I --pedantic on the result: any E: or W: tag fails;
#   5. installs the three .debs with apt, runs the autopkgtest consumer (debian/tests/build-consumer),
#      checks the manual pages, and profiles python3 with the installed mimalloc-prof command;
#   6. removes the packages again if they were not installed before.
# Last line: "deb: ok" or "deb: FAILED (reason)".  Exit status 0 only on "deb: ok".
# Environment: DEB_KEEP=1 keeps the packages installed and the temporary directory;
#   DEB_BUILD_OPTIONS is passed to dpkg-buildpackage (e.g. nocheck to skip the Check suite).
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
start=$(date +%s)
pkgs="libmimalloc-prof0 libmimalloc-prof-dev mimalloc-prof"

fail() {
  echo "deb: FAILED ($1)"
  exit 1
}
elapsed() { echo "$(($(date +%s) - start))s"; }
if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
apt_get() { DEBIAN_FRONTEND=noninteractive $sudo apt-get -y -qq -o Dpkg::Use-Pty=0 "$@"; }

[ -f debian/control ] || fail "no debian/ directory in $top"
command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
  || fail "$top is not a git work tree (the file list comes from git ls-files)"

tmp=$(mktemp -d /tmp/mimalloc-prof-deb.XXXXXX) || fail "mktemp"
cleanup() {
  if [ "${DEB_KEEP:-0}" != 1 ]; then
    if [ -n "${installed_by_us:-}" ]; then apt_get purge $installed_by_us >/dev/null 2>&1; fi
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. dependencies -------------------------------------------------------------------------------
tools="dpkg-dev debhelper lintian fakeroot build-essential python3 man-db gzip"
missing=
for p in $tools; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ] || ! dpkg-checkbuilddeps debian/control >/dev/null 2>&1; then
  echo "deb: installing build dependencies"
  apt_get update >"$tmp/apt.log" 2>&1 || { tail -n 20 "$tmp/apt.log"; fail "apt-get update"; }
  apt_get install --no-install-recommends $tools >>"$tmp/apt.log" 2>&1 \
    || { tail -n 20 "$tmp/apt.log"; fail "apt-get install $tools"; }
  # apt-get build-dep reads debian/control itself (arch lists and build profiles included).
  apt_get build-dep --no-install-recommends "$top" >>"$tmp/apt.log" 2>&1 \
    || { tail -n 20 "$tmp/apt.log"; fail "apt-get build-dep"; }
fi

# A `make install` into /usr/local would shadow the packages (PATH, pkg-config and ld.so look there first).
shadow=$(ls -d /usr/local/bin/mimalloc-prof /usr/local/lib/libmimalloc-prof* \
  /usr/local/lib/*/libmimalloc-prof* /usr/local/lib/pkgconfig/mimalloc-prof.pc \
  /usr/local/lib/*/pkgconfig/mimalloc-prof.pc 2>/dev/null | tr '\n' ' ')
[ -z "$shadow" ] || fail "remove the /usr/local copies first, they shadow the packages: $shadow"

# --- 2. a copy of the working tree -----------------------------------------------------------------
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

# --- 3. build --------------------------------------------------------------------------------------
echo "deb: dpkg-buildpackage -us -uc -b (log: build.log) ..."
jobs=$(nproc 2>/dev/null || echo 1)
if ! (cd "$src" && TMPDIR=$tmp DPKG_GENSYMBOLS_CHECK_LEVEL=4 dpkg-buildpackage -us -uc -b -j"$jobs") \
    >"$tmp/build.log" 2>&1; then
  # The Check suite's failures, or else the end of the log (DEB_KEEP=1 keeps the whole log).
  if grep -q -E '^(FAIL|ERROR):' "$tmp/build.log"; then
    grep -E '^(FAIL|ERROR):' "$tmp/build.log" | sort -u | head -n 40
    grep -E '^# (TOTAL|PASS|FAIL|ERROR):' "$tmp/build.log" | tr '\n' ' ' | sed 's/^/deb: make check: /; s/ $/\n/'
    fail "dpkg-buildpackage: make check failed"
  fi
  tail -n 40 "$tmp/build.log"
  fail "dpkg-buildpackage"
fi
grep -E '^# (TOTAL|PASS|FAIL|SKIP|ERROR):' "$tmp/build.log" | tr '\n' ' ' | sed 's/^/deb: make check: /; s/ $/\n/'
changes=$(ls "$tmp"/mimalloc-prof_*.changes 2>/dev/null | head -n 1)
[ -n "$changes" ] || fail "no .changes file"
ls "$tmp"/*.deb | sed "s|^$tmp/|deb: built |"

# --- 4. lintian ------------------------------------------------------------------------------------
# TMPDIR: lintian leaves MLDBM scratch files behind; keep them in $tmp.
TMPDIR=$tmp lintian -I --pedantic "$changes" >"$tmp/lintian.log" 2>"$tmp/lintian.err"
lrc=$?
# (lintian's stderr: only its "running with root privileges is not recommended" note, unless it broke.)
grep -v 'running with root privileges' "$tmp/lintian.err" | sed 's/^/lintian: /'
if [ -s "$tmp/lintian.log" ]; then sed 's/^/lintian: /' "$tmp/lintian.log"; fi
grep -q -E '^[EW]: ' "$tmp/lintian.log" && fail "lintian reported errors or warnings"
[ $lrc -eq 0 ] || fail "lintian exited with $lrc"
echo "deb: lintian -I --pedantic: $(grep -c -E '^[A-Z]: ' "$tmp/lintian.log") tags"

# --- 5. install and use ----------------------------------------------------------------------------
installed_before=
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    && installed_before="$installed_before $p"
done
debs=
for p in $pkgs; do debs="$debs $tmp/${p}_${version}_$(dpkg --print-architecture).deb"; done
apt_get install --reinstall $debs >"$tmp/install.log" 2>&1 || { tail -n 20 "$tmp/install.log"; fail "apt install"; }
installed_by_us=
for p in $pkgs; do
  case " $installed_before " in *" $p "*) ;; *) installed_by_us="$installed_by_us $p" ;; esac
done
echo "deb: installed$(for p in $pkgs; do printf ' %s=%s' "$p" "$(dpkg-query -W -f='${Version}' "$p")"; done)"

AUTOPKGTEST_TMP=$tmp/autopkgtest
mkdir -p "$AUTOPKGTEST_TMP"
export AUTOPKGTEST_TMP
if ! "$src/debian/tests/build-consumer" >"$tmp/consumer.log" 2>&1; then
  cat "$tmp/consumer.log"
  fail "autopkgtest build-consumer"
fi
echo "deb: autopkgtest build-consumer: $(tail -n 1 "$tmp/consumer.log")"

for page in mimalloc_prof mi_prof_start mimalloc-prof; do
  man -w "$page" >/dev/null 2>&1 || fail "no manual page for $page"
  man "$page" 2>&1 </dev/null | grep -q . || fail "man $page shows nothing"
done
echo "deb: man mimalloc_prof, man mi_prof_start, man mimalloc-prof: ok"

run=$tmp/run
mkdir -p "$run"
# `run -o` has the library write into a fresh /tmp/mimalloc-prof.XXXXXX and renames the final profile out
# of it; profiles of child processes stay there (and so does the directory): removed below.
tmpdirs_before=$(ls -d /tmp/mimalloc-prof.?????? 2>/dev/null)
rc=0
(cd "$run" && /usr/bin/mimalloc-prof run -o x.pb.gz -- env PYTHONMALLOC=malloc python3 -c '
d = {}
for i in range(200000):
    d[i] = [str(i) * 8, (i, i + 1)]
print(len(d))
') >"$tmp/run.log" 2>&1 || rc=$?
for d in $(ls -d /tmp/mimalloc-prof.?????? 2>/dev/null); do
  printf '%s\n' "$tmpdirs_before" | grep -qxF "$d" || rm -rf "$d"
done
[ $rc -eq 0 ] || { cat "$tmp/run.log"; fail "mimalloc-prof run exited with $rc"; }
[ -s "$run/x.pb.gz" ] || { cat "$tmp/run.log"; fail "mimalloc-prof run wrote no profile"; }
rc=0
/usr/bin/mimalloc-prof top -n 8 "$run/x.pb.gz" >"$tmp/top.log" 2>&1 || rc=$?
sed "s|$run/||" "$tmp/top.log"
[ $rc -eq 0 ] || fail "mimalloc-prof top exited with $rc"
# python3's own allocation sites: CPython functions (Py*, _Py*), or module+offset in python3 or libpython.
grep -q -E '[[:space:]](_?Py[A-Za-z_]+|(lib)?python3[.0-9]*(\.so[.0-9]*)?\+0x[0-9a-f]+)$' "$tmp/top.log" \
  || fail "mimalloc-prof top shows no python3 allocation site"

# --- 6. done ---------------------------------------------------------------------------------------
[ "${DEB_KEEP:-0}" = 1 ] && echo "deb: kept $tmp and the installed packages"
echo "deb: all steps passed in $(elapsed)"
echo "deb: ok"
