/*
 * Internal interface of spank_tarantella.so, pyxis-style: dispatch.c holds
 * the slurm_spank_* entry points and switches on spank_context() into one
 * file per context:
 *   client.c      srun, sbatch, salloc: option validation and help (shared)
 *   srun.c        local context (srun): selecting mpi/pmix for the step
 *   slurmstepd.c  remote context: pinning and environment in task_init
 *   args.c        the option: parsing, resolution and the plugin's state
 *   torch_env.c   the pure parts of the torchrun variables (first node, port)
 * Dependencies point one way: dispatch -> {client, srun, slurmstepd} -> args,
 * and slurmstepd, args -> torch_env.
 * Every hook returns 0 or -1; -1 always comes with one
 * slurm_error("tarantella: ...") that says what to do.
 */
#ifndef TNT_SPANK_H
#define TNT_SPANK_H

#include <slurm/spank.h>

#include "args.h"

int tnt_spank_srun_init(spank_t sp);
int tnt_spank_srun_post_opt(spank_t sp);

/* srun, sbatch and salloc (local and allocator contexts) handle the option
 * alike: resolve it against the site defaults and the allocation's option,
 * reject bad values before anything is submitted, answer =help. */
int tnt_spank_client_option(const char *optarg);

int tnt_spank_stepd_option(const char *optarg);
int tnt_spank_stepd_post_opt(spank_t sp);
int tnt_spank_stepd_task_init(spank_t sp);

#endif
