# shardproxy — build, test and run. `make help` lists the targets.

GO        ?= go
FUZZTIME  ?= 30s
FUZZMINTIME ?= 5s
CONFIG    ?= testdata/default.yml
GOBIN     := $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)
STATICCHECK         := $(GOBIN)/staticcheck
STATICCHECK_VERSION ?= latest
# helm, for packaging's test of the chart (helm lint, helm template); from
# its Go module, as Debian packages none (about 2 minutes to build).
HELM                := $(GOBIN)/helm
HELM_VERSION        ?= v3.22.0
# memcached's routelib.lua, for the Lua routelib tests (TestRoutelib):
# make test ROUTELIB=/path/to/memcached/vendor/routelib/routelib.lua. Empty:
# SHARDPROXY_ROUTELIB from the environment, if set; else those tests skip.
ROUTELIB  ?=
# sudo only when not root (CI runs as root and may have no sudo).
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# command (or a path it installs):Debian package, for every server and
# client suite the integration tests run, the headless browser that loads
# the admin status page, and the tools the examples' and packaging's tests
# use (nc and openssl for examples/, systemd-analyze to verify
# packaging/shardproxy.service).
APT_DEPS  := memcached:memcached redis-server:redis-server redis-cli:redis-tools redis-sentinel:redis-sentinel nutcracker:nutcracker \
	memccapable:libmemcached-tools /usr/lib/python3/dist-packages/pymemcache:python3-pymemcache \
	/usr/lib/python3/dist-packages/redis:python3-redis chromium:chromium \
	nc:netcat-openbsd openssl:openssl systemd-analyze:systemd etcd:etcd-server dnsmasq:dnsmasq

.PHONY: help build run test lint bench memtier bench-go bench-fleet fuzz deps clean soak redis-suite mcp-suite

help:
	@echo 'make build   build bin/shardproxy'
	@echo 'make run     build, start 3 memcached on 127.0.0.1:22121-22123, run shardproxy -c $(CONFIG)'
	@echo 'make run EXAMPLE=NAME  run examples/NAME with the servers it needs (memcached, redis, redis-cluster,'
	@echo '             lua-v1, lua-v2, routelib (ROUTELIB=PATH), tls, near-cache, fleet); README.md, Examples; PORT_BASE=N moves its ports'
	@echo 'make test    deps, lint, then go test -race ./... here and in bench/ (integration tests run real servers;'
	@echo '             ROUTELIB=PATH of memcached'"'"'s routelib.lua runs the routelib tests)'
	@echo 'make lint    gofmt check, go vet, a build for macOS and FreeBSD, staticcheck'
	@echo 'make bench   shardproxy vs nutcracker vs direct, by shardbench and memtier_benchmark (~40 min; BENCH_QUICK=1 a few min) -> bench/report/'
	@echo 'make memtier build memtier_benchmark $(MEMTIER_VERSION) from its public source into MEMTIER_DIR when none is on PATH'
	@echo 'make soak    DURATION=$(DURATION): proxy under memcached+Redis load, faults and reloads; checks every reply'
	@echo 'make bench-go  go test -bench of every package with -benchmem'
	@echo 'make bench-fleet  100 fleet agents against a 3-member etcd: apply and ejection times, etcd traffic (~1 min)'
	@echo 'make redis-suite REDIS_SRC=DIR  Redis'"'"'s own tests (runtest, tests/ of a Redis tree) against redis-server,'
	@echo '             shardproxy and nutcracker over 3 servers -> suite-results/ (scripts/redis-suite.sh)'
	@echo 'make mcp-suite MC_SRC=DIR [MCPROXY=BIN]  memcached'"'"'s t/proxy*.t against shardproxy (and memcached'"'"'s proxy)'
	@echo '             -> mcp-suite-results/ (scripts/mcp-suite.sh)'
	@echo 'make fuzz    every Fuzz target for FUZZTIME=$(FUZZTIME) each, new inputs shrunk for at most FUZZMINTIME=$(FUZZMINTIME)'
	@echo 'make deps    install memcached, redis-server, redis-sentinel, nutcracker, etcd, dnsmasq, chromium, the client suites, staticcheck, helm when missing'
	@echo 'make clean   remove bin/'

build:
	$(GO) build -o bin/shardproxy ./cmd/shardproxy

# EXAMPLE=NAME runs examples/NAME instead (scripts/example.sh): the servers
# it needs, then the proxy; PORT_BASE=N moves its ports 22120-22139 to N..N+19.
EXAMPLE   ?=
run: build
ifeq ($(EXAMPLE),)
	CONFIG=$(CONFIG) scripts/run.sh
else
	$(if $(ROUTELIB),SHARDPROXY_ROUTELIB=$(abspath $(ROUTELIB)) )scripts/example.sh $(EXAMPLE)
endif

# bench/ is a module of its own (bench/go.mod), so that its plotting
# libraries stay out of shardproxy's go.mod. ./... at the root stops at
# bench/go.mod, so test and lint run bench's packages from its directory.
test: deps lint
	$(if $(ROUTELIB),SHARDPROXY_ROUTELIB=$(abspath $(ROUTELIB)) )$(GO) test -race -timeout 20m ./...
	cd bench && $(GO) test -race -timeout 20m ./...

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files need gofmt -w:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	@# the proxy builds where Go's syscall package has sockets like Linux's; Linux-only parts have a stand-in
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=freebsd GOARCH=amd64 $(GO) build ./...
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...

# Starts memcached, redis-server, shardproxy and nutcracker on free loopback
# ports and runs cmd/shardbench and memtier_benchmark against them (bench/ is
# the harness); writes bench/report/ (README.md, PNG plots, results.json).
# BENCH_QUICK=1 is a smoke run of a few minutes reported to a temporary
# directory; BENCH_ARGS passes
# flags, e.g. BENCH_ARGS='-rounds 7 -duration 10s' (bin/bench -h lists them).
# MEMCACHED_PROXY names a memcached built with its proxy (1.6.45,
# ./configure --enable-proxy), which the lua-v2 loads then measure beside
# shardproxy's V2 route; without it those rows are absent.
# MEMTIER is memtier_benchmark, the second load generator of the goal loads:
# the one on PATH, else MEMTIER_DIR's, which make memtier builds.
BENCH_ARGS ?=
MEMCACHED_PROXY ?=
bench: deps build memtier
	$(GO) build -o bin/shardbench ./cmd/shardbench
	cd bench && $(GO) build -o ../bin/bench .
	bin/bench -memtier $(MEMTIER) $(if $(MEMCACHED_PROXY),-memcached-proxy $(MEMCACHED_PROXY)) $(BENCH_ARGS)

# memtier_benchmark (github.com/RedisLabs/memtier_benchmark), built from its
# public source outside the repository when it is not installed: clones tag
# MEMTIER_VERSION of MEMTIER_SRC (a git URL, or a directory holding its source
# tree) and builds it without TLS into MEMTIER_DIR (scripts/build-memtier.sh,
# which apt-get installs the Debian packages it needs: g++ make autoconf
# automake libtool pkg-config libevent-dev zlib1g-dev git).
MEMTIER_VERSION ?= 2.3.0
MEMTIER_SRC     ?= https://github.com/RedisLabs/memtier_benchmark.git
MEMTIER_DIR     ?= $(HOME)/.cache/shardproxy/memtier_benchmark-$(MEMTIER_VERSION)
MEMTIER         ?= $(or $(shell command -v memtier_benchmark 2>/dev/null),$(MEMTIER_DIR)/memtier_benchmark)
memtier:
	@[ -x "$(MEMTIER)" ] || scripts/build-memtier.sh $(dir $(MEMTIER)) $(MEMTIER_VERSION) $(MEMTIER_SRC)

# Runs bin/shardproxy for DURATION against 3 memcached and 3 redis-server
# (one of each behind soak's fault proxy) under verifying load, with faults
# every 3 s and a reload every 10 s; fails on a wrong or lost reply or when
# RSS/goroutines grow from the middle to the end. SOAK_ARGS passes flags
# (bin/soak -h lists them).
DURATION  ?= 10m
SOAK_ARGS ?=
soak: deps build
	$(GO) build -o bin/soak ./soak
	bin/soak -duration $(DURATION) -proxy bin/shardproxy $(SOAK_ARGS)

# Runs Redis's own test suite (REDIS_SRC: a Redis source tree with runtest
# and tests/, e.g. tag 7.0.15) against redis-server direct, shardproxy over
# 3 redis-server, and nutcracker over 3 (plain, and with the servers flushed
# directly); counts per target in suite-results/summary.txt. SUITE_TARGETS
# picks targets; SHARDPROXY_PORT_RANGE=LO-HI places the ports (800 needed).
REDIS_SRC     ?=
SUITE_TARGETS ?=
redis-suite: deps build
	@[ -n "$(REDIS_SRC)" ] || { echo 'redis-suite: set REDIS_SRC to a Redis source tree (runtest, tests/)'; exit 2; }
	SUITE_PARALLEL=1 scripts/redis-suite.sh $(REDIS_SRC) $(SUITE_TARGETS)

# memcached's own proxy tests (t/proxy*.t of a memcached source tree, e.g.
# 1.6.45) against shardproxy, and against MCPROXY (a memcached-debug built
# with --enable-proxy) in the same harness when given; per-file counts in
# mcp-suite-results/summary.md. MCP_TESTS picks files (proxyunits ...).
MC_SRC    ?=
MCPROXY   ?=
MCP_TESTS ?=
mcp-suite: build
	@[ -n "$(MC_SRC)" ] || { echo 'mcp-suite: set MC_SRC to a memcached source tree (t/proxy*.t)'; exit 2; }
	$(if $(MCPROXY),MCPROXY=$(abspath $(MCPROXY)) )scripts/mcp-suite.sh $(MC_SRC) $(MCP_TESTS)

# The hot-path micro-benchmarks (parse, encode, pick a server, loopback).
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# The fleet's scale simulation (fleet/scale_test.go): 100 fleet agents,
# each its own etcd client, against a real 3-member etcd on loopback. It
# prints the time from a Put to every agent's apply of a configuration and
# from the report that tips the majority to every agent's ring, and the
# etcd requests and bytes per proxy at rest and per change (docs/fleet.md,
# Scale). make test runs a short one (TestFleetScale, 20 agents).
bench-fleet: deps
	$(GO) test -run '^$$' -bench '^BenchmarkFleet100$$' -benchtime 1x -timeout 15m ./fleet/

# Every `func FuzzXxx(` in a _test.go file, each alone for FUZZTIME, new
# inputs shrunk for at most FUZZMINTIME (scripts/fuzz.sh says why).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINTIME=$(FUZZMINTIME) scripts/fuzz.sh

# Installs only what is missing and prints nothing when everything is there.
deps:
	@set -e; missing=""; \
	for dep in $(APT_DEPS); do \
		cmd=$${dep%%:*}; pkg=$${dep#*:}; \
		command -v "$$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$$cmd" ] || [ -e "$$cmd" ] || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: apt-get install$$missing"; \
		log=$$(mktemp); \
		{ $(SUDO) apt-get update -q && \
		  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
		} >"$$log" 2>&1 || { cat "$$log"; rm -f "$$log"; exit 1; }; \
		rm -f "$$log"; \
	fi
	@[ -x "$(STATICCHECK)" ] || { \
		echo "deps: go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }
	@command -v helm >/dev/null 2>&1 || [ -x "$(HELM)" ] || { \
		echo "deps: go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)"; \
		$(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }

clean:
	rm -rf bin
