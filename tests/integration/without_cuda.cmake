# A build without CUDA (TNT_WITH_CUDA=OFF, what machines without the CUDA
# toolkit get) must compile and fail the device calls cleanly with "built
# without CUDA". The main build has CUDA here, so this test makes a second,
# small build (libtnt and the device check) inside the build tree; a change
# that only compiles with CUDA once broke it unnoticed.
# The second build takes TNT_SANITIZE from this one, so a sanitizer run
# (make test-sanitizers) checks this variant too instead of an unsanitized copy.
if(TNT_WITH_CUDA)
  set(_nocuda_dir ${PROJECT_BINARY_DIR}/without-cuda)
  add_test(NAME integration.without_cuda
    COMMAND bash -c "set -e
        cmake -S '${PROJECT_SOURCE_DIR}' -B '${_nocuda_dir}' -DTNT_WITH_CUDA=OFF -DTNT_WITH_SPANK=OFF \
          -DTNT_WITH_PYTHON=OFF -DTNT_WERROR=${TNT_WERROR} -DTNT_SANITIZE=${TNT_SANITIZE} \
          -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} >/dev/null
        cmake --build '${_nocuda_dir}' -j 2 --target tarantella gpu_unsupported_check >/dev/null
        ctest --test-dir '${_nocuda_dir}' --output-on-failure --no-tests=error \
          -R '^integration\\.gpu\\.unsupported_np(1|3)$'")
  set_tests_properties(integration.without_cuda PROPERTIES TIMEOUT 600 LABELS integration)
endif()
