# TNT_WITH_CUDA: device-buffer collectives (tnt/tnt_cuda.h) through
# libtnt_cuda.so. Default ON where the CUDA toolkit (CUDAToolkit package)
# and NCCL (nccl.h and libnccl) are found, OFF otherwise; the CPU build is the
# same either way, because libtnt.so never links CUDA or NCCL (it dlopen()s
# libtnt_cuda.so at the first device call, which dlopen()s NCCL in turn).
#
# Sets TNT_WITH_CUDA, and where ON: TNT_NCCL_INCLUDE_DIR, TNT_NCCL_LIBRARY,
# TNT_NCCL_RUNTIME (the libnccl.so.2 path baked in as a fallback).
find_package(CUDAToolkit QUIET)
set(_tnt_cuda_found OFF)
if(CUDAToolkit_FOUND)
  find_path(TNT_NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(TNT_NCCL_LIBRARY nccl
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
          ${CUDAToolkit_LIBRARY_DIR}/../lib ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  # A pip-installed torch brings NCCL along (the nvidia-nccl wheel:
  # nvidia/nccl/include and lib/libnccl.so.2, no unversioned name). GPU nodes
  # often have that one and no other, so it comes last, after the toolkit,
  # NCCL_HOME and the system's.
  if(NOT (TNT_NCCL_INCLUDE_DIR AND TNT_NCCL_LIBRARY) AND TNT_PYTHON)
    execute_process(
      COMMAND ${TNT_PYTHON} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _tnt_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_tnt_nccl_wheel AND EXISTS ${_tnt_nccl_wheel}/include/nccl.h)
      find_path(TNT_NCCL_INCLUDE_DIR nccl.h PATHS ${_tnt_nccl_wheel}/include NO_DEFAULT_PATH)
      find_library(TNT_NCCL_LIBRARY NAMES nccl libnccl.so.2
        PATHS ${_tnt_nccl_wheel}/lib NO_DEFAULT_PATH)
    endif()
  endif()
  if(TNT_NCCL_INCLUDE_DIR AND TNT_NCCL_LIBRARY)
    set(_tnt_cuda_found ON)
  endif()
endif()

option(TNT_WITH_CUDA
  "Build libtnt_cuda.so: collectives on CUDA device buffers (NCCL, host-staged fallback)"
  ${_tnt_cuda_found})

if(TNT_WITH_CUDA)
  if(NOT _tnt_cuda_found)
    message(FATAL_ERROR "TNT_WITH_CUDA=ON needs the CUDA toolkit (found: ${CUDAToolkit_FOUND}; "
      "set CUDAToolkit_ROOT) and NCCL (nccl.h: ${TNT_NCCL_INCLUDE_DIR}, libnccl: "
      "${TNT_NCCL_LIBRARY}; set NCCL_HOME), or configure with -DTNT_WITH_CUDA=OFF")
  endif()
  get_filename_component(_tnt_nccl_real ${TNT_NCCL_LIBRARY} REALPATH)
  get_filename_component(_tnt_nccl_dir ${_tnt_nccl_real} DIRECTORY)
  set(TNT_NCCL_RUNTIME ${_tnt_nccl_dir}/libnccl.so.2)
  message(STATUS "tarantella: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_LIBRARY_DIR}), "
    "NCCL ${TNT_NCCL_LIBRARY}: building libtnt_cuda.so")
else()
  message(STATUS "tarantella: TNT_WITH_CUDA=OFF (CUDA toolkit and NCCL found: "
    "${_tnt_cuda_found}); device collectives will return TNT_ERR_UNSUPPORTED")
endif()
