# Multi-node allreduce benchmark (docs/multinode.md): libtnt across simulated
# nodes, each inter-node algorithm forced, against OpenMPI's MPI_Allreduce on
# the same UCX TCP path, in the same run:
#   tests/bench/multinode_allreduce_bench.sh build [repeats]
# The ctest entry is only a smoke run (label bench); it never judges speed.
add_executable(multinode_allreduce_bench ${CMAKE_CURRENT_LIST_DIR}/multinode_allreduce_bench.c)
target_link_libraries(multinode_allreduce_bench PRIVATE tnt)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(multinode_allreduce_bench_mpi
    ${CMAKE_CURRENT_LIST_DIR}/multinode_allreduce_bench_mpi.c)
  target_link_libraries(multinode_allreduce_bench_mpi PRIVATE MPI::MPI_C)
endif()

if(TNT_WITH_UCX AND TARGET tarantella)
  add_test(NAME bench.multinode_allreduce.smoke
    COMMAND timeout -k 5 50 $<TARGET_FILE:tarantella> --simulate-nodes 2 -n 2
            --python-interpreter "" -- $<TARGET_FILE:multinode_allreduce_bench>
            --label 2x1 --scale 0.05 --max-bytes 1048576)
  set_tests_properties(bench.multinode_allreduce.smoke PROPERTIES TIMEOUT 60 LABELS bench
    ENVIRONMENT "TNT_TIMEOUT=30;UCX_TLS=tcp,self;UCX_WARN_UNUSED_ENV_VARS=n"
    PASS_REGULAR_EXPRESSION "RESULT tarantella auto 2x1 1048576 ")
endif()
