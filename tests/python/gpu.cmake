# GPU pytest suites. python.gpu runs only where nvidia-smi lists a GPU and is
# reported SKIPPED elsewhere (gpu_skip.sh exits 77); python.gpu_absent checks
# the clean failure of the device path where there is none.
add_test(NAME python.gpu
  COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/gpu_skip.sh
          ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python.gpu PROPERTIES TIMEOUT 900 LABELS "python;gpu" SKIP_RETURN_CODE 77
  ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;OMP_NUM_THREADS=1")
add_test(NAME python.gpu_absent
  COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/gpu_skip.sh --without-gpu
          ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_absent.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python.gpu_absent PROPERTIES TIMEOUT 120 LABELS python SKIP_RETURN_CODE 77
  ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python")
# The set_device guard (python/tarantella/_device_guard.py) against a CUDA
# test double, so it runs on every machine: in-process checks and two 2-rank
# launcher runs of the literal Horovod port (about 15 s unloaded).
add_test(NAME python.device_guard
  COMMAND ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_SOURCE_DIR}/test_device_guard.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python.device_guard PROPERTIES TIMEOUT 300 LABELS python
  ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;OMP_NUM_THREADS=1")
# CUDA tensors through the tnt torch.distributed backend against the GPU TEST
# DOUBLE (tests/gpu_double), in a torch without CUDA: 2 ranks through the
# launcher, NCCL double and host-staged. Exits 77 (skipped) without the
# double (TNT_WITH_CUDA off), without the backend, or with a CUDA torch.
# Never counted as a GPU run (docs/torch-distributed.md, "CUDA tensors").
if(NOT DEFINED TNT_GPU_DOUBLE_DIR)
  set(TNT_GPU_DOUBLE_DIR "")
endif()
add_test(NAME python.tnt_backend_gpu_double
  COMMAND ${TNT_TEST_CLEAN_ENV} ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_SOURCE_DIR}/test_tnt_backend_gpu_double.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python.tnt_backend_gpu_double PROPERTIES TIMEOUT 600
  LABELS "python;gpu-double" SKIP_RETURN_CODE 77
  ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;OMP_NUM_THREADS=1;TNT_GPU_DOUBLE_DIR=${TNT_GPU_DOUBLE_DIR};TNT_TORCH_BACKEND_BUILT=$<IF:$<BOOL:${TNT_TORCH_BACKEND_BUILT}>,ON,OFF>")
