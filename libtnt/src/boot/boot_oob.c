/*
 * The caller's own out-of-band exchange (tnt_oob_t, public): a key-value
 * store, MPI, a file system. libtnt calls it only while a communicator is
 * created, and its abort from tnt_abort.
 */
#include "boot/boot.h"

#include "util/log.h"
#include "util/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct boot_oob {
    struct tnt_boot base;
    tnt_oob_t oob;
    double timeout_s;
};

static tnt_status_t oob_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes)
{
    struct boot_oob *b = (struct boot_oob *)boot;
    void *req = NULL;

    if (b->oob.allgather(b->oob.ctx, in, out, bytes, &req) != 0) {
        return tnt_error_raise(TNT_ERR_BOOTSTRAP,
                               "bootstrap: the caller's out-of-band allgather of %zu bytes failed "
                               "on rank %d (tnt_oob_t.allgather returned non-zero)",
                               bytes, b->base.info.rank);
    }
    if (b->oob.test == NULL) {
        return TNT_OK;
    }
    tnt_backoff_t backoff;
    tnt_status_t status = TNT_OK;
    int done;
    tnt_backoff_init(&backoff, b->timeout_s);
    while ((done = b->oob.test(b->oob.ctx, req)) == 0) {
        if (tnt_backoff_wait(&backoff) != 0) {
            status = tnt_error_raise(TNT_ERR_TIMEOUT,
                                     "bootstrap: the caller's out-of-band allgather of %zu bytes "
                                     "did not finish within TNT_TIMEOUT=%.0f s on rank %d (do all "
                                     "%d processes call tnt_comm_create_oob?)",
                                     bytes, b->timeout_s, b->base.info.rank, b->base.info.size);
            break;
        }
    }
    if (done < 0) {
        status = tnt_error_raise(TNT_ERR_BOOTSTRAP,
                                 "bootstrap: the caller's out-of-band allgather of %zu bytes "
                                 "failed on rank %d (tnt_oob_t.test returned %d)",
                                 bytes, b->base.info.rank, done);
    }
    if (b->oob.req_free != NULL) {
        b->oob.req_free(b->oob.ctx, req);
    }
    return status;
}

static void oob_abort(tnt_boot_t *boot, int exit_code, const char *message)
{
    struct boot_oob *b = (struct boot_oob *)boot;
    if (b->oob.abort != NULL) {
        b->oob.abort(b->oob.ctx, exit_code, message);
    }
}

static void oob_finalize(tnt_boot_t *boot)
{
    free(boot);
}

static const struct tnt_boot_ops oob_ops = {
    .name = "oob",
    .allgather = oob_allgather,
    .abort = oob_abort,
    .finalize = oob_finalize,
};

tnt_status_t tnt_boot_oob_create(const tnt_oob_t *oob, double timeout_s, tnt_boot_t **boot_p)
{
    if (oob == NULL || oob->allgather == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_comm_create_oob: %s; pass a tnt_oob_t whose allgather "
                               "exchanges bytes among all processes",
                               oob == NULL ? "oob is NULL" : "oob->allgather is NULL");
    }
    if (oob->size < 1 || oob->size > TNT_BOOT_MAX_SIZE || oob->rank < 0 || oob->rank >= oob->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_comm_create_oob: rank %d of size %d; the size must be 1 to "
                               "%ld and the rank 0 to size-1",
                               oob->rank, oob->size, (long)TNT_BOOT_MAX_SIZE);
    }
    struct boot_oob *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_comm_create_oob: out of memory");
    }
    b->base.ops = &oob_ops;
    b->oob = *oob;
    b->timeout_s = timeout_s;
    b->base.info.rank = oob->rank;
    b->base.info.size = oob->size;
    b->base.info.local_rank = -1;
    b->base.info.local_size = -1;
    snprintf(b->base.info.job_id, sizeof(b->base.info.job_id), "%s",
             oob->job_id != NULL ? oob->job_id : "oob");
    if (oob->hostname != NULL) {
        snprintf(b->base.info.hostname, sizeof(b->base.info.hostname), "%s", oob->hostname);
    } else if (gethostname(b->base.info.hostname, sizeof(b->base.info.hostname)) != 0) {
        snprintf(b->base.info.hostname, sizeof(b->base.info.hostname), "localhost");
    }
    b->base.info.hostname[sizeof(b->base.info.hostname) - 1] = '\0';
    *boot_p = &b->base;
    return TNT_OK;
}
