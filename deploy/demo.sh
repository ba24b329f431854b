#!/usr/bin/env bash
# The embedded default on one machine, doing what tunefarm is for: trackerd, one local CPU agent and
# tunerd on loopback with a data directory; an ONNX model in, its tasks tuned on the farm as one
# job, the tuned model built as a library and run beside ONNX Runtime and beside its untuned build
# (the same model from the templates' default configs); then it stops what it started.
#
# The model is one BERT-base encoder layer (128 tokens): its GEMMs take milliseconds, where the
# templates' defaults leave room that 160 trials find on the agent. How much of that the built
# model keeps depends on how like the model's conditions the agent's timing is, so the demo
# prints what the model got, gain or loss. On a model of microsecond kernels
# (DEMO_MODEL=resnet50_small DEMO_INPUT_SHAPE=) the defaults are about as fast as anything the
# search finds.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODEL_NAME=${DEMO_MODEL:-bert_layer}
TRIALS=${DEMO_TRIALS:-160}
# The layer's batch dimension is symbolic: one sequence of 128 tokens.
INPUT_SHAPE=${DEMO_INPUT_SHAPE-hidden_states=1,128,768}
SHAPE_ARGS=()
[[ -z "$INPUT_SHAPE" ]] || SHAPE_ARGS=(--input-shape "$INPUT_SHAPE")
DATA_DIR="$BUILD_DIR/demo-data"
LOG_DIR="$BUILD_DIR/demo-logs"
PYTHON="$BUILD_DIR/venv/bin/python"

for b in trackerd device-agent tunerd tune-client tunefarm-build-library; do
  [[ -x "$BIN/$b" ]] || { echo "demo: $BIN/$b is missing; run 'make build' first" >&2; exit 1; }
done
[[ -x "$PYTHON" ]] || { echo "demo: $PYTHON is missing; run 'make deps' first" >&2; exit 1; }
# bench/model_bench.py runs the built model through the tunefarm package, which the build installs
# into the venv (target tunefarm_python; a build folder configured before the venv existed lacks it).
"$PYTHON" -c 'import tunefarm' 2>/dev/null || {
  echo "demo: the tunefarm Python package is not in $PYTHON's venv; run 'cmake --build $BUILD_DIR --target tunefarm_python'" \
       "(or, if that target is unknown, 'cmake $BUILD_DIR' first)" >&2
  exit 1
}

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
run() {
  printf '$ %s\n' "$*"
  "$@"
}

step "an ONNX model: $MODEL_NAME (written by models/make_models.py)"
/usr/bin/python3 models/make_models.py "$DATA_DIR/models" --only "$MODEL_NAME" >/dev/null
MODEL="$DATA_DIR/models/$MODEL_NAME.onnx"
ls -l "$MODEL"

step "starting trackerd on $TRACKER, one CPU agent, and tunerd on $TUNER (history in $DATA_DIR)"
# Metrics off: the demo must start beside daemons that already run on this host.
"$BIN/trackerd" --listen "$TRACKER" --metrics-listen off >"$LOG_DIR/trackerd.log" 2>&1 & PIDS+=($!)
# Kernels measured single-threaded, as the model is run below.
TUNEFARM_NUM_THREADS=1 "$BIN/device-agent" --tracker "$TRACKER" --key local-cpu --metrics-listen off \
  >"$LOG_DIR/device-agent.log" 2>&1 & PIDS+=($!)
"$BIN/tunerd" --listen "$TUNER" --tracker "$TRACKER" --data-dir "$DATA_DIR" --metrics-listen off \
  >"$LOG_DIR/tunerd.log" 2>&1 & PIDS+=($!)

for _ in $(seq 1 100); do
  if "$BIN/tune-client" --tracker "$TRACKER" devices --json 2>/dev/null | grep -q '"agents_total": *1'; then break; fi
  sleep 0.2
done
# tunerd checks its history before it listens: wait until it answers.
for _ in $(seq 1 100); do
  if "$BIN/tune-client" --server "$TUNER" jobs >/dev/null 2>&1; then break; fi
  sleep 0.2
done
run "$BIN/tune-client" --tracker "$TRACKER" devices

step "its tuning tasks: each convolution and matrix multiply, with how often it occurs"
run "$BIN/tune-client" --server "$TUNER" tasks --model "$MODEL" "${SHAPE_ARGS[@]}"

step "tuned on the farm as one job: $TRIALS trials shared by the tasks where the model's latency falls most"
run "$BIN/tune-client" --server "$TUNER" submit --model "$MODEL" "${SHAPE_ARGS[@]}" --trials "$TRIALS" --watch

step "the model built twice: from the tuned records, and untuned (the templates' defaults)"
run "$BIN/tune-client" --server "$TUNER" build --model "$MODEL" "${SHAPE_ARGS[@]}" -o "$DATA_DIR/tuned" --name demo_model
: >"$DATA_DIR/no-records.jsonl"
run "$BIN/tune-client" build --model "$MODEL" "${SHAPE_ARGS[@]}" --from-records "$DATA_DIR/no-records.jsonl" \
  -o "$DATA_DIR/untuned" --name demo_model 2>/dev/null

step "the tuned build beside ONNX Runtime and the untuned build, one thread, interleaved (bench/model_bench.py)"
run "$PYTHON" bench/model_bench.py --model "$MODEL" --artifact "$DATA_DIR/tuned" \
  --untuned-artifact "$DATA_DIR/untuned" --threads 1 >"$LOG_DIR/model_bench.out"
cat "$LOG_DIR/model_bench.out"
# The last line is model_bench's JSON: what tuning gave, in one line.
"$PYTHON" -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
untuned, tuned, ort = r["untuned_ms"], r["ours_ms"], r["onnxruntime_ms"]
gain = f"{untuned / tuned:.2f}x faster" if tuned <= untuned else f"{tuned / untuned:.2f}x slower"
print(f"tuning: {untuned:.2f} ms untuned -> {tuned:.2f} ms tuned ({gain}); ONNX Runtime {ort:.2f} ms")' \
  "$LOG_DIR/model_bench.out"

# The one job of this fresh history, for the commands below (jobs lists newest first, under a header).
JOB=$("$BIN/tune-client" --server "$TUNER" jobs | awk 'NR == 2 { print $1 }')

step "done: stopped trackerd, the agent and tunerd; logs in $LOG_DIR. To go on from here:"
cat <<EOF
  the library:       ls $DATA_DIR/tuned   (demo_model.h, libdemo_model.so/.a, the weights, manifest.json)
  its records:       $BIN/tunerd --data-dir $DATA_DIR &   (tunerd again, on the demo's history)
                     $BIN/tune-client records --job $JOB
  your own farm:     trackerd, device-agent and tunerd as README.md's "Command line" starts them
  your own model:    tune-client tasks --model FILE.onnx; tune-client submit --model FILE.onnx --trials 400 --watch
                     tune-client build --model FILE.onnx -o DIR
  one kernel:        tune-client submit --workload 'matmul:M=512,N=512,K=512' --trials 200 --watch
EOF
