# Failure handling under the tarantella launcher (the srun cases are in
# tests/slurm/resilience.cmake; both run tests/slurm/resilience.sh).
foreach(_case launcher_stop launcher_kill launcher_raise)
  add_test(NAME python.resilience.${_case}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/slurm/resilience.sh ${_case} ${TNT_TEST_PYTHON}
            ${CMAKE_CURRENT_SOURCE_DIR}/ranks/resil_ranks.py ${PROJECT_BINARY_DIR}/bin/tarantella)
  set_tests_properties(python.resilience.${_case} PROPERTIES
    TIMEOUT 120
    LABELS python
    PASS_REGULAR_EXPRESSION "OK \\(${_case}\\)"
    ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python")
endforeach()
