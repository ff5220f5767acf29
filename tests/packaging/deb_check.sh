#!/bin/sh
# tests/packaging/deb_check.sh SRC BUILD — the Debian packages as a C user gets them.
#
# Builds libchorus0, libchorus-dev and chorus-tools with tools/build-deb (tree BUILD/deb-tree;
# lintian must report no error), installs them with apt-get, then:
#   1. readelf -d shows SONAME libchorus.so.0; pkg-config --modversion chorus is the project's
#      version;
#   2. deb_client.c compiles with nothing but `pkg-config --cflags --libs chorus` (no
#      PKG_CONFIG_PATH, no LD_LIBRARY_PATH) and links /usr's libchorus.so.0;
#   3. it runs under the chorusrun found on PATH (/usr/bin) with 4 ranks, each rank checking
#      its all-reduce and all-gather; chorus-all-reduce-perf (a /usr/bin link into
#      /usr/libexec/chorus) checks its results on 2 ranks (-c 1);
#   4. `dpkg -L` of each package is recorded, the packages are purged, and none of those
#      files may be left.
# Needs root (dpkg): without it, or without dpkg, it exits 77 (meson reports SKIP). It stops
# (failing) if any of the three packages is installed already, rather than replace it; the
# packages are purged on every exit. While installed, /usr/include/chorus.h and
# /usr/lib/.../libchorus.so cannot shadow a build tree's own: meson puts the tree's include/
# first on the compiler's line (-I before the system directories), links the tree's library by
# path and runs its programs through their build RUNPATH.
set -eu
src=$1
build=$2
pkgs="chorus-tools libchorus-dev libchorus0"
if [ "$(id -u)" -ne 0 ] || ! command -v dpkg >/dev/null 2>&1; then
  echo "deb_check: SKIP: needs root and dpkg to install packages"
  exit 77
fi
for p in $pkgs; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    echo "deb_check: $p is installed already; not touching it (dpkg -P $p to run this check)"
    exit 1
  fi
done
tmp=$(mktemp -d /tmp/chorus-deb-test.XXXXXX)
chmod 755 "$tmp"  # apt reads the .deb files as its own user
installed=0
cleanup() {
  # shellcheck disable=SC2086
  [ "$installed" = 0 ] || dpkg -P $pkgs >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

CHORUS_DEB_BUILDDIR=$build/deb-tree "$src/tools/build-deb" "$tmp/debs"
version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" "$src/meson.build")
installed=1
# As the README says to (apt resolves the Depends; here they are installed already, so nothing is downloaded).
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "$tmp"/debs/libchorus0_*.deb "$tmp"/debs/libchorus-dev_*.deb "$tmp"/debs/chorus-tools_*.deb
for p in $pkgs; do dpkg -L "$p" > "$tmp/$p.list"; done
echo "deb_check: installed $(cat "$tmp"/*.list | wc -l) paths"

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
readelf -d "/usr/lib/$ma/libchorus.so.0" | grep "(SONAME)" | tee "$tmp/soname"
grep -q "Library soname: \[libchorus.so.0\]" "$tmp/soname"
modversion=$(env -u PKG_CONFIG_PATH pkg-config --modversion chorus)
[ "$modversion" = "$version" ] || { echo "deb_check: chorus.pc says $modversion, project $version"; exit 1; }
echo "deb_check: chorus.pc version $modversion"

cd "$tmp"
cp "$src/tests/packaging/deb_client.c" .
# shellcheck disable=SC2046
env -u PKG_CONFIG_PATH -u CPATH -u C_INCLUDE_PATH -u LIBRARY_PATH \
  cc -std=c99 -Wall -Werror -o client deb_client.c $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs chorus)
loaded=$(env -u LD_LIBRARY_PATH ldd ./client | sed -n 's/^\s*libchorus.so.0 => \(\S*\) .*/\1/p')
# /lib is /usr/lib on a merged-/usr system: compare where the links lead.
if [ -z "$loaded" ] || [ "$(readlink -f "$loaded")" != "$(readlink -f "/usr/lib/$ma/libchorus.so.0")" ]; then
  ldd ./client
  echo "deb_check: client does not load /usr's libchorus"
  exit 1
fi
echo "deb_check: client built with pkg-config alone loads $loaded"

path_clean=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
[ "$(PATH=$path_clean command -v chorusrun)" = /usr/bin/chorusrun ]
out=$(env -u LD_LIBRARY_PATH PATH=$path_clean CHORUS_TIMEOUT_S=60 chorusrun -np 4 ./client 2>&1) || {
  echo "$out"; echo "deb_check: chorusrun -np 4 ./client FAILED"; exit 1; }
echo "$out"
[ "$(echo "$out" | grep -c "all-reduce and all-gather correct")" -eq 4 ]
out=$(env -u LD_LIBRARY_PATH PATH=$path_clean CHORUS_TIMEOUT_S=60 chorusrun -np 2 chorus-all-reduce-perf -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 2>&1) || {
  echo "$out"; echo "deb_check: chorus-all-reduce-perf FAILED"; exit 1; }
echo "$out" | tail -4
echo "$out" | grep -q "Out of bounds values : 0 OK" || { echo "deb_check: chorus-all-reduce-perf found wrong values"; exit 1; }
PATH=$path_clean chorus-topo > /dev/null
PATH=$path_clean chorus-hang-report --help > /dev/null

# shellcheck disable=SC2086
dpkg -P $pkgs
installed=0
left=0
for p in $pkgs; do
  while read -r f; do
    # Directories other packages share (/usr, /usr/bin, ...) stay; every file and link goes.
    if [ -L "$f" ] || { [ -e "$f" ] && [ ! -d "$f" ]; }; then
      echo "deb_check: left behind by $p: $f"
      left=1
    elif [ "$f" != "/." ] && [ -d "$f" ] && [ -z "$(dpkg -S "$f" 2>/dev/null)" ]; then
      echo "deb_check: directory left behind by $p, owned by no package: $f"
      left=1
    fi
  done < "$tmp/$p.list"
done
[ "$left" = 0 ]
echo "deb_check: purged; nothing of the $(cat "$tmp"/*.list | wc -l) installed paths left"
