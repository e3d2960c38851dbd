# The PMIx bootstrap under Slurm 22.05's own PMIx server (srun --mpi=pmix) on
# the private test cluster (cluster.cmake): rank, size, local rank and node
# agree with SLURM_PROCID/NTASKS/LOCALID/NODEID/NNODES, on one node and on two
# (nodes n1, n2 are told apart by the PMIX_HOSTNAME Slurm reports; its
# PMIX_NODEID is not used). And srun without PMIx (the cluster's MpiDefault
# is none): every task is a singleton and prints one warning naming the fix.
if(TARGET bootstrap_check)
  set(_bs_slurm_check $<TARGET_FILE:bootstrap_check>)
  set(_bs_slurm_env env TNT_TIMEOUT=30 UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n)
  tnt_add_slurm_test(NAME slurm.bootstrap.pmix_N1_n2 TIMEOUT 60
    COMMAND ${_bs_slurm_env} srun --mpi=pmix -N 1 -n 2 --immediate=30
            ${_bs_slurm_check} --launcher slurm --expect-size 2 --expect-nodes 1 --check-args)
  if(TNT_WITH_UCX)
    tnt_add_slurm_test(NAME slurm.bootstrap.pmix_N2_n4 TIMEOUT 60
      COMMAND ${_bs_slurm_env} srun --mpi=pmix -N 2 -n 4 --immediate=30
              ${_bs_slurm_check} --launcher slurm --expect-size 4 --expect-nodes 2)
  endif()
  tnt_add_slurm_test(NAME slurm.bootstrap.no_pmix_warning TIMEOUT 60
    COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/expect_output.sh 2
            "SLURM started 2 tasks.*srun --tarantella.*srun --mpi=pmix.*MpiDefault=pmix" --
            srun --mpi=none -N 1 -n 2 --immediate=30 ${_bs_slurm_check} --launcher none)
endif()
