#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, one at a time (go test -fuzz
# takes one), each for FUZZTIME from its own directory: bench/ is a module
# of its own. An input the fuzzer finds new is shrunk for at most
# FUZZMINTIME; with go test's default of a minute, targets with big seeds
# spent most of a short run shrinking rather than fuzzing.
#
# A target that fails with a bare "context deadline exceeded" at the end of
# its time, having written no failing input, met the race in Go's fuzzing
# coordinator (go.dev/issue/75804, fixed in Go 1.27), not a finding: it is
# run once more. Any other failure stops the run; the failing input is in
# the package's testdata/fuzz.
#
# `make fuzz` runs it; GO, FUZZTIME and FUZZMINTIME come from there.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZMINTIME=${FUZZMINTIME:-5s}

# fuzz runs one target, its output on stdout; its status is go test's.
fuzz() {
	local dir=$1 name=$2
	(cd "$dir" && "$GO" test -run='^$' -fuzz="^$name\$" -fuzztime="$FUZZTIME" \
		-fuzzminimizetime="$FUZZMINTIME" .) 2>&1
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0
for file in $(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata \
	'^func Fuzz[A-Za-z0-9_]*\(' . | sort); do
	dir=$(dirname "$file")
	for name in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$file"); do
		n=$((n + 1))
		echo "== $dir $name ($FUZZTIME)"
		if fuzz "$dir" "$name" | tee "$log"; then
			continue
		fi
		if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
			echo "fuzz.sh: $name failed at its deadline with no input written (Go's coordinator race, go.dev/issue/75804); once more"
			fuzz "$dir" "$name"
			continue
		fi
		exit 1
	done
done
echo "fuzz: ran $n target(s)"
