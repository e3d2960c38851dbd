# Fusion engine through real ranks: tests/integration/fusion_check.c, run by
# the tarantella launcher (when it is built) and by OpenMPI's mpirun (when
# installed). TNT_TIMEOUT=20 makes a hang fail in seconds, well inside the
# ctest TIMEOUT.
add_executable(fusion_check ${CMAKE_CURRENT_SOURCE_DIR}/fusion_check.c)
target_link_libraries(fusion_check PRIVATE tnt tnt_test_common m)

set(_fusion_env "TNT_TIMEOUT=20;TNT_FUSION_THRESHOLD_KB=4")
find_program(TNT_MPIRUN mpirun)

# tnt_fusion_test(<name> <ranks> <scenario>)
function(tnt_fusion_test name ranks scenario)
  if(TARGET tarantella)
    add_test(NAME integration.fusion.${name}.launcher
             COMMAND $<TARGET_FILE:tarantella> -n ${ranks} -- $<TARGET_FILE:fusion_check> ${scenario})
    set_tests_properties(integration.fusion.${name}.launcher PROPERTIES
      TIMEOUT 60 LABELS integration ENVIRONMENT "${_fusion_env}"
      PASS_REGULAR_EXPRESSION "fusion_check ${scenario}: OK")
  endif()
  if(TNT_MPIRUN)
    add_test(NAME integration.fusion.${name}.mpirun
             COMMAND ${TNT_MPIRUN} --allow-run-as-root --oversubscribe -np ${ranks}
                     -x TNT_TIMEOUT -x TNT_FUSION_THRESHOLD_KB
                     $<TARGET_FILE:fusion_check> ${scenario})
    set_tests_properties(integration.fusion.${name}.mpirun PROPERTIES
      TIMEOUT 60 LABELS integration ENVIRONMENT "${_fusion_env}"
      PASS_REGULAR_EXPRESSION "fusion_check ${scenario}: OK")
  endif()
endfunction()

tnt_fusion_test(results_1 1 results)
tnt_fusion_test(results_2 2 results)
tnt_fusion_test(results_3 3 results)
tnt_fusion_test(mismatch_4 4 mismatch)
tnt_fusion_test(unmarked_3 3 unmarked)
tnt_fusion_test(compressed_2 2 compressed)
tnt_fusion_test(compressed_3 3 compressed)

# Singleton mode: no launcher, no PMIx server; the engine still plans,
# compares (with itself) and reduces.
add_test(NAME integration.fusion.singleton COMMAND fusion_check results)
set_tests_properties(integration.fusion.singleton PROPERTIES
  TIMEOUT 60 LABELS integration ENVIRONMENT "${_fusion_env}"
  PASS_REGULAR_EXPRESSION "fusion_check results: OK \\(1 ranks\\)")
