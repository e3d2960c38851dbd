# The "tnt" torch.distributed backend: tarantella._tnt_torch, a C++
# c10d::ProcessGroup over libtnt (python/tarantella/_tnt_torch.cpp). Optional:
# it needs a C++ compiler, torch's C++ headers and libraries (Debian:
# libtorch-dev, or the headers a pip/conda torch ships under torch/include)
# and pybind11 (pybind11-dev, or the copy those torch headers carry). Where
# any is missing the rest of the package is built as before, and
# `import tarantella` registers a "tnt" backend whose creation says how to
# get it (tarantella/torch_backend.py).
#
# TNT_WITH_TORCH_BACKEND: AUTO (build when possible), ON (fail without), OFF.
set(TNT_WITH_TORCH_BACKEND AUTO CACHE STRING
  "Build the tnt torch.distributed backend (tarantella._tnt_torch): AUTO, ON or OFF")
set_property(CACHE TNT_WITH_TORCH_BACKEND PROPERTY STRINGS AUTO ON OFF)

set(_tnt_torch_why "")
if(TNT_WITH_TORCH_BACKEND STREQUAL "OFF")
  set(_tnt_torch_why "TNT_WITH_TORCH_BACKEND=OFF")
endif()

if(NOT _tnt_torch_why)
  include(CheckLanguage)
  check_language(CXX)
  if(CMAKE_CXX_COMPILER)
    enable_language(CXX)
  else()
    set(_tnt_torch_why "no C++ compiler")
  endif()
endif()

# Where the interpreter's torch lives: its headers and libraries must be the
# ones the extension is loaded into.
if(NOT _tnt_torch_why)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__)"
    OUTPUT_VARIABLE _tnt_torch_out RESULT_VARIABLE _tnt_torch_rc ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _tnt_torch_rc EQUAL 0)
    set(_tnt_torch_why "${Python3_EXECUTABLE} cannot import torch")
  else()
    string(REPLACE "\n" ";" _tnt_torch_out "${_tnt_torch_out}")
    list(GET _tnt_torch_out 0 _tnt_torch_dir)
    list(GET _tnt_torch_out 1 _tnt_torch_version)
  endif()
endif()

if(NOT _tnt_torch_why)
  find_path(TNT_TORCH_INCLUDE_DIR torch/csrc/distributed/c10d/ProcessGroup.hpp
    HINTS ${_tnt_torch_dir}/include NO_DEFAULT_PATH)
  find_path(TNT_TORCH_INCLUDE_DIR torch/csrc/distributed/c10d/ProcessGroup.hpp)
  find_path(TNT_TORCH_API_INCLUDE_DIR torch/torch.h
    HINTS ${TNT_TORCH_INCLUDE_DIR}/torch/csrc/api/include NO_DEFAULT_PATH)
  find_path(TNT_PYBIND11_INCLUDE_DIR pybind11/pybind11.h HINTS ${TNT_TORCH_INCLUDE_DIR})
  set(_tnt_torch_libs)
  foreach(_lib torch torch_cpu c10 torch_python)
    find_library(TNT_TORCH_LIB_${_lib} ${_lib} HINTS ${_tnt_torch_dir}/lib NO_DEFAULT_PATH)
    find_library(TNT_TORCH_LIB_${_lib} ${_lib})
    if(NOT TNT_TORCH_LIB_${_lib})
      set(_tnt_torch_why "lib${_lib}.so not found next to torch (${_tnt_torch_dir}/lib)")
    endif()
    list(APPEND _tnt_torch_libs ${TNT_TORCH_LIB_${_lib}})
  endforeach()
  if(NOT TNT_TORCH_INCLUDE_DIR OR NOT TNT_TORCH_API_INCLUDE_DIR)
    set(_tnt_torch_why "torch's C++ headers (c10d/ProcessGroup.hpp) not found; on Debian: apt-get install libtorch-dev")
  elseif(NOT TNT_PYBIND11_INCLUDE_DIR)
    set(_tnt_torch_why "pybind11 headers not found; on Debian: apt-get install pybind11-dev")
  endif()
endif()

if(_tnt_torch_why)
  if(TNT_WITH_TORCH_BACKEND STREQUAL "ON")
    message(FATAL_ERROR "tarantella: the tnt torch backend cannot be built: ${_tnt_torch_why}")
  endif()
  message(STATUS "tarantella: tnt torch.distributed backend (_tnt_torch): not built (${_tnt_torch_why})")
  set(TNT_TORCH_BACKEND_BUILT OFF CACHE INTERNAL "tarantella._tnt_torch is built")
  return()
endif()
message(STATUS "tarantella: tnt torch.distributed backend (_tnt_torch): built, against torch ${_tnt_torch_version} (${TNT_TORCH_INCLUDE_DIR})")
set(TNT_TORCH_BACKEND_BUILT ON CACHE INTERNAL "tarantella._tnt_torch is built")

Python3_add_library(tnt_torch_pyext MODULE WITH_SOABI
  tarantella/_tnt_torch.cpp tarantella/_tnt_torch_args.cpp tarantella/_tnt_torch_p2p.cpp
  tarantella/_tnt_torch_store.cpp tarantella/_tnt_torch_monitored.cpp
  tarantella/_tnt_torch_device.cpp)
# torch's headers are not warning-clean under -Wall -Wextra; SYSTEM keeps our
# flags (and -Werror) for our own code only.
target_include_directories(tnt_torch_pyext SYSTEM PRIVATE
  ${TNT_TORCH_INCLUDE_DIR} ${TNT_TORCH_API_INCLUDE_DIR} ${TNT_PYBIND11_INCLUDE_DIR})
target_link_libraries(tnt_torch_pyext PRIVATE tnt ${_tnt_torch_libs} Threads::Threads)
target_compile_features(tnt_torch_pyext PRIVATE cxx_std_17)
# torch's libraries are built with the C++11 ABI on Debian and in current
# wheels; ask torch rather than guess.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
  OUTPUT_VARIABLE _tnt_torch_abi OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(_tnt_torch_abi STREQUAL "0" OR _tnt_torch_abi STREQUAL "1")
  target_compile_definitions(tnt_torch_pyext PRIVATE _GLIBCXX_USE_CXX11_ABI=${_tnt_torch_abi})
endif()
set_target_properties(tnt_torch_pyext PROPERTIES
  OUTPUT_NAME _tnt_torch
  LIBRARY_OUTPUT_DIRECTORY ${TNT_PY_PKG_DIR}
  BUILD_RPATH "${PROJECT_BINARY_DIR}/lib"
  INSTALL_RPATH "$ORIGIN/${_tnt_py_to_lib};${CMAKE_INSTALL_FULL_LIBDIR}"
  CXX_VISIBILITY_PRESET hidden)
add_dependencies(tnt_python tnt_torch_pyext)
install(TARGETS tnt_torch_pyext LIBRARY DESTINATION ${TNT_PYTHON_INSTALL_DIR}/tarantella
  COMPONENT python)
