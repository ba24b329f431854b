# tunefarm — the two commands of the Quick start, and the pieces they are made of.
BUILD_DIR ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
CTEST_JOBS ?= 2

.PHONY: all deps configure build agent-arm64 test demo bench packages gpu-bundle clean

all: build

deps:
	BUILD_DIR=$(BUILD_DIR) bash deploy/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR)

# device-agent and its measurement worker for aarch64 boards, cross-built with Debian's toolchain
# (cmake/aarch64-linux-gnu.cmake) into $(ARM64_BUILD_DIR); the test suite runs them under qemu-aarch64.
ARM64_BUILD_DIR ?= $(BUILD_DIR)-arm64

$(ARM64_BUILD_DIR)/build.ninja:
	cmake -S . -B $(ARM64_BUILD_DIR) -G Ninja $(CMAKE_FLAGS) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DTUNEFARM_AGENT_ONLY=ON

agent-arm64: $(ARM64_BUILD_DIR)/build.ninja
	cmake --build $(ARM64_BUILD_DIR)

test: deps
	$(MAKE) build
	$(MAKE) agent-arm64
	cd $(BUILD_DIR) && OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 ctest --output-on-failure -j $(CTEST_JOBS)
	@# The Python package's tests ran inside ctest (python_package); their pytest summary:
	@tail -n 1 $(BUILD_DIR)/tests/python/pytest.log 2>/dev/null || true
	@if [ -f tests/fuzz/run.sh ]; then BUILD_DIR=$(BUILD_DIR) bash tests/fuzz/run.sh; fi

# The demo needs the four programs, the sandbox worker, the library builder and the Python package
# that bench/model_bench.py imports (into build/venv, which deps makes before configure), not the test suite.
DEMO_TARGETS = trackerd device-agent tunerd tune-client tunefarm-measure-worker tunefarm-build-library tunefarm_python

demo: deps
	$(MAKE) configure
	@# A build folder configured before deps made build/venv lacks the Python package's target.
	cmake --build $(BUILD_DIR) --target help | grep '^tunefarm_python:' >/dev/null || cmake $(BUILD_DIR)
	cmake --build $(BUILD_DIR) --target $(DEMO_TARGETS)
	BUILD_DIR=$(BUILD_DIR) bash deploy/demo.sh

# Debian packages of what the build holds (cmake/Packaging.cmake), into $(BUILD_DIR)/packages.
packages: deps
	$(MAKE) configure
	cmake --build $(BUILD_DIR) --target packages

# A self-contained x86-64 bundle of the farm (deploy/gpu-bundle.sh): the programs and every library
# they load but glibc's own, for a machine without our Debian libraries (a rented GPU box), in
# $(BUILD_DIR)/gpu-bundle/tunefarm-bundle and as an archive. The archive must stay under ~58 MiB to
# travel beside the working tree to a device machine (64 MiB in all). Measured on 2 cores: xz -6
# 54.8 MiB in 85 s (chosen); xz -9 52.4 MiB but 149 s; zstd -19 --long=27 58.5 MiB in 85 s.
GPU_BUNDLE_TARGETS = trackerd device-agent tunefarm-measure-worker tunefarm-probe-kernel tunerd tune-client \
	tunefarm-build-library tunefarm-model-import tunefarm_rt
GPU_BUNDLE_ARCHIVE ?= $(BUILD_DIR)/gpu-bundle.tar.xz

gpu-bundle: configure
	cmake --build $(BUILD_DIR) --target $(GPU_BUNDLE_TARGETS)
	bash deploy/gpu-bundle.sh $(BUILD_DIR) --archive $(GPU_BUNDLE_ARCHIVE)
	@size=$$(stat -c %s $(GPU_BUNDLE_ARCHIVE)); human=$$(numfmt --to=iec-i --suffix=B --format=%.1f $$size); \
	  if [ $$size -le $$((58 << 20)) ]; then echo "gpu-bundle: $(GPU_BUNDLE_ARCHIVE) is $$human, under the 58 MiB a device machine takes"; \
	  else echo "gpu-bundle: warning: $(GPU_BUNDLE_ARCHIVE) is $$human, over the 58 MiB a device machine takes" >&2; fi

bench: build
	BUILD_DIR=$(BUILD_DIR) bash bench/run.sh

clean:
	rm -rf $(BUILD_DIR) $(ARM64_BUILD_DIR)
