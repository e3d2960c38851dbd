# A build without UCX must still run single-node jobs and must fail a job
# that spans nodes at tnt_init with a message naming TNT_WITH_UCX. That needs
# a second, small build (C only: libtnt, the launcher and the two check
# programs), made by this test inside the build tree and then tested with
# the same fragments (bootstrap.cmake, multinode.cmake) that register the
# no-UCX variants when TNT_WITH_UCX is OFF.
# The second build takes TNT_SANITIZE from this one, so a sanitizer run
# (make test-sanitizers) checks this variant too instead of an unsanitized copy.
if(TNT_WITH_UCX)
  set(_noucx_dir ${PROJECT_BINARY_DIR}/without-ucx)
  add_test(NAME integration.without_ucx
    COMMAND ${CMAKE_COMMAND} -E env --unset=SLURM_JOB_ID
      bash -c "set -e
        cmake -S '${PROJECT_SOURCE_DIR}' -B '${_noucx_dir}' -DTNT_WITH_UCX=OFF -DTNT_WITH_SPANK=OFF \
          -DTNT_WITH_PYTHON=OFF -DTNT_WERROR=${TNT_WERROR} -DTNT_SANITIZE=${TNT_SANITIZE} \
          -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} >/dev/null
        cmake --build '${_noucx_dir}' -j 2 --target tarantella bootstrap_check multinode_check >/dev/null
        ctest --test-dir '${_noucx_dir}' --output-on-failure --no-tests=error \
          -R 'integration\\.(multinode\\.no_ucx|bootstrap\\.(tarantella_nodes2_without_ucx|tarantella_np2))$'")
  set_tests_properties(integration.without_ucx PROPERTIES TIMEOUT 600 LABELS integration)
endif()
