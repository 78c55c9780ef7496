#!/usr/bin/env bash
# Runs one of the examples in examples/ in the foreground: starts the
# servers it needs (memcached, redis-server, a Redis Cluster, with TLS
# certificates made on the spot, an etcd cluster, dnsmasq), then shardproxy
# on the example's configuration (or several, a fleet, on the configuration
# the script publishes to etcd), and prints the command that talks to it.
# Ctrl-C (or SIGTERM) stops shardproxy and every server started here, and
# removes the run directory. `make run EXAMPLE=NAME` builds bin/shardproxy
# and runs this script; extra arguments go to shardproxy.
#
#   scripts/example.sh NAME [shardproxy flags...]
#
# Each example is a directory with shardproxy.yml (and any file it names)
# and run.conf, which this script sources: servers=(kind:port ...), the
# try command, and tls=1 or routelib=1 when it needs them. A fleet example
# sets fleet=PREFIX (the etcd members among its servers hold the
# configuration under PREFIX), proxies=(HOST ...) (one proxy per loopback
# address, each with the example's ports there) and next=FILE,
# next_says=TEXT (the version the banner says how to publish). The files are
# copied into RUN_DIR (default ${TMPDIR:-/tmp}/shardproxy-example-NAME-PORT, PORT the proxy's),
# where the servers keep their files and their output (KIND-PORT/log) too.
#
# Ports: an example uses 127.0.0.1:22120-22139: the proxy 22120, its
# servers from 22121, cluster bus (and etcd peer) ports from 22131, the
# stats port 22138 and the HTTP admin 22139 (a fleet's proxies: these three
# on each one's loopback address, 127.0.0.N, which Linux answers on).
# PORT_BASE=N moves them all to N..N+19 (every 221NN in the copied files
# becomes N+NN-20); PORTS="P0 P1 ... P19" moves 22120+i to Pi instead (the
# tests pick free ports one by one).
#
# Exit status: shardproxy's (a fleet's: the first non-zero of its
# proxies'); 1 when a server or the proxy cannot start; 2 for an unknown
# example. The routelib example needs memcached's routelib.lua in
# SHARDPROXY_ROUTELIB; without it the script says how to get it and exits
# 0 having started nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "example.sh: $*" >&2; }

list_examples() {
	local d
	for d in examples/*/run.conf; do
		d=${d%/run.conf}
		echo "  ${d#examples/}"
	done
}

name=${1:-}
[ $# -eq 0 ] || shift
src=examples/$name
if ! [[ $name =~ ^[a-z0-9][a-z0-9-]*$ ]] || [ ! -f "$src/run.conf" ]; then
	say "unknown example '$name'; the examples are:"
	list_examples >&2
	exit 2
fi

BIN=${BIN:-bin/shardproxy}
BASE=${PORT_BASE:-22120}
if ! [[ $BASE =~ ^[0-9]+$ ]] || [ "$BASE" -lt 1024 ] || [ "$BASE" -gt 65516 ]; then
	say "PORT_BASE=$BASE: want a number from 1024 to 65516 (the example uses BASE..BASE+19)"
	exit 2
fi
read -r -a port_map <<<"${PORTS:-}"
if [ ${#port_map[@]} -eq 0 ]; then
	for i in $(seq 0 19); do port_map+=($((BASE + i))); done
elif [ ${#port_map[@]} -ne 20 ]; then
	say "PORTS has ${#port_map[@]} ports; want 20, for 22120-22139"
	exit 2
fi
for p in "${port_map[@]}"; do
	[[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || { say "PORTS: bad port '$p'"; exit 2; }
done
default_run=${TMPDIR:-/tmp}/shardproxy-example-$name-${port_map[0]}
RUN_DIR=${RUN_DIR:-$default_run}

# moved prints file with every port 22120+i (i < 20) replaced by port_map[i].
moved() { MAP="${port_map[*]}" perl -pe 'BEGIN { @p = split / /, $ENV{MAP} } s/\b221([23][0-9])\b/$p[$1 - 20]/ge' "$1"; }

# The example's own settings, ports moved.
servers=()
try=""
tls=0
routelib=0
fleet=""
proxies=(127.0.0.1)
next=""
next_says=""
# shellcheck disable=SC1090
source <(moved "$src/run.conf")

if [ "$routelib" = 1 ]; then
	lib=${SHARDPROXY_ROUTELIB:-}
	if [ -z "$lib" ] || [ ! -f "$lib" ]; then
		say "skipped: the $name example needs memcached's routelib.lua, which is not part of shardproxy."
		say "  It is vendor/routelib/routelib.lua in memcached's source (after vendor/fetch.sh),"
		say "  or lib/routelib/routelib.lua of https://github.com/memcached/memcached-proxylibs."
		say "  Run: make run EXAMPLE=$name ROUTELIB=/path/to/routelib.lua"
		say "  (or SHARDPROXY_ROUTELIB=/path/to/routelib.lua scripts/example.sh $name)."
		[ -z "$lib" ] || say "  SHARDPROXY_ROUTELIB=$lib: no such file."
		exit 0
	fi
fi

apt_install() {
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	say "installing $* with apt-get"
	$sudo apt-get update -q >/dev/null
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

# need installs the Debian package of each command that is missing.
need() {
	local cmd pkg missing=()
	for cmd in "$@"; do
		case $cmd in
		memcached) pkg=memcached ;;
		redis-server) pkg=redis-server ;;
		redis-cli) pkg=redis-tools ;;
		nc) pkg=netcat-openbsd ;;
		openssl) pkg=openssl ;;
		etcd) pkg=etcd-server ;;
		*) pkg=$cmd ;;
		esac
		command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

tools=(perl)
for s in "${servers[@]}"; do
	case ${s%%:*} in
	memcached) tools+=(memcached) ;;
	redis | redis-tls) tools+=(redis-server) ;;
	cluster) tools+=(redis-server redis-cli) ;;
	etcd) tools+=(etcd) ;;
	dnsmasq) tools+=(dnsmasq) ;;
	*) say "$src/run.conf: unknown server kind in '$s'"; exit 2 ;;
	esac
done
[ "$tls" != 1 ] || tools+=(openssl)
case $try in *"| nc "*) tools+=(nc) ;; esac
case $try in *redis-cli*) tools+=(redis-cli) ;; esac
need "${tools[@]}"

if [ ! -x "$BIN" ]; then
	say "building $BIN"
	go build -o "$BIN" ./cmd/shardproxy
fi

# listening PORT [HOST]: something listens on HOST (127.0.0.1):PORT.
listening() { (: <"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# Every port of the example must be free: a server already there would
# answer in place of the one this script means to start.
proxy_port=${port_map[0]}
stats_port=${port_map[18]}
admin_port=${port_map[19]}
ports=()
for s in "${servers[@]}"; do
	p=${s#*:}
	ports+=("${p%/*}")
	[ "${p#*/}" = "$p" ] || ports+=("${p#*/}")
done
for h in "${proxies[@]}"; do
	for p in "$proxy_port" "$stats_port" "$admin_port"; do
		if listening "$p" "$h"; then
			say "$h:$p is in use; stop what listens there, or run with PORT_BASE=N to use ports N..N+19 instead of 22120-22139"
			exit 1
		fi
	done
done
for p in "${ports[@]}"; do
	if listening "$p"; then
		say "127.0.0.1:$p is in use; stop what listens there, or run with PORT_BASE=N to use ports N..N+19 instead of 22120-22139"
		exit 1
	fi
done

if [ -e "$RUN_DIR" ]; then
	if [ "$RUN_DIR" = "$default_run" ]; then
		rm -rf "$RUN_DIR" # left by a run that was killed
	elif [ -n "$(ls -A "$RUN_DIR")" ]; then
		say "RUN_DIR=$RUN_DIR is not empty"
		exit 2
	fi
fi
mkdir -p "$RUN_DIR"

started=()
cleanup() {
	local status=$?
	if [ ${#started[@]} -gt 0 ]; then
		kill -TERM "${started[@]}" 2>/dev/null || true
		wait "${started[@]}" 2>/dev/null || true
		say "stopped the servers started here"
	fi
	rm -rf "$RUN_DIR"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The example's files, ports moved. routelib.lua is copied in: a route
# file may load only the files in its own directory and below.
for f in "$src"/*; do
	case ${f##*/} in run.conf) continue ;; esac
	moved "$f" >"$RUN_DIR/${f##*/}"
done
[ "$routelib" != 1 ] || cp "$lib" "$RUN_DIR/routelib.lua"

# make_certs makes a throwaway CA and, signed by it, the certificates the
# proxy serves (proxy), redis-server serves (redis) and the proxy shows
# redis-server (client), each for 127.0.0.1 and localhost, valid 2 days.
make_certs() {
	local d=$RUN_DIR/tls leaf
	mkdir -p "$d"
	(
		umask 077
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj /CN=shardproxy-example-ca -keyout "$d/ca.key" -out "$d/ca.crt" \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
		for leaf in proxy redis client; do
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
				-subj "/CN=shardproxy-example-$leaf" -keyout "$d/$leaf.key" -out "$d/$leaf.csr"
			openssl x509 -req -in "$d/$leaf.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
				-set_serial "0x$(openssl rand -hex 8)" -days 2 -out "$d/$leaf.crt" \
				-extfile <(printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' \
					'extendedKeyUsage=serverAuth,clientAuth')
			rm -f "$d/$leaf.csr"
		done
		rm -f "$d/ca.key" # nothing more is signed
	) 2>"$RUN_DIR/openssl.log" || { cat "$RUN_DIR/openssl.log" >&2; say "openssl failed"; exit 1; }
	say "made a throwaway CA and certificates in $d"
}
[ "$tls" != 1 ] || make_certs

# wait_port waits up to 10 s for what pid started to listen on port (of
# host, default 127.0.0.1); log, if given, is the file that has its output.
wait_port() {
	local port=$1 pid=$2 what=$3 log=${4:-} host=${5:-127.0.0.1}
	for _ in $(seq 100); do
		listening "$port" "$host" && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			[ -z "$log" ] || tail -n 20 "$log" >&2
			say "$what on $host:$port exited; its output is above"
			exit 1
		fi
		sleep 0.1
	done
	[ -z "$log" ] || tail -n 20 "$log" >&2
	say "$what on $host:$port did not listen within 10s"
	exit 1
}

# The etcd members, named by their client port, form one cluster: each is
# started knowing every member's peer URL.
etcd_cluster=()
etcd_endpoints=()
for s in "${servers[@]}"; do
	case $s in etcd:*/*)
		p=${s#*:}
		etcd_cluster+=("e${p%/*}=http://127.0.0.1:${p#*/}")
		etcd_endpoints+=("127.0.0.1:${p%/*}")
		;;
	esac
done
etcd=$(IFS=,; echo "${etcd_endpoints[*]}")

# start_server KIND PORT [BUS] starts one server in the background, its
# output in RUN_DIR/KIND-PORT/log; BUS is a cluster node's bus port or an
# etcd member's peer port.
start_server() {
	local kind=$1 port=$2 bus=${3:-} dir=$RUN_DIR/$1-$2 user=()
	mkdir -p "$dir"
	exec 3>"$dir/log"
	local redis=(--bind 127.0.0.1 --dir "$dir" --save "" --appendonly no --daemonize no --loglevel warning)
	case $kind in
	memcached)
		[ "$(id -u)" != 0 ] || user=(-u root) # memcached refuses root without -u
		memcached -l 127.0.0.1 -p "$port" -U 0 "${user[@]}" >&3 2>&1 &
		;;
	redis)
		redis-server "${redis[@]}" --port "$port" >&3 2>&1 &
		;;
	redis-tls)
		redis-server "${redis[@]}" --port 0 --tls-port "$port" \
			--tls-cert-file "$RUN_DIR/tls/redis.crt" --tls-key-file "$RUN_DIR/tls/redis.key" \
			--tls-ca-cert-file "$RUN_DIR/tls/ca.crt" >&3 2>&1 &
		;;
	cluster)
		redis-server "${redis[@]}" --port "$port" --cluster-enabled yes --cluster-port "$bus" \
			--cluster-config-file nodes.conf --cluster-node-timeout 2000 >&3 2>&1 &
		;;
	etcd)
		etcd --name "e$port" --data-dir "$dir/data" \
			--listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
			--listen-peer-urls "http://127.0.0.1:$bus" --initial-advertise-peer-urls "http://127.0.0.1:$bus" \
			--initial-cluster "$(IFS=,; echo "${etcd_cluster[*]}")" --initial-cluster-state new \
			--initial-cluster-token shardproxy-example --logger zap --log-level warn >&3 2>&1 &
		;;
	dnsmasq)
		# Its own records only (dnsmasq.conf): no /etc/hosts, no upstream.
		"$(command -v dnsmasq || echo /usr/sbin/dnsmasq)" --keep-in-foreground --no-resolv --no-hosts \
			--port "$port" --listen-address 127.0.0.1 --bind-interfaces --pid-file= \
			--log-facility=- --conf-file="$RUN_DIR/dnsmasq.conf" >&3 2>&1 &
		;;
	esac
	local pid=$!
	exec 3>&-
	started+=("$pid")
	wait_port "$port" "$pid" "$kind" "$dir/log"
	say "$kind on 127.0.0.1:$port (pid $pid)"
}

cluster=()
for s in "${servers[@]}"; do
	kind=${s%%:*}
	p=${s#*:}
	port=${p%/*}
	bus=""
	[ "${p#*/}" = "$p" ] || bus=${p#*/}
	start_server "$kind" "$port" "$bus"
	[ "$kind" != cluster ] || cluster+=("127.0.0.1:$port")
done

# The cluster nodes become one cluster of masters, the slots spread evenly.
if [ ${#cluster[@]} -gt 0 ]; then
	redis-cli --cluster create "${cluster[@]}" --cluster-yes >"$RUN_DIR/cluster-create.log" 2>&1 ||
		{ cat "$RUN_DIR/cluster-create.log" >&2; say "redis-cli --cluster create failed"; exit 1; }
	for node in "${cluster[@]}"; do
		for _ in $(seq 200); do # up to 20 s
			redis-cli -h 127.0.0.1 -p "${node#*:}" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
			sleep 0.1
		done
		redis-cli -h 127.0.0.1 -p "${node#*:}" cluster info | grep -q '^cluster_state:ok' ||
			{ say "cluster node $node is not ok within 20s"; exit 1; }
	done
	say "Redis Cluster of ${#cluster[@]} masters: ${cluster[*]}"
fi

# etcd_healthy PORT asks the etcd member's /health: true once the
# cluster has a leader and a quorum.
etcd_healthy() {
	local reply
	reply=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null || return 1
	[[ $reply == *'"health":"true"'* ]]
}

if [ ${#etcd_endpoints[@]} -gt 0 ]; then
	for ep in "${etcd_endpoints[@]}"; do
		for _ in $(seq 200); do # up to 20 s
			etcd_healthy "${ep#*:}" && break
			sleep 0.1
		done
		etcd_healthy "${ep#*:}" || { say "etcd member $ep is not healthy within 20s"; exit 1; }
	done
	say "etcd cluster of ${#etcd_endpoints[@]} members: $etcd"
fi

# A fleet's proxies take their configuration from etcd, where it is
# published first, validated as -t would; each proxy has an id of its own.
if [ -n "$fleet" ]; then
	"$BIN" fleet put -c "$RUN_DIR/shardproxy.yml" --etcd "$etcd" --etcd-prefix "$fleet" >"$RUN_DIR/fleet-put.log" 2>&1 ||
		{ cat "$RUN_DIR/fleet-put.log" >&2; say "shardproxy fleet put failed"; exit 1; }
	say "$(tail -n 1 "$RUN_DIR/fleet-put.log")"
fi

# Each proxy listens on its own loopback address (the pools' addresses
# moved there with --fleet-listen-host in a fleet, whose configuration
# all share), the same ports on each.
pids=()
for i in "${!proxies[@]}"; do
	h=${proxies[$i]}
	if [ -n "$fleet" ]; then
		source_args=(--etcd "$etcd" --etcd-prefix "$fleet" --fleet-id "proxy$((i + 1))" --fleet-listen-host "$h")
	else
		source_args=(-c "$RUN_DIR/shardproxy.yml")
	fi
	"$BIN" "${source_args[@]}" -s "$stats_port" -a "$h" --admin "$h:$admin_port" "$@" &
	pids+=($!)
	started+=($!)
	wait_port "$proxy_port" $! shardproxy "" "$h"
done

# The shell stays to stop the servers afterwards. From here on, INT and
# TERM go on to the proxies, which drain and exit, and the script exits
# with their status (set before the banner: a Ctrl-C right after it is one).
interrupted=0
trap 'interrupted=1; kill -TERM "${pids[@]}" 2>/dev/null || true' INT TERM

if [ -z "$fleet" ]; then
	cat >&2 <<MSG

shardproxy runs examples/$name ($RUN_DIR/shardproxy.yml) on 127.0.0.1:$proxy_port.
Talk to it:

  ${try//\{run\}/$RUN_DIR}

Stats port: nc -q1 127.0.0.1 $stats_port (twemproxy's JSON)
HTTP admin: curl 127.0.0.1:$admin_port/metrics; reload: kill -HUP ${pids[0]}
Ctrl-C stops shardproxy and the servers started here.

MSG
else
	cat >&2 <<MSG

${#pids[@]} proxies run examples/$name, on ${proxies[*]}, each with the pool on
port $proxy_port, the stats port $stats_port and the HTTP admin $admin_port there; their
configuration comes from etcd $etcd under $fleet.
Talk to it:

  ${try//\{run\}/$RUN_DIR}

Publish a new configuration ($next $next_says) and watch every proxy apply it:

  $BIN fleet put -c $RUN_DIR/$next --etcd $etcd --etcd-prefix $fleet
  $BIN fleet status --etcd $etcd --etcd-prefix $fleet
  curl -s ${proxies[0]}:$admin_port/metrics | grep -E '^shardproxy_(fleet_config_revision|ring_version)'

Stats port: nc -q1 HOST $stats_port (twemproxy's JSON)
HTTP admin: curl HOST:$admin_port/metrics, /config
Ctrl-C stops the proxies and the servers started here.

MSG
fi

# wait_proxy PID waits for one proxy and sets st to its exit status. A
# signal cuts wait short (status 128+n) whether or not the proxy has
# exited yet: it waits again for the proxy's own status.
wait_proxy() {
	while :; do
		interrupted=0
		st=0
		wait "$1" || st=$?
		[ "$interrupted" = 1 ] || break
	done
	# bash 5.2 may lose the status of a child that exited while a trapped
	# signal cut the wait before: the next wait then gives -1, never a real
	# exit status (seen under load). shardproxy exits 0 on INT and TERM.
	if [ "$st" = -1 ]; then
		st=0
	fi
}

# The first of several proxies to exit (or a signal) stops the others; the
# script exits with the first non-zero status among them, else 0.
if [ ${#pids[@]} -gt 1 ]; then
	wait -n "${pids[@]}" || true
	kill -TERM "${pids[@]}" 2>/dev/null || true
fi
status=0
for pid in "${pids[@]}"; do
	wait_proxy "$pid"
	[ "$status" != 0 ] || status=$st
done
exit "$status"
