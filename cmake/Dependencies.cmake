# Every third-party dependency comes from a Debian 12 package (deploy/install-deps.sh).
# The quirks handled here are recorded in the project's toolchain notes.

find_package(Threads REQUIRED)

# gRPC ships a CMake config; protobuf does not, so the FindProtobuf module is used.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)

# The compiler, the cost model, the history and models: not the agent side's (TUNEFARM_AGENT_ONLY).
if(NOT TUNEFARM_AGENT_ONLY)
  # Pin LLVM 16: it is the only version whose NVPTX backend knows sm_90.
  find_package(LLVM 16 REQUIRED CONFIG HINTS /usr/lib/llvm-16/lib/cmake/llvm NO_DEFAULT_PATH)
  add_library(tunefarm_llvm INTERFACE)
  target_include_directories(tunefarm_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
  target_compile_definitions(tunefarm_llvm INTERFACE ${LLVM_DEFINITIONS})
  # One shared libLLVM: fast links and small binaries.
  target_link_libraries(tunefarm_llvm INTERFACE LLVM)
  target_link_directories(tunefarm_llvm INTERFACE ${LLVM_LIBRARY_DIRS})
  # LLD as a library (liblld-16-dev: static archives only) links candidates in-process.
  find_library(LLD_ELF_LIBRARY lldELF PATHS ${LLVM_LIBRARY_DIRS} NO_DEFAULT_PATH REQUIRED)
  find_library(LLD_COMMON_LIBRARY lldCommon PATHS ${LLVM_LIBRARY_DIRS} NO_DEFAULT_PATH REQUIRED)
  # LLD compresses debug sections with zlib or zstd, when asked: the archives name both.
  find_package(ZLIB REQUIRED)
  find_library(ZSTD_LIBRARY zstd REQUIRED)
  target_link_libraries(tunefarm_llvm INTERFACE ${LLD_ELF_LIBRARY} ${LLD_COMMON_LIBRARY} LLVM ZLIB::ZLIB ${ZSTD_LIBRARY})

  # Debian's XGBoost CMake config names a binary that is not installed; import the library by hand.
  find_path(XGBOOST_INCLUDE_DIR xgboost/c_api.h REQUIRED)
  find_library(XGBOOST_LIBRARY xgboost REQUIRED)
  add_library(tunefarm_xgboost INTERFACE)
  target_include_directories(tunefarm_xgboost SYSTEM INTERFACE ${XGBOOST_INCLUDE_DIR})
  target_link_libraries(tunefarm_xgboost INTERFACE ${XGBOOST_LIBRARY})

  find_package(SQLite3 REQUIRED)
  # A history shared by several tunerds lives in PostgreSQL, reached through libpq (libpq-dev).
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
  # ONNX models (model/): Debian's libonnx, its protobuf messages, checker and shape inference.
  find_package(ONNX CONFIG REQUIRED)
endif()
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
# The agent-only build leaves them out (device_agent/metrics.h says why).
if(NOT TUNEFARM_AGENT_ONLY)
  # The daemons' HTTP endpoints (metrics, dashboard): Debian's cpp-httplib is a compiled library
  # whose pkg-config file carries the defines (OpenSSL, zlib, brotli) its header must be read with;
  # prometheus-cpp's core (metric types, text format) through pkg-config too, since its CMake config
  # also demands the pull exposer's civetweb, which nothing here uses.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  pkg_check_modules(PROMETHEUS_CORE REQUIRED IMPORTED_TARGET prometheus-cpp-core)
  # The dashboard's charts (libjs-chart.js); tunerd serves the file from where Debian installs it.
  find_file(CHARTJS_FILE chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH)
  if(NOT CHARTJS_FILE)
    message(WARNING "chart.min.js (Debian's libjs-chart.js) not found: tunerd's dashboard will show tables without "
                    "charts until --chart-js names the file (bash deploy/install-deps.sh installs it)")
    set(CHARTJS_FILE "/usr/share/javascript/chart.js/chart.min.js")
  endif()
endif()
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()

if(TUNEFARM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

if(TUNEFARM_BUILD_BENCH)
  # The anchors the benchmarks compare against. Debian's dnnl CMake config insists on OpenCL,
  # which nothing here uses, so both libraries are imported by hand.
  find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED)
  find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread openblas REQUIRED)
  add_library(tunefarm_openblas INTERFACE)
  target_include_directories(tunefarm_openblas SYSTEM INTERFACE ${CBLAS_INCLUDE_DIR})
  target_link_libraries(tunefarm_openblas INTERFACE ${OPENBLAS_LIBRARY})
  find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
  find_path(DNNL_INCLUDE_DIR dnnl.hpp REQUIRED)
  add_library(tunefarm_dnnl INTERFACE)
  target_include_directories(tunefarm_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
  target_link_libraries(tunefarm_dnnl INTERFACE ${DNNL_LIBRARY})
endif()

# Helpers for the per-folder CMakeLists files.

# tunefarm_test(NAME SOURCES... LIBS ...): one GoogleTest executable registered with ctest.
function(tunefarm_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  # One variable only: the GoogleTest module splits list-valued properties of discovered tests.
  # The Makefile's test target exports the OpenMP settings for the whole ctest run.
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" ENVIRONMENT "TUNEFARM_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endfunction()
