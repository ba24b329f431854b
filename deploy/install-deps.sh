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
  llvm-16-dev lld-16 liblld-16-dev libzstd-dev zlib1g-dev
  # cost model, history, logging, command lines, config files, JSON
  libxgboost-dev libsqlite3-dev libspdlog-dev libfmt-dev
  # a history shared by several tunerds: PostgreSQL's client library, and the server the tests
  # start (initdb, postgres) in a temporary directory
  libpq-dev postgresql-15
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  # ONNX models: the importer's library, and the package the model scripts write them with; the
  # virtual environment for ONNX Runtime (below)
  libonnx-dev python3-onnx python3-numpy python3-venv
  # metrics (prometheus-cpp's core: counters, histograms, the text format), the daemons' HTTP
  # endpoints (cpp-httplib, with OpenSSL for TLS) and the dashboard's charts
  prometheus-cpp-dev libcpp-httplib-dev libssl-dev libjs-chart.js
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev
  # the dashboard's browser test
  chromium-headless-shell
  # ARM boards, emulated (the aarch64 agent's own libraries are ARM64_PACKAGES below)
  qemu-user g++-aarch64-linux-gnu
  # fuzzing (libFuzzer comes with clang's runtime)
  clang libclang-rt-dev
  # Debian packages (CPack runs dpkg-shlibdeps), and the test that installs them and verifies the
  # units (systemd-analyze), with the tools their maintainer scripts use
  dpkg-dev systemd adduser init-system-helpers procps
  # the self-contained bundle for machines without these libraries (deploy/gpu-bundle.sh): each
  # program's and library's RUNPATH, and its archive
  patchelf xz-utils
)

# The aarch64 device agent's cross build (make agent-arm64): Debian's cross toolchain and the
# multiarch :arm64 development packages, installed beside the amd64 ones. prometheus-cpp-dev is not
# among them: its arm64 package conflicts with the amd64 one, so the ARM agent is built without metrics.
ARM64_PACKAGES=(
  crossbuild-essential-arm64
  libgrpc++-dev:arm64 libprotobuf-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
)
PACKAGES+=("${ARM64_PACKAGES[@]}")

sudo_prefix() {
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to $1" >&2; exit 1; }
    echo "sudo"
  fi
}

# Packages of another architecture install only once dpkg knows it; apt-get update (which
# install_packages runs when anything is missing) then fetches its package lists.
add_arm64_architecture() {
  if dpkg --print-foreign-architectures | grep -qx arm64; then return; fi
  local sudo
  sudo=$(sudo_prefix "add the arm64 architecture")
  echo "install-deps: adding the arm64 architecture to dpkg"
  $sudo dpkg --add-architecture arm64
}

# The multiarch libc6:arm64 (pulled in by the :arm64 packages) is a newer build than the cross
# toolchain's libc6-arm64-cross. Under `qemu-aarch64 -L /usr/aarch64-linux-gnu` the cross loader
# then finds /lib/aarch64-linux-gnu/libc.so.6 through the host's ld.so.cache, and a loader and C
# library of two builds hang the first thread a program starts. The multiarch directory inside the
# cross root, pointing at the cross root's own libraries, keeps loader and C library of one build;
# libraries that only the multiarch packages have (gRPC, protobuf) are still found beside them.
align_arm64_cross_root() {
  local link=/usr/aarch64-linux-gnu/lib/aarch64-linux-gnu
  [[ -d /usr/aarch64-linux-gnu/lib && ! -e "$link" ]] || return 0
  local sudo
  sudo=$(sudo_prefix "link $link")
  echo "install-deps: linking $link to the cross root's own libraries"
  $sudo ln -s . "$link"
}

install_packages() {
  local missing=()
  local native
  native=$(dpkg --print-architecture)
  for pkg in "${PACKAGES[@]}"; do
    # With two architectures a name matches a package of each: the one wanted is the name's
    # ":arch" qualifier, or the native architecture (or "all") when it has none.
    local arch="$native"
    [[ "$pkg" == *:* ]] && arch="${pkg#*:}"
    local status
    status=$(dpkg-query -W -f='${Status}|${Architecture}\n' "${pkg%%:*}" 2>/dev/null || true)
    grep -qxE "install ok installed\|($arch|all)" <<<"$status" || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#PACKAGES[@]} packages already installed"
    return
  fi
  local sudo
  sudo=$(sudo_prefix "install: ${missing[*]}")
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Python packages from PyPI (deploy/python-requirements.txt, all pinned) in a virtual environment
# under the build folder; it is remade only when the requirements change.
install_venv() {
  local dir="${BUILD_DIR:-build}/venv"
  local requirements
  requirements="$(dirname "$0")/python-requirements.txt"
  if [[ -f "$dir/requirements.txt" ]] && cmp -s "$requirements" "$dir/requirements.txt"; then
    echo "install-deps: $dir is up to date"
    return
  fi
  echo "install-deps: making $dir"
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  cp "$requirements" "$dir/requirements.txt"
}

add_arm64_architecture
install_packages
align_arm64_cross_root
install_venv
