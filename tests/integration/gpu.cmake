# Device collectives (tnt/tnt_cuda.h).
#  - Everywhere: libtnt.so and the Python extension need no CUDA library
#    (readelf -d), and on a machine without a GPU the device API fails
#    cleanly, on every rank alike, with a message naming what is missing.
#  - Label gpu: the collectives on real GPUs, through the host-staged path
#    (ranks sharing one GPU) and NCCL. They run where nvidia-smi lists a GPU
#    and report SKIPPED (return code 77) elsewhere, never passed.
set(_gpu_skip ${CMAKE_CURRENT_LIST_DIR}/gpu_skip.sh)
set(_gpu_env env -u PMIX_NAMESPACE -u PMIX_RANK -u PMIX_SERVER_URI4 -u PMIX_SERVER_URI41
  -u PMIX_SERVER_URI3 -u PMIX_SERVER_URI2 -u PMIX_SERVER_URI21 -u SLURM_NTASKS -u SLURM_NPROCS
  -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_STEP_ID -u SLURM_PROCID -u TNT_GPU_TRANSPORT
  -u TNT_GPU_STAGING_KB TNT_TIMEOUT=60)

function(tnt_gpu_test name timeout labels)
  add_test(NAME integration.gpu.${name} COMMAND ${ARGN})
  set_tests_properties(integration.gpu.${name} PROPERTIES TIMEOUT ${timeout}
    LABELS "${labels}" SKIP_RETURN_CODE 77)
endfunction()

# No DT_NEEDED on CUDA or NCCL in what every user loads.
set(_gpu_no_cuda_libs $<TARGET_FILE:tnt>)
if(TARGET tnt_pyext)
  list(APPEND _gpu_no_cuda_libs $<TARGET_FILE:tnt_pyext>)
endif()
tnt_gpu_test(no_cuda_needed 30 integration
  bash ${CMAKE_CURRENT_LIST_DIR}/gpu_no_cuda_needed.sh ${_gpu_no_cuda_libs})

add_executable(gpu_unsupported_check ${CMAKE_CURRENT_LIST_DIR}/gpu_unsupported_check.c)
target_link_libraries(gpu_unsupported_check PRIVATE tnt)
if(TNT_WITH_CUDA)
  set(_gpu_missing "no usable GPU")
  # Every rank reports the failing rank of the collective set-up.
  set(_gpu_missing_np3 "rank 0: no usable GPU")
else()
  set(_gpu_missing "built without CUDA")
  set(_gpu_missing_np3 "built without CUDA")
endif()
tnt_gpu_test(unsupported_np1 60 integration
  ${_gpu_env} timeout 50 ${_gpu_skip} --without-gpu
  $<TARGET_FILE:gpu_unsupported_check> unsupported "${_gpu_missing}")
if(TARGET tarantella)
  set(_gpu_tnt ${PROJECT_BINARY_DIR}/bin/tarantella)
  # Several ranks: all fail at once (no rank waits for TNT_TIMEOUT=60).
  tnt_gpu_test(unsupported_np3 60 integration
    ${_gpu_env} TNT_TIMEOUT=20 timeout 50 ${_gpu_skip} --without-gpu ${_gpu_tnt} -n 3 --
    $<TARGET_FILE:gpu_unsupported_check> unsupported "${_gpu_missing_np3}")
endif()
if(TNT_WITH_CUDA)
  # A bad TNT_GPU_* value fails tnt_init on every rank, GPU or not.
  tnt_gpu_test(bad_transport 60 integration
    ${_gpu_env} TNT_GPU_TRANSPORT=bogus timeout 50
    $<TARGET_FILE:gpu_unsupported_check> invalid "TNT_GPU_TRANSPORT='bogus'")
  if(TARGET tarantella)
    tnt_gpu_test(bad_staging_np2 60 integration
      ${_gpu_env} TNT_GPU_STAGING_KB=1 timeout 50 ${_gpu_tnt} -n 2 --
      $<TARGET_FILE:gpu_unsupported_check> invalid "TNT_GPU_STAGING_KB='1'")
  endif()

  add_executable(gpu_collectives_check ${CMAKE_CURRENT_LIST_DIR}/gpu_collectives_check.c)
  target_link_libraries(gpu_collectives_check PRIVATE tnt CUDA::cudart)
  target_include_directories(gpu_collectives_check PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set(_gpu_check $<TARGET_FILE:gpu_collectives_check>)
  # The collective set on device buffers (reduce, reduce_scatter(v)).
  add_executable(gpu_composed_check ${CMAKE_CURRENT_LIST_DIR}/gpu_composed_check.c)
  target_link_libraries(gpu_composed_check PRIVATE tnt CUDA::cudart)
  target_include_directories(gpu_composed_check PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set(_gpu_composed $<TARGET_FILE:gpu_composed_check>)
  add_executable(gpu_exchange_check ${CMAKE_CURRENT_LIST_DIR}/gpu_exchange_check.c)
  target_link_libraries(gpu_exchange_check PRIVATE tnt CUDA::cudart)
  target_include_directories(gpu_exchange_check PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set(_gpu_exchange $<TARGET_FILE:gpu_exchange_check>)
  tnt_gpu_test(composed_nccl_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=nccl timeout 290 ${_gpu_skip} ${_gpu_composed} --expect nccl)
  tnt_gpu_test(composed_host_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=host TNT_GPU_STAGING_KB=64 timeout 290 ${_gpu_skip}
    ${_gpu_composed} --expect host)
  # gather, scatter, allgatherv, alltoall(v), send/recv on device buffers.
  tnt_gpu_test(exchange_nccl_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=nccl timeout 290 ${_gpu_skip} ${_gpu_exchange} --expect nccl)
  tnt_gpu_test(exchange_host_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=host TNT_GPU_STAGING_KB=64 timeout 290 ${_gpu_skip}
    ${_gpu_exchange} --expect host)
  tnt_gpu_test(nccl_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=nccl timeout 290 ${_gpu_skip} ${_gpu_check} --expect nccl)
  tnt_gpu_test(auto_np1 300 gpu
    ${_gpu_env} timeout 290 ${_gpu_skip} ${_gpu_check} --expect nccl)
  tnt_gpu_test(host_np1 300 gpu
    ${_gpu_env} TNT_GPU_TRANSPORT=host TNT_GPU_STAGING_KB=64 timeout 290 ${_gpu_skip}
    ${_gpu_check} --expect host)
  if(TARGET tarantella)
    # The launcher gives every rank the same GPU on a one-GPU machine:
    # auto must pick the host path there.
    foreach(_np 2 4)
      tnt_gpu_test(host_shared_np${_np} 600 gpu
        ${_gpu_env} TNT_GPU_STAGING_KB=64 timeout 590 ${_gpu_skip} ${_gpu_tnt} -n ${_np} --
        ${_gpu_check})
    endforeach()
    tnt_gpu_test(composed_host_shared_np2 600 gpu
      ${_gpu_env} TNT_GPU_STAGING_KB=64 timeout 590 ${_gpu_skip} ${_gpu_tnt} -n 2 --
      ${_gpu_composed} --expect host)
    foreach(_np 2 4)
      tnt_gpu_test(exchange_host_shared_np${_np} 600 gpu
        ${_gpu_env} TNT_GPU_STAGING_KB=64 timeout 590 ${_gpu_skip} ${_gpu_tnt} -n ${_np} --
        ${_gpu_exchange} --expect host)
    endforeach()
    tnt_gpu_test(host_large_np2 600 gpu
      ${_gpu_env} TNT_GPU_TRANSPORT=host timeout 590 ${_gpu_skip} ${_gpu_tnt} -n 2 --
      ${_gpu_check} --large --expect host)
  endif()
endif()

# scripts/verify-gpu.sh on a machine without a GPU: it fails with a message
# saying so, before building anything (skipped where a GPU exists).
add_test(NAME integration.gpu.verify_script_without_gpu
  COMMAND ${_gpu_skip} --without-gpu ${CMAKE_CURRENT_LIST_DIR}/expect_output.sh --fail 1
    "^verify-gpu: no GPU found" -- bash ${PROJECT_SOURCE_DIR}/scripts/verify-gpu.sh
    --build-dir ${CMAKE_CURRENT_BINARY_DIR}/verify-gpu-not-built)
set_tests_properties(integration.gpu.verify_script_without_gpu PROPERTIES TIMEOUT 60
  LABELS integration SKIP_RETURN_CODE 77)

# scripts/prefix-deps.sh, which builds verify-gpu.sh's dependencies into a
# prefix on nodes without the packages: its .pc rewriting and its exports,
# on a small .deb made by the test.
add_test(NAME integration.gpu.prefix_deps_script
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/prefix_deps.sh)
set_tests_properties(integration.gpu.prefix_deps_script PROPERTIES TIMEOUT 60
  LABELS integration SKIP_RETURN_CODE 77)
