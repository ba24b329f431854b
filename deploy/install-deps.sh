#!/usr/bin/env bash
# Installs the Debian 12 packages that tunefarm's build, tests and benchmarks need.
# Idempotent: when every package is already installed it changes nothing and touches no network.
set -euo pipefail

PACKAGES=(
  # build tools
  cmake ninja-build pkg-config g++ make binutils
  # wire contracts and services
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # the embedded compiler
  llvm-16-dev lld-16 libzstd-dev
  # cost model, history, logging, command lines, config files, JSON
  libxgboost-dev libsqlite3-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  # ONNX models: the importer's library, and the package the model scripts write them with
  libonnx-dev python3-onnx python3-numpy
  # metrics (prometheus-cpp's core: counters, histograms, the text format), the daemons' HTTP
  # endpoints (cpp-httplib, with OpenSSL for TLS) and the dashboard's charts
  prometheus-cpp-dev libcpp-httplib-dev libssl-dev libjs-chart.js
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev
  # the dashboard's browser test
  chromium-headless-shell
  # ARM boards, emulated
  qemu-user g++-aarch64-linux-gnu
  # fuzzing (libFuzzer comes with clang's runtime)
  clang libclang-rt-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
