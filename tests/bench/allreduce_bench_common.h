/*
 * Shared by allreduce_bench.c (libtnt) and mpi_allreduce_bench.c (MPI), so
 * both measure exactly the same way: float32 sum in place, sizes 4 B to
 * --max bytes in powers of 4, warm-up, iterations scaled by size (about
 * --volume bytes reduced per size, between 20 and 20000 iterations, and no
 * more than fit in --time seconds judging by the warm-up; rank 0's count is
 * broadcast so all ranks agree), a barrier before each timed loop, the per-rank average latency averaged
 * over ranks (as the OSU benchmarks do). Output, osu style:
 *   # size(B)  avg_lat(us)  algbw(GB/s)  busbw(GB/s)
 * algbw = size / latency; busbw = algbw * 2 (n - 1) / n, the data each rank
 * must move in a ring allreduce, so values are comparable across n.
 */
#ifndef TNT_BENCH_ALLREDUCE_COMMON_H
#define TNT_BENCH_ALLREDUCE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_opts {
    size_t min_bytes;
    size_t max_bytes;
    double volume; /* bytes reduced per size, to pick the iteration count */
    double time_s; /* at most about this long per size */
    int post;      /* libtnt only: tnt_allreduce_post + tnt_wait (the hand-off) */
};

static inline int bench_parse(int argc, char **argv, struct bench_opts *o)
{
    o->min_bytes = 4;
    o->max_bytes = (size_t)256 << 20;
    o->volume = 4.0 * (1 << 30);
    o->time_s = 0.5;
    o->post = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--min") == 0 && i + 1 < argc) {
            o->min_bytes = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            o->max_bytes = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--volume") == 0 && i + 1 < argc) {
            o->volume = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--time") == 0 && i + 1 < argc) {
            o->time_s = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--post") == 0) {
            o->post = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [--min BYTES] [--max BYTES] [--volume BYTES] [--time S] [--post]\n",
                    argv[0]);
            return -1;
        }
    }
    if (o->min_bytes < 4) {
        o->min_bytes = 4;
    }
    return 0;
}

/* warm_s: seconds per iteration seen in the warm-up. */
static inline int bench_iterations(const struct bench_opts *o, size_t bytes, double warm_s)
{
    double it = o->volume / (double)bytes;
    if (warm_s > 0 && it > o->time_s / warm_s) {
        it = o->time_s / warm_s;
    }
    return it < 20 ? 20 : it > 20000 ? 20000 : (int)it;
}

#define BENCH_WARMUP 20

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void bench_header(const char *what, int size)
{
    printf("# %s, %d ranks, float32 sum, in place\n", what, size);
    printf("# %-12s %14s %14s %14s\n", "size(B)", "avg_lat(us)", "algbw(GB/s)", "busbw(GB/s)");
}

static inline void bench_row(size_t bytes, double avg_s, int size)
{
    double algbw = (double)bytes / avg_s / 1e9;
    double busbw = size > 1 ? algbw * 2.0 * (size - 1) / size : algbw;
    printf("  %-12zu %14.2f %14.3f %14.3f\n", bytes, avg_s * 1e6, algbw, busbw);
    fflush(stdout);
}

#endif
