# End-to-end tests of spank_tarantella.so on the test cluster (cluster.cmake):
# real slurmctld/slurmd, MpiDefault=none, 4 nodes x 2 CPUs. Each case is one
# function of spank_e2e.sh; together they take about 30 s.
add_executable(slurm_allreduce_check ${CMAKE_CURRENT_LIST_DIR}/slurm_allreduce_check.c)
# Only the installed API, linked like a user program.
target_link_libraries(slurm_allreduce_check PRIVATE tnt)

if(TARGET spank_tarantella)
  set(_spank_e2e ${CMAKE_CURRENT_LIST_DIR}/spank_e2e.sh)
  foreach(_case allreduce pin_core env torch_env cpus_hint bad_values help sbatch_option sbatch_directive salloc without)
    tnt_add_slurm_test(NAME slurm.spank.${_case} TIMEOUT 90
      COMMAND bash ${_spank_e2e} ${_case} $<TARGET_FILE:slurm_allreduce_check>)
  endforeach()
  # An unmodified DDP script under srun --tarantella -N 2 -n 4 against a
  # serial run (docs/torch-distributed.md); 4 torch ranks on 2 CPUs.
  tnt_add_slurm_test(NAME slurm.spank.ddp TIMEOUT 240
    COMMAND bash ${_spank_e2e} ddp $<TARGET_FILE:slurm_allreduce_check>
            ${TNT_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/ranks)
  # srun --tarantella python3 -m tarantella.smoke from the build tree,
  # without PYTHONPATH: the plugin adds its package (issue 25, point 6).
  if(TNT_WITH_PYTHON)
    tnt_add_slurm_test(NAME slurm.spank.pythonpath TIMEOUT 120
      COMMAND bash ${_spank_e2e} pythonpath $<TARGET_FILE:slurm_allreduce_check>
              ${TNT_TEST_PYTHON} ${PROJECT_BINARY_DIR}/python)
  endif()
  # The same on the tnt backend (import tarantella, init_process_group("tnt")),
  # from the build tree's package; skipped where _tnt_torch is not built.
  tnt_add_slurm_test(NAME slurm.spank.ddp_tnt TIMEOUT 240
    COMMAND bash ${_spank_e2e} ddp_tnt $<TARGET_FILE:slurm_allreduce_check>
            ${TNT_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/tests/python/ranks ${PROJECT_BINARY_DIR}/python)
endif()

# Site defaults from plugstack.conf arguments need a cluster of their own
# (its plugstack.conf line differs); the case starts and stops it itself.
if(TARGET spank_tarantella AND TNT_SLURM_CLUSTER_AVAILABLE)
  add_test(NAME slurm.spank.site_defaults
    COMMAND bash ${_spank_e2e} site_defaults $<TARGET_FILE:slurm_allreduce_check>
            ${TNT_SLURM_CLUSTER_SH} $<TARGET_FILE:spank_tarantella>)
  set_tests_properties(slurm.spank.site_defaults PROPERTIES TIMEOUT 120 LABELS slurm)
endif()
