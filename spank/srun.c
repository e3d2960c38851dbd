/*
 * Local context (srun): validation before anything launches, --tarantella=help,
 * and making sure the step is bootstrapped through PMIx.
 *
 * Why SLURM_MPI_TYPE is set in slurm_spank_init (Slurm 22.05, src/srun and
 * src/common/plugstack.c): srun calls spank_init() before it parses any
 * option; then _opt_env() reads SLURM_MPI_TYPE, then the command line is
 * parsed (this is when option callbacks run), then _opt_verify() falls back
 * to MpiDefault and loads the MPI plugin, and only then is
 * slurm_spank_init_post_opt called. So the option callback and post_opt are
 * both too late to choose the MPI plugin; slurm_spank_init is the one hook
 * early enough. At that point the callback has not run, so we look for the
 * option ourselves: in srun's arguments, or inherited from sbatch/salloc.
 * An explicit --mpi=... on the command line is parsed after the variable and
 * still wins; post_opt then checks what was chosen (srun exports the final
 * type as SLURM_MPI_TYPE when it loads the plugin) and fails fast with the
 * fix if it is not PMIx.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tnt_spank.h"

/* Is arg the option or an abbreviation getopt_long accepts ("--tar" is the
 * shortest prefix no other srun option shares), with or without "=value"? */
static int srun_arg_is_option(const char *arg)
{
    static const char name[] = TNT_SPANK_OPTION_NAME;
    size_t len;

    if (strncmp(arg, "--", 2) != 0) {
        return 0;
    }
    arg += 2;
    len = strcspn(arg, "=");
    return len >= 3 && len <= sizeof name - 1 && strncmp(arg, name, len) == 0;
}

/*
 * Does srun's command line contain --tarantella[=...]? The whole argv is
 * searched: telling srun's options from the program's needs srun's option
 * table. A program argument spelled like the option therefore also selects
 * PMIx for that step, which is harmless.
 */
static int srun_argv_has_option(void)
{
    char buf[65536];
    ssize_t n, len = 0;
    int fd, found = 0;
    char *p;

    fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    while (len < (ssize_t)sizeof buf - 1 &&
           (n = read(fd, buf + len, sizeof buf - 1 - (size_t)len)) > 0) {
        len += n;
    }
    close(fd);
    buf[len] = '\0';
    /* Skip argv[0]; arguments are NUL-separated. */
    for (p = buf + strlen(buf) + 1; p < buf + len; p += strlen(p) + 1) {
        if (srun_arg_is_option(p)) {
            found = 1;
            break;
        }
    }
    return found;
}

/*
 * A training step cannot go on without one of its ranks, so a --tarantella
 * step ends as soon as any task exits with a non-zero status or a signal:
 * srun reads SLURM_KILL_BAD_EXIT in _opt_env(), after spank_init (see the
 * top of this file), like -K. An explicit -K0/-K1 on the command line is
 * parsed later and wins; a value the user exported is kept.
 */
static int srun_kill_on_bad_exit(void)
{
    if (getenv("SLURM_KILL_BAD_EXIT") != NULL) {
        return 0;
    }
    if (setenv("SLURM_KILL_BAD_EXIT", "1", 1) != 0) {
        slurm_error("tarantella: cannot set SLURM_KILL_BAD_EXIT=1 in srun's environment; "
                    "run srun with -K (--kill-on-bad-exit)");
        return -1;
    }
    return 0;
}

int tnt_spank_srun_init(spank_t sp)
{
    (void)sp;
    if (getenv(TNT_SPANK_INHERITED_ENV) == NULL && !srun_argv_has_option()) {
        return 0;
    }
    /* Somebody chose the MPI plugin already (the user, a module file):
     * respect it; post_opt says what to do if it is not PMIx. */
    if (getenv("SLURM_MPI_TYPE") != NULL) {
        return srun_kill_on_bad_exit();
    }
    if (setenv("SLURM_MPI_TYPE", "pmix", 1) != 0) {
        slurm_error("tarantella: cannot set SLURM_MPI_TYPE=pmix in srun's environment; "
                    "run srun with --mpi=pmix");
        return -1;
    }
    tnt_spank_state.mpi_type_set_by_us = 1;
    slurm_debug("tarantella: --tarantella seen, selecting the mpi/pmix plugin for this step");
    return srun_kill_on_bad_exit();
}

int tnt_spank_srun_post_opt(spank_t sp)
{
    const char *mpi;
    char desc[256];

    (void)sp;
    if (!tnt_spank_state.config.enabled) {
        return 0;
    }
    mpi = getenv("SLURM_MPI_TYPE");
    if (mpi == NULL) {
        /* Not a Slurm we know: it did not export the MPI type it chose. */
        slurm_verbose("tarantella: cannot tell which MPI plugin srun chose; the step needs "
                      "mpi/pmix (--mpi=pmix)");
    } else if (strncmp(mpi, "pmix", 4) != 0) {
        slurm_error("tarantella: this step would start with --mpi=%s, but Tarantella ranks "
                    "bootstrap through PMIx. Use srun --mpi=pmix (or drop --mpi and "
                    "SLURM_MPI_TYPE so that --tarantella selects it), or ask the administrator "
                    "to set MpiDefault=pmix in slurm.conf",
                    mpi);
        return -1;
    }
    if (tnt_spank_state.config.verbose) {
        slurm_info("tarantella: %s (mpi=%s)",
                   tnt_spank_config_format(&tnt_spank_state.config, desc, sizeof desc),
                   mpi != NULL ? mpi : "?");
    }
    return 0;
}
