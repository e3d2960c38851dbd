/*
 * Command line of `tarantella`, the single-node launcher. The parser is pure
 * (no output, no exit, no environment), so tests/unit/test_launcher_options.c
 * can drive it; main.c prints what it returns.
 */
#ifndef TNT_LAUNCHER_OPTIONS_H
#define TNT_LAUNCHER_OPTIONS_H

#include <stddef.h>

#include "pin.h"

/* The interpreter the Python package was built for (CMake's TNT_PYTHON,
 * recorded at configure time). */
#ifndef TNT_LAUNCH_DEFAULT_PYTHON
#define TNT_LAUNCH_DEFAULT_PYTHON "/usr/bin/python3"
#endif
/* An upper bound on -n that keeps every per-rank table small; a node with
 * more local ranks than this is not a workstation. */
#define TNT_LAUNCH_MAX_RANKS 4096

/* --fusion-threshold auto: TNT_FUSION_THRESHOLD_KB=auto (tuned, docs/tuning.md). */
#define TNT_LAUNCH_FUSION_AUTO (-2L)

struct tnt_launch_options {
    int nranks;     /* -n N (default 1) */
    int no_gpu;     /* --no-gpu: CUDA_VISIBLE_DEVICES="" */
    char **exports; /* -x VAR=VAL, in order (NULL-terminated, owned) */
    int nexports;
    const char *log_level;     /* --log-level (any case), lowercased: error|warn|..., or NULL */
    int log_on_all_devices;    /* --log-on-all-devices */
    int output_on_all_devices; /* --output-on-all-devices */
    long fusion_threshold_kb;  /* --fusion-threshold KB; -1 = not given, TNT_LAUNCH_FUSION_AUTO */
    tnt_pin_mode_t pin;        /* --pin MODE / --pin-to-socket (default none) */
    int pin_memory;            /* --pin-memory / --pin-memory-to-socket: strict */
    const char *python;        /* --python-interpreter ("" = exec directly) */
    int dry_run;               /* --dry-run */
    int show_version;          /* --version */
    int show_help;             /* --help / -h */
    const char *hostfile;      /* --hostfile FILE, or NULL */
    int simulate_nodes;        /* --simulate-nodes K (0 = off) */
    char **program;            /* PROGRAM ARGS... (NULL-terminated, points into argv) */
    int nprogram;
};

/*
 * Parses argv[1..argc-1]. Returns 0 on success; -1 with a message naming the
 * bad value and the valid ones in errbuf. With --help or --version only those
 * flags are meaningful (no program needed). Strings point into argv; the
 * caller frees opts->exports with tnt_launch_options_free on every path.
 */
int tnt_launch_options_parse(int argc, char **argv, struct tnt_launch_options *opts, char *errbuf,
                             size_t errlen);
void tnt_launch_options_free(struct tnt_launch_options *opts);

/* The usage text printed by --help. */
const char *tnt_launch_usage(void);

/* Valid --log-level names (the same as TNT_LOG_LEVEL). */
#define TNT_LAUNCH_LOG_LEVELS "error, warn, info, debug, trace"

#endif
