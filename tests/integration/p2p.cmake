# Point-to-point messages (tnt_send / tnt_recv): forked ranks over a file
# store on 1 and 3 "nodes" (hostnames; UCX between them), and the same
# checks under the tarantella launcher. Every command runs under `timeout`.
if(NOT TNT_WITH_UCX)
  return()
endif()
add_executable(p2p_check ${CMAKE_CURRENT_LIST_DIR}/p2p_check.c)
# Only the installed API: link the shared library like a user would.
target_link_libraries(p2p_check PRIVATE tnt tnt_test_common)

set(_p2p_env "TNT_TIMEOUT=30;UCX_WARN_UNUSED_ENV_VARS=n")

# tnt_p2p_test(<name> <timeout> [ENV k=v...] ARGS ...)
function(tnt_p2p_test name timeout)
  cmake_parse_arguments(T "" "" "ENV;ARGS" ${ARGN})
  add_test(NAME integration.p2p.${name}
    COMMAND timeout -k 5 ${timeout} $<TARGET_FILE:p2p_check> ${T_ARGS})
  math(EXPR _ctest_timeout "${timeout} + 10")
  set_tests_properties(integration.p2p.${name} PROPERTIES TIMEOUT ${_ctest_timeout}
    LABELS integration ENVIRONMENT "${_p2p_env};${T_ENV}")
endfunction()

foreach(_np 1 2 3 5 8)
  tnt_p2p_test(all_${_np} 180 ARGS --ranks ${_np} --mode all)
endforeach()
foreach(_np 3 4 8)
  tnt_p2p_test(all_${_np}x3 180 ARGS --ranks ${_np} --nodes 3 --mode all)
endforeach()
# UCX over TCP only (what separate hosts without RDMA use), 3 nodes.
tnt_p2p_test(all_6x3_tcp 180 ENV UCX_TLS=tcp,self ARGS --ranks 6 --nodes 3 --mode all)
# User messages (tags 0 and 1, by rank and any-source) in flight while the
# multi-node gather, scatter and alltoall(v) run: neither matches the
# other's; 2 nodes of 2 ranks, and 3 nodes of one over TCP.
tnt_p2p_test(coll_mix_4x2 120 ARGS --ranks 4 --nodes 2 --mode coll-mix)
tnt_p2p_test(coll_mix_3x3_tcp 120 ENV UCX_TLS=tcp,self ARGS --ranks 3 --nodes 3 --mode coll-mix)
tnt_p2p_test(bad_args_3 60 ARGS --ranks 3 --mode bad-args)
tnt_p2p_test(truncate_2 60 ARGS --ranks 2 --mode truncate)
tnt_p2p_test(unmatched_send_2 60 ENV TNT_TIMEOUT=3 ARGS --ranks 2 --mode unmatched-send)
tnt_p2p_test(unmatched_send_2x2 60 ENV TNT_TIMEOUT=3 ARGS --ranks 2 --nodes 2 --mode unmatched-send)
tnt_p2p_test(unmatched_recv_3 60 ENV TNT_TIMEOUT=3 ARGS --ranks 3 --mode unmatched-recv)
# Messages from 256 KiB (TNT_P2P_CMA_KB), which on one host the receiver
# reads from the sender's buffer: the same checks on one node, across two,
# and with the read turned off.
tnt_p2p_test(reads_2 60 ARGS --ranks 2 --mode reads)
tnt_p2p_test(reads_3 60 ARGS --ranks 3 --mode reads)
tnt_p2p_test(reads_2x2 60 ARGS --ranks 2 --nodes 2 --mode reads)
tnt_p2p_test(reads_off_2 60 ENV TNT_P2P_CMA_KB=0 ARGS --ranks 2 --mode reads)
tnt_p2p_test(reads_rank1_off_2 60 ARGS --ranks 2 --mode reads-rank1-off)
# The sender of a message read on one host is killed before it is received.
tnt_p2p_test(peer_dies_read_2 90 ENV TNT_TIMEOUT=60 ARGS --ranks 2 --mode peer-dies-read)
# A rank on the host killed before its peer ever connected to it.
tnt_p2p_test(peer_dies_first_2 90 ENV TNT_TIMEOUT=60 ARGS --ranks 2 --mode peer-dies-first)
# A rank killed while a message to it moves, and while its peer waits for
# one: the peer fails with TNT_ERR_PEER_FAILED within seconds (TNT_TIMEOUT
# is long here), on one node (the segment's robust locks) and across two
# (UCX sees the connection break).
foreach(_m send recv)
  tnt_p2p_test(peer_dies_${_m}_2 90 ENV TNT_TIMEOUT=60 ARGS --ranks 2 --mode peer-dies-${_m})
  tnt_p2p_test(peer_dies_${_m}_2x2 90 ENV TNT_TIMEOUT=60 ARGS --ranks 2 --nodes 2
    --mode peer-dies-${_m})
endforeach()
# One-rank communicators serve messages to themselves in the process (no
# UCX worker, no descriptor), with the same meaning and errors.
tnt_p2p_test(self_1 90 ENV TNT_TIMEOUT=3 ARGS --ranks 1 --mode self)
tnt_p2p_test(self_3 90 ENV TNT_TIMEOUT=3 ARGS --ranks 3 --mode self)
# TNT_P2P=off: no point-to-point transport, calls fail naming the setting.
tnt_p2p_test(off_2 60 ENV TNT_P2P=off ARGS --ranks 2 --mode off)
tnt_p2p_test(off_3x2 60 ENV TNT_P2P=off ARGS --ranks 3 --nodes 2 --mode off)
# Off on one rank only: the ranks agree (no hang in the worker's exchange).
tnt_p2p_test(off_rank1_3 60 ARGS --ranks 3 --mode off-rank1)
# The ping-pong measurement (docs/c-api.md) runs as a smoke test, so it
# keeps working; its figures are not asserted.
add_test(NAME bench.p2p_pingpong.smoke
  COMMAND timeout -k 5 170 $<TARGET_FILE:p2p_check> --ranks 2 --mode pingpong)
set_tests_properties(bench.p2p_pingpong.smoke PROPERTIES TIMEOUT 180 LABELS bench
  ENVIRONMENT "${_p2p_env}")

if(TARGET tarantella)
  set(_p2p_launch ${TNT_TEST_CLEAN_ENV} TNT_TIMEOUT=30 UCX_WARN_UNUSED_ENV_VARS=n)
  foreach(_np 2 4)
    add_test(NAME integration.p2p.tarantella_np${_np}
      COMMAND ${_p2p_launch} timeout -k 5 170 ${PROJECT_BINARY_DIR}/bin/tarantella -n ${_np}
        -- $<TARGET_FILE:p2p_check> --launcher --mode all)
    set_tests_properties(integration.p2p.tarantella_np${_np} PROPERTIES TIMEOUT 180
      LABELS integration)
  endforeach()
  add_test(NAME integration.p2p.tarantella_unmatched_send
    COMMAND ${_p2p_launch} TNT_TIMEOUT=3 timeout -k 5 50 ${PROJECT_BINARY_DIR}/bin/tarantella
      -n 2 -- $<TARGET_FILE:p2p_check> --launcher --mode unmatched-send)
  set_tests_properties(integration.p2p.tarantella_unmatched_send PROPERTIES TIMEOUT 60
    LABELS integration)
endif()
