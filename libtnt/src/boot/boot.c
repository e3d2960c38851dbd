/*
 * The implementation-independent half of the bootstrap: argument checks, the
 * size-1 shortcuts every implementation would otherwise repeat, and the
 * choice between PMIx and the singleton for a real process.
 */
#include "boot/boot.h"

#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long an abort waits for its last lines to be read (tnt_log_drain). */
#define TNT_BOOT_ABORT_DRAIN_S 2.0
/* and then for slurmstepd to pass them on to srun, which stops forwarding
 * output once the step is aborted. */
#define TNT_BOOT_ABORT_FORWARD_US (500 * 1000)

tnt_status_t tnt_boot_init(double timeout_s, tnt_boot_t **boot_p)
{
    char why[256];
    tnt_status_t status = tnt_boot_pmix_create(timeout_s, why, sizeof(why), boot_p);
    if (status != TNT_BOOT_PMIX_ABSENT) {
        return status;
    }
    /* A job that named a PMIx server but cannot reach it was meant to have
     * peers; a plain `python train.py` was not. */
    return tnt_boot_singleton_create(why, getenv("PMIX_NAMESPACE") != NULL, boot_p);
}

void tnt_boot_ref(tnt_boot_t *boot)
{
    atomic_fetch_add_explicit(&boot->extra_refs, 1, memory_order_relaxed);
}

void tnt_boot_finalize(tnt_boot_t *boot)
{
    if (boot == NULL) {
        return;
    }
    if (atomic_fetch_sub_explicit(&boot->extra_refs, 1, memory_order_acq_rel) > 0) {
        return;
    }
    boot->ops->finalize(boot);
}

const struct tnt_boot_info *tnt_boot_info(const tnt_boot_t *boot)
{
    return &boot->info;
}

tnt_status_t tnt_boot_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes)
{
    if (bytes > 0 && (in == NULL || out == NULL)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "bootstrap allgather: NULL buffer");
    }
    if (boot->info.size == 1) {
        if (bytes > 0) {
            memmove(out, in, bytes);
        }
        return TNT_OK;
    }
    return boot->ops->allgather(boot, in, out, bytes);
}

void tnt_boot_abort(tnt_boot_t *boot, int exit_code, const char *message)
{
    if (exit_code == 0) {
        exit_code = 1; /* an abort is a failure, whatever the caller says */
    }
    if (message == NULL) {
        message = "tnt_abort";
    }
    /* The abort kills this process and its peers at once, and slurmstepd
     * drops what it has not read yet: the traceback and the reason would be
     * lost (seen in about one abort in twenty under srun). */
    tnt_log_drain(TNT_BOOT_ABORT_DRAIN_S);
    usleep(TNT_BOOT_ABORT_FORWARD_US);
    if (boot != NULL) {
        boot->ops->abort(boot, exit_code, message);
    }
    /* No launcher to ask (singleton, no bootstrap yet), or it did not end
     * this process. */
    _exit(exit_code);
}
