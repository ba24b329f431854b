# tunefarm — the two commands of the Quick start, and the pieces they are made of.
BUILD_DIR ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
CTEST_JOBS ?= 2

.PHONY: all deps configure build test demo bench packages clean

all: build

deps:
	BUILD_DIR=$(BUILD_DIR) bash deploy/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR)

test: deps
	$(MAKE) build
	cd $(BUILD_DIR) && OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 ctest --output-on-failure -j $(CTEST_JOBS)
	@if [ -f tests/fuzz/run.sh ]; then BUILD_DIR=$(BUILD_DIR) bash tests/fuzz/run.sh; fi

# The demo needs the four programs, the sandbox worker and kernel_bench, not the test suite.
DEMO_TARGETS = trackerd device-agent tunerd tune-client tunefarm-measure-worker kernel_bench

demo: deps
	$(MAKE) configure
	cmake --build $(BUILD_DIR) --target $(DEMO_TARGETS)
	BUILD_DIR=$(BUILD_DIR) bash deploy/demo.sh

# Debian packages of what the build holds (cmake/Packaging.cmake), into $(BUILD_DIR)/packages.
packages: deps
	$(MAKE) configure
	cmake --build $(BUILD_DIR) --target packages

bench: build
	BUILD_DIR=$(BUILD_DIR) bash bench/run.sh

clean:
	rm -rf $(BUILD_DIR)
