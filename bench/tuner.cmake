# The tuner's benchmark: search_bench (trials each strategy needs, planning time).
add_executable(search_bench ${CMAKE_CURRENT_SOURCE_DIR}/search_bench.cc)
target_link_libraries(search_bench PRIVATE tunefarm_tuner CLI11::CLI11 nlohmann_json::nlohmann_json)
add_dependencies(search_bench tunefarm-measure-worker)
