# Shared-memory collectives through the public API with real PMIx ranks:
# every dtype x op x count x in/out of place, exact values and bitwise
# equality across ranks, on 1..8 ranks, through the tarantella launcher and
# through OpenMPI's mpirun; the >= 64 MiB case on a few rank counts; a rank
# killed mid-collective. Every command runs under `timeout`.
add_executable(collectives_check ${CMAKE_CURRENT_LIST_DIR}/collectives_check.c)
target_link_libraries(collectives_check PRIVATE tnt)

set(_coll_check $<TARGET_FILE:collectives_check>)
# The same clean launcher environment as bootstrap.cmake (TNT_TEST_CLEAN_ENV).
set(_coll_env ${TNT_TEST_CLEAN_ENV} -u TNT_SHM_CMA -u TNT_SHM_STAGING_KB -u TNT_SHM_SMALL_KB
  -u TNT_SHM_STREAM_KB -u TNT_SHM_STREAM TNT_TIMEOUT=60)

function(tnt_collectives_test name timeout)
  add_test(NAME integration.collectives.${name} COMMAND ${ARGN})
  set_tests_properties(integration.collectives.${name} PROPERTIES TIMEOUT ${timeout}
    LABELS integration)
endfunction()

# A rank killed with SIGKILL in the middle of an allreduce: the job must end
# with a failure within seconds and leave no new /dev/shm/tnt-* segment.
set(_coll_kill bash ${CMAKE_CURRENT_LIST_DIR}/collectives_kill.sh)

if(TARGET tarantella)
  set(_coll_tnt ${PROJECT_BINARY_DIR}/bin/tarantella)
  foreach(_np 1 2 3 4 5 6 7 8)
    tnt_collectives_test(tarantella_np${_np} 120
      ${_coll_env} timeout 110 ${_coll_tnt} -n ${_np} -- ${_coll_check})
  endforeach()
  foreach(_np 2 8)
    tnt_collectives_test(tarantella_large_np${_np} 180
      ${_coll_env} timeout 170 ${_coll_tnt} -n ${_np} -- ${_coll_check} --large)
  endforeach()
  # Every single-copy CMA algorithm (by default only mid-sized blocks of
  # allgather, gather, scatter and alltoall take one), and none at all.
  tnt_collectives_test(tarantella_no_cma_np3 120
    ${_coll_env} TNT_SHM_CMA=off timeout 110 ${_coll_tnt} -n 3 -- ${_coll_check})
  foreach(_np 3 8)
    tnt_collectives_test(tarantella_cma_np${_np} 180
      ${_coll_env} TNT_SHM_CMA=1 timeout 170 ${_coll_tnt} -n ${_np} -- ${_coll_check} --large)
  endforeach()
  # The streamed large-message path for every staged size (and no one-phase
  # path), standard matrix and large case, in and out of place.
  foreach(_np 2 5)
    tnt_collectives_test(tarantella_stream_np${_np} 180
      ${_coll_env} TNT_SHM_STREAM=on TNT_SHM_STREAM_KB=0 TNT_SHM_SMALL_KB=0
      TNT_SHM_STAGING_KB=256
      timeout 170 ${_coll_tnt} -n ${_np} -- ${_coll_check} --large)
  endforeach()
  # A 4 MiB /dev/shm in a private mount namespace (root only, else skipped):
  # tnt_init fails with the size needed, never SIGBUS.
  add_test(NAME integration.collectives.small_dev_shm
    COMMAND ${_coll_env} bash ${CMAKE_CURRENT_LIST_DIR}/shm_small_devshm.sh ${_coll_tnt}
            ${_coll_check})
  set_tests_properties(integration.collectives.small_dev_shm PROPERTIES TIMEOUT 240
    LABELS integration SKIP_RETURN_CODE 77)
  tnt_collectives_test(tarantella_rank_killed 60
    ${_coll_env} ${_coll_kill}
    timeout 50 ${_coll_tnt} -n 4 -- ${_coll_check} --kill-rank 2)
  # Between small rooted calls, whose senders return before the receivers
  # arrive: the survivors' next call still fails at once.
  tnt_collectives_test(tarantella_rank_killed_rooted 60
    ${_coll_env} ${_coll_kill}
    timeout 50 ${_coll_tnt} -n 4 -- ${_coll_check} --kill-rank-rooted 2)
endif()

find_program(TNT_MPIRUN mpirun)
if(TNT_MPIRUN)
  set(_coll_mpirun ${TNT_MPIRUN} --allow-run-as-root --oversubscribe --bind-to none)
  foreach(_np 1 2 3 5 8)
    tnt_collectives_test(mpirun_np${_np} 120
      ${_coll_env} timeout 110 ${_coll_mpirun} -np ${_np} ${_coll_check})
  endforeach()
  tnt_collectives_test(mpirun_large_np3 180
    ${_coll_env} timeout 170 ${_coll_mpirun} -np 3 ${_coll_check} --large)
  tnt_collectives_test(mpirun_rank_killed 60
    ${_coll_env} ${_coll_kill}
    timeout 50 ${_coll_mpirun} -np 3 ${_coll_check} --kill-rank 1)
endif()

# Another local user pre-creates the job's old, predictable segment names
# with a forged header (root only: it switches users; else skipped).
add_executable(shm_forge ${CMAKE_CURRENT_LIST_DIR}/shm_forge.c)
target_link_libraries(shm_forge PRIVATE rt)
if(TARGET tarantella)
  add_test(NAME integration.shm.attack_forged_segment
    COMMAND ${_coll_env} TNT_TIMEOUT=20 bash ${CMAKE_CURRENT_LIST_DIR}/shm_attack.sh
            ${_coll_tnt} ${_coll_check} $<TARGET_FILE:shm_forge>)
  set_tests_properties(integration.shm.attack_forged_segment PROPERTIES TIMEOUT 240
    LABELS integration SKIP_RETURN_CODE 77)
endif()
