/*
 * The same measurement as allreduce_bench.c with MPI_Allreduce (in place),
 * for the comparison in docs/benchmarks.md:
 *   mpirun --bind-to core -np 2 build/bin/mpi_allreduce_bench [--max BYTES]
 */
#include <mpi.h>

#include "allreduce_bench_common.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct bench_opts opts;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (bench_parse(argc, argv, &opts) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *buf = malloc(opts.max_bytes);
    if (buf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < opts.max_bytes / 4; i++) {
        buf[i] = 1e-3f;
    }
    if (rank == 0) {
        bench_header("mpi_allreduce_bench (MPI_Allreduce)", size);
    }

    for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= 4) {
        int count = (int)(bytes / 4);
        int warmup = bytes >= (64u << 20) ? 3 : BENCH_WARMUP;
        double w0 = bench_now();
        for (int i = 0; i < warmup; i++) {
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        int iters = bench_iterations(&opts, bytes, (bench_now() - w0) / warmup);
        MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        for (int i = 0; i < iters; i++) {
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double avg = (bench_now() - t0) / iters, sum = 0;
        MPI_Allreduce(&avg, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            bench_row(bytes, sum / size, size);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
