/*
 * The client side of the option, shared by srun (local context) and
 * sbatch/salloc (allocator context): validate it before anything is
 * submitted or launched, and answer --tarantella=help. For allocations Slurm
 * itself then carries the value to the job's steps (see
 * TNT_SPANK_INHERITED_ENV in args.h); srun's PMIx selection is in srun.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tnt_spank.h"

int tnt_spank_client_option(const char *optarg)
{
    tnt_spank_config_t config;
    char err[768];

    if (tnt_spank_resolve(&tnt_spank_state.defaults, getenv(TNT_SPANK_INHERITED_ENV),
                          optarg != NULL ? optarg : "", &config, err, sizeof err) != 0) {
        slurm_error("tarantella: %s", err);
        return -1;
    }
    if (config.help) {
        fputs(tnt_spank_help_text(), stdout);
        fflush(stdout);
        exit(0);
    }
    tnt_spank_state.config = config;
    tnt_spank_state.option_seen = 1;
    return 0;
}
