# Allreduce benchmark against OpenMPI (docs/benchmarks.md). Not a test: the
# ctest entry is a smoke run (label bench) that only checks the program
# works; speed is measured by tests/bench/run_all.sh.
add_executable(allreduce_bench ${CMAKE_CURRENT_LIST_DIR}/allreduce_bench.c)
target_link_libraries(allreduce_bench PRIVATE tnt)

# The MPI twin is optional: built when an MPI C library is found.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(mpi_allreduce_bench ${CMAKE_CURRENT_LIST_DIR}/mpi_allreduce_bench.c)
  target_link_libraries(mpi_allreduce_bench PRIVATE MPI::MPI_C)
endif()

if(TARGET tarantella)
  add_test(NAME bench.allreduce.smoke
           COMMAND $<TARGET_FILE:tarantella> -n 2 -- $<TARGET_FILE:allreduce_bench>
                   --max 1048576 --volume 1e7)
  set_tests_properties(bench.allreduce.smoke PROPERTIES TIMEOUT 60 LABELS bench
                       ENVIRONMENT "TNT_TIMEOUT=30" PASS_REGULAR_EXPRESSION "1048576 ")
endif()

# The collective set against OpenMPI's (docs/benchmarks.md): one source
# built twice, so both measure the same way.
add_executable(collective_set_bench ${CMAKE_CURRENT_LIST_DIR}/collective_set_bench.c)
target_link_libraries(collective_set_bench PRIVATE tnt)
if(MPI_C_FOUND)
  add_executable(mpi_collective_set_bench ${CMAKE_CURRENT_LIST_DIR}/collective_set_bench.c)
  target_compile_definitions(mpi_collective_set_bench PRIVATE BENCH_MPI=1)
  target_link_libraries(mpi_collective_set_bench PRIVATE MPI::MPI_C)
endif()
if(TARGET tarantella)
  add_test(NAME bench.collective_set.smoke
           COMMAND $<TARGET_FILE:tarantella> -n 2 -- $<TARGET_FILE:collective_set_bench>
                   --max 65536 --volume 1e6)
  set_tests_properties(bench.collective_set.smoke PROPERTIES TIMEOUT 60 LABELS bench
                       ENVIRONMENT "TNT_TIMEOUT=30" PASS_REGULAR_EXPRESSION "pingpong +65536 ")
endif()
