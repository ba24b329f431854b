# Cross build for aarch64 boards with Debian's cross toolchain (crossbuild-essential-arm64) and its
# multiarch :arm64 development packages, which install beside the amd64 ones: libraries under
# /usr/lib/aarch64-linux-gnu, headers shared under /usr/include. Used with -DTUNEFARM_AGENT_ONLY=ON
# (make agent-arm64); deploy/install-deps.sh installs what it needs.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Makes find_package and find_library look under lib/aarch64-linux-gnu, never the amd64 libraries.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# Code generators (protoc, grpc_cpp_plugin) run on the build machine: the amd64 ones.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# What runs the results here: user-mode QEMU with the arm64 loader and C library.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
