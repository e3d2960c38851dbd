# The `tarantella` launcher, end to end (tests/integration/launcher_test.py):
# its PMIx server checked by a PMIx client of our own for 1, 2, 4 and 8 ranks
# and simulated nodes; environment and pinning; failure handling (a rank
# exiting 3, aborting (also after printing its own message), killed by SIGKILL; SIGTERM/SIGINT/Ctrl-C to the
# launcher); bad options; --dry-run; --hostfile hand-off to mpirun; and a
# rank killed in the middle of a libtnt allreduce loop; segments a killed
# rank could not remove are removed by the launcher; admission: a process
# the launcher did not start (user nobody lying about its uid, as root only;
# a second connection for a rank; a tool) cannot join or abort the job, and
# a server stuck at shutdown does not hang the launcher. Every case waits
# with a bound and has a ctest TIMEOUT; together they take about 35 s here.
add_executable(launcher_pmix_client ${CMAKE_CURRENT_LIST_DIR}/launcher_pmix_client.c)
target_link_libraries(launcher_pmix_client PRIVATE PkgConfig::PMIX tnt_test_common)
add_executable(launcher_tnt_loop ${CMAKE_CURRENT_LIST_DIR}/launcher_tnt_loop.c)
target_link_libraries(launcher_tnt_loop PRIVATE tnt)
add_executable(launcher_intruder ${CMAKE_CURRENT_LIST_DIR}/launcher_intruder.c)
target_link_libraries(launcher_intruder PRIVATE PkgConfig::PMIX)
add_library(launcher_uid_lie MODULE ${CMAKE_CURRENT_LIST_DIR}/launcher_uid_lie.c)
set_target_properties(launcher_uid_lie PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY
  ${CMAKE_RUNTIME_OUTPUT_DIRECTORY})

set(_launcher_cases pmix_np1 pmix_np2 pmix_np4 pmix_np8 simulate_nodes env pin exit_status
  abort abort_echo sigkill_rank signals usr1 ctrl_c bad_options dry_run help_version hostfile tnt_kill tnt_exit shm_leftover
  intruder second_connection stuck_shutdown)
foreach(_case ${_launcher_cases})
  add_test(NAME integration.launcher.${_case}
    COMMAND ${TNT_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/launcher_test.py
            ${PROJECT_BINARY_DIR}/bin ${_case})
  set_tests_properties(integration.launcher.${_case} PROPERTIES TIMEOUT 60 LABELS integration
    SKIP_RETURN_CODE 77)
endforeach()
