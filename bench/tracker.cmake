# tracker_bench: brokered results per second, dispatch latency and trackerd's peak RSS. Its
# simulated agents are the device agent's session code, so it needs that component too.
if(TARGET tunefarm_agent)
  add_executable(tracker_bench ${CMAKE_CURRENT_LIST_DIR}/tracker_bench.cc)
  target_link_libraries(tracker_bench PRIVATE tunefarm_agent)
  add_dependencies(tracker_bench trackerd)
endif()
