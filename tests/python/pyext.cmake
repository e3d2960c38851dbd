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
