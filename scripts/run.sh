#!/usr/bin/env bash
# Runs shardproxy in the foreground on $CONFIG (default testdata/default.yml)
# with local memcached backends on 127.0.0.1:22121-22123, started here unless
# something already listens there. Arguments go to shardproxy. On exit
# (shardproxy stops, Ctrl-C, SIGTERM) the memcached servers started here are
# stopped. `make run` builds bin/shardproxy first.
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${CONFIG:-testdata/default.yml}
BIN=${BIN:-bin/shardproxy}
read -r -a MEMCACHED_PORTS <<<"${MEMCACHED_PORTS:-22121 22122 22123}"

say() { echo "run.sh: $*" >&2; }

apt_install() {
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	say "installing $* with apt-get"
	$sudo apt-get update -q >/dev/null
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

listening() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

command -v memcached >/dev/null 2>&1 || apt_install memcached
command -v nc >/dev/null 2>&1 || apt_install netcat-openbsd
if [ ! -x "$BIN" ]; then
	say "building $BIN"
	go build -o "$BIN" ./cmd/shardproxy
fi
[ -f "$CONFIG" ] || { say "no config file $CONFIG"; exit 1; }

started=()
stop_memcached() {
	if [ ${#started[@]} -gt 0 ]; then
		kill "${started[@]}" 2>/dev/null || true
		wait "${started[@]}" 2>/dev/null || true
		say "stopped the memcached servers started here"
	fi
}
trap stop_memcached EXIT

user=()
[ "$(id -u)" != 0 ] || user=(-u root) # memcached refuses root without -u
for port in "${MEMCACHED_PORTS[@]}"; do
	if listening "$port"; then
		say "127.0.0.1:$port already listens; using it as is"
		continue
	fi
	memcached -l 127.0.0.1 -p "$port" -U 0 "${user[@]}" &
	pid=$!
	started+=("$pid")
	for _ in $(seq 50); do # up to 5 s
		listening "$port" && break
		kill -0 "$pid" 2>/dev/null || { say "memcached on 127.0.0.1:$port exited"; exit 1; }
		sleep 0.1
	done
	listening "$port" || { say "memcached on 127.0.0.1:$port did not start within 5s"; exit 1; }
	say "memcached on 127.0.0.1:$port (pid $pid)"
done

listen=$(awk '$1 == "listen:" { print $2; exit }' "$CONFIG")
host=${listen%:*}
port=${listen##*:}
cat >&2 <<MSG

shardproxy serves $CONFIG on $listen. Talk to it with memcached's text protocol:

  printf 'set foo 0 0 3\\r\\nbar\\r\\nget foo\\r\\n' | nc -q1 $host $port

(nc -q1 works with both Debian netcats, netcat-openbsd and netcat-traditional.)
The proxy's counters, memcached-style:

  printf 'stats\\r\\n' | nc -q1 $host $port

Ctrl-C stops shardproxy and the memcached servers started here.

MSG

# Not exec: the shell stays to stop memcached afterwards. It passes INT and
# TERM on to shardproxy and exits with shardproxy's status.
"$BIN" -c "$CONFIG" "$@" &
proxy=$!
interrupted=0
trap 'interrupted=1; kill -TERM "$proxy" 2>/dev/null || true' INT TERM
# A signal cuts wait short (status 128+n) whether or not shardproxy has
# exited yet; wait again for shardproxy's own status. bash 5.2 may then
# give -1 for a child that exited in between (never a real status):
# shardproxy exits 0 on INT and TERM.
while :; do
	interrupted=0
	status=0
	wait "$proxy" || status=$?
	[ "$interrupted" = 1 ] || break
done
if [ "$status" = -1 ]; then
	status=0
fi
exit "$status"
