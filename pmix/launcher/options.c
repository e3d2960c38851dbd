/*
 * Option parsing for the launcher. Accepts "--opt VALUE" and "--opt=VALUE"
 * (and "-nN" / "-xVAR=VAL" for the short ones), stops at "--" or at the first
 * argument that is not an option: everything after is the program and its
 * arguments, passed through untouched.
 */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const log_levels[] = { "error", "warn", "info", "debug", "trace" };

static int opt_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int opt_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Strict decimal: digits only (no sign, no spaces, no suffix), in [min, max]. */
static int parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    long value;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return -1;
    }
    errno = 0;
    value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max) {
        return -1;
    }
    *out = value;
    return 0;
}

static int valid_env_name(const char *text, size_t len)
{
    if (len == 0 || (text[0] >= '0' && text[0] <= '9')) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        char c = text[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_')) {
            return 0;
        }
    }
    return 1;
}

/*
 * Matches argv[*i] against a long option that takes a value ("--name VALUE"
 * or "--name=VALUE"). Returns 1 and sets *value (advancing *i past a separate
 * value), 0 when argv[*i] is not this option, -1 when the value is missing.
 */
static int match_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);

    if (strncmp(arg, name, len) != 0) {
        return 0;
    }
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

/* The same for a short option: "-n N" or "-nN". */
static int match_short(int argc, char **argv, int *i, char letter, const char **value)
{
    const char *arg = argv[*i];

    if (arg[0] != '-' || arg[1] != letter) {
        return 0;
    }
    if (arg[2] != '\0') {
        *value = arg[2] == '=' ? arg + 3 : arg + 2;
        return 1;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

static int add_export(struct tnt_launch_options *opts, const char *assignment, char *errbuf,
                      size_t errlen)
{
    const char *eq = strchr(assignment, '=');
    char **grown;

    if (eq == NULL || !valid_env_name(assignment, (size_t)(eq - assignment))) {
        return opt_err(errbuf, errlen,
                       "invalid -x value '%s': expected VAR=VALUE with VAR made of letters, "
                       "digits and '_' (e.g. -x OMP_PROC_BIND=true)",
                       assignment);
    }
    grown = realloc(opts->exports, (size_t)(opts->nexports + 2) * sizeof *grown);
    if (grown == NULL) {
        return opt_err(errbuf, errlen, "out of memory while parsing -x");
    }
    opts->exports = grown;
    /* argv strings live until exit; no copy is needed. */
    opts->exports[opts->nexports++] = (char *)assignment;
    opts->exports[opts->nexports] = NULL;
    return 0;
}

/*
 * Options of the older Tarantella launcher (gaspi_run over ssh) that have no
 * meaning here. Each says what replaces it, so an old command line fails with
 * the fix instead of "unknown option".
 */
static const struct {
    const char *name;
    const char *replacement;
} removed_options[] = {
    { "--npernode", "tarantella runs every rank on this machine: give the total with -n N; "
                    "across nodes use srun --tarantella -N NODES --ntasks-per-node=R "
                    "(or --hostfile FILE, which hands the job to mpirun)" },
    { "--n-per-node", "tarantella runs every rank on this machine: give the total with -n N; "
                      "across nodes use srun --tarantella -N NODES --ntasks-per-node=R "
                      "(or --hostfile FILE, which hands the job to mpirun)" },
    { "--cleanup", "it is no longer needed: at the end of every job tarantella stops what the "
                   "ranks left behind and removes their shared memory; just run the job again" },
    { "--force", "it is no longer needed: every job's processes and shared memory are its own, "
                 "so a new job never conflicts with an earlier one; just run the job" },
};

/* 1 (with the message in errbuf) when arg is one of the removed options,
 * with or without "=VALUE". */
static int removed_option(const char *arg, char *errbuf, size_t errlen)
{
    for (size_t k = 0; k < sizeof removed_options / sizeof removed_options[0]; k++) {
        size_t len = strlen(removed_options[k].name);

        if (strncmp(arg, removed_options[k].name, len) == 0 &&
            (arg[len] == '\0' || arg[len] == '=')) {
            opt_err(errbuf, errlen, "option %s of the older Tarantella launcher was removed: %s",
                    removed_options[k].name, removed_options[k].replacement);
            return 1;
        }
    }
    return 0;
}

int tnt_launch_options_parse(int argc, char **argv, struct tnt_launch_options *opts, char *errbuf,
                             size_t errlen)
{
    const char *value = NULL;
    int i, m;
    long number;

    memset(opts, 0, sizeof *opts);
    opts->nranks = 1;
    opts->fusion_threshold_kb = -1;
    opts->pin = TNT_PIN_NONE;
    opts->python = TNT_LAUNCH_DEFAULT_PYTHON;

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];

        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            break; /* the program */
        }

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            opts->show_help = 1;
        } else if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
            opts->show_version = 1;
        } else if (strcmp(arg, "--no-gpu") == 0) {
            opts->no_gpu = 1;
        } else if (strcmp(arg, "--log-on-all-devices") == 0) {
            opts->log_on_all_devices = 1;
        } else if (strcmp(arg, "--output-on-all-devices") == 0) {
            opts->output_on_all_devices = 1;
        } else if (strcmp(arg, "--pin-to-socket") == 0) {
            opts->pin = TNT_PIN_SOCKET;
        } else if (strcmp(arg, "--pin-memory-to-socket") == 0) {
            opts->pin = TNT_PIN_SOCKET;
            opts->pin_memory = 1;
        } else if (strcmp(arg, "--pin-memory") == 0) {
            opts->pin_memory = 1;
        } else if (strcmp(arg, "--dry-run") == 0) {
            opts->dry_run = 1;
        } else if (arg[1] != '-' && (m = match_short(argc, argv, &i, 'n', &value)) != 0) {
            if (m < 0) {
                return opt_err(errbuf, errlen, "-n needs a value: the number of ranks (1 to %d)",
                               TNT_LAUNCH_MAX_RANKS);
            }
            if (parse_long(value, 1, TNT_LAUNCH_MAX_RANKS, &number) != 0) {
                return opt_err(errbuf, errlen,
                               "invalid -n value '%s': expected a number of ranks from 1 to %d",
                               value, TNT_LAUNCH_MAX_RANKS);
            }
            opts->nranks = (int)number;
        } else if (arg[1] != '-' && (m = match_short(argc, argv, &i, 'x', &value)) != 0) {
            if (m < 0) {
                return opt_err(errbuf, errlen, "-x needs a value: VAR=VALUE");
            }
            if (add_export(opts, value, errbuf, errlen) != 0) {
                return -1;
            }
        } else if ((m = match_value(argc, argv, &i, "--log-level", &value)) != 0) {
            const char *level = NULL;

            /* Any case: the old launcher took INFO, DEBUG, ... */
            for (size_t l = 0; m > 0 && l < sizeof log_levels / sizeof log_levels[0]; l++) {
                if (strcasecmp(value, log_levels[l]) == 0) {
                    level = log_levels[l];
                }
            }
            if (level == NULL) {
                return opt_err(errbuf, errlen,
                               "invalid --log-level '%s': valid levels are %s (in any case)",
                               m > 0 ? value : "", TNT_LAUNCH_LOG_LEVELS);
            }
            opts->log_level = level;
        } else if ((m = match_value(argc, argv, &i, "--fusion-threshold", &value)) != 0) {
            if (m > 0 && strcasecmp(value, "auto") == 0) {
                number = TNT_LAUNCH_FUSION_AUTO;
            } else if (m < 0 || parse_long(value, 0, LONG_MAX / 1024, &number) != 0) {
                return opt_err(errbuf, errlen,
                               "invalid --fusion-threshold '%s': expected a size in KiB, a "
                               "whole number >= 0 (0 = one allreduce per tensor), or auto "
                               "(tuned over the first training steps)",
                               m > 0 ? value : "");
            }
            opts->fusion_threshold_kb = number;
        } else if ((m = match_value(argc, argv, &i, "--pin", &value)) != 0) {
            if (m < 0 || tnt_pin_mode_parse(value, &opts->pin) != 0) {
                return opt_err(errbuf, errlen, "invalid --pin mode '%s': valid modes are %s",
                               m > 0 ? value : "", tnt_pin_mode_choices());
            }
        } else if ((m = match_value(argc, argv, &i, "--python-interpreter", &value)) != 0) {
            if (m < 0) {
                return opt_err(errbuf, errlen,
                               "--python-interpreter needs a value: a path, "
                               "or \"\" to run the program directly");
            }
            opts->python = value;
        } else if ((m = match_value(argc, argv, &i, "--hostfile", &value)) != 0) {
            if (m < 0 || value[0] == '\0') {
                return opt_err(errbuf, errlen, "--hostfile needs a file name");
            }
            opts->hostfile = value;
        } else if ((m = match_value(argc, argv, &i, "--simulate-nodes", &value)) != 0) {
            if (m < 0 || parse_long(value, 1, TNT_LAUNCH_MAX_RANKS, &number) != 0) {
                return opt_err(errbuf, errlen,
                               "invalid --simulate-nodes '%s': expected a number of nodes from 1 "
                               "to the number of ranks (-n)",
                               m > 0 ? value : "");
            }
            opts->simulate_nodes = (int)number;
        } else if (removed_option(arg, errbuf, errlen)) {
            return -1;
        } else {
            return opt_err(errbuf, errlen, "unknown option '%s'; see tarantella --help", arg);
        }
    }
    if (i < argc) {
        opts->program = argv + i;
        opts->nprogram = argc - i;
    }
    if (opts->show_help || opts->show_version) {
        return 0;
    }
    if (opts->nprogram == 0) {
        return opt_err(errbuf, errlen,
                       "no program given; usage: tarantella -n N [options] -- "
                       "PROGRAM [ARGS...] (see tarantella --help)");
    }
    if (opts->program[0][0] == '\0') {
        return opt_err(errbuf, errlen, "the program name is empty");
    }
    if (opts->simulate_nodes > opts->nranks) {
        return opt_err(errbuf, errlen,
                       "invalid --simulate-nodes %d: it must be between 1 and the number of "
                       "ranks (-n %d), so that every simulated node has a rank",
                       opts->simulate_nodes, opts->nranks);
    }
    if (opts->hostfile != NULL && opts->simulate_nodes > 0) {
        return opt_err(errbuf, errlen,
                       "--hostfile and --simulate-nodes cannot be combined: "
                       "--simulate-nodes runs every rank on this machine");
    }
    return 0;
}

void tnt_launch_options_free(struct tnt_launch_options *opts)
{
    free(opts->exports);
    opts->exports = NULL;
    opts->nexports = 0;
}

const char *tnt_launch_usage(void)
{
    return "usage: tarantella [options] [--] PROGRAM [ARGS...]\n"
           "\n"
           "Starts N ranks of PROGRAM on this machine as one Tarantella job (the launcher is\n"
           "their PMIx server). PROGRAM ending in .py runs under the Python interpreter;\n"
           "anything else is executed directly. Multi-node jobs belong to SLURM:\n"
           "  srun --tarantella -N NODES --ntasks-per-node=R python model.py\n"
           "\n"
           "options:\n"
           "  -n N                      number of ranks (default 1)\n"
           "  -x VAR=VALUE              set VAR in every rank's environment (repeatable)\n"
           "  --no-gpu                  hide GPUs from the ranks (CUDA_VISIBLE_DEVICES=\"\")\n"
           "  --log-level LEVEL         libtnt log level: error, warn, info, debug, trace\n"
           "                            (any case)\n"
           "                            (TNT_LOG_LEVEL); info and above also make the\n"
           "                            launcher describe each rank's binding\n"
           "  --log-on-all-devices      log on every rank, not only rank 0\n"
           "  --output-on-all-devices   print progress output on every rank\n"
           "  --fusion-threshold KB     gradient fusion bucket size in KiB\n"
           "                            (TNT_FUSION_THRESHOLD_KB; 0 = one allreduce per tensor,\n"
           "                            auto = tuned over the first training steps)\n"
           "  --pin MODE                pin each rank: none, socket, numa, core, auto\n"
           "                            (default none; see docs/launcher.md)\n"
           "  --pin-memory              bind memory strictly to the rank's NUMA nodes\n"
           "                            (otherwise they are only preferred)\n"
           "  --pin-to-socket           same as --pin socket\n"
           "  --pin-memory-to-socket    same as --pin socket --pin-memory\n"
           "  --python-interpreter PATH interpreter for .py programs (\"\" executes the\n"
           "                            program directly); default, the one the package\n"
           "                            was built for: " TNT_LAUNCH_DEFAULT_PYTHON "\n"
           "                            (the ranks' PYTHONPATH gets this launcher's package\n"
           "                            unless that interpreter finds it by itself)\n"
           "  --dry-run                 print each rank's command, added environment and\n"
           "                            binding; start nothing\n"
           "  --hostfile FILE           outside SLURM: hand the job to OpenMPI's mpirun\n"
           "  --simulate-nodes K        testing aid: present the ranks as K nodes named\n"
           "                            <host>-node<i> (contiguous blocks of ranks)\n"
           "  --version                 print the version and exit\n"
           "  -h, --help                print this help and exit\n"
           "\n"
           "exit status: 0 when every rank exits 0; otherwise that of the first rank to fail\n"
           "(128+N when it was killed by signal N), 1 for a rank that called abort with 0,\n"
           "2 for bad options, 127 when the program cannot be executed.\n";
}
