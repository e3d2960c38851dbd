/*
 * Entry points of spank_tarantella.so. Slurm loads the plugin into srun
 * (local context), sbatch/salloc (allocator), slurmstepd (remote) and slurmd;
 * each hook switches on spank_context() into the file for that context.
 * Only slurm_spank_* and plugin_* are exported (spank_tarantella.lds).
 */
#include <string.h>

#include "tnt_spank.h"

SPANK_PLUGIN(tarantella, 1);

static int option_cb(int val, const char *optarg, int remote);

/*
 * has_arg 2: the value is optional and must be attached (--tarantella=...),
 * so a bare --tarantella never swallows the command that follows it.
 * Registered with spank_option_register() in slurm_spank_init: a static
 * spank_options[] table is invisible to sbatch and salloc.
 */
static struct spank_option tnt_spank_option = {
    TNT_SPANK_OPTION_NAME,
    "[KEY=VALUE,...]",
    "Run the step with Tarantella: PMIx bootstrap, task pinning and TNT_* "
    "environment. Sub-options: pin=none|socket|numa|core|auto, pin-memory, "
    "fusion=KB, log=LEVEL, log-all, output-all, no-gpu, verbose; "
    "--tarantella=help explains them.",
    2,
    0,
    option_cb,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t context = spank_context();
    char err[768];

    if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR) {
        return 0;
    }
    /* Callbacks may run twice; registering the option twice would fail. */
    if (tnt_spank_state.initialized) {
        return 0;
    }
    tnt_spank_config_default(&tnt_spank_state.defaults);
    if (tnt_spank_plugstack_parse(ac, av, &tnt_spank_state.defaults, err, sizeof err) != 0) {
        slurm_error("tarantella: %s; fix the plugin's line in plugstack.conf", err);
        return -1;
    }
    tnt_spank_state.config = tnt_spank_state.defaults;
    if (spank_option_register(sp, &tnt_spank_option) != ESPANK_SUCCESS) {
        slurm_error("tarantella: cannot register --%s; is another plugin using that name?",
                    TNT_SPANK_OPTION_NAME);
        return -1;
    }
    tnt_spank_state.initialized = 1;
    if (context == S_CTX_LOCAL) {
        return tnt_spank_srun_init(sp);
    }
    return 0;
}

/* The option callback for every context. */
static int option_cb(int val, const char *optarg, int remote)
{
    switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
        return tnt_spank_client_option(optarg);
    case S_CTX_REMOTE:
        return tnt_spank_stepd_option(optarg);
    default:
        return 0;
    }
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    switch (spank_context()) {
    case S_CTX_LOCAL:
        return tnt_spank_srun_post_opt(sp);
    case S_CTX_REMOTE:
        return tnt_spank_stepd_post_opt(sp);
    default:
        return 0;
    }
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    if (spank_context() != S_CTX_REMOTE) {
        return 0;
    }
    return tnt_spank_stepd_task_init(sp);
}
