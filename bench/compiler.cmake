# The compiler's benchmarks: compile_bench (config -> loadable shared object) and kernel_bench
# (our kernels against OpenBLAS and oneDNN, single thread, interleaved).
add_executable(compile_bench ${CMAKE_CURRENT_SOURCE_DIR}/compile_bench.cc)
target_link_libraries(compile_bench PRIVATE tunefarm_compiler CLI11::CLI11)
add_executable(kernel_bench ${CMAKE_CURRENT_SOURCE_DIR}/kernel_bench.cc)
target_link_libraries(kernel_bench PRIVATE tunefarm_compiler tunefarm_wire tunefarm_openblas tunefarm_dnnl CLI11::CLI11
                      nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
