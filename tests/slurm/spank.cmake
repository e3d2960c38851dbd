# End-to-end tests of spank_tarantella.so on the test cluster (cluster.cmake):
# real slurmctld/slurmd, MpiDefault=none, 4 nodes x 2 CPUs. Each case is one
# function of spank_e2e.sh; together they take about 30 s.
add_executable(slurm_allreduce_check ${CMAKE_CURRENT_LIST_DIR}/slurm_allreduce_check.c)
# Only the installed API, linked like a user program.
target_link_libraries(slurm_allreduce_check PRIVATE tnt)

if(TARGET spank_tarantella)
  set(_spank_e2e ${CMAKE_CURRENT_LIST_DIR}/spank_e2e.sh)
  foreach(_case allreduce pin_core env bad_values help sbatch_option sbatch_directive salloc without)
    tnt_add_slurm_test(NAME slurm.spank.${_case} TIMEOUT 90
      COMMAND bash ${_spank_e2e} ${_case} $<TARGET_FILE:slurm_allreduce_check>)
  endforeach()
endif()
