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

# Install anywhere (docs/install.md). Each builds the source tree again
# without tests in a scratch directory, so it checks what a user does.
# As an unprivileged user (nobody, through setpriv, when ctest runs as root):
# build, `cmake --install build --prefix P` into the user's own directory,
# and a 2-rank job from the installed launcher and package.
add_test(NAME integration.install_nonroot
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_nonroot.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(integration.install_nonroot PROPERTIES TIMEOUT 600 LABELS integration)
if(TNT_WITH_PYTHON)
  # A venv (--system-site-packages: torch from Debian) as TNT_PYTHON: the
  # install goes into the venv, and its bin/tarantella uses its python.
  add_test(NAME integration.install_venv
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_venv.sh ${PROJECT_SOURCE_DIR})
  set_tests_properties(integration.install_venv PROPERTIES TIMEOUT 600 LABELS integration)
endif()
# Debian packages (cmake/TntPackaging.cmake): built with scripts/build-debs.sh,
# installed with dpkg -i into an alternate root checked against this
# machine's package database, used (launcher + Python package, a program
# built against libtnt-dev, the plugin loaded by a private SLURM cluster when
# root and the daemons are there) and purged.
if(TNT_WITH_SPANK AND TNT_WITH_PYTHON)
  add_test(NAME integration.package_deb
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/package_deb.sh ${PROJECT_SOURCE_DIR}
            ${PROJECT_SOURCE_DIR}/tests/slurm/cluster.sh ${TNT_GPU_DOUBLE_DIR})
  set_tests_properties(integration.package_deb PROPERTIES TIMEOUT 900 LABELS integration)
endif()
