#!/usr/bin/env bash
# make bench: every benchmark program, one after the other, with the settings RESULTS.md quotes.
# Each prints its figures and ends with one JSON line; this script collects those lines.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
WORKLOADS=${WORKLOADS:-bench/workloads.txt}
export OMP_WAIT_POLICY=PASSIVE

summary=()
run() {
  local name=$1; shift
  echo "== $name $*"
  local out
  out=$("$BIN/$name" "$@" | tee /dev/stderr | tail -n 1)
  summary+=("{\"bench\":\"$name\",\"figures\":$out}")
}

run compile_bench
# Issue 13's measure: random valid candidates of the channel-blocked 3x3 template.
run compile_bench --workload "conv2d_nchwc:N=1,C=256,H=14,W=14,K=256,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16" --samples 60
run kernel_bench --workloads "$WORKLOADS"
# Issue 32, session 17: the 3x3 layers as Winograd's F(2x2) and F(4x4) beside the direct default.
run kernel_bench --workloads bench/winograd_layers.txt --repeats 5 --clock thread
run db_bench
run sandbox_bench
run tracker_bench
run search_bench --workloads bench/search_workloads.txt --trials "${SEARCH_TRIALS:-400}" --seeds "${SEARCH_SEEDS:-3}"

echo "== summary"
printf '%s\n' "${summary[@]}"
