/*
 * libtnt allreduce benchmark (osu style; see allreduce_bench_common.h).
 *   build/bin/tarantella -n 2 --pin core -- build/bin/allreduce_bench [--max BYTES] [--post]
 * --post times tnt_allreduce_post + tnt_wait instead of tnt_allreduce: the
 * same collective plus the hand-off (to the progress thread and back, or,
 * when the thread has not taken it, to the waiting thread; TNT_OVERLAP).
 * tests/bench/run_all.sh runs it against mpi_allreduce_bench and writes
 * docs/benchmarks.md. Never fails on speed; exits non-zero only on errors.
 */
#include <tnt/tnt.h>

#include "allreduce_bench_common.h"

static tnt_status_t one(tnt_comm_t *comm, float *buf, size_t count, int post)
{
    if (!post) {
        return tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
    }
    tnt_request_t *req;
    tnt_status_t st = tnt_allreduce_post(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM, &req);
    return st == TNT_OK ? tnt_wait(req) : st;
}

int main(int argc, char **argv)
{
    struct bench_opts opts;
    if (bench_parse(argc, argv, &opts) != 0) {
        return 2;
    }
    tnt_comm_t *comm;
    if (tnt_init(&comm) != TNT_OK) {
        fprintf(stderr, "allreduce_bench: tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    int rank = tnt_rank(comm), size = tnt_size(comm);
    float *buf = malloc(opts.max_bytes);
    if (buf == NULL) {
        fprintf(stderr, "allreduce_bench: cannot allocate %zu bytes\n", opts.max_bytes);
        return 1;
    }
    for (size_t i = 0; i < opts.max_bytes / 4; i++) {
        buf[i] = 1e-3f;
    }
    if (rank == 0) {
        bench_header(opts.post ? "tarantella allreduce_bench (tnt_allreduce_post + tnt_wait)"
                               : "tarantella allreduce_bench (tnt_allreduce)",
                     size);
    }

    for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= 4) {
        size_t count = bytes / 4;
        int warmup = bytes >= (64u << 20) ? 3 : BENCH_WARMUP;
        double w0 = bench_now();
        for (int i = 0; i < warmup; i++) {
            if (one(comm, buf, count, opts.post) != TNT_OK) {
                goto fail;
            }
        }
        int iters = bench_iterations(&opts, bytes, (bench_now() - w0) / warmup);
        if (tnt_broadcast(comm, &iters, sizeof iters, 0) != TNT_OK || tnt_barrier(comm) != TNT_OK) {
            goto fail;
        }
        double t0 = bench_now();
        for (int i = 0; i < iters; i++) {
            if (one(comm, buf, count, opts.post) != TNT_OK) {
                goto fail;
            }
        }
        double avg = (bench_now() - t0) / iters, sum = 0;
        if (tnt_allreduce(comm, &avg, &sum, 1, TNT_FLOAT64, TNT_SUM) != TNT_OK) {
            goto fail;
        }
        if (rank == 0) {
            bench_row(bytes, sum / size, size);
        }
    }
    free(buf);
    tnt_finalize(comm);
    return 0;

fail:
    fprintf(stderr, "allreduce_bench: rank %d: %s\n", rank, tnt_last_error());
    return 1;
}
