# Communicators without PMIx (tnt_comm_create_oob over the test's own file
# store) and from other communicators (tnt_comm_split, tnt_comm_dup). The
# check forks its ranks itself; --nodes K gives them K hostnames, so the
# communicators span "nodes" and use UCX (TCP on loopback) between them.
add_executable(comm_check ${CMAKE_CURRENT_LIST_DIR}/comm_check.c)
# Only the installed API: link the shared library like a user would.
target_link_libraries(comm_check PRIVATE tnt tnt_test_common Threads::Threads)

set(_comm_env "TNT_TIMEOUT=30;UCX_TLS=tcp,self;UCX_WARN_UNUSED_ENV_VARS=n")

# tnt_comm_test(<name> <timeout> [ENV k=v...] ARGS ...)
function(tnt_comm_test name timeout)
  cmake_parse_arguments(T "" "" "ENV;ARGS" ${ARGN})
  add_test(NAME integration.comm.${name}
    COMMAND timeout -k 5 ${timeout} $<TARGET_FILE:comm_check> ${T_ARGS})
  math(EXPR _ctest_timeout "${timeout} + 10")
  set_tests_properties(integration.comm.${name} PROPERTIES TIMEOUT ${_ctest_timeout}
    LABELS integration ENVIRONMENT "${_comm_env};${T_ENV}")
endfunction()

tnt_comm_test(oob_basic_2 60 ARGS --ranks 2 --mode basic)
tnt_comm_test(oob_basic_1 60 ARGS --ranks 1 --mode basic)
tnt_comm_test(oob_bad_args 30 ARGS --ranks 1 --mode bad-oob)
# A rank that never joins: the others' non-blocking exchange gives up at
# TNT_TIMEOUT with TNT_ERR_TIMEOUT.
tnt_comm_test(oob_timeout_3 30 ENV TNT_TIMEOUT=3 ARGS --ranks 3 --nonblocking --mode timeout)
tnt_comm_test(split_6 90 ARGS --ranks 6 --mode split)
tnt_comm_test(split_bad_color_3 60 ARGS --ranks 3 --mode bad-color)
tnt_comm_test(threads_3 90 ARGS --ranks 3 --mode threads)
# A rank that never joins a collective on a split: the hang doctor's
# verdict at TNT_TIMEOUT names the split and its own rank numbers.
tnt_comm_test(split_hang_5 60 ENV TNT_TIMEOUT=3 ARGS --ranks 5 --mode hang)
# The same with an eager (8 B) gather to the rank that stays away: the
# senders' tnt_finalize ends at TNT_TIMEOUT with that verdict.
tnt_comm_test(split_hang_eager_5 60 ENV TNT_TIMEOUT=3 ARGS --ranks 5 --mode hang-eager)
# A rank of a split killed in each collective of the set: the rest of its
# communicator fail with TNT_ERR_PEER_FAILED naming the communicator within
# seconds (TNT_TIMEOUT is long), the other communicator goes on.
foreach(_op reduce reduce_scatter gather scatter allgatherv alltoall alltoallv)
  tnt_comm_test(dies_${_op}_6 60 ENV TNT_TIMEOUT=60 ARGS --ranks 6 --mode dies-${_op})
endforeach()
# The same with 8 B blocks, which the rooted calls hand off eagerly.
foreach(_op reduce gather scatter)
  tnt_comm_test(dies_small_${_op}_6 60 ENV TNT_TIMEOUT=60 ARGS --ranks 6 --mode dies-small-${_op})
endforeach()
# The collective set on the communicator and on a parity split of it.
tnt_comm_test(set_1 60 ARGS --ranks 1 --mode set)
tnt_comm_test(set_2 90 ARGS --ranks 2 --mode set)
tnt_comm_test(set_8 180 ARGS --ranks 8 --mode set)
# The smallest staging area, without CMA: the shared-memory gather, scatter
# and alltoall(v) pipeline their bulk blocks through many phases (with CMA,
# the default where it works, set_8 reads them from the senders' buffers).
tnt_comm_test(set_8_small_slots 180 ENV TNT_SHM_STAGING_KB=64 TNT_SHM_CMA=off
  ARGS --ranks 8 --mode set)
# TNT_SHM_CMA=on: every call that has a single-copy form takes it.
tnt_comm_test(set_8_cma_on 180 ENV TNT_SHM_CMA=on ARGS --ranks 8 --mode set)
# The cost measurement (docs/c-api.md) runs as a smoke test, so it keeps
# working; its figures are not asserted.
add_test(NAME bench.comm_cost.smoke
  COMMAND timeout -k 5 120 $<TARGET_FILE:comm_check> --ranks 2 --mode cost)
set_tests_properties(bench.comm_cost.smoke PROPERTIES TIMEOUT 130 LABELS bench
  ENVIRONMENT "${_comm_env}")
if(TNT_WITH_UCX)
  tnt_comm_test(oob_basic_4x2 90 ARGS --ranks 4 --nodes 2 --nonblocking --mode basic)
  # 3 + 2 ranks on two nodes: the parity children span both nodes too, with
  # uneven node sizes.
  tnt_comm_test(split_5x2 120 ARGS --ranks 5 --nodes 2 --mode split)
  tnt_comm_test(split_6x3 120 ARGS --ranks 6 --nodes 3 --nonblocking --mode split)
  tnt_comm_test(threads_4x2 120 ARGS --ranks 4 --nodes 2 --mode threads)
  # 5 nodes of one rank, and 3 + 2 + 2 over 3 nodes (uneven).
  tnt_comm_test(set_5x5 180 ARGS --ranks 5 --nodes 5 --mode set)
  tnt_comm_test(set_7x3 180 ARGS --ranks 7 --nodes 3 --mode set)
  # 2 nodes of 2 ranks; and ranks dealt to the nodes in turn (--cyclic), so
  # a node's ranks are not consecutive: the multi-node gather, scatter and
  # alltoall(v) then move each node's blocks through an iov or a packed copy
  # (coll/multinode/gather.c), evenly (6 over 3) and unevenly (7 over 3).
  tnt_comm_test(set_4x2 180 ARGS --ranks 4 --nodes 2 --mode set)
  tnt_comm_test(set_6x3_cyclic 180 ARGS --ranks 6 --nodes 3 --cyclic --mode set)
  tnt_comm_test(set_7x3_cyclic 180 ARGS --ranks 7 --nodes 3 --cyclic --mode set)
  # Past the windows of coll/multinode/multinode_impl.h: 18 ranks take 17
  # pairwise alltoall steps (16 in flight), and a root of 34 nodes receives
  # or sends 33 node messages (32 in flight).
  tnt_comm_test(set_18x3 180 ARGS --ranks 18 --nodes 3 --mode set)
  tnt_comm_test(set_34x34 240 ARGS --ranks 34 --nodes 34 --mode set)
  # A rank of a split across 2 nodes (3 + 2) that never joins the
  # multi-node gather, scatter or alltoall: the hang doctor's verdict at
  # TNT_TIMEOUT names the split and its rank, as for an allreduce.
  foreach(_op gather scatter alltoall)
    tnt_comm_test(split_hang_${_op}_5x2 60 ENV TNT_TIMEOUT=3
                  ARGS --ranks 5 --nodes 2 --mode hang-${_op})
  endforeach()
  foreach(_op reduce gather scatter alltoall alltoallv)
    tnt_comm_test(dies_${_op}_6x2 60 ENV TNT_TIMEOUT=60 ARGS --ranks 6 --nodes 2 --mode dies-${_op})
  endforeach()
endif()
