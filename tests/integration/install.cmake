# `cmake --install` into a scratch prefix, then a tiny program built against it
# with pkg-config and with find_package(tnt). Needs the whole build (ctest runs
# after it), installs under a temporary DESTDIR and removes it again.
add_test(NAME integration.install
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_check.sh ${PROJECT_BINARY_DIR})
set_tests_properties(integration.install PROPERTIES TIMEOUT 120 LABELS integration)
