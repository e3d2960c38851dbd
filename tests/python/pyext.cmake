# pytest suites of the pyext component (tarantella._tnt, collectives,
# optimizers, data). Each file is its own ctest test so failures are easy to
# attribute; pytest exits 5 when it collects nothing, which fails the test.
foreach(_suite collectives optimizer data objects)
  add_test(NAME python.${_suite}
    COMMAND ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
            ${CMAKE_CURRENT_SOURCE_DIR}/test_${_suite}.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python.${_suite} PROPERTIES
    TIMEOUT 180
    LABELS python
    ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python")
endforeach()
# compression: nine launcher runs of 2-4 ranks (16-bit reductions on one and
# on simulated nodes, fp16 edge cases, a mismatch) and nine 2-rank digits
# trainings (about 90 s unloaded).
add_test(NAME python.compression
  COMMAND ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_SOURCE_DIR}/test_compression.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python.compression PROPERTIES
  TIMEOUT 600
  LABELS python
  ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;OMP_NUM_THREADS=1")
