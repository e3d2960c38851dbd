/*
 * Device-path logic that needs no GPU: choosing the transport from every
 * rank's probe and detecting ranks that share a GPU (the host-staged path's
 * chunks are planned in chunks.c). Pure except for error recording, so it is
 * unit-tested without CUDA (tests/unit/test_gpu_plan.c).
 */
#include "gpu/gpu.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
