# Debian packages with CPack, one per install component:
#
#   component  package                  contents
#   lib        libtnt                   libtnt.so.<version> (and the soname link)
#   dev        libtnt-dev               tnt/tnt.h, libtnt.so, tnt.pc, the CMake package
#   launcher   tarantella               the tarantella launcher
#   spank      slurm-spank-tarantella   spank_tarantella.so (TNT_SLURM_PLUGIN_DIR)
#   python     python3-tarantella       the tarantella package for TNT_PYTHON
#   cuda       libtnt-cuda              libtnt_cuda.so, the device collectives
#                                       (TNT_WITH_CUDA builds only)
#
# Build them with a /usr prefix, so that the paths are Debian's
# (scripts/build-debs.sh does this; `make deb` calls it):
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DTNT_BUILD_TESTS=OFF
#   cmake --build build-deb -j && (cd build-deb && cpack -G DEB)
#
# A new component (e.g. a CUDA library) is an install(... COMPONENT <name>)
# plus one entry in _tnt_deb_components below with its package name, summary
# and dependencies.
set(CPACK_PACKAGE_NAME tarantella)
set(CPACK_PACKAGE_VENDOR "Tarantella")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Tarantella maintainers <tarantella@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "SLURM-native data-parallel PyTorch training")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/cc-hpc-itwm/tarantella")
# The install prefix chosen at configure time is the packages' prefix (the
# library, Python and plugin directories were computed for it).
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# dpkg-shlibdeps works out the dependencies on Debian's libraries (libpmix2,
# libhwloc15, libucx0, ...); libtnt's own soname is recorded in its
# shlibs file so the other packages can depend on it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# libtnt itself is found in the build tree (the Python extension links it);
# the dependency on the libtnt package comes from the component DEPENDS.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

# name;package;summary;component dependencies;extra Debian dependencies
set(_tnt_deb_components
  "lib|libtnt|Tarantella collectives library (libtnt)||"
  "dev|libtnt-dev|Tarantella collectives library: header, pkg-config and CMake files|lib|"
  "launcher|tarantella|Tarantella single-node launcher (a PMIx server)||")
if(TNT_WITH_SPANK)
  list(APPEND _tnt_deb_components
    "spank|slurm-spank-tarantella|SPANK plugin adding --tarantella to srun, sbatch and salloc||")
endif()
if(TNT_WITH_CUDA)
  list(APPEND _tnt_deb_components
    "cuda|libtnt-cuda|Tarantella device collectives for CUDA buffers (NCCL, host-staged)|lib|")
endif()
if(TNT_WITH_PYTHON)
  # The extension is built for one Python ABI (TNT_PYTHON's major.minor).
  execute_process(COMMAND "${TNT_PYTHON}" -c "import sys; print('%d.%d' % sys.version_info[:2])"
    OUTPUT_VARIABLE _tnt_deb_pyver OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND _tnt_deb_components
    "python|python3-tarantella|Tarantella Python package (import tarantella as tnt)|lib|python3 (>= ${_tnt_deb_pyver}), python3 (<< ${_tnt_deb_pyver}.99), python3-numpy, python3-torch")
endif()

set(CPACK_COMPONENTS_ALL "")
foreach(_entry ${_tnt_deb_components})
  string(REPLACE "|" ";" _fields "${_entry}")
  list(GET _fields 0 _comp)
  list(GET _fields 1 _pkg)
  list(GET _fields 2 _summary)
  list(GET _fields 3 _deps)
  list(GET _fields 4 _debdeps)
  string(TOUPPER ${_comp} _COMP)
  list(APPEND CPACK_COMPONENTS_ALL ${_comp})
  set(CPACK_DEBIAN_${_COMP}_PACKAGE_NAME ${_pkg})
  set(CPACK_COMPONENT_${_COMP}_DESCRIPTION "${_summary}")
  if(_deps)
    set(CPACK_COMPONENT_${_COMP}_DEPENDS ${_deps})
  endif()
  if(_debdeps)
    set(CPACK_DEBIAN_${_COMP}_PACKAGE_DEPENDS "${_debdeps}")
  endif()
endforeach()
# The plugin is loaded by srun/sbatch/salloc (slurm-client) and slurmstepd
# (slurmd); either is enough on a given host. Set after the loop, whose
# fields are separated by '|'.
set(CPACK_DEBIAN_SPANK_PACKAGE_DEPENDS "slurm-client | slurmd")
# The launcher runs Python programs: suggest the package.
set(CPACK_DEBIAN_LAUNCHER_PACKAGE_RECOMMENDS python3-tarantella)
set(CPACK_DEBIAN_SPANK_PACKAGE_RECOMMENDS "tarantella, python3-tarantella")
# The CUDA runtime (libcudart.so.<major>) comes from NVIDIA's packages or the
# cluster's CUDA module, not from a Debian package dpkg-shlibdeps knows, and
# NCCL is loaded at run time when present (docs/gpu.md): no shlibs
# dependency; the plugin's RUNPATH names the toolkit it was built with.
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUDA_PACKAGE_RECOMMENDS "libnccl2")
include(CPack)
