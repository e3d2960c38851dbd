/*
 * The rest of the collective set on device buffers (tnt_cuda.h):
 * tnt_gather_device, tnt_scatter_device, tnt_allgatherv_device,
 * tnt_alltoall_device, tnt_alltoallv_device, and the device messages
 * tnt_send_device / tnt_recv_device. Every byte is checked against what a
 * serial program would hold (byte i of what rank s sends rank d is
 * pat(s, d, i)): every root, in place where the call has an in-place form,
 * sizes past several 64 KiB staging chunks and the double's 64 KiB
 * channel, empty blocks; messages: a partner exchange, shorter messages
 * than the buffer, any-source receives, a message too long for the
 * receive. Then bad input: a root or peer out of range, sizes that differ
 * across ranks, a pair that disagrees, a host pointer, one rank calling the
 * host form; the collectives must fail on every rank (INVALID_ARG or
 * MISMATCH naming the rank and values) and leave the communicator usable.
 * Runs against the GPU test double (label gpu-double) and real GPUs
 * (label gpu), on whichever transport TNT_GPU_TRANSPORT picks.
 *
 *   gpu_exchange_check [--expect nccl|host]
 */
#include "gpu_check.h"

#include <stdint.h>

static unsigned char pat(int src, int dst, size_t i, unsigned seed)
{
    return (unsigned char)(src * 131 + dst * 17 + i * 7 + (i >> 9) + seed * 29);
}

/* A device buffer holding n bytes of pat(src, dst, .) */
static void fill(void *dev, size_t n, int src, int dst, unsigned seed)
{
    unsigned char *host = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        host[i] = pat(src, dst, i, seed);
    }
    CUDA_OK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaStreamSynchronize(stream)); /* host is freed below */
    free(host);
}

/* n bytes of dev + off must be pat(src, dst, .); 0 and a message if not. */
static int expect_bytes(const char *what, const void *dev, size_t n, int src, int dst,
                        unsigned seed)
{
    unsigned char *host = malloc(n ? n : 1);
    CUDA_OK(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        if (host[i] != pat(src, dst, i, seed)) {
            fprintf(stderr, "rank %d: FAIL %s: byte %zu from rank %d is %u, expected %u\n", rank,
                    what, i, src, host[i], pat(src, dst, i, seed));
            failures++;
            free(host);
            return 0;
        }
    }
    free(host);
    return 1;
}

static tnt_status_t synced(tnt_comm_t *comm, tnt_status_t status)
{
    return status == TNT_OK ? tnt_device_synchronize(comm, stream) : status;
}

static void check_gather(tnt_comm_t *comm, size_t b, int root, int in_place, unsigned seed)
{
    char what[128];
    snprintf(what, sizeof(what), "gather %zu bytes per rank root %d %s", b, root,
             in_place ? "in place" : "out of place");
    char *drecv = rank == root ? dev_alloc((size_t)size * b) : NULL;
    char *dsend = rank == root && in_place ? drecv + (size_t)root * b : dev_alloc(b);
    fill(dsend, b, rank, root, seed);
    tnt_status_t status = synced(comm, tnt_gather_device(comm, dsend, drecv, b, root, stream));
    if (status != TNT_OK) {
        fail(what, status);
    } else if (rank == root) {
        for (int r = 0; r < size; r++) {
            if (!expect_bytes(what, drecv + (size_t)r * b, b, r, root, seed)) {
                break;
            }
        }
    }
    if (!(rank == root && in_place)) {
        cudaFree(dsend);
    }
    cudaFree(drecv);
}

static void check_scatter(tnt_comm_t *comm, size_t b, int root, int in_place, unsigned seed)
{
    char what[128];
    snprintf(what, sizeof(what), "scatter %zu bytes per rank root %d %s", b, root,
             in_place ? "in place" : "out of place");
    char *dsend = rank == root ? dev_alloc((size_t)size * b) : NULL;
    for (int j = 0; rank == root && j < size; j++) {
        fill(dsend + (size_t)j * b, b, root, j, seed);
    }
    char *drecv = rank == root && in_place ? dsend + (size_t)root * b : dev_alloc(b);
    tnt_status_t status = synced(comm, tnt_scatter_device(comm, dsend, drecv, b, root, stream));
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        expect_bytes(what, drecv, b, root, rank, seed);
    }
    if (!(rank == root && in_place)) {
        cudaFree(drecv);
    }
    cudaFree(dsend);
}

static void check_allgatherv(tnt_comm_t *comm, const size_t *bytes, unsigned seed)
{
    size_t total = 0;
    for (int r = 0; r < size; r++) {
        total += bytes[r];
    }
    char what[128];
    snprintf(what, sizeof(what), "allgatherv %zu bytes here of %zu", bytes[rank], total);
    char *dsend = dev_alloc(bytes[rank]), *drecv = dev_alloc(total);
    fill(dsend, bytes[rank], rank, 0, seed);
    tnt_status_t status = synced(comm, tnt_allgatherv_device(comm, dsend, drecv, bytes, stream));
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        size_t at = 0;
        for (int r = 0; r < size && expect_bytes(what, drecv + at, bytes[r], r, 0, seed); r++) {
            at += bytes[r];
        }
    }
    cudaFree(dsend);
    cudaFree(drecv);
}

/* What rank s sends rank d in the alltoallv checks (some pairs empty). */
static size_t pair_bytes(int s, int d, size_t base)
{
    return (s * 3 + d * 5 + (int)base) % 7 == 0 ? 0 : base + (size_t)s * 101 + (size_t)d * 37;
}

/* equal: tnt_alltoall_device with base bytes per pair. */
static void check_alltoall(tnt_comm_t *comm, int equal, size_t base, unsigned seed)
{
    size_t *sendbytes = malloc((size_t)size * sizeof(size_t));
    size_t *recvbytes = malloc((size_t)size * sizeof(size_t));
    size_t stotal = 0, rtotal = 0;
    for (int j = 0; j < size; j++) {
        sendbytes[j] = equal ? base : pair_bytes(rank, j, base);
        recvbytes[j] = equal ? base : pair_bytes(j, rank, base);
        stotal += sendbytes[j];
        rtotal += recvbytes[j];
    }
    char what[128];
    snprintf(what, sizeof(what), "alltoall%s base %zu, %zu bytes out, %zu in", equal ? "" : "v",
             base, stotal, rtotal);
    char *dsend = dev_alloc(stotal), *drecv = dev_alloc(rtotal);
    size_t at = 0;
    for (int j = 0; j < size; j++) {
        fill(dsend + at, sendbytes[j], rank, j, seed);
        at += sendbytes[j];
    }
    tnt_status_t status =
        equal ? tnt_alltoall_device(comm, dsend, drecv, base, stream)
              : tnt_alltoallv_device(comm, dsend, sendbytes, drecv, recvbytes, stream);
    status = synced(comm, status);
    if (status != TNT_OK) {
        fail(what, status);
    } else {
        at = 0;
        for (int r = 0; r < size && expect_bytes(what, drecv + at, recvbytes[r], r, rank, seed);
             r++) {
            at += recvbytes[r];
        }
    }
    cudaFree(dsend);
    cudaFree(drecv);
    free(sendbytes);
    free(recvbytes);
}

/* Ranks 2k and 2k+1 exchange a message of n bytes each way (the even one
 * sends first); the receive buffer is spare bytes longer. */
static void check_partner(tnt_comm_t *comm, size_t n, size_t spare, unsigned seed)
{
    int partner = rank ^ 1;
    if (partner >= size) {
        return;
    }
    char what[128];
    snprintf(what, sizeof(what), "send/recv %zu bytes into %zu with rank %d", n, n + spare,
             partner);
    char *dsend = dev_alloc(n), *drecv = dev_alloc(n + spare);
    fill(dsend, n, rank, partner, seed);
    tnt_recv_info_t info = { -1, -1, 0 };
    tnt_status_t status = TNT_OK;
    for (int step = 0; step < 2 && status == TNT_OK; step++) {
        if ((step == 0) == (rank % 2 == 0)) {
            status = tnt_send_device(comm, dsend, n, partner, 42, stream);
        } else {
            status = tnt_recv_device(comm, drecv, n + spare, partner, 42, &info, stream);
        }
    }
    status = synced(comm, status);
    if (status != TNT_OK) {
        fail(what, status);
    } else if (info.source != partner || info.tag != 42 || info.bytes != n) {
        fprintf(stderr, "rank %d: FAIL %s: info says source %d tag %d %zu bytes\n", rank, what,
                info.source, info.tag, info.bytes);
        failures++;
    } else {
        expect_bytes(what, drecv, n, partner, rank, seed);
    }
    cudaFree(dsend);
    cudaFree(drecv);
}

/* Every other rank sends rank 0 one message; rank 0 takes them with
 * TNT_ANY_SOURCE in whatever order they come. */
static void check_any_source(tnt_comm_t *comm, unsigned seed)
{
    const size_t most = 70000 + 1000 * (size_t)size;
    char *dbuf = dev_alloc(most);
    tnt_status_t status = TNT_OK;
    if (rank != 0) {
        size_t n = 70000 + 1000 * (size_t)rank;
        fill(dbuf, n, rank, 0, seed);
        status = synced(comm, tnt_send_device(comm, dbuf, n, 0, 7, stream));
        if (status != TNT_OK) {
            fail("any-source: send to rank 0", status);
        }
    }
    int *seen = calloc((size_t)size, sizeof(int));
    for (int k = 1; rank == 0 && k < size; k++) {
        tnt_recv_info_t info;
        status = synced(comm, tnt_recv_device(comm, dbuf, most, TNT_ANY_SOURCE, 7, &info, stream));
        if (status != TNT_OK) {
            fail("any-source receive", status);
            break;
        }
        if (info.source < 1 || info.source >= size || seen[info.source] ||
            info.bytes != 70000 + 1000 * (size_t)info.source) {
            fprintf(stderr, "rank 0: FAIL any-source: source %d, %zu bytes\n", info.source,
                    info.bytes);
            failures++;
            break;
        }
        seen[info.source] = 1;
        expect_bytes("any-source receive", dbuf, info.bytes, info.source, 0, seed);
    }
    if (rank == 0 && size > 1) {
        printf("gpu_exchange_check: %d any-source receives: OK\n", size - 1);
    }
    free(seen);
    cudaFree(dbuf);
}

/* A message longer than the receive: the receiver fails with MISMATCH
 * naming both lengths, the sender succeeds (as tnt_send), and the pair
 * goes on working. */
static void check_too_long(tnt_comm_t *comm)
{
    int partner = rank ^ 1;
    if (partner >= size) {
        return;
    }
    char *dbuf = dev_alloc(2000);
    tnt_status_t status;
    if (rank % 2 == 0) {
        status = tnt_send_device(comm, dbuf, 2000, partner, 3, stream);
        expect_status("message longer than the receive: sender", status, TNT_OK, NULL);
    } else {
        status = tnt_recv_device(comm, dbuf, 1000, partner, 3, NULL, stream);
        if (status != TNT_ERR_MISMATCH || strstr(tnt_last_error(), "2000 bytes") == NULL) {
            fprintf(stderr, "rank %d: FAIL too long message: got %s (%s)\n", rank,
                    tnt_status_string(status), tnt_last_error());
            failures++;
        }
    }
    synced(comm, TNT_OK);
    cudaFree(dbuf);
    check_partner(comm, 100, 0, 99);
}

static void check_bad_inputs(tnt_comm_t *comm)
{
    const size_t b = 64;
    char *dsend = dev_alloc(b * (size_t)size), *drecv = dev_alloc(b * (size_t)size);
    int last = size - 1;
    char last_rank[32];
    snprintf(last_rank, sizeof(last_rank), "rank %d", last);
    size_t *counts = malloc((size_t)size * sizeof(size_t));
    size_t *counts2 = malloc((size_t)size * sizeof(size_t));

    tnt_status_t status = tnt_gather_device(comm, dsend, drecv, b, rank == last ? size : 0, stream);
    expect_status("gather root out of range on the last rank", status, TNT_ERR_INVALID_ARG,
                  rank == last ? "root" : last_rank);
    status = tnt_scatter_device(comm, dsend, drecv, b, rank == last ? -1 : 0, stream);
    expect_status("scatter root -1 on the last rank", status, TNT_ERR_INVALID_ARG,
                  rank == last ? "root -1" : last_rank);

    if (size > 1) {
        status = tnt_gather_device(comm, dsend, drecv, rank == last ? b / 2 : b, 0, stream);
        expect_status("gather sizes differ", status, TNT_ERR_MISMATCH, "passes count");
        status = tnt_alltoall_device(comm, dsend, drecv, rank == last ? b / 2 : b, stream);
        expect_status("alltoall sizes differ", status, TNT_ERR_MISMATCH, "passes count");
        for (int r = 0; r < size; r++) {
            counts[r] = r == 0 && rank == last ? b - 1 : b;
        }
        status = tnt_allgatherv_device(comm, dsend, drecv, counts, stream);
        expect_status("allgatherv sizes differ", status, TNT_ERR_MISMATCH, "per-rank counts");
        /* The last rank expects one byte more from rank 0 than it sends. */
        for (int r = 0; r < size; r++) {
            counts[r] = b / 2;
            counts2[r] = b / 2 + (rank == last && r == 0 ? 1 : 0);
        }
        status = tnt_alltoallv_device(comm, dsend, counts, drecv, counts2, stream);
        expect_status("alltoallv pair disagrees", status, TNT_ERR_MISMATCH, "which expects");

        /* One rank calls the host form, as the root of a gather: a small
         * host scatter's root or gather's non-root would hand its bytes off
         * and return (eager rooted calls, docs/c-api.md), and learn of the
         * difference only in its next call. */
        char *host = calloc((size_t)size, b);
        status = rank == last ? tnt_gather(comm, host + (size_t)last * b, host, b, last)
                              : tnt_gather_device(comm, dsend, NULL, b, last, stream);
        expect_status("host gather on the last rank", status, TNT_ERR_MISMATCH, "form");
        /* A host buffer passed to a device call on the last rank. */
        status = tnt_alltoall_device(comm, rank == last ? host : dsend, drecv, b, stream);
        expect_status("host sendbuf on the last rank", status, TNT_ERR_INVALID_ARG,
                      rank == last ? "host memory" : last_rank);
        free(host);
    }
    /* alltoall's buffers must be apart. */
    status = tnt_alltoall_device(comm, dsend, dsend + 1, b, stream);
    expect_status("overlapping alltoall buffers", status, TNT_ERR_INVALID_ARG, "overlap");

    /* Messages: checked on this rank alone, nothing sent. */
    status = tnt_send_device(comm, dsend, b, size, 0, stream);
    expect_status("send to a peer out of range", status, TNT_ERR_INVALID_ARG, "peer");
    status = tnt_recv_device(comm, drecv, b, -2, 0, NULL, stream);
    expect_status("receive from peer -2", status, TNT_ERR_INVALID_ARG, "peer -2");
    status = tnt_send_device(comm, dsend, b, rank, 0, stream);
    expect_status("send to itself", status, TNT_ERR_INVALID_ARG, "this rank");
    status = tnt_recv_device(comm, drecv, b, 0, -1, NULL, stream);
    expect_status("negative tag", status, TNT_ERR_INVALID_ARG, "tag -1");

    /* After all that, the communicator still works. */
    status = synced(comm, tnt_gather_device(comm, dsend, drecv, b, 0, stream));
    expect_status("a good gather afterwards", status, TNT_OK, NULL);
    free(counts);
    free(counts2);
    cudaFree(dsend);
    cudaFree(drecv);
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = gpu_check_open(argc, argv, "gpu_exchange_check");
    unsigned seed = 1;
    /* Past several 64 KiB staging chunks (TNT_GPU_STAGING_KB=64) and the
     * double's 64 KiB channel. */
    static const size_t sizes[] = { 1, 37, 100003 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int root = 0; root < size; root++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_gather(comm, sizes[k], root, in_place, seed++);
                check_scatter(comm, sizes[k], root, in_place, seed++);
            }
        }
        check_alltoall(comm, 1, sizes[k], seed++);
        check_alltoall(comm, 0, sizes[k], seed++);
    }
    size_t *bytes = malloc((size_t)size * sizeof(size_t));
    for (int r = 0; r < size; r++) {
        bytes[r] = r == 1 ? 0 : 11 + 1000 * (size_t)r; /* rank 1 contributes nothing */
    }
    check_allgatherv(comm, bytes, seed++);
    for (int r = 0; r < size; r++) {
        bytes[r] = 70001 * (size_t)(r + 1);
    }
    check_allgatherv(comm, bytes, seed++);
    free(bytes);
    /* Nothing at all moves: every rank still agrees. */
    expect_status("gather of 0 bytes", tnt_gather_device(comm, NULL, NULL, 0, 0, stream), TNT_OK,
                  NULL);

    static const size_t msgs[] = { 1, 4099, 300001 };
    for (size_t k = 0; k < sizeof(msgs) / sizeof(msgs[0]); k++) {
        check_partner(comm, msgs[k], k == 1 ? 100 : 0, seed++);
    }
    check_any_source(comm, seed++);
    check_too_long(comm);

    check_bad_inputs(comm);
    return gpu_check_close(comm);
}
