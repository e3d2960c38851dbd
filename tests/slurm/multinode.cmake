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
