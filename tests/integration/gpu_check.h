/*
 * The harness the device-buffer checks share (gpu_collectives_check.c,
 * gpu_composed_check.c, gpu_exchange_check.c): this rank and the job's
 * size, a failure count, the non-blocking stream every check enqueues on
 * (inputs are copied in on it too: the legacy default stream is not
 * ordered before it), and the ways to fail and to check a status. Each
 * check is one .c file including this once.
 */
#ifndef TNT_TESTS_INTEGRATION_GPU_CHECK_H
#define TNT_TESTS_INTEGRATION_GPU_CHECK_H

#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>

#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;
static cudaStream_t stream;
/* What tnt_device_init chose (gpu_check_open), for checks that differ by
 * path; the name prefixes the lines rank 0 prints. */
__attribute__((unused)) static tnt_gpu_transport_t transport;
__attribute__((unused)) static const char *check_name = "gpu check";

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static inline void fail(const char *what, tnt_status_t status)
{
    fprintf(stderr, "rank %d: FAIL %s: %s (%s)\n", rank, what, tnt_status_string(status),
            tnt_last_error());
    failures++;
}

static inline void *dev_alloc(size_t bytes)
{
    void *p;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

/* status must be want on this rank, and the message must contain needle
 * (NULL: any). */
static inline void expect_status(const char *what, tnt_status_t status, tnt_status_t want,
                                 const char *needle)
{
    if (status != want) {
        fprintf(stderr, "rank %d: FAIL %s: got %s (%s), expected %s\n", rank, what,
                tnt_status_string(status), status == TNT_OK ? "" : tnt_last_error(),
                tnt_status_string(want));
        failures++;
    } else if (needle != NULL && strstr(tnt_last_error(), needle) == NULL) {
        fprintf(stderr, "rank %d: FAIL %s: message '%s' lacks '%s'\n", rank, what, tnt_last_error(),
                needle);
        failures++;
    } else if (rank == 0) {
        printf("%s: %s: %s (%s)\n", check_name, what, tnt_status_string(status),
               status == TNT_OK ? "" : tnt_last_error());
    }
}

/* tnt_init, the stream, tnt_device_init and --expect nccl|host: 0, or
 * exits 1. */
static inline tnt_comm_t *gpu_check_open(int argc, char **argv, const char *name)
{
    tnt_comm_t *comm;
    const char *expect = NULL;
    check_name = name;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
            expect = argv[++i];
        }
    }
    if (tnt_init(&comm) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        exit(1);
    }
    rank = tnt_rank(comm);
    size = tnt_size(comm);
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    tnt_status_t status = tnt_device_init(comm);
    if (status != TNT_OK) {
        fail("tnt_device_init", status);
        exit(1);
    }
    tnt_device_transport(comm, &transport);
    if (rank == 0) {
        printf("%s: %d ranks, transport %s\n", name, size, tnt_gpu_transport_string(transport));
    }
    if (expect != NULL && strcmp(expect, tnt_gpu_transport_string(transport)) != 0) {
        fprintf(stderr, "rank %d: FAIL transport is %s, expected %s\n", rank,
                tnt_gpu_transport_string(transport), expect);
        failures++;
    }
    return comm;
}

/* Ends the check: 0 when nothing failed. */
static inline int gpu_check_close(tnt_comm_t *comm)
{
    cudaStreamDestroy(stream);
    tnt_finalize(comm);
    if (failures == 0 && rank == 0) {
        printf("%s: OK\n", check_name);
    }
    return failures == 0 ? 0 : 1;
}

#endif
