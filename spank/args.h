/*
 * Option parsing for spank_tarantella.so: the `--tarantella[=KEY=VALUE,...]`
 * sub-options and the plugstack.conf arguments (site defaults). Pure string
 * handling, no Slurm calls, so tests/unit/test_spank_args.c covers it
 * completely.
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
} tnt_spank_config_t;

/* pin=auto, everything else unset/off, not enabled. */
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
 * "default_pin=socket default_fusion=16384". Applied to *defaults (which stay
 * not enabled). Returns 0, or -1 with the bad argument named in errbuf.
 */
int tnt_spank_plugstack_parse(int argc, char *const argv[], tnt_spank_config_t *defaults,
                              char *errbuf, size_t errlen);

/* The canonical "pin=core,pin-memory,fusion=64,..." form of a configuration
 * (only what differs from unset), for log lines. Returns buf. */
char *tnt_spank_config_format(const tnt_spank_config_t *config, char *buf, size_t len);

/* The text --tarantella=help prints. */
const char *tnt_spank_help_text(void);

#endif
