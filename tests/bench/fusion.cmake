# Fusion benchmark (docs/tuning.md): step time against the fusion threshold
# for ResNet-50 and a 10 M-parameter MLP, on 2 ranks:
#   build/bin/tarantella -n 2 -- build/bin/fusion_bench
# The ctest entry is only a smoke run (label bench) so the program keeps
# working; it never judges speed.
add_executable(fusion_bench ${CMAKE_CURRENT_SOURCE_DIR}/fusion_bench.c)
target_link_libraries(fusion_bench PRIVATE tnt)

find_program(TNT_MPIRUN mpirun)
if(TARGET tarantella)
  add_test(NAME bench.fusion.smoke
           COMMAND $<TARGET_FILE:tarantella> -n 2 -- $<TARGET_FILE:fusion_bench>
                   --quick --model mlp10m --compute 0)
elseif(TNT_MPIRUN)
  add_test(NAME bench.fusion.smoke
           COMMAND ${TNT_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   $<TARGET_FILE:fusion_bench> --quick --model mlp10m --compute 0)
endif()
if(TARGET tarantella OR TNT_MPIRUN)
  set_tests_properties(bench.fusion.smoke PROPERTIES TIMEOUT 60 LABELS bench
                       ENVIRONMENT "TNT_TIMEOUT=30" PASS_REGULAR_EXPRESSION "\\| 64 MiB \\|")
endif()
