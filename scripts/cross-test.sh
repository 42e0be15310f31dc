#!/bin/sh
# cross-test.sh ARCH - cross-builds libmimalloc-prof for another Debian architecture (i386, arm64, ...)
# and runs its test suite on that architecture, on a Debian 12 machine of any architecture:
#   1. installs the cross toolchain (crossbuild-essential-ARCH), adds ARCH to dpkg's architectures and
#      installs the ARCH build dependencies (libmimalloc-dev:ARCH, check:ARCH, ...);
#   2. runs ARCH programs natively when the kernel can (i386 on an amd64 kernel: its 32-bit ABI), else
#      under qemu-user registered with binfmt_misc (qemu-user-static, binfmt-support), so that programs
#      the tests start run under it too;
#   3. configures --host=ARCH's triplet in _build/cross-ARCH, builds, and runs `make check` there;
#   4. profiles a C++ program on ARCH with the cross-built `mimalloc-prof run` and reads it back with its
#      `top` (debian/tests/profile-command): its operator new sites must be named;
#   5. cross-builds the Debian packages, `scripts/deb.sh -a ARCH` (dpkg-buildpackage -a ARCH, lintian),
#      into _build/cross-ARCH/deb.  Steps 4 and 5 count as one test each.
# Every skipped test is printed with its reason; the last line is
# "cross-test ARCH: N passed, N failed, N skipped".  Exit status 0 unless a test failed or a step broke.
# Multi-Arch: same packages need one version on every architecture: when the indexes disagree, the ARCH
# packages are asked for at a version both architectures have (this machine's installed one if ARCH has
# it, else newer); under CI=true (a throw-away machine) this machine's own copies may also go back to an
# older version that ARCH has too (security updates reach amd64's index before i386's, say).
# When the ARCH packages still cannot be installed (typically a mirror caught mid-sync) nothing is built:
# that is reported loudly and counted as one skipped test, exit status 0.
# Logs stay in _build/cross-ARCH (apt.log, configure.log, build.log, test-suite.log, deb.log, ...).
# CK_RUN_SUITE / CK_RUN_CASE select part of the Check suite as usual.
set -u
arch=${1:-}
[ -n "$arch" ] && [ $# -eq 1 ] || { echo "usage: scripts/cross-test.sh ARCH   (a Debian architecture: i386, arm64, ...)" >&2; exit 2; }
cd "$(dirname "$0")/.."
top=$(pwd)
start=$(date +%s)
native=$(dpkg --print-architecture)
build=$top/_build/cross-$arch

say() { echo "cross-test $arch: $*"; }
fail() {
  say "FAILED ($1)"
  exit 1
}
skip_all() {   # skip_all REASON...: nothing could be tested; loud, but not a failure
  echo "cross-test $arch: ******************************************************************"
  echo "cross-test $arch: SKIPPED: $*"
  echo "cross-test $arch: ******************************************************************"
  say "0 passed, 0 failed, 1 skipped"
  exit 0
}
if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
apt_get() { DEBIAN_FRONTEND=noninteractive $sudo apt-get -y -q --no-remove -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 "$@"; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

host=$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null) \
  || { echo "cross-test: '$arch' is not a Debian architecture (dpkg-architecture -L lists them)" >&2; exit 2; }
[ "$arch" != "$native" ] || { echo "cross-test: $arch is this machine's own architecture: use scripts/test.sh" >&2; exit 2; }
mkdir -p "$build" || fail "mkdir $build"
apt_log=$build/apt.log
apt_arch=
: >"$apt_log"

# --- 1. toolchain and ARCH packages ----------------------------------------------------------------
# Libraries the build and the tests link with, for ARCH; libunwind only where Debian has it (the arch
# list of libunwind-dev in debian/control).  libstdc++6 for the C++ tests' programs at run time; libdw,
# libdebuginfod and libmicrohttpd (its `serve`) for the mimalloc-prof command, libjansson for its
# flame-graph test: every library configure looks for, with pkg-config or AC_CHECK_LIB.
case " amd64 arm64 armel armhf i386 mips64el mipsel ppc64el riscv64 s390x " in
  *" $arch "*) unwind=yes; unwind_pkg=libunwind-dev ;;
  *) unwind=no; unwind_pkg= ;;
esac
foreign=
# libc6-dbg: valgrind (amd64) runs i386 programs too, given the symbols of their glibc's loader.
dbg=
case $native:$arch in amd64:i386) dbg=libc6-dbg ;; esac
for p in libmimalloc-dev check libsubunit-dev libprotobuf-c-dev zlib1g-dev libstdc++6 libdw-dev \
         libdebuginfod-dev libmicrohttpd-dev libiberty-dev libjansson-dev $unwind_pkg $dbg; do
  foreign="$foreign $p:$arch"
done
tools="build-essential autoconf automake libtool pkgconf pkgconf:$arch protobuf-c-compiler crossbuild-essential-$arch"

missing=
for p in $tools $foreign; do installed "$p" || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    say "dpkg --add-architecture $arch"
    $sudo dpkg --add-architecture "$arch" || fail "dpkg --add-architecture $arch"
  fi
  say "apt-get update (log: ${apt_log#$top/})"
  # An index that fails to download (a mirror mid-sync) is not fatal yet: the install below says whether
  # the packages can still be had.  apt keeps none of a repository's new indexes when one of them fails,
  # so a broken index of a third architecture would keep ARCH's out too: then update again for this
  # machine's architecture and ARCH only.
  if ! apt_get update >>"$apt_log" 2>&1; then
    echo "cross-test $arch: WARNING: apt-get update failed for some indexes:"
    grep -E '^E:' "$apt_log" | sort -u | sed 's/^/cross-test     /'
    if [ -n "$(dpkg --print-foreign-architectures | grep -vx "$arch")" ]; then
      apt_arch="-o APT::Architectures=$native,$arch"
      say "apt-get update for $native and $arch only"
      apt_get $apt_arch update >>"$apt_log" 2>&1 || echo "cross-test $arch: WARNING: still failing"
    fi
  fi
  say "installing$missing"
  # Multi-Arch: same packages must have the same version on every architecture.  When the indexes of the
  # architectures disagree (one failed to download, the mirror is mid-sync, or this machine's copy came
  # from a newer update than ARCH's index has yet) apt gives up at the first mismatch: then try again,
  # asking for each package apt named at a version that both architectures' indexes have, a few rounds.
  # Preferred: the version installed here, else a newer one.  Only under CI=true (a throw-away machine)
  # may this machine's copy go back to an older version both have (apt-get --allow-downgrades).
  align=
  downgrade=
  versions() { apt-cache $apt_arch madison "$1" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -u; }
  align_one() {   # align_one NAME: NAME:native=V NAME:ARCH=V added to $align, if such a V exists
    case " $align " in *" $1:$arch="*) return ;; esac
    have=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$1:$native" 2>/dev/null | sed -n 's/^ii *//p')
    versions "$1:$arch" >"$build/apt-versions"
    both=$(versions "$1:$native" | grep -xF -f "$build/apt-versions")
    pick=
    if [ -n "$have" ] && echo "$both" | grep -qxF "$have"; then
      pick=$have
    else
      for v in $both; do
        [ -z "$have" ] || dpkg --compare-versions "$v" ge "$have" || [ "${CI:-}" = true ] || continue
        [ -z "$pick" ] || dpkg --compare-versions "$v" gt "$pick" || continue
        pick=$v
      done
    fi
    [ -n "$pick" ] || return 0
    if [ -n "$have" ] && [ "$pick" != "$have" ]; then
      align="$align $1:$native=$pick"
      if dpkg --compare-versions "$pick" lt "$have"; then
        downgrade=--allow-downgrades
        echo "cross-test $arch: ** CI=true: this machine's $1 goes back from $have to $pick, which $arch has too"
      fi
    fi
    align="$align $1:$arch=$pick"
  }
  round=0
  until apt_get $apt_arch install --no-install-recommends $downgrade $missing $align \
          >"$build/apt-install.log" 2>&1; do
    cat "$build/apt-install.log" >>"$apt_log"
    round=$((round + 1))
    before=$align
    # "libfoo-dev:ARCH : Depends: libfoo1:ARCH (= 1.0) but it is not going to be installed": libfoo1.
    for n in $(grep -E '^ [^ ]+ : +(Pre)?Depends: ' "$build/apt-install.log" | sed 's/.*Depends: //' \
               | grep -o -E "^[a-z0-9.+-]+:$arch" | sed "s/:$arch\$//" | sort -u); do
      align_one "$n"
    done
    # Or apt would remove a copy of another architecture, to upgrade or install a package whose versions
    # then differ (this machine's libfoo1, or a third architecture's of an older index): the ARCH packages
    # to install that are installed here too, and the packages to remove.
    if grep -q '^E: Packages need to be removed but remove is disabled' "$build/apt-install.log"; then
      for n in $( (sed -n '/^The following NEW packages will be installed:/,/^[^ ]/p' "$build/apt-install.log" \
                     | grep -o -E "[a-z0-9.+-]+:$arch" | sed "s/:$arch\$//"
                   sed -n '/^The following packages will be REMOVED:/,/^[^ ]/p' "$build/apt-install.log" \
                     | sed 1d | grep '^ ' | tr ' ' '\n' | sed 's/:.*//') | sort -u); do
        dpkg-query -W -f='${db:Status-Abbrev}' "$n:$native" 2>/dev/null | grep -q '^ii' && align_one "$n"
      done
    fi
    if [ "$align" = "$before" ] || [ $round -ge 10 ]; then
      echo "cross-test $arch: apt-get install failed:"
      grep -E '^( [^ ]+ : |E: )' "$build/apt-install.log" | sed 's/^/cross-test     /' | tail -n 20
      [ "${CI:-}" = true ] || echo "cross-test $arch: (under CI=true, this machine's packages may be downgraded to versions $arch has too)"
      skip_all "the $arch packages could not be installed: versions differ across architectures (a" \
               "mirror mid-sync, or an index that failed to download?); see ${apt_log#$top/}"
    fi
    say "retrying with versions both architectures have:$align"
  done
  cat "$build/apt-install.log" >>"$apt_log"
fi

# --- 2. running ARCH programs ----------------------------------------------------------------------
cat >"$build/hello.c" <<'EOF'
int main(void) { return 0; }
EOF
"$host-gcc" -o "$build/hello" "$build/hello.c" || fail "$host-gcc cannot link a program"
case $arch in
  arm64) qarch=aarch64 ;; armel | armhf) qarch=arm ;; ppc64el) qarch=ppc64le ;;
  mips64el) qarch=mips64el ;; mipsel) qarch=mipsel ;; *) qarch=$arch ;;
esac
binfmt=/proc/sys/fs/binfmt_misc/qemu-$qarch
if [ -f "$binfmt" ] && grep -qx enabled "$binfmt" && "$build/hello"; then
  runner="under $(qemu-"$qarch"-static --version | head -n 1) through binfmt_misc"
elif "$build/hello" 2>/dev/null; then
  runner="natively (the kernel runs $arch programs)"
elif [ "$arch" = i386 ]; then
  # An amd64 kernel built without IA32 emulation.  Debian registers no qemu-i386 on amd64, and under a
  # hand-registered one the suite's dump tests fail on any tree (no profile is written at exit, by the
  # interval or on a signal), so i386 is not tested here rather than tested wrongly.
  skip_all "this kernel does not run i386 programs (no IA32 emulation), and qemu-i386 is no substitute"
else
  # qemu-user, registered with binfmt_misc (its F flag: the interpreter is opened now, so it works in any
  # mount namespace or chroot); a test's child processes run under it too.
  for p in qemu-user-static binfmt-support; do
    installed "$p" || { apt_get install --no-install-recommends "$p" >>"$apt_log" 2>&1 || fail "apt-get install $p"; }
  done
  [ -e /proc/sys/fs/binfmt_misc/status ] || $sudo mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
    || fail "cannot mount binfmt_misc (needed to run $arch programs under qemu-user)"
  $sudo update-binfmts --enable "qemu-$qarch" >>"$apt_log" 2>&1 || true
  "$build/hello" || fail "$arch programs do not run, even with qemu-$qarch registered in binfmt_misc"
  runner="under $(qemu-"$qarch"-static --version | head -n 1) through binfmt_misc"
fi
say "$arch programs run $runner"
# The fuzz targets bound each input's CPU time (tests/fuzz/driver.c); an emulator spends 10 to 20 times
# the native CPU on the same work, so under qemu-user the bound is stretched by MPROF_FUZZ_TIME_FACTOR.
case $runner in
  under*) MPROF_FUZZ_TIME_FACTOR=${MPROF_FUZZ_TIME_FACTOR:-20}; export MPROF_FUZZ_TIME_FACTOR ;;
esac

# --- 3. build and test -----------------------------------------------------------------------------
# Out-of-tree builds need a source tree that was not configured in place.
[ ! -f config.status ] || make distclean >/dev/null 2>&1 || rm -f config.status
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] \
  || autoreconf -fi >"$build/autoreconf.log" 2>&1 || { cat "$build/autoreconf.log"; fail "autoreconf"; }
find "$build" -mindepth 1 -maxdepth 1 ! -name apt.log ! -name 'hello*' -exec rm -rf {} +
say "configure --host=$host --with-libunwind=$unwind --enable-tests"
(cd "$build" && "$top/configure" --host="$host" --with-libunwind="$unwind" --enable-tests >configure.log 2>&1) \
  || { tail -n 30 "$build/configure.log"; fail "configure"; }
make -C "$build" -j2 >"$build/build.log" 2>&1 || { tail -n 30 "$build/build.log"; fail "make"; }
grep -E 'warning:' "$build/build.log" | sort -u | sed "s|^|cross-test $arch: build |"
say "make check (log: ${build#$top/}/test-suite.log)"
rc=0
# Check's timeouts catch a hung test; the foreign architecture (qemu-user, or i386's rate-1 tests with
# libunwind) runs slower than the native build they were set for, so they are stretched, as debian/rules
# does for a package build on a loaded builder.
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4} make -C "$build" -j2 check >"$build/check.out" 2>&1 || rc=$?
[ $rc -eq 0 ] || grep -E '^(FAIL|ERROR)' "$build/check.out" | sed "s/^/cross-test $arch: /"
if [ ! -f "$build/tests/check_prof.trs" ]; then   # the suite did not even build: one failure
  grep -E 'error' "$build/check.out" | head -n 20 | sed "s/^/cross-test $arch: /"
  printf ':test-result: ERROR\n' >"$build/check-build.trs"
fi
# The C++ profile, reported like one more TAP test.
say "profiling a C++ program with the $arch mimalloc-prof (log: ${build#$top/}/profile-command.log)"
mkdir -p "$build/profile"
if (cd "$build/profile" && AUTOPKGTEST_TMP=$build/profile DEB_HOST_GNU_TYPE=$host \
      sh "$top/debian/tests/profile-command" "$build/tools/mimalloc-prof") >"$build/profile-command.log" 2>&1; then
  printf ':test-result: PASS\n' >"$build/profile-command.trs"
  grep -E '^ +[0-9.]+ ' "$build/profile-command.log" | sed "s/^/cross-test $arch: top: /"
else
  printf ':test-result: FAIL\n' >"$build/profile-command.trs"
  cat "$build/profile-command.log"
  rc=1
fi
# The Debian packages, cross-built.
say "scripts/deb.sh -a $arch (log: ${build#$top/}/deb.log)"
# nocheck: the suite just ran (debhelper would run it again wherever ARCH programs can run); the nocheck
# build profile too, so that the test-only build dependencies (chromium, debuginfod, python3.11-dbg, which
# would be wanted for ARCH) are not asked for.
if DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" DEB_BUILD_PROFILES="nocheck ${DEB_BUILD_PROFILES:-}" \
     sh "$top/scripts/deb.sh" -a "$arch" -o "$build/deb" \
     >"$build/deb.log" 2>&1; then
  printf ':test-result: PASS\n' >"$build/deb.trs"
  grep -E '^deb: +[^ ]+\.deb$' "$build/deb.log" | sed "s/^deb: */cross-test $arch: built /"
else
  printf ':test-result: FAIL\n' >"$build/deb.trs"
  tail -n 30 "$build/deb.log"
  rc=1
fi
counts=$(find "$build" -name '*.trs' -exec cat {} + 2>/dev/null | awk '
  /^:test-result:/ { t[$2]++ }
  END { printf "%d passed, %d failed, %d skipped\n", t["PASS"] + t["XFAIL"],
                t["FAIL"] + t["ERROR"] + t["XPASS"], t["SKIP"] }')
find "$build" -name '*.log' -path '*/tests/*' -exec grep -h -E '^ok [0-9]+ .*# SKIP' {} + \
  | sed "s/^ok [0-9]* - /cross-test $arch: skipped: /"
say "$runner, $(($(date +%s) - start)) s"
failed=$(echo "$counts" | awk '{ print $3 }')
[ "$rc" -eq 0 ] && [ "$failed" = 0 ] || { say "$counts"; exit 1; }
say "$counts"
