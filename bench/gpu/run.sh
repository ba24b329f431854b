#!/usr/bin/env bash
# The GPU check, as one command on a machine with an NVIDIA GPU and none of our Debian libraries
# (a rented GPU machine, say): unpack the bundle `make gpu-bundle` made, start trackerd,
# one CUDA agent and tunerd on loopback, tune four operators on the GPU, time the same operators
# with PyTorch (cuBLAS with TF32 off, cuDNN) in the same run, and write the records, the logs and
# a JSON summary to $OUT. The summary is also the last line printed.
#
#   OUT=DIR bash bench/gpu/run.sh [BUNDLE.tar.xz | BUNDLE-DIR]
#
# The run is sized for one call of at most ten minutes: a smoke job first (a small GEMM, seconds),
# which ends the run with the logs if the farm cannot measure on this GPU at all, so that a failed
# run costs little of the machine's time; then each operator with 200 trials or its time budget,
# whichever ends first. Environment: TARGET (default: cuda with this GPU's sm_NN), KEY (gpu),
# BUDGET_SCALE (multiplies each operator's budget; default 1), TRIALS (200), PYTHON (python3),
# OPS_FILE (lines "WORKLOAD SECONDS" in place of the four below).
# With TARGET=llvm it runs the same steps on a CPU (how the script itself is tested without a GPU).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUNDLE=${1:-$REPO/build/gpu-bundle.tar.xz}
OUT=${OUT:-$REPO/build/gpu-out}
KEY=${KEY:-gpu}
TRIALS=${TRIALS:-200}
SCALE=${BUDGET_SCALE:-1}
PYTHON=${PYTHON:-python3}
# The operators and each one's share of the run (seconds of tuning at BUDGET_SCALE=1): the issue's
# GEMMs, a ResNet-50 3x3 convolution (256 channels at 14x14) and a MobileNet depthwise one.
WORKLOADS=(
  "matmul:M=4096,N=4096,K=4096 90"
  "matmul:M=1024,N=1024,K=1024 60"
  "conv2d_nchw:N=1,C=256,H=14,W=14,K=256,R=3,S=3,stride=1,pad=1 60"
  "depthwise_conv2d_nchw:N=1,C=512,H=14,W=14,R=3,S=3,stride=1,pad=1 45"
)
[[ -z "${OPS_FILE:-}" ]] || mapfile -t WORKLOADS < <(grep -v '^#' "$OPS_FILE" | grep .)

mkdir -p "$OUT"
LOG="$OUT/run.log"
: >"$LOG"
T0=$(date +%s.%N)
# Seconds since $1 (awk: the machine may lack bc).
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf '[%6ss] %s\n' "$(since "$T0")" "$*" | tee -a "$LOG" >&2; }

# Outside /tmp: each measurement worker gets a /tmp of its own.
WORK="$REPO/.gpu-run"
rm -rf "$WORK" && mkdir -p "$WORK"
if [[ -d "$BUNDLE" ]]; then
  BIN="$(cd "$BUNDLE" && pwd)/bin"  # an unpacked bundle (deploy/gpu-bundle.sh without --archive)
elif [[ -f "$BUNDLE" ]]; then
  # Python's tarfile where tar finds no xz program (minimal images lack xz-utils).
  tar -C "$WORK" -xf "$BUNDLE" 2>/dev/null ||
    "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE" "$WORK" ||
    { say "cannot unpack $BUNDLE"; exit 2; }
  BIN="$WORK/tunefarm-bundle/bin"
else
  say "no bundle at $BUNDLE: run 'make gpu-bundle' first"
  exit 2
fi
# The workers run as nobody under a root agent: the bundle must be readable by everyone.
chmod -R a+rX "$WORK" "$BIN/.."
say "bundle at $BIN/.. ($(du -sh "$BIN/.." | cut -f1))"

if [[ -z "${TARGET:-}" ]]; then
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.[:space:]')
  [[ -n "$CAP" ]] || { say "nvidia-smi names no GPU: set TARGET to run without one"; exit 2; }
  TARGET="cuda -arch=sm_$CAP"
fi
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,memory.total --format=csv \
  >"$OUT/gpu.csv" 2>&1 || true
say "target '$TARGET', device key $KEY; $(tail -1 "$OUT/gpu.csv")"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p=$1
  while ! port_free "$p"; do p=$((20000 + RANDOM % 20000)); done
  echo "$p"
}
TRACKER="127.0.0.1:$(pick_port 9190)"
TUNER="127.0.0.1:$(pick_port 9291)"
DATA="$WORK/data"
LOGS="$WORK/logs"
mkdir -p "$DATA" "$LOGS"
PIDS=()
AGENT_PID=
finish() {
  for pid in "${PIDS[@]}" $AGENT_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs 2>/dev/null || true
}
trap finish EXIT
client() { "$BIN/tune-client" --server "$TUNER" --tracker "$TRACKER" "$@"; }

# Starts the agent with $@ (NAME=VALUE words set its environment, the rest are its flags); fails
# when it does not register, e.g. when its start-up self-test finds the sandbox cannot run kernels.
start_agent() {
  [[ -z "$AGENT_PID" ]] || { kill "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=; }
  local vars=() flags=() word
  for word in "$@"; do
    if [[ "$word" == -* || "$word" != *=* ]]; then flags+=("$word"); else vars+=("$word"); fi
  done
  echo "== device-agent ${vars[*]} ${flags[*]}" >>"$LOGS/device-agent.log"
  env "${vars[@]}" "$BIN/device-agent" --tracker "$TRACKER" --key "$KEY" --metrics-listen off "${flags[@]}" \
    >>"$LOGS/device-agent.log" 2>&1 &
  AGENT_PID=$!
  for _ in $(seq 1 150); do
    if client devices --json 2>/dev/null | grep -q '"agents_total": *1'; then return 0; fi
    kill -0 "$AGENT_PID" 2>/dev/null || break
    sleep 0.2
  done
  say "the agent did not register ($*); its log ends:"
  tail -4 "$LOGS/device-agent.log" | cut -c1-600 | tee -a "$LOG" >&2
  AGENT_PID=
  return 1
}

# What a board's own set-up may bear on: its limits, C library, cgroups and GPU devices.
{ ulimit -a; getconf GNU_LIBC_VERSION; cat /proc/self/cgroup; grep cgroup /proc/mounts; ls -la /dev/nvidia*
  nproc; head -2 /etc/os-release; uname -r; cat /proc/sys/kernel/threads-max /proc/sys/kernel/pid_max
} >"$OUT/board.txt" 2>&1

"$BIN/trackerd" --listen "$TRACKER" --metrics-listen off >"$LOGS/trackerd.log" 2>&1 & PIDS+=($!)
"$BIN/tunerd" --listen "$TUNER" --tracker "$TRACKER" --data-dir "$DATA" --metrics-listen off \
  >"$LOGS/tunerd.log" 2>&1 & PIDS+=($!)
# The agent as deployed first; where it cannot run kernels, the ways it can be weakened, in order, so
# that one run still measures and says which one it took (AGENT_VARIANTS: ';'-separated).
IFS=';' read -r -a VARIANTS <<<"${AGENT_VARIANTS:-;--no-namespaces}"
started=
for variant in "${VARIANTS[@]}"; do
  # shellcheck disable=SC2086  # a variant is words
  if start_agent $variant; then started=1; AGENT_VARIANT=$variant; break; fi
done
[[ -n "$started" ]] || { say "no way of starting the agent worked: stopping"; exit 3; }
[[ -z "$AGENT_VARIANT" ]] || { say "the agent runs with: $AGENT_VARIANT"; echo "agent: $AGENT_VARIANT" >>"$OUT/notes.txt"; }
for _ in $(seq 1 150); do client jobs >/dev/null 2>&1 && break; sleep 0.2; done
grep -m3 -E "measurement sandbox|GPU|cuda" "$LOGS/device-agent.log" | tee -a "$LOG" >&2
if [[ "$TARGET" == cuda* ]] && ! grep -q "measures 'cuda' candidates" "$LOGS/device-agent.log"; then
  say "the agent serves no 'cuda' target (its log above says why): stopping"
  exit 3
fi
say "farm up: trackerd $TRACKER, tunerd $TUNER"

# Runs one job to its end; prints its id. $1 workload, $2 trials, $3 time budget in seconds.
tune() {
  local out id
  out=$(client submit --workload "$1" --target "$TARGET" --device "$KEY" --trials "$2" \
        --time-budget "${3}s" --max-wait 60s --json) || { say "submit failed: $out"; return 1; }
  id=$(echo "$out" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])') ||
    { say "no job id in: $out"; return 1; }
  client watch "$id" >>"$LOGS/watch.log" 2>&1 || true
  echo "$id"
}

# A job "works" when it recorded at least one successful measurement.
job_ok() { client status "$1" --json 2>/dev/null | grep -q '"best_gflops": *[1-9]'; }

SMOKE="matmul:M=256,N=256,K=256"
# Where the smoke job measures nothing, the agent again with one sandbox layer off at a time, then
# all of them: the first that measures runs the rest, and which one it was says what breaks the
# GPU's driver (notes.txt).
SMOKE_VARIANTS=("" "--sandbox-without landlock" "--sandbox-without seccomp" "--sandbox-without nobody"
                "--sandbox-without landlock --sandbox-without seccomp --sandbox-without nobody")
[[ "$AGENT_VARIANT" == *--no-namespaces* ]] ||
  SMOKE_VARIANTS+=("--no-namespaces --sandbox-without landlock --sandbox-without seccomp --sandbox-without nobody")
# SMOKE_VARIANTS_LIST (';'-separated) replaces the list; SMOKE_ALL=1 tries every one (notes.txt says
# which measured) and runs the rest with the first that did.
[[ -z "${SMOKE_VARIANTS_LIST:-}" ]] || IFS=';' read -r -a SMOKE_VARIANTS <<<"$SMOKE_VARIANTS_LIST"
BASE_VARIANT=$AGENT_VARIANT
running=""  # what the agent runs with beyond BASE_VARIANT ("none" while none runs)
chosen=
smoke_id=
for extra in "${SMOKE_VARIANTS[@]}"; do
  if [[ "$extra" != "$running" ]]; then
    running=none
    # shellcheck disable=SC2086  # a variant is words
    start_agent $BASE_VARIANT $extra || continue
    running=$extra
  fi
  say "smoke job: $SMOKE, 8 trials${extra:+ (agent: $extra)}"
  id=$(tune "$SMOKE" 8 60)
  if [[ -n "$id" ]] && job_ok "$id"; then
    echo "smoke passed${extra:+ with $extra}" >>"$OUT/notes.txt"
    [[ -n "$smoke_id" ]] || { smoke_id=$id; chosen=$extra; }
    [[ -n "${SMOKE_ALL:-}" ]] || break
    continue
  fi
  why=$(grep -o "most often.*" "$LOGS/tunerd.log" | tail -1)
  say "the smoke job measured nothing: ${why:-see tunerd.log}"
  echo "smoke failed${extra:+ with $extra}: $why" >>"$OUT/notes.txt"
  # Kernels from 6.15 log Landlock's denials (to dmesg where no audit daemon runs): the path the
  # GPU driver was refused, where Landlock is what broke it.
  dmesg 2>/dev/null | grep -i landlock | tail -5 >>"$OUT/notes.txt" || true
done
[[ -n "$smoke_id" ]] || { say "the farm cannot measure on this device: stopping"; exit 4; }
if [[ "$running" != "$chosen" ]]; then
  # shellcheck disable=SC2086
  start_agent $BASE_VARIANT $chosen || exit 3
fi
say "smoke job $smoke_id: $(client status "$smoke_id" 2>&1 | head -1)"

: >"$OUT/jobs.jsonl"
for entry in "${WORKLOADS[@]}"; do
  w=${entry% *}
  budget=$(awk -v b="${entry##* }" -v s="$SCALE" 'BEGIN { printf "%d", b * s }')
  say "tuning $w: $TRIALS trials or ${budget}s"
  start=$(date +%s.%N)
  id=$(tune "$w" "$TRIALS" "$budget") || continue
  wall=$(since "$start")
  status=$(client status "$id" --json 2>/dev/null | tr -d '\n')
  best=$(client best --workload "$w" --target "$TARGET" --json 2>>"$LOG" | head -1)
  printf '{"workload": "%s", "job": "%s", "wall_s": %s, "status": %s, "best": %s}\n' \
    "$w" "$id" "$wall" "${status:-null}" "${best:-null}" >>"$OUT/jobs.jsonl"
  say "  $(client status "$id" 2>&1 | head -1)"
done
client export "$OUT/records.jsonl" >>"$LOG" 2>&1
say "records exported: $(wc -l <"$OUT/records.jsonl") lines"

say "the same operators with PyTorch"
PYTHONUNBUFFERED=1 "$PYTHON" "$HERE/baseline.py" "${WORKLOADS[@]%% *}" >"$OUT/baseline.json" 2>>"$LOG" ||
  say "the PyTorch baseline failed (see run.log)"
"$PYTHON" "$HERE/summary.py" --jobs "$OUT/jobs.jsonl" --baseline "$OUT/baseline.json" \
  --gpu "$OUT/gpu.csv" --wall "$(since "$T0")" >"$OUT/summary.json" 2>>"$LOG"
say "done"
cat "$OUT/summary.json"
