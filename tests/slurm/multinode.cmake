# Multi-node collectives end to end on the private SLURM cluster (4 slurmd
# on this host, see cluster.cmake): srun --mpi=pmix places the tasks on
# distinct nodes n1..n4, whose names Slurm's PMIx plugin reports as each
# rank's PMIX_HOSTNAME, so libtnt takes the inter-node path over UCX. UCX_TLS
# forces TCP (UCX 1.13 uses the loopback interface for it without extra
# settings); every rank prints the transport UCX selected and the bytes it
# moved, and --transport tcp fails the test otherwise.
set(_mn_slurm_env env TNT_TIMEOUT=30 UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n)
set(_mn_slurm_modes --mode matrix --mode big --big-mib 64 --mode bcast --mode allgather
  --mode barrier --mode fusion --transport tcp)

if(TNT_WITH_UCX AND TARGET multinode_check)
  tnt_add_slurm_test(NAME slurm.multinode.N2_n4 TIMEOUT 90
    COMMAND ${_mn_slurm_env} srun --mpi=pmix -N 2 -n 4 --immediate=30
            $<TARGET_FILE:multinode_check> --expect-nodes 2 --expect-size 4 ${_mn_slurm_modes}
    PASS_REGULAR_EXPRESSION "multinode_check: OK \\(4 ranks on 2 nodes\\)")
  # Uneven: 3 + 2 ranks; cyclic placement also makes each node's ranks
  # non-contiguous (0,2,4 | 1,3).
  tnt_add_slurm_test(NAME slurm.multinode.N2_n5_cyclic TIMEOUT 90
    COMMAND ${_mn_slurm_env} srun --mpi=pmix -N 2 -n 5 -m cyclic --overcommit --immediate=30
            $<TARGET_FILE:multinode_check> --expect-nodes 2 --expect-size 5 ${_mn_slurm_modes}
    PASS_REGULAR_EXPRESSION "multinode_check: OK \\(5 ranks on 2 nodes\\)")
  # Rank 3 (node n2) is killed mid-allreduce; -K0 keeps srun from killing the
  # rest, so the survivors on n1, n3, n4 must report the error themselves,
  # each within 5 s although TNT_TIMEOUT is 30 s.
  tnt_add_slurm_test(NAME slurm.multinode.kill TIMEOUT 60
    COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/multinode_kill.sh 1 4 5 --
            ${_mn_slurm_env} srun --mpi=pmix -K0 -N 4 -n 8 --immediate=30
            $<TARGET_FILE:multinode_check> --expect-nodes 4 --mode kill --kill-rank 3)
endif()

# The same checks at 16 nodes: a second private cluster of 16 slurmd
# (n1..n16, 2 CPUs each) as its own fixture, started once for the tests
# below and sharing the 4-node cluster's lock so the two never load the
# machine at once. One rank per node and small cases keep them to seconds:
# 16 x 1 (every collective, the fusion engine, 16-bit rounding), 8 nodes
# with 13 ranks (uneven: 2 + 2 + 2 + 2 + 2 + 1 + 1 + 1), and rank 5 killed
# on node 5 of 16 (every other rank must report it within 5 s).
if(TNT_WITH_UCX AND TARGET multinode_check AND TNT_SLURM_CLUSTER_AVAILABLE)
  set(_mn16_state ${CMAKE_CURRENT_BINARY_DIR}/cluster16.state)
  set(_mn16_run ${TNT_SLURM_CLUSTER_SH} run --state-file ${_mn16_state} --)
  set(_mn16_modes --mode matrix --mode half --mode big --big-mib 4 --mode bcast --mode allgather
    --mode barrier --mode fusion --transport tcp)
  add_test(NAME slurm.cluster16_start
    COMMAND ${TNT_SLURM_CLUSTER_SH} start --nodes 16 --cpus 2 --state-file ${_mn16_state})
  set_tests_properties(slurm.cluster16_start PROPERTIES TIMEOUT 120 LABELS slurm
    FIXTURES_SETUP slurm_cluster16 RESOURCE_LOCK slurm_cluster)
  add_test(NAME slurm.cluster16_stop
    COMMAND ${TNT_SLURM_CLUSTER_SH} stop --state-file ${_mn16_state})
  set_tests_properties(slurm.cluster16_stop PROPERTIES TIMEOUT 60 LABELS slurm
    FIXTURES_CLEANUP slurm_cluster16 RESOURCE_LOCK slurm_cluster)

  # tnt_mn16_test(<name> <timeout> <command...>)
  function(tnt_mn16_test name timeout)
    math(EXPR _inner "${timeout} - 5")
    add_test(NAME slurm.multinode16.${name}
      COMMAND ${_mn16_run} timeout -k 5 ${_inner} ${ARGN})
    set_tests_properties(slurm.multinode16.${name} PROPERTIES TIMEOUT ${timeout} LABELS slurm
      FIXTURES_REQUIRED slurm_cluster16 RESOURCE_LOCK slurm_cluster)
  endfunction()

  tnt_mn16_test(N16_n16 120 ${_mn_slurm_env} srun --mpi=pmix -N 16 -n 16 --immediate=30
    $<TARGET_FILE:multinode_check> --expect-nodes 16 --expect-size 16 ${_mn16_modes})
  set_tests_properties(slurm.multinode16.N16_n16 PROPERTIES
    PASS_REGULAR_EXPRESSION "multinode_check: OK \\(16 ranks on 16 nodes\\)")
  tnt_mn16_test(N8_n13 120 ${_mn_slurm_env} srun --mpi=pmix -N 8 -n 13 --immediate=30
    $<TARGET_FILE:multinode_check> --expect-nodes 8 --expect-size 13 ${_mn16_modes})
  set_tests_properties(slurm.multinode16.N8_n13 PROPERTIES
    PASS_REGULAR_EXPRESSION "multinode_check: OK \\(13 ranks on 8 nodes\\)")
  tnt_mn16_test(kill 60 ${CMAKE_SOURCE_DIR}/tests/integration/multinode_kill.sh 5 15 5 --
    ${_mn_slurm_env} srun --mpi=pmix -K0 -N 16 -n 16 --immediate=30
    $<TARGET_FILE:multinode_check> --expect-nodes 16 --mode kill --kill-rank 5)
endif()
