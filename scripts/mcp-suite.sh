#!/usr/bin/env bash
# Runs memcached's own proxy tests (the t/proxy*.t files of a memcached
# source tree, e.g. tag 1.6.45) against shardproxy and, when MCPROXY names a
# memcached built with --enable-proxy, against memcached's proxy in the same
# harness, as a user moving from one to the other would:
#
#   each .t runs with cwd a scratch copy of the tree's t/ (the tests write
#   mode files into t/); where a test starts "memcached-debug", it gets
#   scripts/mcp-suite-memcached.sh, which turns memcached's command line
#   (-p, -l, -m, -o proxy_config=FILE,proxy_arg=ARG, ...) into a shardproxy
#   pool of kind lua and runs bin/shardproxy; for the memcached target it
#   gets MCPROXY itself. The .t and .lua files run unedited.
#
# Usage: scripts/mcp-suite.sh MC_SRC [TEST...]     (TEST: proxyunits, ...;
#        default every t/proxy*.t in MC_SRC)
# Environment: MCPROXY (memcached binary with the proxy; the memcached
# target runs only when it is set), MCP_SUITE_TARGETS (default "memcached
# shardproxy", or "shardproxy" without MCPROXY), SHARDPROXY (default bin/shardproxy),
# MCP_SUITE_OUT (default mcp-suite-results/), MCP_SUITE_TIMEOUT (seconds per
# file, default 300), ROUTELIB (routelib.lua; default
# MC_SRC/vendor/routelib/routelib.lua, for proxy_config=routelib),
# MCP_SUITE_PORT_OFFSET (default 0: added to every mock backend port, 11011
# to 12999, in the scratch copies of the .t and .lua files, so that two
# runs can share a machine; the only edit made to the tests).
#
# Results: MCP_SUITE_OUT/TARGET/FILE.log (the TAP output and the server's
# log) and MCP_SUITE_OUT/summary.md, a table of planned, passed and failed
# assertions per file and target. The mock backends listen on the fixed
# ports the tests name (moved by MCP_SUITE_PORT_OFFSET), so targets run one
# after the other. Nothing of the memcached tree is changed or copied into
# this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { echo "mcp-suite: $*" >&2; }

[ $# -ge 1 ] || { say "usage: $0 MC_SRC [TEST...]"; exit 2; }
src=$(cd "$1" && pwd)
shift
[ -d "$src/t" ] && [ -f "$src/t/lib/MemcachedTest.pm" ] || { say "$src has no t/lib/MemcachedTest.pm"; exit 2; }
command -v perl >/dev/null || { say "perl is missing"; exit 2; }

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	for f in "$src"/t/proxy*.t; do tests+=("$(basename "$f" .t)"); done
fi
shardproxy=${SHARDPROXY:-$root/bin/shardproxy}
[ -x "$shardproxy" ] || { say "$shardproxy is not built (make build)"; exit 2; }
routelib=${ROUTELIB:-$src/vendor/routelib/routelib.lua}
timeout_s=${MCP_SUITE_TIMEOUT:-300}
out=$(mkdir -p "${MCP_SUITE_OUT:-mcp-suite-results}" && cd "${MCP_SUITE_OUT:-mcp-suite-results}" && pwd)

targets=(shardproxy)
if [ -n "${MCPROXY:-}" ]; then
	[ -x "$MCPROXY" ] || { say "MCPROXY=$MCPROXY is not executable"; exit 2; }
	targets=(memcached "${targets[@]}")
fi
if [ -n "${MCP_SUITE_TARGETS:-}" ]; then
	read -r -a targets <<<"$MCP_SUITE_TARGETS"
fi

work=$(mktemp -d /tmp/mcp-suite.XXXXXX)
trap 'rm -rf "$work"' EXIT

# builddir TARGET: a directory laid out as memcached's build tree is for its
# tests (t/, memcached-debug, timedrun).
builddir() {
	local d=$work/$1
	rm -rf "$d"
	mkdir -p "$d"
	cp -r "$src/t" "$d/t"
	if [ "${MCP_SUITE_PORT_OFFSET:-0}" != 0 ]; then
		perl -pi -e 's/\b(1[12]\d{3})\b/$1 >= 11011 ? $1 + '"$MCP_SUITE_PORT_OFFSET"' : $1/ge' \
			"$d"/t/proxy*.t "$d"/t/proxy*.lua
	fi
	if [ "$1" = memcached ]; then
		ln -s "$(cd "$(dirname "$MCPROXY")" && pwd)/$(basename "$MCPROXY")" "$d/memcached-debug"
	else
		cp "$root/scripts/mcp-suite-memcached.sh" "$d/memcached-debug"
	fi
	# memcached's timedrun runs a command for at most N seconds. Here the
	# command is exec'd (the tests send their signals, SIGHUP to reload, to
	# the pid they started); the per-file timeout below bounds the run.
	printf '#!/bin/sh\nshift\nexec "$@"\n' >"$d/timedrun"
	chmod +x "$d/memcached-debug" "$d/timedrun"
	echo "$d"
}

# count LOG: "planned passed failed" of the top-level TAP lines.
count() {
	local planned passed failed
	planned=$(grep -E -m1 '^1\.\.[0-9]+' "$1" | sed 's/^1\.\.//; s/ .*//' || true)
	passed=$(grep -cE '^ok [0-9]+' "$1" || true)
	failed=$(grep -cE '^not ok [0-9]+' "$1" || true)
	echo "${planned:--} $passed $failed"
}

declare -A result
for target in "${targets[@]}"; do
	d=$(builddir "$target")
	mkdir -p "$out/$target"
	for t in "${tests[@]}"; do
		[ -f "$d/t/$t.t" ] || { say "no t/$t.t in $src"; exit 2; }
		log=$out/$target/$t.log
		say "$target: t/$t.t"
		status=0
		(cd "$d" && SHARDPROXY="$shardproxy" MCP_SUITE_ROUTELIB="$routelib" \
			MCP_SUITE_SERVER_LOG="$out/$target/$t.server.log" \
			timeout -s KILL "$timeout_s" perl "t/$t.t") >"$log" 2>&1 || status=$?
		# A test left running (timeout) may leave its server behind.
		pkill -f "$d/" 2>/dev/null || true
		read -r planned passed failed < <(count "$log")
		note=""
		[ "$status" = 137 ] && note="timed out after ${timeout_s}s"
		[ "$status" != 0 ] && [ "$status" != 137 ] && note="exit $status"
		grep -q '^1\.\.0 # SKIP' "$log" && note="skipped: $(sed -n 's/^1\.\.0 # SKIP //p' "$log")"
		result[$target/$t]="$planned|$passed|$failed|$note"
		say "$target: t/$t.t planned=$planned passed=$passed failed=$failed $note"
	done
done

{
	echo "# memcached's proxy tests ($(basename "$src"))"
	echo
	printf '| test |'
	for target in "${targets[@]}"; do printf ' %s planned | passed | failed | |' "$target"; done
	echo
	printf '|---|'
	for _ in "${targets[@]}"; do printf -- '---|---|---|---|'; done
	echo
	for t in "${tests[@]}"; do
		printf '| t/%s.t |' "$t"
		for target in "${targets[@]}"; do
			IFS='|' read -r planned passed failed note <<<"${result[$target/$t]}"
			printf ' %s | %s | %s | %s |' "$planned" "$passed" "$failed" "$note"
		done
		echo
	done
} >"$out/summary.md"
cat "$out/summary.md"
