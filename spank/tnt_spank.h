/*
 * Internal interface of spank_tarantella.so, pyxis-style: dispatch.c holds
 * the slurm_spank_* entry points and switches on spank_context() into one
 * file per context:
 *   client.c      srun, sbatch, salloc: option validation and help (shared)
 *   srun.c        local context (srun): selecting mpi/pmix for the step
 *   slurmstepd.c  remote context: pinning and environment in task_init
 * Every hook returns 0 or -1; -1 always comes with one
 * slurm_error("tarantella: ...") that says what to do.
 */
#ifndef TNT_SPANK_H
#define TNT_SPANK_H

#include <slurm/spank.h>

#include "args.h"

/* State of the plugin in this process (srun, sbatch, salloc or one
 * slurmstepd). Slurm calls the hooks from one thread, so no locking. */
typedef struct {
    int initialized;             /* slurm_spank_init ran (idempotence) */
    tnt_spank_config_t defaults; /* plugstack.conf arguments */
    tnt_spank_config_t config;   /* resolved for this step/job */
    int option_seen;             /* the option callback ran */
    /* slurmstepd: the option as forwarded by srun, resolved in post_opt once
     * the step's environment (the allocation's option) can be read. */
    char remote_arg[1024];
    int remote_arg_null; /* forwarded as a bare --tarantella */
    int remote_arg_too_long;
    /* srun: SLURM_MPI_TYPE=pmix was set by slurm_spank_init. */
    int mpi_type_set_by_us;
} tnt_spank_state_t;

extern tnt_spank_state_t tnt_spank_state;

/* The option callback for every context (dispatch.c). */
int tnt_spank_option_cb(int val, const char *optarg, int remote);

int tnt_spank_srun_init(spank_t sp);
int tnt_spank_srun_post_opt(spank_t sp);

/* srun, sbatch and salloc (local and allocator contexts) handle the option
 * alike: resolve it against the site defaults and the allocation's option,
 * reject bad values before anything is submitted, answer =help. */
int tnt_spank_client_option(const char *optarg);

int tnt_spank_stepd_option(const char *optarg);
int tnt_spank_stepd_post_opt(spank_t sp);
int tnt_spank_stepd_task_init(spank_t sp);

/* Resolves defaults + inherited (the allocation's option, NULL: none) + own
 * (this step's option, NULL: none; "" for a bare --tarantella) into *config. Both the inherited and the
 * own value must parse; errors name the bad value. Returns 0 or -1. */
int tnt_spank_resolve(const tnt_spank_config_t *defaults, const char *inherited, const char *own,
                      tnt_spank_config_t *config, char *errbuf, size_t errlen);

#endif
