/*
 * Against the GPU TEST DOUBLE (label gpu-double): several tnt_init /
 * device collective / tnt_finalize cycles in one process leak no stream,
 * event, pinned buffer, device buffer or NCCL communicator: after each
 * tnt_finalize the double's live counts are back to what they were before
 * the first tnt_init.
 *
 *   gpu_double_cycles CYCLES
 */
#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_double.h"

static void live_now(struct tnt_cuda_double_live *live)
{
    void (*cuda_live)(struct tnt_cuda_double_live *);
    *(void **)&cuda_live = dlsym(RTLD_DEFAULT, "tnt_cuda_double_live");
    if (cuda_live == NULL) {
        fprintf(stderr, "gpu_double_cycles: the CUDA runtime is not the test double; put "
                        "tests/gpu_double/cuda first on LD_LIBRARY_PATH\n");
        exit(2);
    }
    cuda_live(live);
    /* The plugin loaded NCCL privately (RTLD_LOCAL): find that copy. */
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (nccl != NULL) {
        long (*nccl_live)(void);
        *(void **)&nccl_live = dlsym(nccl, "tnt_nccl_double_live");
        live->nccl_comms = nccl_live != NULL ? nccl_live() : 0;
        dlclose(nccl);
    }
}

int main(int argc, char **argv)
{
    int cycles = argc > 1 ? atoi(argv[1]) : 3, failures = 0;
    struct tnt_cuda_double_live before, after;
    live_now(&before);
    for (int cycle = 0; cycle < cycles; cycle++) {
        tnt_comm_t *comm;
        if (tnt_init(&comm) != TNT_OK) {
            fprintf(stderr, "cycle %d: tnt_init: %s\n", cycle, tnt_last_error());
            return 1;
        }
        int rank = tnt_rank(comm), size = tnt_size(comm);
        float *dev, host[1000];
        for (int i = 0; i < 1000; i++) {
            host[i] = (float)(rank + i);
        }
        cudaStream_t stream;
        tnt_status_t status = tnt_device_init(comm);
        if (status == TNT_OK &&
            (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != 0 ||
             cudaMalloc((void **)&dev, sizeof(host)) != 0 ||
             cudaMemcpyAsync(dev, host, sizeof(host), cudaMemcpyHostToDevice, stream) != 0)) {
            fprintf(stderr, "cycle %d: CUDA set-up failed\n", cycle);
            return 1;
        }
        if (status == TNT_OK) {
            status = tnt_allreduce_device(comm, dev, dev, 1000, TNT_FLOAT32, TNT_SUM, stream);
        }
        if (status == TNT_OK) {
            status = tnt_device_synchronize(comm, stream);
        }
        if (status != TNT_OK) {
            fprintf(stderr, "cycle %d: device allreduce: %s\n", cycle, tnt_last_error());
            return 1;
        }
        /* The counts see the objects while they live (else the check
         * below could not fail). */
        struct tnt_cuda_double_live during;
        tnt_gpu_transport_t transport;
        tnt_device_transport(comm, &transport);
        live_now(&during);
        if (transport == TNT_GPU_TRANSPORT_NCCL ? during.nccl_comms != 1
                                                : during.host_allocs <= before.host_allocs) {
            fprintf(stderr, "rank %d: FAIL cycle %d: the double's counts miss the live %s\n", rank,
                    cycle, transport == TNT_GPU_TRANSPORT_NCCL ? "communicator" : "pinned buffers");
            failures++;
        }
        cudaMemcpy(host, dev, sizeof(host), cudaMemcpyDeviceToHost);
        float want = (float)(size * (size - 1) / 2 + size * 999);
        if (host[999] != want) {
            fprintf(stderr, "cycle %d: allreduce gave %g, expected %g\n", cycle, host[999], want);
            failures++;
        }
        cudaFree(dev);
        cudaStreamDestroy(stream);
        tnt_finalize(comm);
        live_now(&after);
        printf("rank %d cycle %d (%s): live streams %ld, events %ld, device buffers %ld, pinned "
               "buffers %ld, NCCL communicators %ld\n",
               rank, cycle, tnt_gpu_transport_string(transport), after.streams, after.events,
               after.device_allocs, after.host_allocs, after.nccl_comms);
        if (after.streams != before.streams || after.events != before.events ||
            after.device_allocs != before.device_allocs ||
            after.host_allocs != before.host_allocs || after.nccl_comms != 0) {
            fprintf(stderr, "rank %d: FAIL cycle %d leaked CUDA or NCCL objects\n", rank, cycle);
            failures++;
        }
    }
    return failures == 0 ? 0 : 1;
}
