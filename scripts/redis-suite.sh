#!/usr/bin/env bash
# Runs Redis's own test suite (the tests/ and runtest of a Redis source tree,
# e.g. tag 7.0.15) against one or more targets, as a user of each would:
#
#   direct      one redis-server
#   proxy       bin/shardproxy in front of a pool of 3 redis-server
#               (ketama, redis_flushall: true so the suite can flush,
#               redis_config: true so it can CONFIG SET, redis_scripts:
#               dedicated so a busy script can be killed as on a server)
#   nutcracker  nutcracker in front of the same kind of pool
#   nutcracker-flush  the same, but the suite's copy empties the servers
#               directly before each test group (nutcracker refuses
#               FLUSHALL by closing the connection)
#
# Usage: scripts/redis-suite.sh REDIS_SRC [TARGET...]   (default: all four)
#
# Each target gets fresh servers for every unit and its own copy of the
# suite (the suite writes into tests/tmp), so targets may run at once
# (SUITE_PARALLEL=1).
# Ports come from SHARDPROXY_PORT_RANGE=LO-HI (default 30000-30999): target i
# uses LO+200*i .. LO+200*i+199. Results go to SUITE_OUT (default
# suite-results/): per target the full log, the failing tests, a line per
# unit (TARGET.units: UNIT passed=N failed=N cut=N), and a line
#   TARGET passed=N failed=N exceptions=N
# in summary.txt. RUNTEST_ARGS replaces the suite's arguments (default below);
# SUITE_UNITS, a grep -E pattern, picks the units to run (default: all).
# Nothing of the Redis tree is changed or copied into this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { echo "redis-suite: $*" >&2; }

[ $# -ge 1 ] || { say "usage: $0 REDIS_SRC [direct|proxy|nutcracker|nutcracker-flush ...]"; exit 2; }
src=$(cd "$1" && pwd)
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(direct proxy nutcracker nutcracker-flush)
[ -x "$src/runtest" ] && [ -d "$src/tests" ] || { say "$src has no runtest and tests/"; exit 2; }
command -v tclsh >/dev/null || { say "tclsh is missing (apt-get install tcl)"; exit 2; }
for cmd in redis-server redis-cli; do
	command -v $cmd >/dev/null || { say "$cmd is missing (make deps)"; exit 2; }
done

range=${SHARDPROXY_PORT_RANGE:-30000-30999}
lo=${range%-*}
hi=${range#*-}
if [ $((hi - lo + 1)) -lt $((200 * ${#targets[@]})) ]; then
	say "SHARDPROXY_PORT_RANGE=$range is too small: ${#targets[@]} target(s) need 200 ports each"
	exit 2
fi
out=$(mkdir -p "${SUITE_OUT:-suite-results}" && cd "${SUITE_OUT:-suite-results}" && pwd)
read -r -a default_args <<<'--singledb --durable --tags -slow --ignore-encoding --ignore-digest'
if [ -n "${RUNTEST_ARGS:-}" ]; then
	read -r -a default_args <<<"$RUNTEST_ARGS"
fi

work=$(mktemp -d /tmp/redis-suite.XXXXXX)
pids=() # the servers and proxies this shell started
stop_started() {
	local pid
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		# A redis-server running an endless script a unit left behind
		# does not stop on TERM.
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
trap 'stop_started; rm -rf "$work"' EXIT
export TERM=dumb # the suite colours its [ok] lines on an xterm

listening() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

await() { # port name
	for _ in $(seq 100); do
		listening "$1" && return 0
		sleep 0.1
	done
	say "$2 did not listen on 127.0.0.1:$1 within 10s"
	return 1
}

# start_redis PORT DIR: a redis-server with the settings the suite's own
# servers have that a user may choose (DEBUG allowed, no snapshots).
start_redis() {
	mkdir -p "$2"
	redis-server --port "$1" --bind 127.0.0.1 --dir "$2" --save '' --appendonly no \
		--enable-debug-command yes --enable-protected-configs yes --enable-module-command yes \
		--latency-monitor-threshold 1 --logfile "$2/redis.log" &
	pids+=($!)
	await "$1" "redis-server"
}

# pool_yaml NAME PORT EXTRA SERVER_PORT...: the pool both proxies run, with
# the EXTRA line (or none).
pool_yaml() {
	local name=$1 port=$2 extra=$3
	shift 3
	printf '%s:\n  listen: 127.0.0.1:%s\n  redis: true\n  hash: fnv1a_64\n  distribution: ketama\n' "$name" "$port"
	# The suite names the keys one command uses with a common {tag}, as for
	# a Redis Cluster: a pool hashing only the tag keeps them together.
	printf '  hash_tag: "{}"\n'
	printf '  timeout: 30000\n  auto_eject_hosts: false\n  server_retry_timeout: 1000\n'
	[ -z "$extra" ] || printf '  %s\n' "$extra"
	printf '  servers:\n'
	for p in "$@"; do printf '    - 127.0.0.1:%s:1\n' "$p"; done
}

# run_target NAME INDEX: servers, the proxy in front, then the suite.
run_target() {
	local name=$1 base=$((lo + 200 * $2)) dir="$work/$1" port
	mkdir -p "$dir"
	cp -r "$src/runtest" "$src/tests" "$dir/"
	[ ! -d "$src/utils" ] || cp -r "$src/utils" "$dir/"
	mkdir -p "$dir/src" "$dir/tests/tmp"
	ln -sf "$(command -v redis-server)" "$dir/src/redis-server"
	ln -sf "$(command -v redis-cli)" "$dir/src/redis-cli"
	# The suite's port finder also probes port+10000 (a cluster bus port,
	# for servers it spawns, which an external run never does): past 55535
	# that is no port at all. In this copy it probes an ephemeral port, so
	# every port stays in the range.
	sed -i 's/\[expr \$port+10000\]/0/' "$dir/tests/support/util.tcl"
	case $name in
	direct) port=$base ;;
	proxy | nutcracker | nutcracker-flush) port=$((base + 10)) ;;
	*)
		say "unknown target $name"
		return 2
		;;
	esac
	if [ "$name" = nutcracker-flush ]; then
		flush_servers_directly "$dir" $((base + 1)) $((base + 2)) $((base + 3))
	fi
	say "$name: suite against 127.0.0.1:$port (log $out/$name.log)"
	local started=$SECONDS unit
	: >"$out/$name.log"
	# One run per unit, on fresh servers (and a fresh proxy): a closed
	# connection is an exception that ends the suite's run, and a unit that
	# leaves a server changed (a setting, a script still running) when one
	# of its tests fails halfway: either should cost only that unit.
	: >"$out/$name.units"
	for unit in $(cd "$dir" && ./runtest --list-tests | grep -E "${SUITE_UNITS:-.}"); do
		stop_started
		pids=()
		start_fleet "$name" "$base" "$dir"
		(cd "$dir" && ./runtest --host 127.0.0.1 --port "$port" --baseport $((base + 150)) --portcount 40 \
			--timeout "${UNIT_TIMEOUT:-300}" "${default_args[@]}" --single "$unit") >"$out/$name.unit.log" 2>&1 </dev/null || true
		cat "$out/$name.unit.log" >>"$out/$name.log"
		printf '%s passed=%d failed=%d cut=%d\n' "$unit" \
			"$(grep -c '^\[ok\]' "$out/$name.unit.log" || true)" \
			"$(grep -c '^\[err\]' "$out/$name.unit.log" || true)" \
			"$(grep -cE '^\[(exception\]|TIMEOUT\])' "$out/$name.unit.log" || true)" >>"$out/$name.units"
	done
	rm -f "$out/$name.unit.log"
	count "$name" $((SECONDS - started))
}

# start_fleet NAME BASE DIR: the servers of target NAME, and the proxy in
# front of them; they start empty (no snapshots are saved).
start_fleet() {
	local name=$1 base=$2 dir=$3 port=$(($2 + 10))
	if [ "$name" = direct ]; then
		start_redis "$base" "$dir/r0"
		return
	fi
	for i in 1 2 3; do start_redis $((base + i)) "$dir/r$i"; done
	if [ "$name" = proxy ]; then
		pool_yaml suite "$port" $'redis_flushall: true\n  redis_config: true\n  redis_scripts: dedicated' $((base + 1)) $((base + 2)) $((base + 3)) >"$dir/pool.yml"
		"$root/bin/shardproxy" -c "$dir/pool.yml" -a 127.0.0.1 -s $((base + 11)) \
			-admin 127.0.0.1:$((base + 12)) -o "$dir/proxy.log" &
	else
		pool_yaml suite "$port" '' $((base + 1)) $((base + 2)) $((base + 3)) >"$dir/pool.yml"
		nutcracker -c "$dir/pool.yml" -a 127.0.0.1 -s $((base + 11)) -o "$dir/proxy.log" &
	fi
	pids+=($!)
	await "$port" "$name"
}

# flush_servers_directly DIR PORT...: for nutcracker-flush, the copy's
# harness empties each server itself before a test group instead of sending
# FLUSHALL and FUNCTION FLUSH, which nutcracker refuses by closing the
# connection (so that every unit of the plain nutcracker run ends at its
# first line).
flush_servers_directly() {
	local dir=$1 tcl=""
	shift
	for p in "$@"; do tcl+="exec redis-cli -p $p flushall; exec redis-cli -p $p function flush; "; done
	python3 - "$dir/tests/support/server.tcl" "$tcl" <<'PY'
import sys
path, tcl = sys.argv[1], sys.argv[2]
text = open(path).read()
old = "    r flushall\n    r function flush\n"
if old not in text:
    sys.exit("redis-suite: the harness has no FLUSHALL to replace")
open(path, "w").write(text.replace(old, "    " + tcl + "\n", 1))
PY
}

# count NAME SECONDS: the suite prints one [ok] or [err] line per test, and
# [exception] or [TIMEOUT] when a unit's run ends early.
count() {
	local log="$out/$1.log" ok err exc
	ok=$(grep -c '^\[ok\]: ' "$log" || true)
	err=$(grep -c '^\[err\]: ' "$log" || true)
	exc=$(grep -cE '^\[(exception\]|TIMEOUT\])' "$log" || true)
	grep -E '^\[(err\]|exception\]|TIMEOUT\])' "$log" >"$out/$1.failed" || true
	echo "$1 passed=$ok failed=$err aborted_units=$exc seconds=$2" | tee -a "$out/summary.txt"
}

if [ ! -x bin/shardproxy ] && printf '%s\n' "${targets[@]}" | grep -qx proxy; then
	go build -o bin/shardproxy ./cmd/shardproxy
fi
: >"$out/summary.txt"
i=0
jobs=()
for t in "${targets[@]}"; do
	if [ "${SUITE_PARALLEL:-0}" = 1 ]; then
		(
			pids=()
			trap stop_started EXIT
			run_target "$t" $i
		) &
		jobs+=($!)
	else
		run_target "$t" $i
		stop_started
		pids=()
	fi
	i=$((i + 1))
done
for j in "${jobs[@]}"; do wait "$j" || true; done
cat "$out/summary.txt"
