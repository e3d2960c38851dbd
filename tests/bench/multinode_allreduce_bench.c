/*
 * Multi-node allreduce benchmark for libtnt (public API only). Run it across
 * simulated nodes, e.g.
 *   TNT_ALLREDUCE_ALGO=ring UCX_TLS=tcp,self \
 *     build/bin/tarantella --simulate-nodes 2 -n 2 --python-interpreter "" -- \
 *     build/bin/multinode_allreduce_bench --label 2x1
 * or through srun on a real cluster. tests/bench/multinode_allreduce_bench.sh
 * runs all algorithms and OpenMPI side by side; docs/multinode.md has the
 * figures. Never fails on speed; exits non-zero only on a libtnt error.
 */
#include <tnt/tnt.h>

#include "multinode_allreduce_bench_common.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *label = "?";
    const char *algo = getenv("TNT_ALLREDUCE_ALGO");
    double scale = 1.0;
    size_t min_bytes = 0, max_bytes = (size_t)64 << 20;
    tnt_comm_t *comm;
    float *buf;
    tnt_status_t s;

    if (mnb_parse_args(argc, argv, &label, &scale, &min_bytes, &max_bytes) != 0) {
        fprintf(stderr, "usage: %s [--label L] [--scale X] [--min-bytes B] [--max-bytes B]\n",
                argv[0]);
        return 2;
    }
    if (algo == NULL || *algo == '\0') {
        algo = "auto";
    }
    s = tnt_init(&comm);
    if (s != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    buf = malloc(max_bytes);
    if (buf == NULL) {
        return 1;
    }
    for (size_t i = 0; i < max_bytes / 4; i++) {
        buf[i] = 1.0f / (float)(1 + i % 13);
    }
    for (size_t k = 0; k < MNB_NUM_SIZES && mnb_sizes[k] <= max_bytes; k++) {
        if (mnb_sizes[k] < min_bytes) {
            continue;
        }
        size_t count = mnb_sizes[k] / 4;
        int iters = mnb_iters(mnb_sizes[k], scale);
        double t0, dt, worst;

        for (int w = 0; w < 3; w++) {
            s = tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
            if (s != TNT_OK) {
                goto fail;
            }
        }
        /* Values grow with every SUM; reset so nothing overflows to inf
         * (which would not change the timing, but keeps runs comparable). */
        for (size_t i = 0; i < count; i++) {
            buf[i] = 1e-3f;
        }
        if ((s = tnt_barrier(comm)) != TNT_OK) {
            goto fail;
        }
        t0 = mnb_now();
        for (int it = 0; it < iters; it++) {
            s = tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
            if (s != TNT_OK) {
                goto fail;
            }
        }
        dt = (mnb_now() - t0) / iters;
        s = tnt_allreduce(comm, &dt, &worst, 1, TNT_FLOAT64, TNT_MAX);
        if (s != TNT_OK) {
            goto fail;
        }
        if (tnt_rank(comm) == 0) {
            mnb_print("tarantella", algo, label, tnt_size(comm), mnb_sizes[k], worst);
        }
    }
    free(buf);
    tnt_finalize(comm);
    return 0;

fail:
    fprintf(stderr, "rank %d: allreduce failed: %s\n", tnt_rank(comm), tnt_last_error());
    return 1;
}
