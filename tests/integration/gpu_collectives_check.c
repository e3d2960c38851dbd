/*
 * Device collectives on real GPUs (label gpu; skipped where nvidia-smi
 * finds none): every dtype x op, in place and out of place, counts from 1
 * to past several host-staging chunks, exact values (collectives_values.h)
 * and bitwise-identical results on every rank; broadcast from every root;
 * allgather; with --large one 256 MiB float32 allreduce. Each rank uses its
 * current CUDA device (CUDA_VISIBLE_DEVICES from the launcher or the plugin;
 * ranks may share one GPU with TNT_GPU_TRANSPORT=host).
 *
 *   gpu_collectives_check [--large] [--expect nccl|host]
 */
#include "gpu_check.h"

#include "collectives_values.h"

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static void same_everywhere(tnt_comm_t *comm, const void *host, size_t bytes, const char *what)
{
    uint64_t mine = fnv(host, bytes);
    uint64_t *all = malloc((size_t)size * sizeof(*all));
    if (tnt_allgather(comm, &mine, all, sizeof(mine)) != TNT_OK) {
        fail("hash allgather", TNT_ERR_TRANSPORT);
    }
    for (int r = 0; r < size; r++) {
        if (all[r] != all[0]) {
            fprintf(stderr, "rank %d: FAIL %s: rank %d's result differs from rank 0's\n", rank,
                    what, r);
            failures++;
            break;
        }
    }
    free(all);
}

static void check_allreduce(tnt_comm_t *comm, tnt_gpu_transport_t path, tnt_dtype_t dt, tnt_op_t op,
                            size_t count, int in_place, uint64_t seed)
{
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    void *host = malloc(bytes ? bytes : 1);
    void *dsend = NULL, *drecv = NULL;
    char what[128];
    snprintf(what, sizeof(what), "allreduce dtype %d op %d count %zu %s", (int)dt, (int)op, count,
             in_place ? "in place" : "out of place");

    for (size_t i = 0; i < count; i++) {
        cv_store(dt, host, i, cv_value(op, size, seed, rank, i));
    }
    CUDA_OK(cudaMalloc(&dsend, bytes ? bytes : 1));
    drecv = dsend;
    if (!in_place) {
        CUDA_OK(cudaMalloc(&drecv, bytes ? bytes : 1));
    }
    CUDA_OK(cudaMemcpyAsync(dsend, host, bytes, cudaMemcpyHostToDevice, stream));
    tnt_status_t status = tnt_allreduce_device(comm, dsend, drecv, count, dt, op, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        CUDA_OK(cudaMemcpy(host, drecv, bytes, cudaMemcpyDeviceToHost));
        /* NCCL averages floats by pre-multiplying with 1/size, which is not
         * exact for sizes that are not powers of two. */
        int approx =
            path == TNT_GPU_TRANSPORT_NCCL && op == TNT_AVG && dt != TNT_INT32 && dt != TNT_INT64;
        for (size_t i = 0; i < count; i++) {
            double want = cv_expected(dt, op, size, seed, i), got = cv_load(dt, host, i);
            double tol = approx ? 1e-2 * (want < 0 ? -want : want) + 1e-2 : 0.0;
            if (got - want > tol || want - got > tol) {
                fprintf(stderr, "rank %d: FAIL %s: element %zu is %g, expected %g\n", rank, what, i,
                        got, want);
                failures++;
                break;
            }
        }
        same_everywhere(comm, host, bytes, what);
    }
    if (!in_place) {
        cudaFree(drecv);
    }
    cudaFree(dsend);
    free(host);
}

static void check_broadcast(tnt_comm_t *comm, size_t bytes, int root)
{
    unsigned char *host = malloc(bytes);
    void *dev;
    char what[96];
    snprintf(what, sizeof(what), "broadcast %zu bytes from %d", bytes, root);
    for (size_t i = 0; i < bytes; i++) {
        host[i] = (unsigned char)(rank == root ? cv_mix(i) : 0xee);
    }
    CUDA_OK(cudaMalloc(&dev, bytes));
    CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
    tnt_status_t status = tnt_broadcast_device(comm, dev, bytes, root, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        CUDA_OK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < bytes; i++) {
            if (host[i] != (unsigned char)cv_mix(i)) {
                fprintf(stderr, "rank %d: FAIL %s: byte %zu\n", rank, what, i);
                failures++;
                break;
            }
        }
    }
    cudaFree(dev);
    free(host);
}

static void check_allgather(tnt_comm_t *comm, size_t per_rank, int in_place)
{
    size_t total = per_rank * (size_t)size;
    unsigned char *host = malloc(total);
    void *dsend, *drecv;
    char what[96];
    snprintf(what, sizeof(what), "allgather %zu bytes per rank%s", per_rank,
             in_place ? " in place" : "");
    for (size_t i = 0; i < per_rank; i++) {
        host[i] = (unsigned char)cv_mix((uint64_t)rank * 1000003u + i);
    }
    CUDA_OK(cudaMalloc(&drecv, total));
    dsend = in_place ? (char *)drecv + (size_t)rank * per_rank : NULL;
    if (!in_place) {
        CUDA_OK(cudaMalloc(&dsend, per_rank));
    }
    CUDA_OK(cudaMemcpyAsync(dsend, host, per_rank, cudaMemcpyHostToDevice, stream));
    tnt_status_t status = tnt_allgather_device(comm, dsend, drecv, per_rank, stream);
    if (status == TNT_OK) {
        status = tnt_device_synchronize(comm, stream);
    }
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        CUDA_OK(cudaMemcpy(host, drecv, total, cudaMemcpyDeviceToHost));
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < per_rank; i++) {
                if (host[(size_t)r * per_rank + i] !=
                    (unsigned char)cv_mix((uint64_t)r * 1000003u + i)) {
                    fprintf(stderr, "rank %d: FAIL %s: rank %d byte %zu\n", rank, what, r, i);
                    failures++;
                    r = size;
                    break;
                }
            }
        }
    }
    if (!in_place) {
        cudaFree(dsend);
    }
    cudaFree(drecv);
    free(host);
}

int main(int argc, char **argv)
{
    int large = 0;
    for (int i = 1; i < argc; i++) {
        large |= strcmp(argv[i], "--large") == 0;
    }
    /* The stream is non-blocking, as torch's side streams are: the inputs
     * are copied in on it (cudaMemcpyAsync), because a cudaMemcpy on the
     * legacy default stream is not ordered before work on it (a pageable
     * copy may still be in flight when cudaMemcpy returns). */
    tnt_comm_t *comm = gpu_check_open(argc, argv, "gpu_collectives_check");

    /* Counts reach past several 64 KiB chunks (run with TNT_GPU_STAGING_KB=64). */
    static const size_t counts[] = { 1, 3, 97, 4099, 65537, 300007 };
    uint64_t seed = 1;
    for (int dt = 0; dt < TNT_DTYPE_LAST; dt++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (int in_place = 0; in_place < 2; in_place++) {
                    check_allreduce(comm, transport, (tnt_dtype_t)dt, (tnt_op_t)op, counts[c],
                                    in_place, seed++);
                }
            }
        }
    }
    static const size_t bsizes[] = { 1, 1000, 100003, 2000003 };
    for (size_t b = 0; b < sizeof(bsizes) / sizeof(bsizes[0]); b++) {
        for (int root = 0; root < size; root++) {
            check_broadcast(comm, bsizes[b], root);
        }
    }
    static const size_t gsizes[] = { 1, 4099, 300007 };
    for (size_t g = 0; g < sizeof(gsizes) / sizeof(gsizes[0]); g++) {
        check_allgather(comm, gsizes[g], 0);
        check_allgather(comm, gsizes[g], 1);
    }
    if (large) {
        /* 256 MiB of float32. */
        check_allreduce(comm, transport, TNT_FLOAT32, TNT_SUM, (size_t)64 << 20, 1, 4242);
    }
    return gpu_check_close(comm);
}
