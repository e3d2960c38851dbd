/*
 * The launch plan: pure computations the launcher makes before it starts
 * anything (which simulated node each rank is on, each rank's added
 * environment, the program's argv, the mpirun hand-off command). Kept free
 * of I/O so tests/unit/test_launcher_options.c can check them.
 */
#ifndef TNT_LAUNCHER_PLAN_H
#define TNT_LAUNCHER_PLAN_H

#include <stddef.h>

#include "options.h"

/* A growable NULL-terminated "NAME=VALUE" array (malloc'd strings), the
 * format execve and PMIx_server_setup_fork use. */
struct tnt_envlist {
    char **v;
    int n;
};

/* Copies a NULL-terminated environment (e.g. environ). Returns 0 or -1. */
int tnt_envlist_copy(struct tnt_envlist *list, char *const *env);
/* Sets NAME to VALUE, replacing an existing entry. Returns 0 or -1. */
int tnt_envlist_set(struct tnt_envlist *list, const char *name, const char *value);
/* Sets from a "NAME=VALUE" string. Returns 0 or -1. */
int tnt_envlist_put(struct tnt_envlist *list, const char *assignment);
/* The value of NAME in a NULL-terminated environment, or NULL. */
const char *tnt_env_lookup(char *const *env, const char *name);
void tnt_envlist_free(struct tnt_envlist *list);

/*
 * Contiguous blocks of ranks per node: node i of K holds N/K ranks, plus one
 * when i < N % K (the same rule as the dataset shards). Arrays have N
 * entries (node_of_rank, local_rank) or K entries (node_first, node_size).
 * Returns 0, or -1 when K is not in [1, N].
 */
int tnt_launch_layout(int nranks, int nnodes, int *node_of_rank, int *local_rank, int *node_first,
                      int *node_size);

/*
 * The environment the launcher adds for one rank (not the PMix_* variables),
 * in the order they are applied; later entries win:
 *   TNT_PIN=<mode>, TNT_LOG_LEVEL, TNT_LOG_ON_ALL_DEVICES=1,
 *   TNT_OUTPUT_ON_ALL_DEVICES=1, TNT_FUSION_THRESHOLD_KB (when given),
 *   OMP_NUM_THREADS=<nthreads> unless base_env or -x sets it,
 *   CUDA_VISIBLE_DEVICES="" with --no-gpu, else <local_rank % ngpus> when
 *   ngpus > 0 and neither base_env nor -x sets it,
 *   then every -x VAR=VALUE.
 * Returns 0 or -1 (out of memory); `added` must be empty on entry.
 */
int tnt_launch_rank_env(const struct tnt_launch_options *opts, char *const *base_env,
                        int local_rank, int nthreads, int ngpus, struct tnt_envlist *added);

/* The address every rank's torch.distributed store is reached at: the job
 * is on this machine (also with --simulate-nodes). */
#define TNT_LAUNCH_MASTER_ADDR "127.0.0.1"

/* Who a rank is, in the terms torchrun uses (node = GROUP_RANK). */
struct tnt_launch_torch_ids {
    int rank, world_size, local_rank, local_world_size, node;
};

/*
 * The variables torchrun sets, so that an unmodified
 * init_process_group(init_method="env://") works (docs/torch-distributed.md):
 *   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
 *   MASTER_ADDR=127.0.0.1, MASTER_PORT=<master_port>.
 * Each one only when neither base_env nor a -x option sets it: a value the
 * user gave is never overwritten. Appended to `added`. Returns 0 or -1
 * (out of memory).
 */
int tnt_launch_torch_env(const struct tnt_launch_options *opts, char *const *base_env,
                         const struct tnt_launch_torch_ids *ids, int master_port,
                         struct tnt_envlist *added);

/*
 * argv for exec: "PYTHON PROGRAM ARGS..." when the program ends in ".py" and
 * the interpreter is not "", else "PROGRAM ARGS...". A NULL-terminated array
 * of pointers into opts (malloc'd array only). Returns NULL when out of memory.
 */
char **tnt_launch_exec_argv(const struct tnt_launch_options *opts);

/*
 * The mpirun command line equivalent to opts with --hostfile:
 *   mpirun -np N --hostfile FILE --bind-to <none|socket|numa|core>
 *          -x TNT_PIN=<mode> [-x VAR=VAL ...] [--map-by ppr:...] PROGRAM...
 * (TNT_* and -x variables become -x arguments). Array of malloc'd strings,
 * NULL-terminated; free with tnt_launch_argv_free. NULL when out of memory.
 */
char **tnt_launch_mpirun_argv(const struct tnt_launch_options *opts, const char *mpirun);
void tnt_launch_argv_free(char **argv);

#endif
