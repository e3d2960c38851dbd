# The shared SLURM test cluster (tests/slurm/cluster.sh) as a ctest fixture.
#
# Other fragments add tests that need real slurmctld/slurmd daemons with
#
#   tnt_add_slurm_test(NAME slurm.my_test TIMEOUT 60
#                      COMMAND srun --tarantella -N 2 -n 4 --immediate=20 ...)
#
# which runs COMMAND through `cluster.sh run` (SLURM_CONF and PATH set for the
# private cluster), requires the fixture `slurm_cluster`, labels the test
# `slurm` and serialises it with the other cluster users. Tests added by hand
# instead need: FIXTURES_REQUIRED slurm_cluster, RESOURCE_LOCK slurm_cluster,
# and ${TNT_SLURM_RUN} in front of the command. The cluster has 4 nodes n1..n4
# with 2 CPUs and 2 declared GPUs (scheduling only, no devices) each,
# MpiDefault=none, and the build tree's
# spank_tarantella.so in its plugstack.conf. Jobs that do not fit wait
# forever: always pass --immediate (or a time limit) and keep a TIMEOUT.
#
# The fixture needs root and the Slurm daemons; without them the SLURM tests
# are left out (TNT_SLURM_CLUSTER_AVAILABLE is OFF) with a configure message.

set(TNT_SLURM_CLUSTER_SH ${CMAKE_CURRENT_SOURCE_DIR}/cluster.sh)
set(TNT_SLURM_CLUSTER_STATE ${CMAKE_CURRENT_BINARY_DIR}/cluster.state)
set(TNT_SLURM_RUN ${TNT_SLURM_CLUSTER_SH} run --state-file ${TNT_SLURM_CLUSTER_STATE} --)

find_program(TNT_SLURMCTLD slurmctld PATHS /usr/sbin /usr/local/sbin)
find_program(TNT_SLURMD slurmd PATHS /usr/sbin /usr/local/sbin)
find_program(TNT_MUNGED munged PATHS /usr/sbin /usr/local/sbin)
find_program(TNT_SRUN srun)
execute_process(COMMAND id -u OUTPUT_VARIABLE _tnt_uid OUTPUT_STRIP_TRAILING_WHITESPACE)

set(TNT_SLURM_CLUSTER_AVAILABLE ON)
if(NOT TNT_SLURMCTLD OR NOT TNT_SLURMD OR NOT TNT_MUNGED OR NOT TNT_SRUN)
  message(STATUS "SLURM tests left out: slurmctld, slurmd, munged or srun not found")
  set(TNT_SLURM_CLUSTER_AVAILABLE OFF)
elseif(NOT _tnt_uid STREQUAL "0")
  message(STATUS "SLURM tests left out: the test cluster needs root (uid is ${_tnt_uid})")
  set(TNT_SLURM_CLUSTER_AVAILABLE OFF)
endif()

if(TNT_SLURM_CLUSTER_AVAILABLE)
  set(_tnt_cluster_plugin_args)
  if(TARGET spank_tarantella)
    set(_tnt_cluster_plugin_args --plugin $<TARGET_FILE:spank_tarantella>)
  endif()
  add_test(NAME slurm.cluster_start
    COMMAND ${TNT_SLURM_CLUSTER_SH} start --nodes 4 --cpus 2 --gpus 2 ${_tnt_cluster_plugin_args}
            --state-file ${TNT_SLURM_CLUSTER_STATE})
  set_tests_properties(slurm.cluster_start PROPERTIES TIMEOUT 120 LABELS slurm
    FIXTURES_SETUP slurm_cluster RESOURCE_LOCK slurm_cluster)
  add_test(NAME slurm.cluster_stop
    COMMAND ${TNT_SLURM_CLUSTER_SH} stop --state-file ${TNT_SLURM_CLUSTER_STATE})
  set_tests_properties(slurm.cluster_stop PROPERTIES TIMEOUT 60 LABELS slurm
    FIXTURES_CLEANUP slurm_cluster RESOURCE_LOCK slurm_cluster)
endif()

# tnt_add_slurm_test(NAME <name> TIMEOUT <seconds> COMMAND <cmd...>
#                    [WORKING_DIRECTORY <dir>] [PASS_REGULAR_EXPRESSION <re>]
#                    [FAIL_REGULAR_EXPRESSION <re>] [WILL_FAIL])
function(tnt_add_slurm_test)
  cmake_parse_arguments(T "WILL_FAIL" "NAME;TIMEOUT;WORKING_DIRECTORY;PASS_REGULAR_EXPRESSION;FAIL_REGULAR_EXPRESSION" "COMMAND" ${ARGN})
  if(NOT TNT_SLURM_CLUSTER_AVAILABLE)
    return()
  endif()
  if(NOT T_NAME OR NOT T_TIMEOUT OR NOT T_COMMAND)
    message(FATAL_ERROR "tnt_add_slurm_test needs NAME, TIMEOUT and COMMAND")
  endif()
  if(NOT T_WORKING_DIRECTORY)
    set(T_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  # timeout(1) inside ctest's own TIMEOUT: a hung srun gets TERM (srun then
  # cancels its step) before ctest kills the whole process group.
  math(EXPR _inner "${T_TIMEOUT} - 5")
  add_test(NAME ${T_NAME} COMMAND ${TNT_SLURM_RUN} timeout -k 5 ${_inner} ${T_COMMAND}
           WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  # Exit status 77: a prerequisite is missing, reported as skipped.
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS slurm
    FIXTURES_REQUIRED slurm_cluster RESOURCE_LOCK slurm_cluster SKIP_RETURN_CODE 77)
  if(T_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGULAR_EXPRESSION}")
  endif()
  if(T_FAIL_REGULAR_EXPRESSION)
    set_tests_properties(${T_NAME} PROPERTIES FAIL_REGULAR_EXPRESSION "${T_FAIL_REGULAR_EXPRESSION}")
  endif()
  if(T_WILL_FAIL)
    set_tests_properties(${T_NAME} PROPERTIES WILL_FAIL TRUE)
  endif()
endfunction()
