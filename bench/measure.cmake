# sandbox_bench: what the measurement sandbox costs per candidate (a fresh worker, its namespaces
# and limits), and the probe kernel's cost timed through it against the same kernel timed in
# process.
add_executable(sandbox_bench ${CMAKE_CURRENT_LIST_DIR}/sandbox_bench.cc)
target_link_libraries(sandbox_bench PRIVATE tunefarm_measure tunefarm_rt CLI11::CLI11)
add_dependencies(sandbox_bench tunefarm-measure-worker)
