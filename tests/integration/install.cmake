# `cmake --install` into a scratch prefix, then a tiny program built against it
# with pkg-config and with find_package(tnt). Needs the whole build (ctest runs
# after it), installs under a temporary DESTDIR and removes it again.
set(_install_cflags "")
if(TNT_SANITIZE)
  set(_install_cflags -fsanitize=${TNT_SANITIZE})
endif()
add_test(NAME integration.install
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_check.sh ${PROJECT_BINARY_DIR} "${_install_cflags}")
set_tests_properties(integration.install PROPERTIES TIMEOUT 120 LABELS integration)
