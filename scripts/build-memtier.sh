#!/usr/bin/env bash
# Builds memtier_benchmark (Redis Ltd.'s load generator, make bench's second
# generator) from its public source, outside the repository:
#
#   scripts/build-memtier.sh OUT [VERSION] [SOURCE]
#
# OUT gets the memtier_benchmark binary. SOURCE is memtier's git repository
# (default https://github.com/RedisLabs/memtier_benchmark.git), cloned at the
# tag VERSION (default 2.3.0), or a directory holding its source tree. It is
# built without TLS (./configure --disable-tls), which the benchmarks do not
# use, so it needs only these Debian packages, installed with apt-get when
# missing (sudo when not root): g++ make autoconf automake libtool pkg-config
# libevent-dev zlib1g-dev git. About a minute on 2 cores.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT [VERSION] [SOURCE]" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
version=${2:-2.3.0}
source=${3:-https://github.com/RedisLabs/memtier_benchmark.git}

missing=""
for pkg in g++ make autoconf automake libtool pkg-config libevent-dev zlib1g-dev git; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
	sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
	echo "build-memtier: apt-get install$missing"
	$sudo apt-get update -q >/dev/null
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$source" ]; then
	cp -R "$source/." "$work/src"
else
	echo "build-memtier: git clone $source at $version"
	git clone -q --depth 1 --branch "$version" "$source" "$work/src"
fi
cd "$work/src"
log="$work/build.log"
echo "build-memtier: building memtier_benchmark $version into $out"
{ autoreconf -ivf && ./configure --disable-tls && make -j"$(nproc)"; } >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
cp memtier_benchmark "$out/memtier_benchmark"
"$out/memtier_benchmark" --version | head -1
