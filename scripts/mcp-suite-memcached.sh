#!/usr/bin/env bash
# memcached's command line, served by shardproxy: scripts/mcp-suite.sh puts
# this file where memcached's tests start "memcached-debug". It writes a
# shardproxy configuration with one pool of kind lua per listen address and
# execs $SHARDPROXY on it.
#
#   -p PORT            listen on 127.0.0.1:PORT (memcached: every address)
#   -l [tag_T_:]ADDR   listen on ADDR (several -l: several pools); a tagged
#                      one is listen_tags T: ADDR of the first pool
#   -m MB              lua_internal_cache (mcp.internal's storage)
#   -t N               -threads N (memcached's worker threads; default 4):
#                      a Lua pool runs one Lua state per thread
#   -o proxy_config=F  lua: F (routelib: $MCP_SUITE_ROUTELIB; a:b: lua: [a, b]),
#                      lua_dirs: / (memcached's route files read any path),
#                      proxy_arg=A: lua_arg: A
#   -h                 memcached's feature words the tests look for
# Other options (-U, -u, -R, -c, extstore and slab tunables) have no
# counterpart and are ignored.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = -h ]; then
	# MemcachedTest.pm asks -h which features the binary has.
	echo "shardproxy as memcached: -p <num> -l <addr> -m <num> -o proxy_config=<file>,proxy_arg=<arg>,ext_path=<file>"
	exit 0
fi

port=11211
threads=4 # memcached's default -t
listens=()
mem=""
config=""
arg=""
while [ $# -gt 0 ]; do
	case $1 in
	-p) port=$2; shift ;;
	-l) listens+=("$2"); shift ;;
	-m) mem=$2; shift ;;
	-o)
		IFS=',' read -r -a opts <<<"$2"
		for o in "${opts[@]}"; do
			case $o in
			proxy_config=*) config=${o#proxy_config=} ;;
			proxy_arg=*) arg=${o#proxy_arg=} ;;
			esac
		done
		shift ;;
	-t) threads=$2; shift ;;
	-U | -u | -R | -c | -s | -b | -I | -f | -n) shift ;;
	esac
	shift
done
[ -n "$config" ] || { echo "mcp-suite: no -o proxy_config" >&2; exit 2; }
[ "$config" = routelib ] && config=$MCP_SUITE_ROUTELIB
[ ${#listens[@]} -gt 0 ] || listens=("127.0.0.1:$port")

abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/${1#./}" ;; esac; }

conf=$here/shardproxy.$$.yml
# -l tag_NAME_:ADDR: a listener whose requests carry the tag NAME; they
# become the first pool's listen_tags. Each untagged -l is a pool.
plain=()
tags=()
for l in "${listens[@]}"; do
	addr=${l##*_:} # tag_b_:127.0.0.1:12052 -> 127.0.0.1:12052
	case $addr in *:*) ;; *) addr=$addr:$port ;; esac
	case $l in
	tag_*_:*) name=${l#tag_}; tags+=("${name%%_:*}: $addr") ;;
	*) plain+=("$addr") ;;
	esac
done
[ ${#plain[@]} -gt 0 ] || plain=("127.0.0.1:$port")
[ -f "$arg" ] && arg=$(abs "$arg") # a file: from the test's cwd
{
	i=0
	for addr in "${plain[@]}"; do
		echo "mcp$i:"
		echo "  listen: $addr"
		if [ $i = 0 ] && [ ${#tags[@]} -gt 0 ]; then
			echo "  listen_tags:"
			for t in "${tags[@]}"; do echo "    $t"; done
		fi
		# proxy_config=a.lua:b.lua: several route files, one state.
		echo "  lua:"
		IFS=':' read -r -a files <<<"$config"
		for f in "${files[@]}"; do echo "    - $(abs "$f")"; done
		# memcached's route files read any path (the tests' mode files
		# are in /tmp).
		echo "  lua_dirs: /"
		[ -n "$arg" ] && echo "  lua_arg: $arg"
		[ -n "$mem" ] && echo "  lua_internal_cache: $mem"
		i=$((i + 1))
	done
} >"$conf"
exec "$SHARDPROXY" -c "$conf" -threads "$threads" -admin "" -a 127.0.0.1 -s 0 -v "${MCP_SUITE_VERBOSITY:-5}" \
	-o "${MCP_SUITE_SERVER_LOG:-/dev/stderr}"
