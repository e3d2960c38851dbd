/*
 * Device-path logic that needs no GPU: reading the TNT_GPU_* settings,
 * choosing the transport from every rank's probe, detecting ranks that share
 * a GPU, and planning the chunks of the host-staged path. Pure except for
 * tnt_gpu_settings_read (getenv) and error recording, so it is unit-tested
 * without CUDA (tests/unit/test_gpu_plan.c).
 */
#include "gpu/gpu.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------ */
/* Settings. A local reader, kept apart so that the settings table can take */
/* it over; unlike the tuning knobs, a bad value is an error: silently      */
/* choosing another transport than the one asked for would hide the typo.  */
/* Errors are recorded, not logged: tnt_gpu_select reports them, once, on   */
/* every rank.                                                              */
/* ------------------------------------------------------------------------ */

tnt_status_t tnt_gpu_request_parse(const char *value, tnt_gpu_request_t *request_p)
{
    static const struct {
        const char *name;
        tnt_gpu_request_t request;
    } choices[] = {
        { "auto", TNT_GPU_REQUEST_AUTO },
        { "nccl", TNT_GPU_REQUEST_NCCL },
        { "host", TNT_GPU_REQUEST_HOST },
    };

    if (value == NULL || value[0] == '\0') {
        *request_p = TNT_GPU_REQUEST_AUTO;
        return TNT_OK;
    }
    for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        if (strcasecmp(value, choices[i].name) == 0) {
            *request_p = choices[i].request;
            return TNT_OK;
        }
    }
    return tnt_error_set(TNT_ERR_INVALID_ARG,
                         "TNT_GPU_TRANSPORT='%.64s' is not a GPU transport; use auto (NCCL "
                         "when every rank has its own GPU, else host), nccl or host",
                         value);
}

tnt_status_t tnt_gpu_staging_parse(const char *value, size_t *chunk_bytes_p)
{
    if (value == NULL || value[0] == '\0') {
        *chunk_bytes_p = (size_t)TNT_GPU_STAGING_KB_DEFAULT << 10;
        return TNT_OK;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long kb = strtoull(value, &end, 10);
    /* strtoull accepts "-1" (as a huge number): only digits are valid. */
    int digits_only = value[strspn(value, "0123456789")] == '\0';
    if (!digits_only || errno != 0 || end == value || kb < TNT_GPU_STAGING_KB_MIN ||
        kb > ((unsigned long long)SIZE_MAX >> 10) / TNT_GPU_STAGING_SLOTS) {
        return tnt_error_set(TNT_ERR_INVALID_ARG,
                             "TNT_GPU_STAGING_KB='%.64s' is not a chunk size; use a whole "
                             "number of KiB, at least %d (default %d)",
                             value, TNT_GPU_STAGING_KB_MIN, TNT_GPU_STAGING_KB_DEFAULT);
    }
    *chunk_bytes_p = (size_t)kb << 10;
    return TNT_OK;
}

tnt_status_t tnt_gpu_settings_read(tnt_gpu_request_t *request_p, size_t *chunk_bytes_p)
{
    tnt_gpu_request_t request = TNT_GPU_REQUEST_AUTO;
    size_t chunk_bytes = 0;
    tnt_status_t status = tnt_gpu_request_parse(getenv("TNT_GPU_TRANSPORT"), &request);
    if (status == TNT_OK) {
        status = tnt_gpu_staging_parse(getenv("TNT_GPU_STAGING_KB"), &chunk_bytes);
    }
    if (status == TNT_OK) {
        *request_p = request;
        *chunk_bytes_p = chunk_bytes;
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* Duplicate GPUs                                                           */
/* ------------------------------------------------------------------------ */

struct uuid_rank {
    const uint8_t *uuid;
    int rank;
};

static int uuid_rank_cmp(const void *a, const void *b)
{
    const struct uuid_rank *x = a, *y = b;
    int c = memcmp(x->uuid, y->uuid, 16);
    if (c != 0) {
        return c;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

int tnt_gpu_find_duplicate(const struct tnt_gpu_peer *peers, int size, int *a_p, int *b_p)
{
    /* Sorting keeps this O(n log n) for jobs of thousands of ranks. Equal
     * UUIDs end up adjacent, in rank order within a group, so each group's
     * first two entries are its lowest pair. */
    struct uuid_rank *order = malloc((size_t)(size > 0 ? size : 1) * sizeof(*order));
    if (order == NULL) {
        return -1;
    }
    for (int r = 0; r < size; r++) {
        order[r].uuid = peers[r].uuid;
        order[r].rank = r;
    }
    qsort(order, (size_t)size, sizeof(*order), uuid_rank_cmp);
    int found = 0, best_a = 0, best_b = 0;
    for (int i = 1; i < size; i++) {
        if (memcmp(order[i - 1].uuid, order[i].uuid, 16) != 0) {
            continue;
        }
        int a = order[i - 1].rank, b = order[i].rank;
        if (!found || a < best_a || (a == best_a && b < best_b)) {
            found = 1;
            best_a = a;
            best_b = b;
        }
        /* Skip the rest of this group: its first pair is its lowest. */
        while (i + 1 < size && memcmp(order[i].uuid, order[i + 1].uuid, 16) == 0) {
            i++;
        }
    }
    free(order);
    if (found) {
        *a_p = best_a;
        *b_p = best_b;
    }
    return found;
}

/* ------------------------------------------------------------------------ */
/* Selection                                                                */
/* ------------------------------------------------------------------------ */

static const char *request_name(int request)
{
    switch (request) {
    case TNT_GPU_REQUEST_AUTO:
        return "auto";
    case TNT_GPU_REQUEST_NCCL:
        return "nccl";
    case TNT_GPU_REQUEST_HOST:
        return "host";
    default:
        return "?";
    }
}

tnt_status_t tnt_gpu_select(const struct tnt_gpu_peer *peers, int size,
                            tnt_gpu_transport_t *transport_p)
{
    for (int r = 0; r < size; r++) {
        if (!peers[r].ok) {
            tnt_status_t error =
                peers[r].error < 0 ? (tnt_status_t)peers[r].error : TNT_ERR_UNSUPPORTED;
            return tnt_error_raise(error, "device collectives are not available: rank %d: %.384s",
                                   r, peers[r].reason);
        }
    }
    for (int r = 1; r < size; r++) {
        if (peers[r].request != peers[0].request) {
            return tnt_error_raise(TNT_ERR_MISMATCH,
                                   "ranks disagree on TNT_GPU_TRANSPORT: rank 0 has %s, rank %d "
                                   "has %s; set the same value for every rank",
                                   request_name(peers[0].request), r,
                                   request_name(peers[r].request));
        }
    }
    const int request = peers[0].request;
    if (request == TNT_GPU_REQUEST_HOST) {
        *transport_p = TNT_GPU_TRANSPORT_HOST;
        return TNT_OK;
    }

    int no_nccl = -1;
    for (int r = 0; r < size && no_nccl < 0; r++) {
        if (!peers[r].nccl_ok) {
            no_nccl = r;
        }
    }
    int a = -1, b = -1;
    int dup = tnt_gpu_find_duplicate(peers, size, &a, &b);
    if (dup < 0) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "out of memory comparing the GPUs of %d ranks",
                               size);
    }
    if (request == TNT_GPU_REQUEST_NCCL) {
        if (no_nccl >= 0) {
            return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                                   "TNT_GPU_TRANSPORT=nccl, but rank %d could not load NCCL "
                                   "(libnccl.so.2); add it to LD_LIBRARY_PATH or use "
                                   "TNT_GPU_TRANSPORT=host",
                                   no_nccl);
        }
        if (dup) {
            return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                                   "TNT_GPU_TRANSPORT=nccl, but ranks %d and %d use the same GPU "
                                   "(CUDA device %d), which NCCL refuses; give each task its own "
                                   "GPU (srun --gpus-per-task=1) or use TNT_GPU_TRANSPORT=host",
                                   a, b, (int)peers[a].device);
        }
        *transport_p = TNT_GPU_TRANSPORT_NCCL;
        return TNT_OK;
    }
    *transport_p = (no_nccl < 0 && !dup) ? TNT_GPU_TRANSPORT_NCCL : TNT_GPU_TRANSPORT_HOST;
    return TNT_OK;
}
