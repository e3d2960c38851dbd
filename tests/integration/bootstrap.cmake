# Bootstrap and public C API, end to end: singleton, the SLURM-singleton
# warning, bad environment values (rejected by tnt_init), argument errors, OpenMPI's mpirun with 1, 2
# and 4 ranks, the TNT_TIMEOUT path, and the tarantella launcher.
# Every command runs under `timeout` and every test has a ctest TIMEOUT.
add_executable(bootstrap_check ${CMAKE_CURRENT_LIST_DIR}/bootstrap_check.c)
# Only the installed API: link the shared library like a user would.
target_link_libraries(bootstrap_check PRIVATE tnt tnt_test_common m)

set(_bs_check $<TARGET_FILE:bootstrap_check>)
set(_bs_expect ${CMAKE_CURRENT_LIST_DIR}/expect_output.sh)
# Run every test in a clean launcher environment, even when ctest itself runs
# inside a SLURM allocation or under a PMIx launcher.
set(_bs_clean_env ${TNT_TEST_CLEAN_ENV} -u TNT_TIMEOUT -u TNT_LOG_LEVEL
  -u TNT_LOG_ON_ALL_DEVICES)

function(tnt_bootstrap_test name timeout)
  add_test(NAME integration.bootstrap.${name} COMMAND ${ARGN})
  set_tests_properties(integration.bootstrap.${name} PROPERTIES TIMEOUT ${timeout}
    LABELS integration)
endfunction()

# Singleton: no PMIx server at all. --check-args also covers the argument
# errors (NULL comm, bad dtype/op/root, NULL buffers, count 0).
tnt_bootstrap_test(singleton 30
  ${_bs_clean_env} timeout 20 ${_bs_check} --launcher none --check-args)
# srun without PMIx: every task is a singleton, and each prints exactly one
# warning that names the fix.
tnt_bootstrap_test(singleton_slurm_warning 30
  ${_bs_clean_env} SLURM_NTASKS=4 ${_bs_expect} 1
  "srun --tarantella.*srun --mpi=pmix.*MpiDefault=pmix" --
  timeout 20 ${_bs_check} --launcher none)
# torchrun (WORLD_SIZE/RANK/LOCAL_RANK) or OpenMPI's variables without a PMIx
# server: one warning naming both Tarantella launchers, not a silent singleton.
tnt_bootstrap_test(singleton_torchrun_warning 30
  ${_bs_clean_env} -u OMPI_COMM_WORLD_RANK WORLD_SIZE=4 RANK=2 LOCAL_RANK=0 ${_bs_expect} 1
  "WORLD_SIZE=4 \\(set by torchrun.*rank 2 of 4.*srun --tarantella.*tarantella -n 4 --" --
  timeout 20 ${_bs_check} --launcher none)
tnt_bootstrap_test(singleton_ompi_warning 30
  ${_bs_clean_env} -u WORLD_SIZE -u RANK OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1
  ${_bs_expect} 1 "OMPI_COMM_WORLD_SIZE=2 .*rank 1 of 2.*srun --tarantella.*tarantella -n 2 --" --
  timeout 20 ${_bs_check} --launcher none)
# A lone WORLD_SIZE=1 is a singleton by intent: no warning.
tnt_bootstrap_test(singleton_world_size_1 30
  ${_bs_clean_env} WORLD_SIZE=1 ${_bs_expect} 0 "singleton" --
  timeout 20 ${_bs_check} --launcher none)
# Bad values fail tnt_init: one clear error line each, naming the variable,
# the value and the valid values (they used to warn and use the default).
tnt_bootstrap_test(bad_env 30
  ${_bs_clean_env} TNT_TIMEOUT=abc TNT_LOG_LEVEL=loud ${_bs_expect} --fail 2
  "error: TNT_TIMEOUT='abc' is not valid: expected a number of seconds from 0 to 1000000000.*default 300|error: TNT_LOG_LEVEL='loud' is not valid: expected one of error, warn.*default warn" --
  timeout 20 ${_bs_check} --launcher none)

find_program(TNT_MPIRUN mpirun)
if(TNT_MPIRUN)
  # OpenMPI 4.1 hosts a PMIx server (Debian's build uses the system libpmix).
  # No binding: 4 ranks share this machine's 2 cores.
  set(_bs_mpirun ${TNT_MPIRUN} --allow-run-as-root --oversubscribe --bind-to none)
  foreach(_np 1 2 4)
    # The argument errors once with peers (2 ranks), without their log lines x 4.
    set(_bs_args "")
    if(_np EQUAL 2)
      set(_bs_args --check-args)
    endif()
    tnt_bootstrap_test(mpirun_np${_np} 60
      ${_bs_clean_env} timeout 50 ${_bs_mpirun} -np ${_np}
      ${_bs_check} --launcher ompi --expect-size ${_np} --expect-nodes 1 ${_bs_args})
  endforeach()
  # A bad value fails the job at tnt_init under mpirun too (not a hang):
  # every rank that gets to print names it (mpirun may stop the other first).
  tnt_bootstrap_test(bad_env_np2 60
    ${_bs_clean_env} TNT_TIMEOUT=abc ${_bs_expect} --fail 1+ "error: TNT_TIMEOUT='abc' is not valid" --
    timeout 50 ${_bs_mpirun} -x TNT_TIMEOUT -np 2 ${_bs_check} --launcher ompi)
  # TNT_TIMEOUT: rank 1 skips a barrier; ranks 0 and 2 must fail it within a
  # few seconds with a message naming "barrier #N" and rank 1 (checked inside
  # bootstrap_check), and fail later collectives at once.
  tnt_bootstrap_test(timeout 60
    ${_bs_clean_env} TNT_TIMEOUT=2 timeout 40 ${_bs_mpirun} -x TNT_TIMEOUT -np 3
    ${_bs_check} --launcher ompi --skip-barrier-rank 1)
  # The same for the bootstrap's own PMIx fences: rank 1 calls tnt_init too
  # late; the others' tnt_init fails naming "allgather #0" and rank 1.
  tnt_bootstrap_test(init_timeout 60
    ${_bs_clean_env} TNT_TIMEOUT=1 timeout 40 ${_bs_mpirun} -x TNT_TIMEOUT -np 3
    ${_bs_check} --late-init-rank 1)
  # The collective set against serial references under mpirun, on the
  # communicator tnt_init makes (one node).
  # (multinode_check is defined in multinode.cmake, included later.)
  tnt_bootstrap_test(mpirun_set_np3 90
    ${_bs_clean_env} timeout 80 ${_bs_mpirun} -np 3 $<TARGET_FILE:multinode_check>
    --expect-size 3 --mode set)
  # tnt_abort on one rank stops the whole job at once (PMIx_Abort).
  tnt_bootstrap_test(abort 60
    ${_bs_clean_env} ${_bs_expect} --fail 1+ "aborting the job.*on purpose" --
    timeout 20 ${_bs_mpirun} -np 3 ${_bs_check} --launcher ompi --abort-rank 1)
else()
  add_test(NAME integration.bootstrap.mpirun COMMAND sh -c
    "echo 'mpirun not found: install openmpi-bin (scripts/install-deps.sh does)'; exit 1")
  set_tests_properties(integration.bootstrap.mpirun PROPERTIES TIMEOUT 10 LABELS integration)
endif()

# Through the project's own launcher (a PMIx server built on libpmix), on one
# node and on nodes it simulates (distinct PMIX_HOSTNAMEs on this host), which
# takes tnt_init through the multi-node path.
set(_bs_tarantella ${PROJECT_BINARY_DIR}/bin/tarantella)
tnt_bootstrap_test(tarantella_np2 60
  ${_bs_clean_env} timeout 50 ${_bs_tarantella} -n 2 --python-interpreter "" --
  ${_bs_check} --launcher tnt --expect-size 2 --expect-nodes 1 --check-args)
# Bad TNT_* values through the launcher: the job fails at tnt_init (exit
# status, not a timeout) with the variable, the value and the valid range.
# TNT_SHM_STAGING_KB=-1 once wrapped the segment size (a write out of
# bounds) and 2^54 KiB made the slot size 0 (copy loops that never
# advanced); a bad choice and a bad boolean are the other kinds.
tnt_bootstrap_test(tarantella_bad_staging_negative 60
  ${_bs_clean_env} TNT_SHM_STAGING_KB=-1 ${_bs_expect} --fail 1+
  "error: TNT_SHM_STAGING_KB='-1' is not valid: expected a whole number of KiB from 64 to 1048576" --
  timeout 50 ${_bs_tarantella} -n 2 --python-interpreter "" -- ${_bs_check} --launcher tnt)
tnt_bootstrap_test(tarantella_bad_staging_huge 60
  ${_bs_clean_env} TNT_SHM_STAGING_KB=18014398509481984 ${_bs_expect} --fail 1+
  "error: TNT_SHM_STAGING_KB='18014398509481984' is out of range: expected a whole number of KiB from 64 to 1048576" --
  timeout 50 ${_bs_tarantella} -n 2 --python-interpreter "" -- ${_bs_check} --launcher tnt)
tnt_bootstrap_test(tarantella_bad_choice_and_bool 60
  ${_bs_clean_env} TNT_ALLREDUCE_ALGO=fast TNT_SHM_CMA=maybe ${_bs_expect} --fail 2+
  "error: TNT_ALLREDUCE_ALGO='fast' is not valid: expected one of auto, recursive_doubling, rd, ring|error: TNT_SHM_CMA='maybe' is not valid: expected one of auto, on, 1" --
  timeout 50 ${_bs_tarantella} -n 2 --python-interpreter "" -- ${_bs_check} --launcher tnt)
if(TNT_WITH_UCX)
  tnt_bootstrap_test(tarantella_nodes2 60
    ${_bs_clean_env} timeout 50 ${_bs_tarantella} -n 4 --simulate-nodes 2
    --python-interpreter "" -- ${_bs_check} --launcher tnt --expect-size 4 --expect-nodes 2)
else()
  # Without UCX a job over several nodes fails in tnt_init, naming the option.
  tnt_bootstrap_test(tarantella_nodes2_without_ucx 60
    ${_bs_clean_env} ${_bs_expect} --fail 1+ "tnt_init failed.*built without UCX \\(cmake -DTNT_WITH_UCX=ON" --
    timeout 50 ${_bs_tarantella} -n 4 --simulate-nodes 2 --log-on-all-devices
    --python-interpreter "" -- ${_bs_check} --launcher tnt --expect-size 4 --expect-nodes 2)
endif()
