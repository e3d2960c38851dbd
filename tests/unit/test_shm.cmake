# test_shm forks up to 8 ranks per case; on a 2-core machine it needs more
# than the default unit-test timeout. The unit tests are registered by
# unit.cmake, which is included after this fragment, hence the deferred call.
cmake_language(DEFER CALL set_tests_properties unit.test_shm PROPERTIES TIMEOUT 240 LABELS unit)
