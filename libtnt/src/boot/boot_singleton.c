/*
 * The singleton bootstrap: a process that runs alone (size 1). The wrappers
 * in boot.c answer every collective of a size-1 job themselves, so the
 * operations here are never reached with a peer.
 */
#include "boot/boot.h"

#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static tnt_status_t singleton_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes)
{
    (void)boot;
    (void)in;
    (void)out;
    (void)bytes;
    return tnt_error_raise(TNT_ERR_BOOTSTRAP, "bootstrap: a singleton has no peers to gather");
}

/* Nobody else to stop: tnt_boot_abort exits the process. */
static void singleton_abort(tnt_boot_t *boot, int exit_code, const char *message)
{
    (void)boot;
    (void)exit_code;
    (void)message;
}

static void singleton_finalize(tnt_boot_t *boot)
{
    free(boot);
}

static const struct tnt_boot_ops singleton_ops = {
    .name = "singleton",
    .allgather = singleton_allgather,
    .abort = singleton_abort,
    .finalize = singleton_finalize,
};

/* The first of names[] set to a positive number, 0 if none. *which gets its
 * name. */
static long env_task_count(const char *const *names, size_t count, const char **which)
{
    for (size_t i = 0; i < count; i++) {
        const char *v = getenv(names[i]);
        if (v != NULL && *v != '\0') {
            char *end;
            long n = strtol(v, &end, 10);
            if (end != v && n > 0) {
                *which = names[i];
                return n;
            }
        }
    }
    return 0;
}

/* SLURM_NTASKS (or the older SLURM_NPROCS) as a number, 0 if absent. */
static long slurm_ntasks(void)
{
    static const char *const names[] = { "SLURM_NTASKS", "SLURM_NPROCS" };
    const char *which;

    return env_task_count(names, sizeof(names) / sizeof(names[0]), &which);
}

/*
 * The job size another launcher announced without a PMIx server: torchrun
 * (and torch.distributed.launch) set WORLD_SIZE, RANK and LOCAL_RANK; an MPI
 * launcher that is not OpenMPI 4+ with PMIx, or OpenMPI's variables leaking
 * into a plain process, shows OMPI_COMM_WORLD_SIZE. 0 if none; *launcher
 * names who set it.
 */
static long foreign_world_size(const char **variable, const char **launcher)
{
    static const char *const names[] = { "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE" };
    long n = env_task_count(names, sizeof(names) / sizeof(names[0]), variable);

    if (n > 0) {
        *launcher = (*variable)[0] == 'W' ? "torchrun or torch.distributed" : "an MPI launcher";
    }
    return n;
}

tnt_status_t tnt_boot_singleton_create(const char *why, int warn, tnt_boot_t **boot_p)
{
    tnt_boot_t *boot = calloc(1, sizeof(*boot));
    if (boot == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "bootstrap: out of memory");
    }
    struct tnt_boot_info *info = &boot->info;

    boot->ops = &singleton_ops;
    info->rank = 0;
    info->size = 1;
    info->local_rank = 0;
    info->local_size = 1;
    info->is_singleton = 1;
    snprintf(info->job_id, sizeof(info->job_id), "singleton-%ld", (long)getpid());
    if (gethostname(info->hostname, sizeof(info->hostname)) != 0) {
        snprintf(info->hostname, sizeof(info->hostname), "localhost");
    }
    info->hostname[sizeof(info->hostname) - 1] = '\0';

    /* Exactly one warning per process: SLURM's task count is the stronger
     * hint (every task of the step is now computing alone). */
    long ntasks = slurm_ntasks();
    const char *variable = NULL, *launcher = NULL;
    long world = ntasks > 1 ? 0 : foreign_world_size(&variable, &launcher);
    if (ntasks > 1) {
        const char *procid = getenv("SLURM_PROCID");
        tnt_log_warn("SLURM started %ld tasks but task %s found no PMIx server (%s), so each task "
                     "runs alone as a singleton of size 1; launch with 'srun --tarantella ...' or "
                     "'srun --mpi=pmix ...' (admins: set MpiDefault=pmix in slurm.conf)",
                     ntasks, procid != NULL ? procid : "?", why);
    } else if (world > 1) {
        /* Tarantella does not join torchrun's rendezvous (or an MPI job
         * without PMIx): every process would train alone, unnoticed. */
        const char *rank = getenv(variable[0] == 'W' ? "RANK" : "OMPI_COMM_WORLD_RANK");
        tnt_log_warn("%s=%ld (set by %s) says this process is rank %s of %ld, but it found no PMIx "
                     "server (%s), so it runs alone as a singleton of size 1; Tarantella starts "
                     "its ranks itself: launch with 'srun --tarantella ...' on a SLURM cluster or "
                     "'tarantella -n %ld -- script.py' on one machine (not torchrun) to use "
                     "Tarantella's own API; a script that only uses torch.distributed's 'tnt' "
                     "backend, which bootstraps from torchrun's store, may ignore this",
                     variable, world, launcher, rank != NULL ? rank : "?", world, why, world);
    } else if (warn) {
        tnt_log_warn("running as a singleton of size 1: %s", why);
    } else {
        tnt_log_debug("running as a singleton of size 1: %s", why);
    }
    *boot_p = boot;
    return TNT_OK;
}
