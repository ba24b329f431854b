#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into $BUILD_DIR-fuzz and runs each for a bounded time
# from its committed seed corpus (tests/fuzz/corpus/NAME). Exits non-zero on any crash, leak,
# sanitizer report or broken round-trip; a clang build failure is reported loudly but skipped.
# FUZZ_SECONDS sets the time per target (default 20).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
build="${BUILD_DIR:-build}-fuzz"
seconds="${FUZZ_SECONDS:-20}"
targets=(workload_fuzz target_fuzz target_build_fuzz config_fuzz tracker_fuzz requests_fuzz record_fuzz tuner_fuzz model_fuzz)

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
# The fuzz build is a second toolchain (clang) beside the project's g++ one; code that only clang
# rejects must not fail the whole test run, but it must be seen.
if ! cmake --build "$build" -j2 --target "${targets[@]}"; then
  echo "fuzz: SKIPPED: the clang build of the fuzz targets failed (errors above); fix them to fuzz again" >&2
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for target in "${targets[@]}"; do
  name="${target%_fuzz}"
  # New inputs go to a scratch corpus so that the committed seeds stay small and reviewed.
  mkdir -p "$work/$name"
  log="$work/$name.log"
  if ! (cd "$work" && "$root/$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "$work/$name" "$root/tests/fuzz/corpus/$name" >"$log" 2>&1); then
    echo "fuzz: $target FAILED; its report:" >&2
    tail -n 60 "$log" >&2
    status=1
    continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo '?')
  echo "fuzz: $target ok: $runs executions in ${seconds}s, cov: $cov"
done
exit "$status"
