/*
 * The collective set on device buffers (tnt_cuda.h): tnt_reduce_device,
 * tnt_reduce_scatter_device and tnt_reduce_scatterv_device against a
 * serial reference (collectives_values.h: exact in every dtype), in place
 * and out of place, every root, counts past several 64 KiB staging chunks,
 * a zero-length block; then bad input: a root out of range on one rank,
 * counts that differ across ranks, a host pointer on one rank, one rank
 * calling the host form. Each must fail on every rank (INVALID_ARG or
 * MISMATCH naming the rank and values) and leave the communicator usable.
 * Runs against the GPU test double (label gpu-double) and real GPUs
 * (label gpu), on whichever transport TNT_GPU_TRANSPORT picks.
 *
 *   gpu_composed_check [--expect nccl|host]
 */
#include "gpu_check.h"

#include "collectives_values.h"

/* Element i of host against the serial reduction of every rank's element
 * first + i; NCCL's float average pre-multiplies by 1/size (not exact). */
static int check_values(const char *what, tnt_dtype_t dt, tnt_op_t op, uint64_t seed,
                        const void *host, size_t first, size_t n)
{
    int approx =
        transport == TNT_GPU_TRANSPORT_NCCL && op == TNT_AVG && dt != TNT_INT32 && dt != TNT_INT64;
    for (size_t i = 0; i < n; i++) {
        double want = cv_expected(dt, op, size, seed, first + i), got = cv_load(dt, host, i);
        double tol = approx ? 1e-2 * (want < 0 ? -want : want) + 1e-2 : 0.0;
        if (got - want > tol || want - got > tol) {
            fprintf(stderr, "rank %d: FAIL %s: element %zu is %g, expected %g\n", rank, what,
                    first + i, got, want);
            failures++;
            return 0;
        }
    }
    return 1;
}

/* Copies this rank's inputs (elements 0 .. count-1) into a new device buffer. */
static void *dev_inputs(tnt_dtype_t dt, tnt_op_t op, uint64_t seed, size_t count)
{
    size_t bytes = count * tnt_dtype_size(dt);
    void *host = malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < count; i++) {
        cv_store(dt, host, i, cv_value(op, size, seed, rank, i));
    }
    void *dev = dev_alloc(bytes);
    CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaStreamSynchronize(stream)); /* host is freed below */
    free(host);
    return dev;
}

static void check_reduce(tnt_comm_t *comm, tnt_dtype_t dt, tnt_op_t op, size_t count, int root,
                         int in_place, uint64_t seed)
{
    size_t bytes = count * tnt_dtype_size(dt);
    char what[128];
    snprintf(what, sizeof(what), "reduce dtype %d op %d count %zu root %d %s", (int)dt, (int)op,
             count, root, in_place ? "in place" : "out of place");
    void *dsend = dev_inputs(dt, op, seed, count);
    /* Elsewhere than the root recvbuf may be NULL: pass NULL there. */
    void *drecv = rank != root ? NULL : in_place ? dsend : dev_alloc(bytes);
    tnt_status_t status = tnt_reduce_device(comm, dsend, drecv, count, dt, op, root, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    if (status != TNT_OK) {
        fail(what, status);
    } else if (rank == root) {
        void *host = malloc(bytes ? bytes : 1);
        CUDA_OK(cudaMemcpy(host, drecv, bytes, cudaMemcpyDeviceToHost));
        check_values(what, dt, op, seed, host, 0, count);
        free(host);
    }
    if (drecv != NULL && drecv != dsend) {
        cudaFree(drecv);
    }
    cudaFree(dsend);
}

/* counts: elements per rank; equal selects tnt_reduce_scatter_device
 * (counts all alike) over the v form. */
static void check_reduce_scatter(tnt_comm_t *comm, tnt_dtype_t dt, tnt_op_t op,
                                 const size_t *counts, int equal, int in_place, uint64_t seed)
{
    size_t es = tnt_dtype_size(dt), total = 0, first = 0;
    for (int r = 0; r < size; r++) {
        first += r < rank ? counts[r] : 0;
        total += counts[r];
    }
    size_t mine = counts[rank];
    char what[160];
    snprintf(what, sizeof(what), "reduce_scatter%s dtype %d op %d, %zu of %zu elements here, %s",
             equal ? "" : "v", (int)dt, (int)op, mine, total,
             in_place ? "in place" : "out of place");
    char *dsend = dev_inputs(dt, op, seed, total);
    char *drecv = in_place ? dsend + first * es : dev_alloc(mine * es);
    tnt_status_t status =
        equal ? tnt_reduce_scatter_device(comm, dsend, drecv, counts[0], dt, op, stream)
              : tnt_reduce_scatterv_device(comm, dsend, drecv, counts, dt, op, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        void *host = malloc(mine * es + 1);
        CUDA_OK(cudaMemcpy(host, drecv, mine * es, cudaMemcpyDeviceToHost));
        check_values(what, dt, op, seed, host, first, mine);
        free(host);
    }
    if (!in_place) {
        cudaFree(drecv);
    }
    cudaFree(dsend);
}

static void check_bad_inputs(tnt_comm_t *comm)
{
    const size_t n = 64;
    void *dsend = dev_inputs(TNT_FLOAT32, TNT_SUM, 7, n * (size_t)size);
    void *drecv = dev_alloc(n * (size_t)size * 4);
    int last = size - 1;
    char needle[128], last_rank[32];
    snprintf(last_rank, sizeof(last_rank), "rank %d", last);

    /* A root out of range on the last rank only: every rank fails. */
    tnt_status_t status = tnt_reduce_device(comm, dsend, drecv, n, TNT_FLOAT32, TNT_SUM,
                                            rank == last ? size : 0, stream);
    expect_status("root out of range on the last rank", status, TNT_ERR_INVALID_ARG,
                  rank == last ? "root" : last_rank);

    if (size > 1) {
        /* Counts that differ: the last rank passes one element more. */
        status = tnt_reduce_device(comm, dsend, drecv, rank == last ? n + 1 : n, TNT_FLOAT32,
                                   TNT_SUM, 0, stream);
        snprintf(needle, sizeof(needle), "rank %d passes count %zu, rank 0 passes %zu", last, n + 1,
                 n);
        expect_status("reduce counts differ", status, TNT_ERR_MISMATCH, needle);

        status = tnt_reduce_scatter_device(comm, dsend, drecv, rank == last ? n / 2 : n,
                                           TNT_FLOAT32, TNT_SUM, stream);
        expect_status("reduce_scatter counts differ", status, TNT_ERR_MISMATCH, "ranks disagree");

        size_t *counts = malloc((size_t)size * sizeof(*counts));
        for (int r = 0; r < size; r++) {
            counts[r] = r == 0 && rank == last ? n - 1 : n;
        }
        status =
            tnt_reduce_scatterv_device(comm, dsend, drecv, counts, TNT_FLOAT32, TNT_SUM, stream);
        expect_status("reduce_scatterv counts differ", status, TNT_ERR_MISMATCH, "per-rank counts");
        free(counts);

        /* Different ops. */
        status = tnt_reduce_scatter_device(comm, dsend, drecv, n, TNT_FLOAT32,
                                           rank == last ? TNT_MAX : TNT_SUM, stream);
        expect_status("reduce_scatter ops differ", status, TNT_ERR_MISMATCH, "op");

        /* One rank calls the host form. */
        float *host = calloc(n, sizeof(float));
        status = rank == last
                     ? tnt_reduce(comm, host, host, n, TNT_FLOAT32, TNT_SUM, last)
                     : tnt_reduce_device(comm, dsend, drecv, n, TNT_FLOAT32, TNT_SUM, last, stream);
        expect_status("host form on the last rank", status, TNT_ERR_MISMATCH, "form");

        /* A host buffer passed to the device call on the last rank. */
        status = tnt_reduce_device(comm, rank == last ? (void *)host : dsend, drecv, n, TNT_FLOAT32,
                                   TNT_SUM, 0, stream);
        expect_status("host sendbuf on the last rank", status, TNT_ERR_INVALID_ARG,
                      rank == last ? "host memory" : last_rank);
        free(host);
    }

    /* Overlapping buffers that are not the in-place form. */
    status =
        tnt_reduce_scatter_device(comm, dsend, (char *)dsend + 4, n, TNT_FLOAT32, TNT_SUM, stream);
    expect_status("overlapping sendbuf and recvbuf", status, TNT_ERR_INVALID_ARG, NULL);

    /* After all that, the communicator still works. */
    status = tnt_reduce_device(comm, dsend, drecv, n, TNT_FLOAT32, TNT_SUM, 0, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    expect_status("a good call afterwards", status, TNT_OK, NULL);
    cudaFree(drecv);
    cudaFree(dsend);
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = gpu_check_open(argc, argv, "gpu_composed_check");
    tnt_status_t status;

    size_t *counts = malloc((size_t)size * sizeof(*counts));
    uint64_t seed = 1;
    /* Every dtype and op on a small count; a few pairs past several 64 KiB
     * chunks (run with TNT_GPU_STAGING_KB=64) and past the double's 1 MiB
     * NCCL slot. */
    struct {
        tnt_dtype_t dt;
        tnt_op_t op;
    } big[] = { { TNT_FLOAT32, TNT_SUM },
                { TNT_BFLOAT16, TNT_AVG },
                { TNT_INT64, TNT_MAX },
                { TNT_FLOAT16, TNT_PROD },
                { TNT_INT32, TNT_AVG } };
    for (int dt = 0; dt < TNT_DTYPE_LAST; dt++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_reduce(comm, (tnt_dtype_t)dt, (tnt_op_t)op, 97, (int)(seed % size), in_place,
                             seed);
                seed++;
                for (int r = 0; r < size; r++) {
                    counts[r] = 33;
                }
                check_reduce_scatter(comm, (tnt_dtype_t)dt, (tnt_op_t)op, counts, 1, in_place,
                                     seed++);
                for (int r = 0; r < size; r++) {
                    counts[r] = r == 1 ? 0 : 5 + 3 * (size_t)r; /* rank 1 gets nothing */
                }
                check_reduce_scatter(comm, (tnt_dtype_t)dt, (tnt_op_t)op, counts, 0, in_place,
                                     seed++);
            }
        }
    }
    for (size_t b = 0; b < sizeof(big) / sizeof(big[0]); b++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int root = 0; root < size; root++) {
                check_reduce(comm, big[b].dt, big[b].op, 300007, root, in_place, seed++);
            }
            for (int r = 0; r < size; r++) {
                counts[r] = 65537;
            }
            check_reduce_scatter(comm, big[b].dt, big[b].op, counts, 1, in_place, seed++);
            for (int r = 0; r < size; r++) {
                counts[r] = 40009 * (size_t)(r + 1) + (r == 2 ? 150000 : 0);
            }
            check_reduce_scatter(comm, big[b].dt, big[b].op, counts, 0, in_place, seed++);
        }
    }
    /* Zero elements: nothing moves, every rank still agrees. */
    status = tnt_reduce_device(comm, NULL, NULL, 0, TNT_FLOAT32, TNT_SUM, 0, stream);
    expect_status("reduce of 0 elements", status, TNT_OK, NULL);
    free(counts);

    check_bad_inputs(comm);

    return gpu_check_close(comm);
}
