#!/bin/sh
# install-deps.sh - installs the Debian 12 packages needed to build and test libmimalloc-prof.
# Runs apt-get as root, or through sudo otherwise.  Skips the install when everything is present.
set -eu
pkgs="build-essential autoconf automake libtool pkgconf libmimalloc-dev libunwind-dev check libsubunit-dev
      protobuf-c-compiler libprotobuf-c-dev zlib1g-dev python3 golang-go valgrind sqlite3 perl
      libdw-dev libdebuginfod-dev debuginfod libjansson-dev chromium python3.11-dbg libmicrohttpd-dev curl
      libiberty-dev"
missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
echo "install-deps: installing$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
