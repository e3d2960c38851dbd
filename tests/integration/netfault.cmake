# Network faults between nodes (issue 20): netfault.sh puts each rank of
# netfault_check in a network namespace of its own, linked through a
# bridge, and cuts or degrades one node's link. Root only: the script
# skips (77) without the right to make namespaces. The ranks bootstrap over
# a file store (tnt_comm_create_oob), not PMIx: the launcher's server on
# 127.0.0.1 cannot be reached from another namespace.
if(TNT_WITH_UCX)
  add_executable(netfault_check ${CMAKE_CURRENT_LIST_DIR}/netfault_check.c)
  target_link_libraries(netfault_check PRIVATE tnt tnt_test_common)

  # tnt_netfault_test(<name> <timeout> <mode> [ENV k=v...])
  function(tnt_netfault_test name timeout mode)
    cmake_parse_arguments(T "" "" "ENV" ${ARGN})
    add_test(NAME integration.netfault.${name}
      COMMAND timeout -k 5 ${timeout} bash ${CMAKE_CURRENT_LIST_DIR}/netfault.sh
              $<TARGET_FILE:netfault_check> ${mode})
    math(EXPR _ctest_timeout "${timeout} + 10")
    set_tests_properties(integration.netfault.${name} PROPERTIES TIMEOUT ${_ctest_timeout}
      LABELS integration SKIP_RETURN_CODE 77 ENVIRONMENT "${T_ENV}")
  endfunction()

  # Three single-rank nodes; the last one's link goes down mid-run. The
  # ranks run with TNT_TIMEOUT=5 and must all end within 5 + 5 s of the cut.
  tnt_netfault_test(cut_3 90 cut)
  # The last node's link loses 5% of its packets and delays each by 20 ms,
  # both ways (tc netem, or netfault_link.py where the kernel lacks netem):
  # every allreduce of the run is still exact, and packets were dropped.
  tnt_netfault_test(netem_3 180 netem)
endif()
