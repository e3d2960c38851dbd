/*
 * The collective set (reduce, reduce_scatter, gather, scatter, allgatherv,
 * alltoall) timed the way allreduce_bench.c times allreduce
 * (allreduce_bench_common.h: warm-up, iterations scaled by size, a barrier
 * before each timed loop, the per-rank average latency averaged over the
 * ranks). Built twice from this one file, so both measure identically:
 *   collective_set_bench       libtnt (run under tarantella or srun)
 *   mpi_collective_set_bench   OpenMPI's MPI_Reduce, MPI_Reduce_scatter_block, ...
 * A size is the bytes of the whole vector: reduce's count, reduce_scatter's
 * input, the root's buffer of gather/scatter, the output of allgatherv,
 * and each rank's send buffer of alltoall; float32 sum where it reduces.
 *   # op  size(B)  avg_lat(us)  busbw(GB/s)
 * busbw follows nccl-tests: reduce and gather/scatter move size (n-1)/n
 * per rank through the root, reduce_scatter and allgather size (n-1)/n,
 * alltoall size (n-1)/n. Not a test: its ctest entry is a smoke run.
 */
#ifdef BENCH_MPI
#include <mpi.h>
#else
#include <tnt/tnt.h>
#endif

#include "allreduce_bench_common.h"

enum { OP_REDUCE, OP_REDUCE_SCATTER, OP_GATHER, OP_SCATTER, OP_ALLGATHERV, OP_ALLTOALL, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "reduce",  "reduce_scatter", "gather",
                                                "scatter", "allgatherv",     "alltoall" };

struct bench_ctx {
#ifdef BENCH_MPI
    int *counts; /* MPI's per-rank counts and displacements */
    int *displs;
#else
    tnt_comm_t *comm;
    size_t *counts;
#endif
    int rank;
    int size;
    float *send;
    float *recv;
};

/* One call of op on bytes (a multiple of 4 * size). */
static int run_op(struct bench_ctx *c, int op, size_t bytes)
{
    size_t block = bytes / (size_t)c->size;
#ifdef BENCH_MPI
    for (int r = 0; r < c->size; r++) {
        c->counts[r] = (int)block;
        c->displs[r] = (int)(block * (size_t)r);
    }
    switch (op) {
    case OP_REDUCE:
        return MPI_Reduce(c->send, c->recv, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, 0,
                          MPI_COMM_WORLD);
    case OP_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(c->send, c->recv, (int)(block / 4), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
    case OP_GATHER:
        return MPI_Gather(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE, 0,
                          MPI_COMM_WORLD);
    case OP_SCATTER:
        return MPI_Scatter(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE, 0,
                           MPI_COMM_WORLD);
    case OP_ALLGATHERV:
        return MPI_Allgatherv(c->send, (int)block, MPI_BYTE, c->recv, c->counts, c->displs,
                              MPI_BYTE, MPI_COMM_WORLD);
    default:
        return MPI_Alltoall(c->send, (int)block, MPI_BYTE, c->recv, (int)block, MPI_BYTE,
                            MPI_COMM_WORLD);
    }
#else
    for (int r = 0; r < c->size; r++) {
        c->counts[r] = block;
    }
    switch (op) {
    case OP_REDUCE:
        return tnt_reduce(c->comm, c->send, c->recv, bytes / 4, TNT_FLOAT32, TNT_SUM, 0);
    case OP_REDUCE_SCATTER:
        return tnt_reduce_scatter(c->comm, c->send, c->recv, block / 4, TNT_FLOAT32, TNT_SUM);
    case OP_GATHER:
        return tnt_gather(c->comm, c->send, c->recv, block, 0);
    case OP_SCATTER:
        return tnt_scatter(c->comm, c->send, c->recv, block, 0);
    case OP_ALLGATHERV:
        return tnt_allgatherv(c->comm, c->send, c->recv, c->counts);
    default:
        return tnt_alltoall(c->comm, c->send, c->recv, block);
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

static double average_over_ranks(struct bench_ctx *c, double x)
{
    double sum = 0;
#ifdef BENCH_MPI
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)tnt_allreduce(c->comm, &x, &sum, 1, TNT_FLOAT64, TNT_SUM);
#endif
    return sum / c->size;
}

int main(int argc, char **argv)
{
    struct bench_ctx c;
    struct bench_opts opts;
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
    if (bench_parse(argc, argv, &opts) != 0) {
        return 2;
    }
    size_t max = opts.max_bytes;
    c.send = malloc(max * (size_t)c.size);
    c.recv = malloc(max * (size_t)c.size);
    c.counts = calloc((size_t)c.size, sizeof(*c.counts));
#ifdef BENCH_MPI
    c.displs = calloc((size_t)c.size, sizeof(*c.displs));
#endif
    if (c.send == NULL || c.recv == NULL || c.counts == NULL) {
        fprintf(stderr, "collective_set_bench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < max * (size_t)c.size / 4; i++) {
        c.send[i] = 1e-3f;
    }
    if (c.rank == 0) {
        printf("# %s, %d ranks\n# %-15s %-12s %14s %14s\n", what, c.size, "op", "size(B)",
               "avg_lat(us)", "busbw(GB/s)");
    }
    for (int op = 0; op < OP_COUNT; op++) {
        for (size_t bytes = opts.min_bytes; bytes <= max; bytes *= 4) {
            /* Whole float blocks per rank. */
            size_t unit = 4 * (size_t)c.size;
            size_t b = (bytes + unit - 1) / unit * unit;
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
            sync_all(&c);
            double t0 = bench_now();
            for (int i = 0; i < iters; i++) {
                (void)run_op(&c, op, b);
            }
            double avg = average_over_ranks(&c, (bench_now() - t0) / iters);
            if (c.rank == 0) {
                double busbw = (double)b * (c.size - 1) / c.size / avg / 1e9;
                printf("  %-15s %-12zu %14.2f %14.3f\n", op_names[op], b, avg * 1e6, busbw);
                fflush(stdout);
            }
        }
    }
    free(c.send);
    free(c.recv);
    free(c.counts);
#ifdef BENCH_MPI
    free(c.displs);
    MPI_Finalize();
#else
    tnt_finalize(c.comm);
#endif
    return 0;
}
