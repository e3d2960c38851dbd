/*
 * The same measurement as multinode_allreduce_bench.c with OpenMPI's
 * MPI_Allreduce (in place, float32 SUM), for the comparison in
 * docs/multinode.md. Launched by tests/bench/multinode_allreduce_bench.sh with
 * mpirun --mca pml ucx -x UCX_TLS=tcp,self so its traffic takes the same UCX
 * TCP path as libtnt's inter-node traffic.
 */
#include <mpi.h>

#include "multinode_allreduce_bench_common.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *label = "?";
    double scale = 1.0;
    size_t min_bytes = 0, max_bytes = (size_t)64 << 20;
    int rank, size;
    float *buf;

    MPI_Init(&argc, &argv);
    /* Anything else is left to mpirun's own arguments, as before. */
    (void)mnb_parse_args(argc, argv, &label, &scale, &min_bytes, &max_bytes);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = malloc(max_bytes);
    if (buf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < max_bytes / 4; i++) {
        buf[i] = 1.0f / (float)(1 + i % 13);
    }
    for (size_t k = 0; k < MNB_NUM_SIZES && mnb_sizes[k] <= max_bytes; k++) {
        if (mnb_sizes[k] < min_bytes) {
            continue;
        }
        int count = (int)(mnb_sizes[k] / 4);
        int iters = mnb_iters(mnb_sizes[k], scale);
        double t0, dt, worst;

        for (int w = 0; w < 3; w++) {
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        for (int i = 0; i < count; i++) {
            buf[i] = 1e-3f;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = mnb_now();
        for (int it = 0; it < iters; it++) {
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        dt = (mnb_now() - t0) / iters;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            mnb_print("openmpi", "MPI_Allreduce", label, size, mnb_sizes[k], worst);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
