# The timeline (docs/timeline.md) through the launcher: timeline_check runs
# a fixed set of collectives as real ranks and timeline_test.py checks the
# merged file (valid JSON, every rank's events with their sizes,
# communicators and algorithms, lanes in order, clocks aligned), the
# tnt_timeline_start/stop API, no file without TNT_TIMELINE, an unwritable
# path failing tnt_init on every rank, and a stall warning as an instant
# event. Across simulated nodes when UCX is built.
add_executable(timeline_check ${CMAKE_CURRENT_LIST_DIR}/timeline_check.c)
target_link_libraries(timeline_check PRIVATE tnt)

if(TARGET tarantella)
  set(_tl_run ${TNT_TEST_CLEAN_ENV} -u TNT_TIMELINE -u TNT_STALL_WARN TNT_TIMEOUT=60
    ${TNT_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/timeline_test.py
    $<TARGET_FILE:tarantella> $<TARGET_FILE:timeline_check>)
  foreach(_case "collectives;2" "collectives;3" "start;2" "unset;2" "bad-path;3" "stall;2")
    list(GET _case 0 _mode)
    list(GET _case 1 _np)
    add_test(NAME integration.timeline.${_mode}_np${_np} COMMAND ${_tl_run} ${_mode} ${_np})
    set_tests_properties(integration.timeline.${_mode}_np${_np} PROPERTIES TIMEOUT 120
      LABELS integration)
  endforeach()
  if(TNT_WITH_UCX)
    add_test(NAME integration.timeline.collectives_np4_nodes2
      COMMAND ${_tl_run} collectives 4 2)
    set_tests_properties(integration.timeline.collectives_np4_nodes2 PROPERTIES TIMEOUT 120
      LABELS integration)
  endif()
endif()
