# The history's benchmark: db_bench (batched insert throughput and best-config query latency on a
# history of a million records).
add_executable(db_bench ${CMAKE_CURRENT_SOURCE_DIR}/db_bench.cc)
target_link_libraries(db_bench PRIVATE tunefarm_db tunefarm_wire CLI11::CLI11)
