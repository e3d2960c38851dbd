# The device collectives against the GPU TEST DOUBLE (tests/gpu_double:
# host memory for device memory, a worker thread per stream, an NCCL that
# reduces through shared memory), label gpu-double, in every run where the
# CUDA toolkit and NCCL headers are present (TNT_WITH_CUDA). libtnt_cuda.so
# is loaded unchanged; LD_LIBRARY_PATH puts the doubles before the real
# libraries. These tests never count as having run on a GPU (docs/gpu.md).
if(NOT TNT_WITH_CUDA OR NOT TARGET tarantella)
  return()
endif()
set(_dbl_env ${_gpu_env} LD_LIBRARY_PATH=${TNT_GPU_DOUBLE_DIR})
set(_dbl_check $<TARGET_FILE:gpu_collectives_check>)
set(_dbl_unsupported $<TARGET_FILE:gpu_unsupported_check>)
set(_dbl_per_rank ${PROJECT_SOURCE_DIR}/tests/gpu_double/per_rank_env.sh)
set(_dbl_fault ${CMAKE_CURRENT_LIST_DIR}/gpu_double_fault.sh)
set(_dbl_unusable LD_LIBRARY_PATH=${TNT_GPU_DOUBLE_NCCL_UNUSABLE_DIR}:${TNT_GPU_DOUBLE_DIR})

function(tnt_gpu_double_test name timeout)
  add_test(NAME integration.gpu_double.${name} COMMAND ${ARGN})
  set_tests_properties(integration.gpu_double.${name} PROPERTIES TIMEOUT ${timeout}
    LABELS "gpu-double" SKIP_RETURN_CODE 77)
endfunction()

# NCCL path: every rank its own device.
tnt_gpu_double_test(nccl_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 110
  ${_dbl_check} --expect nccl)
tnt_gpu_double_test(auto_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 110
  ${_dbl_check} --expect nccl)
tnt_gpu_double_test(nccl_np2 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b timeout 290
  ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect nccl)
tnt_gpu_double_test(nccl_np4 600 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b,c,d timeout 590
  ${_gpu_tnt} -n 4 -- ${_dbl_check} --expect nccl)
tnt_gpu_double_test(nccl_large_np2 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b timeout 290
  ${_gpu_tnt} -n 2 -- ${_dbl_check} --large --expect nccl)
# Host-staged path: ranks sharing one device (auto picks it), 64 KiB chunks.
tnt_gpu_double_test(host_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_TRANSPORT=host
  TNT_GPU_STAGING_KB=64 timeout 110 ${_dbl_check} --expect host)
tnt_gpu_double_test(host_shared_np2 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_STAGING_KB=64
  timeout 290 ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect host)
tnt_gpu_double_test(host_shared_np4 600 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_STAGING_KB=64
  timeout 590 ${_gpu_tnt} -n 4 -- ${_dbl_check} --expect host)
tnt_gpu_double_test(host_large_np2 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 290
  ${_gpu_tnt} -n 2 -- ${_dbl_check} --large --expect host)

# The collective set on device buffers (gpu_composed_check.c): reduce and
# reduce_scatter(v) against a serial reference, and bad input failing on
# every rank; on NCCL (own devices) and host-staged (one shared device).
set(_dbl_composed $<TARGET_FILE:gpu_composed_check>)
tnt_gpu_double_test(composed_nccl_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 110
  ${_dbl_composed} --expect nccl)
tnt_gpu_double_test(composed_host_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a
  TNT_GPU_TRANSPORT=host TNT_GPU_STAGING_KB=64 timeout 110 ${_dbl_composed} --expect host)
foreach(_np 2 4)
  tnt_gpu_double_test(composed_nccl_np${_np} 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b,c,d
    timeout 290 ${_gpu_tnt} -n ${_np} -- ${_dbl_composed} --expect nccl)
  tnt_gpu_double_test(composed_host_shared_np${_np} 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a
    TNT_GPU_STAGING_KB=64 timeout 290 ${_gpu_tnt} -n ${_np} -- ${_dbl_composed} --expect host)
endforeach()

# The rest of the set (gpu_exchange_check.c): gather, scatter, allgatherv,
# alltoall(v) and device messages (send/recv, any-source) against a serial
# reference, and bad input; on NCCL (the double's ncclSend/ncclRecv and
# groups) and host-staged.
set(_dbl_exchange $<TARGET_FILE:gpu_exchange_check>)
tnt_gpu_double_test(exchange_nccl_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 110
  ${_dbl_exchange} --expect nccl)
tnt_gpu_double_test(exchange_host_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a
  TNT_GPU_TRANSPORT=host TNT_GPU_STAGING_KB=64 timeout 110 ${_dbl_exchange} --expect host)
foreach(_np 2 4)
  tnt_gpu_double_test(exchange_nccl_np${_np} 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b,c,d
    timeout 290 ${_gpu_tnt} -n ${_np} -- ${_dbl_exchange} --expect nccl)
  tnt_gpu_double_test(exchange_host_shared_np${_np} 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a
    TNT_GPU_STAGING_KB=64 timeout 290 ${_gpu_tnt} -n ${_np} -- ${_dbl_exchange} --expect host)
endforeach()

# Path selection.
#  - One rank cannot use NCCL: auto takes the host path on every rank.
tnt_gpu_double_test(mixed_auto_np2 300 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b TNT_GPU_STAGING_KB=64
  timeout 290 ${_gpu_tnt} -n 2 -- ${_dbl_per_rank} 1 ${_dbl_unusable} --
  ${_dbl_check} --expect host)
#  - ... and TNT_GPU_TRANSPORT=nccl fails on every rank, naming that rank.
tnt_gpu_double_test(mixed_nccl_np2 60 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b TNT_GPU_TRANSPORT=nccl
  timeout 50 ${_gpu_tnt} -n 2 -- ${_dbl_per_rank} 1 ${_dbl_unusable} --
  ${_dbl_unsupported} unsupported "rank 1 could not load NCCL")
#  - Two ranks on one GPU with TNT_GPU_TRANSPORT=nccl: refused, naming them.
tnt_gpu_double_test(shared_nccl_np2 60 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_TRANSPORT=nccl
  timeout 50 ${_gpu_tnt} -n 2 -- ${_dbl_unsupported} unsupported "ranks 0 and 1 use the same GPU")
#  - One rank without a device: every rank fails at once, naming it.
tnt_gpu_double_test(no_device_np3 60 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,none,c TNT_TIMEOUT=20
  timeout 50 ${_gpu_tnt} -n 3 -- ${_dbl_unsupported} unsupported "rank 1: no usable GPU")

# No stream, event, pinned buffer or communicator outlives tnt_finalize.
add_executable(gpu_double_cycles ${PROJECT_SOURCE_DIR}/tests/gpu_double/gpu_double_cycles.c)
target_link_libraries(gpu_double_cycles PRIVATE tnt CUDA::cudart ${CMAKE_DL_LIBS})
target_include_directories(gpu_double_cycles PRIVATE ${PROJECT_SOURCE_DIR}/tests/gpu_double)
# Several cycles in one process run as a singleton: under the launcher, a
# rank that re-initialises while a peer is still finalising the previous
# cycle can fail its first PMIx fence (PARTIAL SUCCESS), a limit of
# re-initialising PMIx clients that docs/gpu.md records. Two ranks run one
# cycle each.
tnt_gpu_double_test(cycles_nccl_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_TRANSPORT=nccl
  timeout 110 $<TARGET_FILE:gpu_double_cycles> 3)
tnt_gpu_double_test(cycles_host_np1 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a TNT_GPU_TRANSPORT=host
  timeout 110 $<TARGET_FILE:gpu_double_cycles> 3)
tnt_gpu_double_test(cycles_nccl_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b timeout 110
  ${_gpu_tnt} -n 2 -- $<TARGET_FILE:gpu_double_cycles> 1)
tnt_gpu_double_test(cycles_host_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a timeout 110
  ${_gpu_tnt} -n 2 -- $<TARGET_FILE:gpu_double_cycles> 1)

# Injected faults: each ends the job within TNT_TIMEOUT plus a few seconds,
# with one verdict from the launcher, no rank left in a "kernel", NCCL
# aborted where the design says, and no /dev/shm segment left.
set(_dbl_verdict "^tarantella: rank [0-9]+ ")
#  - A CUDA call fails on rank 1 (sticky, as a device fault): NCCL path and
#    host-staged path. Which call is the 301st depends on how often the
#    waits poll, so it may be libtnt's or the check's own: either way the job
#    must end at once with one verdict.
tnt_gpu_double_test(fault_cuda_call_nccl_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b
  TNT_CUDA_DOUBLE_FAIL_AFTER=300 TNT_CUDA_DOUBLE_FAIL_RANK=1 TNT_TIMEOUT=20
  ${_dbl_fault} 30 ${_dbl_verdict} "injected device fault" "unspecified launch failure" --
  timeout 100 ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect nccl)
tnt_gpu_double_test(fault_cuda_call_host_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a
  TNT_GPU_STAGING_KB=64 TNT_CUDA_DOUBLE_FAIL_AFTER=300 TNT_CUDA_DOUBLE_FAIL_RANK=1 TNT_TIMEOUT=20
  ${_dbl_fault} 30 ${_dbl_verdict} "injected device fault" "unspecified launch failure" --
  timeout 100 ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect host)
#  - ncclCommGetAsyncError reports an error on rank 1: it aborts NCCL.
tnt_gpu_double_test(fault_async_error_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b
  TNT_NCCL_DOUBLE_ASYNC_ERROR_RANK=1 TNT_TIMEOUT=20
  ${_dbl_fault} 30 ${_dbl_verdict} "NCCL failed: unhandled system error"
  "nccl double: rank 1: ncclCommAbort" --
  timeout 100 ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect nccl)
#  - Rank 1's collectives never complete (a hung peer): the wait is bounded
#    by TNT_TIMEOUT, and NCCL is aborted.
tnt_gpu_double_test(fault_hang_np2 120 ${_dbl_env} TNT_CUDA_DOUBLE_GPUS=a,b
  TNT_NCCL_DOUBLE_HANG_RANK=1 TNT_TIMEOUT=10
  ${_dbl_fault} 20 ${_dbl_verdict} "did not finish within 10 s" "ncclCommAbort" --
  timeout 100 ${_gpu_tnt} -n 2 -- ${_dbl_check} --expect nccl)

# The same tests under AddressSanitizer and LeakSanitizer, in a build of
# their own (only the targets they need).
tnt_gpu_double_test(asan 1800 ${CMAKE_CURRENT_LIST_DIR}/gpu_double_asan.sh ${PROJECT_SOURCE_DIR}
  ${PROJECT_BINARY_DIR}/asan-gpu-double)
set_property(TEST integration.gpu_double.asan APPEND PROPERTY LABELS sanitizer)
