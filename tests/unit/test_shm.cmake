# test_shm forks up to 8 ranks per case; on a 2-core machine it needs more
# than the default unit-test timeout.
if(TEST unit.test_shm)
  set_tests_properties(unit.test_shm PROPERTIES TIMEOUT 180 LABELS unit)
endif()
