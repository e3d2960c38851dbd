/*
 * TEST DOUBLE of the CUDA runtime and NCCL (tests only, never installed).
 *
 * libcudart.so.<major> and libnccl.so.2 built from this directory stand in
 * for the real ones when their directory comes first on LD_LIBRARY_PATH
 * (the plugin's RUNPATH and its dlopen("libnccl.so.2") both yield to it).
 * "Device" memory is host memory in a registry; streams are FIFO queues run
 * by a worker thread each; the NCCL double does real collectives between
 * the processes of a job through a shared-memory file named from the unique
 * id. It is a double, not a GPU: nothing that passes against it has run on
 * a GPU (docs/gpu.md keeps the two apart).
 *
 * Environment (read once per process):
 *   TNT_CUDA_DOUBLE_GPUS   device labels, one entry per rank (PMIX_RANK),
 *                          comma-separated, e.g. "a,b" (own GPUs) or "a"
 *                          (every rank shares GPU a); "a+b" gives a rank two
 *                          devices; "none" or unset: no device.
 *   TNT_CUDA_DOUBLE_FAIL_AFTER=k   the (k+1)-th runtime call and every later
 *                          one fail with cudaErrorLaunchFailure (sticky, as a
 *                          real device fault); TNT_CUDA_DOUBLE_FAIL_RANK=r
 *                          limits it to rank r.
 *   TNT_NCCL_DOUBLE_ASYNC_ERROR_RANK=r   on rank r, ncclCommGetAsyncError
 *                          reports ncclSystemError once a collective was
 *                          issued, and that collective never joins its peers.
 *   TNT_NCCL_DOUBLE_HANG_RANK=r   rank r's collectives never complete (a hung
 *                          peer) until ncclCommAbort.
 */
#ifndef TNT_CUDA_DOUBLE_H
#define TNT_CUDA_DOUBLE_H

#include <cuda_runtime_api.h>

#define TNT_CUDA_DOUBLE_API __attribute__((visibility("default")))

/* Objects alive in this process (created and not yet destroyed or freed):
 * what a leak check compares before and after an init/finalize cycle. */
struct tnt_cuda_double_live {
    long streams, events, device_allocs, host_allocs, nccl_comms;
};

/* Runs fn(arg) on the stream's worker, after the work queued before it;
 * returns 0, or -1 when the stream is unknown. */
TNT_CUDA_DOUBLE_API int tnt_cuda_double_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg);
/* Counts of the CUDA objects alive (nccl_comms is left 0: see
 * tnt_nccl_double_live in libnccl.so.2). */
TNT_CUDA_DOUBLE_API void tnt_cuda_double_live(struct tnt_cuda_double_live *live);
/* This process's rank as the double sees it (PMIX_RANK, else 0). */
TNT_CUDA_DOUBLE_API int tnt_cuda_double_rank(void);
/* Whether ptr lies in the double's "device" memory (n bytes from ptr). */
TNT_CUDA_DOUBLE_API int tnt_cuda_double_is_device(const void *ptr, size_t n);

#endif
