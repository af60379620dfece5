#!/usr/bin/env bash
# CPU per call of BenchmarkCall (internal/mcpserver) under each GC percent:
# the test binary's user+system time over a fixed number of calls, the
# settings alternating within each repetition. CPU time, unlike ns/op, is
# barely moved by other processes on a shared machine.
#   bench/load/gccpu.sh mcp 5000; bench/load/gccpu.sh rest 20000
# Prints: case GOGC user_s sys_s maxrss_kB cpu_per_call_us (less the 1x
# run's set-up time).
set -euo pipefail
case=${1:-mcp} n=${2:-5000} reps=${3:-3}
bin=$(mktemp -d)/mcpserver.test
go test -c -o "$bin" ./internal/mcpserver/
cpu() { # user sys maxrss of one run of $2 calls under GOGC=$1
	{ /usr/bin/time -f "%U %S %M" env GOGC="$1" "$bin" -test.run '^$' -test.bench "BenchmarkCall/$case\$" \
		-test.benchtime "$2x" -test.cpu 1 >/dev/null; } 2>&1 | tail -1
}
read -r u s _ < <(cpu 100 1)
setup=$(echo "$u + $s" | bc)
for _ in $(seq "$reps"); do
	for g in 100 200 400 800; do
		read -r u s m < <(cpu "$g" "$n")
		echo "$case GOGC=$g $u $s $m $(echo "($u + $s - $setup) * 1000000 / $n" | bc)"
	done
done
