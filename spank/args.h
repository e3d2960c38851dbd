/*
 * The arguments of spank_tarantella.so, as in pyxis's args.c: the
 * `--tarantella[=KEY=VALUE,...]` sub-options, the plugstack.conf arguments
 * (site defaults), how they combine, and the plugin's option state that the
 * per-context files share. Pure string handling, no Slurm calls, so
 * tests/unit/test_spank_args.c covers it completely.
 */
#ifndef TNT_SPANK_ARGS_H
#define TNT_SPANK_ARGS_H

#include <stddef.h>

#include "topo/pin.h"

/* The option as Slurm sees it: --tarantella, plugin "tarantella". */
#define TNT_SPANK_OPTION_NAME "tarantella"

/*
 * How an allocation's option reaches the steps inside it: sbatch/salloc put
 * "_SLURM_SPANK_OPTION_<plugin>_<option>" into the SPANK job environment, and
 * Slurm exports that to the job with the prefix SLURM_SPANK_. srun feeds it to
 * the option callback, and slurmstepd keeps it in the step's environment.
 */
#define TNT_SPANK_INHERITED_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_tarantella_tarantella"

/* Longest fusion threshold accepted, in KiB (4 GiB). */
#define TNT_SPANK_FUSION_MAX_KB 4194304L

/* Log levels, as libtnt's TNT_LOG_LEVEL accepts them (util/log.h). */
#define TNT_SPANK_LOG_LEVELS "error, warn, info, debug, trace"

/*
 * The settings of one step. "Unset" values leave the task's environment alone
 * (libtnt's own default, or what the user exported, applies).
 */
typedef struct {
    int enabled;        /* --tarantella was given (or inherited) */
    int help;           /* =help: print the sub-options and exit */
    tnt_pin_mode_t pin; /* default TNT_PIN_AUTO */
    int pin_memory;     /* strict NUMA binding instead of preferred */
    long fusion_kb;     /* < 0: unset */
    char log_level[8];  /* "": unset */
    int log_all;        /* TNT_LOG_ON_ALL_DEVICES=1 */
    int output_all;     /* TNT_OUTPUT_ON_ALL_DEVICES=1 */
    int no_gpu;         /* hide the GPUs from the tasks */
    int verbose;        /* each task prints its binding */
    /* MASTER_PORT range (plugstack.conf master_port_range=LOW-HIGH only:
     * the site's to choose, not the user's); torch_env.h has the rule. */
    int master_port_low, master_port_high;
} tnt_spank_config_t;

/* pin=auto, the built-in MASTER_PORT range, everything else unset/off, not
 * enabled. */
void tnt_spank_config_default(tnt_spank_config_t *config);

/*
 * Applies "KEY[=VALUE],..." on top of *config and marks it enabled. NULL, ""
 * and "(null)" (how Slurm forwards a bare --tarantella) mean the defaults.
 * Boolean keys take no value, or yes/no/true/false/1/0 (so a step can switch
 * off what its allocation switched on). On error *config is left untouched
 * and errbuf says which value was bad and what is valid. Returns 0 or -1.
 */
int tnt_spank_args_parse(const char *arg, tnt_spank_config_t *config, char *errbuf, size_t errlen);

/*
 * plugstack.conf arguments: "default_KEY[=VALUE]" for every sub-option except
 * help (underscores and dashes both work: default_pin_memory), e.g.
 * "default_pin=socket default_fusion=16384", and the site setting
 * "master_port_range=LOW-HIGH" (1024 <= LOW <= HIGH <= 65535). Applied to *defaults (which stay
 * not enabled). Returns 0, or -1 with the bad argument named in errbuf.
 */
int tnt_spank_plugstack_parse(int argc, char *const argv[], tnt_spank_config_t *defaults,
                              char *errbuf, size_t errlen);

/* Resolves defaults + inherited (the allocation's option, NULL: none) + own
 * (this step's option, NULL: none; "" for a bare --tarantella) into *config.
 * Both the inherited and the own value must parse; errors name the bad
 * value. Returns 0 or -1. */
int tnt_spank_resolve(const tnt_spank_config_t *defaults, const char *inherited, const char *own,
                      tnt_spank_config_t *config, char *errbuf, size_t errlen);

/* The canonical "pin=core,pin-memory,fusion=64,..." form of a configuration
 * (only what differs from unset), for log lines. Returns buf. */
char *tnt_spank_config_format(const tnt_spank_config_t *config, char *buf, size_t len);

/* The text --tarantella=help prints. */
const char *tnt_spank_help_text(void);

/* State of the plugin in this process (srun, sbatch, salloc or one
 * slurmstepd), written by the option callback and the hooks of each
 * context. Slurm calls the hooks from one thread, so no locking. */
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
    /* slurmstepd: MASTER_ADDR for the step's tasks, found once per node in
     * post_opt ("" when there is none), and why it may not work ("" when
     * it resolved), for rank 0 to print. */
    char master_addr[256];
    char master_addr_note[512];
} tnt_spank_state_t;

extern tnt_spank_state_t tnt_spank_state;

#endif
