/*
 * Shared by the libtnt and the MPI multi-node allreduce benchmarks, so both
 * measure and print the same way: float32 SUM, in place, sizes 8 B .. 64 MiB
 * (x4 steps plus 1 MiB and 16 MiB), a few warm-up runs, then `iters` timed
 * runs; latency is the mean time per allreduce of the slowest rank, bus
 * bandwidth is 2 (n-1)/n * bytes / latency (the NCCL convention).
 * One line per size:  RESULT <impl> <algo> <layout> <bytes> <lat_us> <busbw_GBs>
 */
#ifndef TNT_BENCH_MULTINODE_COMMON_H
#define TNT_BENCH_MULTINODE_COMMON_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t mnb_sizes[] = { 8,      64,      512,     4096,     16384,   65536,
                                    262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20 };
#define MNB_NUM_SIZES (sizeof(mnb_sizes) / sizeof(mnb_sizes[0]))

/* Both programs take the same options (sizes outside [min, max] bytes are
 * skipped, e.g. to profile one size). Returns 0, or -1 for an unknown one. */
static inline int mnb_parse_args(int argc, char **argv, const char **label, double *scale,
                                 size_t *min_bytes, size_t *max_bytes)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--label") == 0 && i + 1 < argc) {
            *label = argv[++i];
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            *scale = atof(argv[++i]);
        } else if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc) {
            *min_bytes = (size_t)atoll(argv[++i]);
        } else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
            *max_bytes = (size_t)atoll(argv[++i]);
        } else {
            return -1;
        }
    }
    return 0;
}

static inline double mnb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* About 0.3 s of work per size on this machine, at least 3 runs. */
static inline int mnb_iters(size_t bytes, double scale)
{
    double it = (bytes <= 65536 ? 400.0 : 64.0 * 1048576.0 / (double)bytes) * scale;
    if (it > 2000) {
        it = 2000;
    }
    return it < 3 ? 3 : (int)it;
}

static inline void mnb_print(const char *impl, const char *algo, const char *layout, int nranks,
                             size_t bytes, double seconds)
{
    double busbw = nranks > 1 ? 2.0 * (nranks - 1) / nranks * (double)bytes / seconds / 1e9 : 0;
    printf("RESULT %s %s %s %zu %.2f %.3f\n", impl, algo, layout, bytes, seconds * 1e6, busbw);
    fflush(stdout);
}

#endif
