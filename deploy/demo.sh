#!/usr/bin/env bash
# The embedded default on one machine: trackerd, one local CPU agent and tunerd on loopback with a
# data directory; tunes one GEMM through tune-client, then compares the tuned kernel with the
# untuned default (and with OpenBLAS and oneDNN) and stops what it started.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
WORKLOAD=${DEMO_WORKLOAD:-matmul:M=512,N=512,K=512}
TRIALS=${DEMO_TRIALS:-128}
DATA_DIR="$BUILD_DIR/demo-data"
LOG_DIR="$BUILD_DIR/demo-logs"

for b in trackerd device-agent tunerd tune-client kernel_bench; do
  [[ -x "$BIN/$b" ]] || { echo "demo: $BIN/$b is missing; run 'make build' first" >&2; exit 1; }
done

# Loopback ports: the documented defaults when free, otherwise whatever the kernel hands out.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p=$1
  while ! port_free "$p"; do p=$((20000 + RANDOM % 20000)); done
  echo "$p"
}
TRACKER_PORT=$(pick_port 9190)
TUNER_PORT=$(pick_port 9191)
[[ "$TUNER_PORT" != "$TRACKER_PORT" ]] || TUNER_PORT=$(pick_port $((TRACKER_PORT + 1)))
TRACKER="127.0.0.1:$TRACKER_PORT"
TUNER="127.0.0.1:$TUNER_PORT"

rm -rf "$DATA_DIR" "$LOG_DIR"
mkdir -p "$DATA_DIR" "$LOG_DIR"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "starting trackerd on $TRACKER, one CPU agent, and tunerd on $TUNER (history in $DATA_DIR)"
"$BIN/trackerd" --listen "$TRACKER" >"$LOG_DIR/trackerd.log" 2>&1 & PIDS+=($!)
# Kernels measured single-threaded, so that the tuned config is tuned for the single-threaded
# comparison with the libraries below.
TUNEFARM_NUM_THREADS=1 "$BIN/device-agent" --tracker "$TRACKER" --key local-cpu >"$LOG_DIR/device-agent.log" 2>&1 & PIDS+=($!)
"$BIN/tunerd" --listen "$TUNER" --tracker "$TRACKER" --data-dir "$DATA_DIR" >"$LOG_DIR/tunerd.log" 2>&1 & PIDS+=($!)

for _ in $(seq 1 100); do
  if "$BIN/tune-client" --tracker "$TRACKER" devices --json 2>/dev/null | grep -q '"agents_total": *1'; then break; fi
  sleep 0.2
done
# tunerd checks its history before it listens: wait until it answers.
for _ in $(seq 1 100); do
  if "$BIN/tune-client" --server "$TUNER" jobs >/dev/null 2>&1; then break; fi
  sleep 0.2
done
"$BIN/tune-client" --tracker "$TRACKER" devices

step "tune-client submit --workload $WORKLOAD --trials $TRIALS --batch-size 32 --watch"
"$BIN/tune-client" --server "$TUNER" submit --workload "$WORKLOAD" --target llvm --device local-cpu \
  --trials "$TRIALS" --batch-size 32 --watch

step "tune-client best --workload $WORKLOAD"
"$BIN/tune-client" --server "$TUNER" best --workload "$WORKLOAD" --target llvm
"$BIN/tune-client" --server "$TUNER" best --workload "$WORKLOAD" --target llvm --json >"$LOG_DIR/best.jsonl"

step "tuned config vs the untuned default, single thread, interleaved with OpenBLAS and oneDNN (kernel_bench)"
echo "$WORKLOAD" >"$LOG_DIR/workload.txt"
# The output goes to a file and is printed from there: `tee /dev/stderr` would reopen a log that
# stderr is redirected to and truncate it.
"$BIN/kernel_bench" --workloads "$LOG_DIR/workload.txt" --config-file "$LOG_DIR/best.jsonl" --repeats 7 \
  >"$LOG_DIR/kernel_bench.out"
cat "$LOG_DIR/kernel_bench.out"
figures=$(tail -n 1 "$LOG_DIR/kernel_bench.out")
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$figures"; }
awk -v w="$WORKLOAD" -v u="$(field default_gflops)" -v t="$(field ours_gflops)" \
  'BEGIN { printf "\n%s: untuned default %.1f GFLOP/s, tuned %.1f GFLOP/s (%.2fx)\n", w, u, t, t / u }'

step "done: stopped trackerd, the agent and tunerd; logs in $LOG_DIR"
