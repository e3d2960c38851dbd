# Failure handling under srun --tarantella on the test cluster: one rank is
# stopped, killed or raises; the step must end within the limits checked by
# resilience.sh, every verdict must name that rank, and /dev/shm must be
# clean. The same cases under the launcher are in tests/python/resilience.cmake.
if(TNT_WITH_PYTHON AND TNT_WITH_UCX AND TARGET spank_tarantella)
  foreach(_case srun_stop srun_stop_shared srun_kill srun_exit srun_leave srun_raise srun_save
                srun_usr2)
    tnt_add_slurm_test(NAME slurm.resilience.${_case} TIMEOUT 120
      COMMAND env PYTHONPATH=${PROJECT_BINARY_DIR}/python
              bash ${CMAKE_CURRENT_LIST_DIR}/resilience.sh ${_case} ${TNT_TEST_PYTHON}
              ${PROJECT_SOURCE_DIR}/tests/python/ranks/resil_ranks.py
      PASS_REGULAR_EXPRESSION "OK \\(${_case}\\)")
  endforeach()
endif()
