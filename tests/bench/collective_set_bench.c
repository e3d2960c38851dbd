/*
 * The collective set (reduce, reduce_scatter, reduce_scatterv, gather,
 * scatter, allgatherv, alltoall, alltoallv) and point-to-point messages
 * (pingpong) timed the way allreduce_bench.c times allreduce
 * (allreduce_bench_common.h: warm-up, iterations scaled by size, a barrier
 * before each timed loop, the per-rank average latency averaged over the
 * ranks). Built twice from this one file, so both measure identically:
 *   collective_set_bench       libtnt (run under tarantella or srun)
 *   mpi_collective_set_bench   OpenMPI's MPI_Reduce, MPI_Reduce_scatter_block, ...
 * A size is the bytes of the whole vector: reduce's count, reduce_scatter's
 * input, the root's buffer of gather/scatter, the output of allgatherv,
 * and each rank's send buffer of alltoall; float32 sum where it reduces.
 * The v forms take uneven counts, as their users pass them:
 *   reduce_scatterv  rank r receives (r + 1) parts of the input's
 *                    n (n + 1) / 2 (the last rank the rounding's rest);
 *   alltoallv        rank i sends rank j 1 unit where i + j is even, 2
 *                    where it is odd, a unit being 2 size / (3 n) rounded
 *                    down to 4 B, so a rank sends about size in all.
 * pingpong: ranks 2k and 2k + 1 send a message of size back and forth
 * (libtnt's tnt_send/tnt_recv; MPI_Ssend/MPI_Recv, since a tnt_send too
 * returns only once the receiver has matched it; built with
 * -DBENCH_MPI_STANDARD_SEND, MPI_Send, which may return as soon as a small
 * message is buffered); the latency is half the round trip, averaged over
 * the ranks of the pairs (an odd last rank sits out), as osu_latency
 * reports it.
 *   # op  size(B)  avg_lat(us)  busbw(GB/s)
 * busbw follows nccl-tests: reduce and gather/scatter move size (n-1)/n
 * per rank through the root, reduce_scatter and allgather size (n-1)/n,
 * alltoall size (n-1)/n; pingpong's is size / latency. --ops a,b,... runs
 * only those ops. Not a test: its ctest entry is a smoke run.
 *
 * --isolated times each call alone, as the OSU collective benchmarks do
 * (osu_gather, osu_reduce, ...): a barrier before every call, only the call
 * timed. Back to back (the default), a rank that hands its bytes off and
 * returns (a gather's non-roots) runs ahead into its next calls as far as
 * the library buffers them, so the loop measures how fast calls follow
 * one another; isolated, every call starts with all ranks present, so it
 * measures how long one call takes. The rows then have a fifth column:
 * the slowest rank's average (a gather's root, which waits for the data),
 * where avg_lat averages the ranks as osu_gather's "Avg Latency" does.
 */
#ifdef BENCH_MPI
#include <mpi.h>
#else
#include <tnt/tnt.h>
#endif

#include "allreduce_bench_common.h"

#if defined(BENCH_MPI) && !defined(BENCH_MPI_STANDARD_SEND)
#define BENCH_MPI_SEND MPI_Ssend
#elif defined(BENCH_MPI)
#define BENCH_MPI_SEND MPI_Send
#endif

enum {
    OP_REDUCE,
    OP_REDUCE_SCATTER,
    OP_REDUCE_SCATTERV,
    OP_GATHER,
    OP_SCATTER,
    OP_ALLGATHERV,
    OP_ALLTOALL,
    OP_ALLTOALLV,
    OP_PINGPONG,
    OP_COUNT
};
static const char *const op_names[OP_COUNT] = { "reduce",   "reduce_scatter", "reduce_scatterv",
                                                "gather",   "scatter",        "allgatherv",
                                                "alltoall", "alltoallv",      "pingpong" };

#ifdef BENCH_MPI
typedef int bench_count_t; /* MPI's counts and displacements */
#else
typedef size_t bench_count_t;
#endif

struct bench_ctx {
#ifdef BENCH_MPI
    int *displs;      /* for counts */
    int *send_displs; /* for send_counts */
#else
    tnt_comm_t *comm;
#endif
    bench_count_t *counts;      /* per rank: allgatherv's, reduce_scatterv's, alltoallv's receive */
    bench_count_t *send_counts; /* alltoallv's send, per rank */
    int rank;
    int size;
    float *send;
    float *recv;
};

/* Fills counts (and send_counts) for op on a vector of bytes; see the
 * comment at the top for the v forms' shapes. */
static void shape_counts(struct bench_ctx *c, int op, size_t bytes)
{
    const size_t n = (size_t)c->size, block = bytes / n;
    if (op == OP_REDUCE_SCATTERV) { /* in float32 elements */
        size_t elems = bytes / 4, parts = n * (n + 1) / 2, given = 0;
        for (size_t r = 0; r < n; r++) {
            size_t k = r + 1 == n ? elems - given : elems * (r + 1) / parts;
            c->counts[r] = (bench_count_t)k;
            given += k;
        }
    } else if (op == OP_ALLTOALLV) { /* in bytes */
        size_t unit = bytes * 2 / (3 * n) / 4 * 4;
        unit = unit < 4 ? 4 : unit;
        for (size_t j = 0; j < n; j++) {
            c->send_counts[j] = (bench_count_t)(unit * (1 + (((size_t)c->rank + j) & 1)));
            c->counts[j] = (bench_count_t)(unit * (1 + (((size_t)c->rank + j) & 1)));
        }
    } else {
        for (size_t r = 0; r < n; r++) {
            c->counts[r] = (bench_count_t)block;
        }
    }
#ifdef BENCH_MPI
    int at = 0, send_at = 0;
    for (int r = 0; r < c->size; r++) {
        c->displs[r] = at;
        c->send_displs[r] = send_at;
        at += c->counts[r];
        send_at += c->send_counts[r];
    }
#endif
}

/* The pingpong's partner of this rank, or -1 for an odd last rank. */
static int pingpong_peer(const struct bench_ctx *c)
{
    int peer = c->rank ^ 1;
    return peer < c->size ? peer : -1;
}

/* One call of op on bytes (a multiple of 4 * size); pingpong: one round
 * trip. */
static int run_op(struct bench_ctx *c, int op, size_t bytes)
{
    size_t block = bytes / (size_t)c->size;
    int peer = pingpong_peer(c);
#ifdef BENCH_MPI
    switch (op) {
    case OP_REDUCE:
        return MPI_Reduce(c->send, c->recv, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, 0,
                          MPI_COMM_WORLD);
    case OP_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(c->send, c->recv, (int)(block / 4), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
    case OP_REDUCE_SCATTERV:
        return MPI_Reduce_scatter(c->send, c->recv, c->counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case OP_GATHER:
        return MPI_Gather(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE, 0,
                          MPI_COMM_WORLD);
    case OP_SCATTER:
        return MPI_Scatter(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE, 0,
                           MPI_COMM_WORLD);
    case OP_ALLGATHERV:
        return MPI_Allgatherv(c->send, (int)block, MPI_BYTE, c->recv, c->counts, c->displs,
                              MPI_BYTE, MPI_COMM_WORLD);
    case OP_ALLTOALL:
        return MPI_Alltoall(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE,
                            MPI_COMM_WORLD);
    case OP_ALLTOALLV:
        return MPI_Alltoallv(c->send, c->send_counts, c->send_displs, MPI_BYTE, c->recv, c->counts,
                             c->displs, MPI_BYTE, MPI_COMM_WORLD);
    default: /* OP_PINGPONG */
        if (peer < 0) {
            return 0;
        }
        if ((c->rank & 1) == 0) {
            int rc = BENCH_MPI_SEND(c->send, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
            return rc != MPI_SUCCESS ? rc
                                     : MPI_Recv(c->recv, (int)bytes, MPI_BYTE, peer, 7,
                                                MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        int rc =
            MPI_Recv(c->recv, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return rc != MPI_SUCCESS
                   ? rc
                   : BENCH_MPI_SEND(c->send, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
    }
#else
    switch (op) {
    case OP_REDUCE:
        return tnt_reduce(c->comm, c->send, c->recv, bytes / 4, TNT_FLOAT32, TNT_SUM, 0);
    case OP_REDUCE_SCATTER:
        return tnt_reduce_scatter(c->comm, c->send, c->recv, block / 4, TNT_FLOAT32, TNT_SUM);
    case OP_REDUCE_SCATTERV:
        return tnt_reduce_scatterv(c->comm, c->send, c->recv, c->counts, TNT_FLOAT32, TNT_SUM);
    case OP_GATHER:
        return tnt_gather(c->comm, c->send, c->recv, block, 0);
    case OP_SCATTER:
        return tnt_scatter(c->comm, c->send, c->recv, block, 0);
    case OP_ALLGATHERV:
        return tnt_allgatherv(c->comm, c->send, c->recv, c->counts);
    case OP_ALLTOALL:
        return tnt_alltoall(c->comm, c->send, c->recv, block);
    case OP_ALLTOALLV:
        return tnt_alltoallv(c->comm, c->send, c->send_counts, c->recv, c->counts);
    default: /* OP_PINGPONG */
        if (peer < 0) {
            return 0;
        }
        if ((c->rank & 1) == 0) {
            tnt_status_t st = tnt_send(c->comm, c->send, bytes, peer, 7);
            return st != TNT_OK ? (int)st : (int)tnt_recv(c->comm, c->recv, bytes, peer, 7, NULL);
        }
        tnt_status_t st = tnt_recv(c->comm, c->recv, bytes, peer, 7, NULL);
        return st != TNT_OK ? (int)st : (int)tnt_send(c->comm, c->send, bytes, peer, 7);
    }
#endif
}

static void sync_all(struct bench_ctx *c)
{
#ifdef BENCH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#else
    (void)tnt_barrier(c->comm);
#endif
}

static int agree_iterations(struct bench_ctx *c, int iters)
{
#ifdef BENCH_MPI
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
#else
    (void)tnt_broadcast(c->comm, &iters, sizeof(iters), 0);
#endif
    return iters;
}

/* The average of x over the ranks that took part (counted: 1). */
static double average_over_ranks(struct bench_ctx *c, double x, int counted)
{
    double mine[2] = { counted ? x : 0.0, counted ? 1.0 : 0.0 }, sum[2] = { 0, 0 };
#ifdef BENCH_MPI
    MPI_Allreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)tnt_allreduce(c->comm, mine, sum, 2, TNT_FLOAT64, TNT_SUM);
#endif
    return sum[1] > 0 ? sum[0] / sum[1] : 0.0;
}

static double max_over_ranks(struct bench_ctx *c, double x)
{
    double worst = 0;
#ifdef BENCH_MPI
    MPI_Allreduce(&x, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#else
    (void)tnt_allreduce(c->comm, &x, &worst, 1, TNT_FLOAT64, TNT_MAX);
#endif
    return worst;
}

/* Takes "--ops a,b" and "--isolated" out of argv (bench_parse knows
 * nothing of them); fills wanted[op]. Returns -1 on an unknown op name. */
static int take_ops(int *argc, char **argv, int wanted[OP_COUNT], int *isolated)
{
    const char *list = NULL;
    int out = 1;
    *isolated = 0;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--ops") == 0 && i + 1 < *argc) {
            list = argv[++i];
        } else if (strcmp(argv[i], "--isolated") == 0) {
            *isolated = 1;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    for (int op = 0; op < OP_COUNT; op++) {
        wanted[op] = list == NULL;
    }
    while (list != NULL && *list != '\0') {
        size_t len = strcspn(list, ",");
        int found = 0;
        for (int op = 0; op < OP_COUNT; op++) {
            if (strlen(op_names[op]) == len && strncmp(op_names[op], list, len) == 0) {
                wanted[op] = found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "collective_set_bench: unknown op '%.*s' in --ops; the ops are",
                    (int)len, list);
            for (int op = 0; op < OP_COUNT; op++) {
                fprintf(stderr, " %s", op_names[op]);
            }
            fprintf(stderr, "\n");
            return -1;
        }
        list += len + (list[len] == ',');
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_ctx c;
    struct bench_opts opts;
    int wanted[OP_COUNT];
    int isolated;
#ifdef BENCH_MPI
    const char *what = "mpi_collective_set_bench (OpenMPI)";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.size);
#else
    const char *what = "collective_set_bench (libtnt)";
    if (tnt_init(&c.comm) != TNT_OK) {
        fprintf(stderr, "collective_set_bench: tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    c.rank = tnt_rank(c.comm);
    c.size = tnt_size(c.comm);
#endif
    if (take_ops(&argc, argv, wanted, &isolated) != 0 || bench_parse(argc, argv, &opts) != 0) {
        return 2;
    }
    size_t max = opts.max_bytes;
    /* alltoallv's rows and pingpong's message may exceed max by a unit. */
    size_t buf_bytes = (max + 64) * (size_t)c.size;
    c.send = malloc(buf_bytes);
    c.recv = malloc(buf_bytes);
    c.counts = calloc((size_t)c.size, sizeof(*c.counts));
    c.send_counts = calloc((size_t)c.size, sizeof(*c.send_counts));
#ifdef BENCH_MPI
    c.displs = calloc((size_t)c.size, sizeof(*c.displs));
    c.send_displs = calloc((size_t)c.size, sizeof(*c.send_displs));
    if (c.displs == NULL || c.send_displs == NULL) {
        fprintf(stderr, "collective_set_bench: out of memory\n");
        return 1;
    }
#endif
    if (c.send == NULL || c.recv == NULL || c.counts == NULL || c.send_counts == NULL) {
        fprintf(stderr, "collective_set_bench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < buf_bytes / 4; i++) {
        c.send[i] = 1e-3f;
    }
    if (c.rank == 0) {
        printf("# %s, %d ranks%s\n# %-15s %-12s %14s %14s%s\n", what, c.size,
               isolated ? ", isolated calls (a barrier before each, only the call timed)" : "",
               "op", "size(B)", "avg_lat(us)", "busbw(GB/s)", isolated ? "    max_lat(us)" : "");
    }
    for (int op = 0; op < OP_COUNT; op++) {
        if (!wanted[op]) {
            continue;
        }
        for (size_t bytes = opts.min_bytes; bytes <= max; bytes *= 4) {
            /* Whole float blocks per rank. */
            size_t unit = 4 * (size_t)c.size;
            size_t b = (bytes + unit - 1) / unit * unit;
            if (op == OP_PINGPONG) {
                b = bytes;
            }
            shape_counts(&c, op, b);
            int warmup = b >= (64u << 20) ? 3 : BENCH_WARMUP;
            double w0 = bench_now();
            for (int i = 0; i < warmup; i++) {
                if (run_op(&c, op, b) != 0) {
                    fprintf(stderr, "collective_set_bench: %s of %zu B failed\n", op_names[op], b);
                    return 1;
                }
            }
            int iters =
                agree_iterations(&c, bench_iterations(&opts, b, (bench_now() - w0) / warmup));
            double per_call = 0;
            if (isolated) {
                for (int i = 0; i < iters; i++) {
                    sync_all(&c);
                    double t0 = bench_now();
                    (void)run_op(&c, op, b);
                    per_call += bench_now() - t0;
                }
                per_call /= iters;
            } else {
                sync_all(&c);
                double t0 = bench_now();
                for (int i = 0; i < iters; i++) {
                    (void)run_op(&c, op, b);
                }
                per_call = (bench_now() - t0) / iters;
            }
            int counted = 1;
            if (op == OP_PINGPONG) {
                per_call /= 2; /* one way */
                counted = pingpong_peer(&c) >= 0;
            }
            double avg = average_over_ranks(&c, per_call, counted);
            double worst = isolated ? max_over_ranks(&c, counted ? per_call : 0.0) : 0.0;
            if (c.rank == 0) {
                double moved = op == OP_PINGPONG ? (double)b : (double)b * (c.size - 1) / c.size;
                double busbw = moved / avg / 1e9;
                printf("  %-15s %-12zu %14.2f %14.3f", op_names[op], b, avg * 1e6, busbw);
                if (isolated) {
                    printf(" %14.2f", worst * 1e6);
                }
                printf("\n");
                fflush(stdout);
            }
        }
    }
    free(c.send);
    free(c.recv);
    free(c.counts);
    free(c.send_counts);
#ifdef BENCH_MPI
    free(c.displs);
    free(c.send_displs);
    MPI_Finalize();
#else
    tnt_finalize(c.comm);
#endif
    return 0;
}
