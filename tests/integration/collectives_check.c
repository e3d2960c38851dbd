/*
 * Collectives through libtnt's public API with real ranks (started by the
 * tarantella launcher or by OpenMPI's mpirun): allreduce for every dtype x
 * op x count (0, 1, primes, counts that are not multiples of the rank count)
 * x in place / out of place, checked against exact expected values
 * (collectives_values.h) and bitwise across ranks (every rank allgathers a
 * hash of its result); broadcast from every root, allgather and barrier.
 *
 *   collectives_check [--large] [--large-count N] [--kill-rank R]
 *     --large        also a float32 sum of 64 MiB + 12 bytes (in place) and
 *                    a bfloat16 average of 32 MiB + 6 bytes (out of place)
 *     --large-count N  the same with N elements (N = 268435456: 1 GiB)
 *     --kill-rank R  rank R kills itself (SIGKILL) before its 3rd large
 *                    allreduce; the others must fail within a few seconds
 *                    with TNT_ERR_PEER_FAILED (exit 3) or be stopped by the
 *                    launcher
 *     --kill-rank-rooted R  the same between small gathers and scatters
 *                    whose roots rotate: rank R dies before its 21st
 *                    call, as a sender that the others' next call waits
 *                    for (eager rooted calls, docs/c-api.md); the
 *                    survivors must fail the same way
 * Exits 0 when every check passed, prints one line per failure otherwise.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tnt/tnt.h>

#include "collectives_values.h"

static int rank, size, failures;

#define FAIL(...)                                              \
    do {                                                       \
        fprintf(stderr, "collectives_check: rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__);                          \
        fputc('\n', stderr);                                   \
        failures++;                                            \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every rank's hash must equal rank 0's. */
static void check_same_everywhere(tnt_comm_t *comm, uint64_t hash, const char *what)
{
    uint64_t *all = malloc(sizeof *all * (size_t)size);
    if (all == NULL) {
        FAIL("out of memory");
        return;
    }
    tnt_status_t st = tnt_allgather(comm, &hash, all, sizeof hash);
    if (st != TNT_OK) {
        FAIL("allgather of result hashes: %s", tnt_last_error());
    } else {
        for (int r = 1; r < size; r++) {
            if (all[r] != all[0]) {
                FAIL("%s: rank %d's result differs from rank 0's", what, r);
                break;
            }
        }
    }
    free(all);
}

static void check_allreduce(tnt_comm_t *comm, tnt_dtype_t dt, tnt_op_t op, size_t count,
                            int inplace, uint64_t seed, char *send, char *recv)
{
    size_t es = tnt_dtype_size(dt);
    char what[128];
    snprintf(what, sizeof what, "allreduce %s %s count %zu %s", cv_dtype_names[dt], cv_op_names[op],
             count, inplace ? "in place" : "out of place");
    cv_fill(dt, op, size, seed, rank, send, count);
    char *out = inplace ? send : recv;
    if (!inplace) {
        memset(recv, 0x5a, count * es);
    }
    tnt_status_t st = tnt_allreduce(comm, send, out, count, dt, op);
    if (st != TNT_OK) {
        FAIL("%s: %s", what, tnt_last_error());
        return;
    }
    size_t bad = cv_check(dt, op, size, seed, out, count);
    if (bad != count) {
        FAIL("%s: element %zu is %g, expected %g", what, bad, cv_load(dt, out, bad),
             cv_expected(dt, op, size, seed, bad));
    }
    check_same_everywhere(comm, cv_hash(out, count * es), what);
}

int main(int argc, char **argv)
{
    int large = 0, kill_rank = -1, kill_rooted = 0;
    size_t large_count = (16u << 20) + 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--large") == 0) {
            large = 1;
        } else if (strcmp(argv[i], "--large-count") == 0 && i + 1 < argc) {
            large = 1;
            large_count = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--kill-rank") == 0 && i + 1 < argc) {
            kill_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--kill-rank-rooted") == 0 && i + 1 < argc) {
            kill_rank = atoi(argv[++i]);
            kill_rooted = 1;
        } else {
            fprintf(stderr,
                    "usage: collectives_check [--large] [--large-count N] [--kill-rank R]\n");
            return 2;
        }
    }

    tnt_comm_t *comm;
    if (tnt_init(&comm) != TNT_OK) {
        fprintf(stderr, "collectives_check: tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    rank = tnt_rank(comm);
    size = tnt_size(comm);
    double t0 = now_s();

    if (kill_rank >= 0 && kill_rooted) {
        unsigned char small[8 * 64] = { 0 }, all[8 * 64];
        for (int it = 0; it < 200 && size <= 64; it++) {
            if (rank == kill_rank && it == 20) {
                raise(SIGKILL);
            }
            double t = now_s();
            int root = it % size;
            tnt_status_t st = it % 2 == 0 ? tnt_gather(comm, small, all, 8, root)
                                          : tnt_scatter(comm, all, small, 8, root);
            if (st != TNT_OK) {
                fprintf(stderr,
                        "collectives_check: rank %d: rooted call %d failed after %.2f s as "
                        "expected: %s\n",
                        rank, it, now_s() - t, tnt_last_error());
                return st == TNT_ERR_PEER_FAILED && now_s() - t < 5.0 && it >= 20 ? 3 : 1;
            }
        }
        fprintf(stderr, "collectives_check: rank %d: no failure seen\n", rank);
        return 1;
    }
    if (kill_rank >= 0) {
        size_t count = 4 << 20;
        float *buf = calloc(count, sizeof *buf);
        for (int it = 0; it < 5 && buf != NULL; it++) {
            if (rank == kill_rank && it == 2) {
                raise(SIGKILL);
            }
            double t = now_s();
            tnt_status_t st = tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
            if (st != TNT_OK) {
                fprintf(stderr,
                        "collectives_check: rank %d: allreduce failed after %.2f s as "
                        "expected: %s\n",
                        rank, now_s() - t, tnt_last_error());
                return st == TNT_ERR_PEER_FAILED && now_s() - t < 5.0 ? 3 : 1;
            }
        }
        fprintf(stderr, "collectives_check: rank %d: no failure seen\n", rank);
        return 1;
    }

    static const size_t counts[] = { 0, 1, 2, 3, 7, 13, 97, 1031, 4099, 65537, 300007 };
    size_t max_count = 300007;
    char *send = malloc(max_count * 8), *recv = malloc(max_count * 8);
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "collectives_check: out of memory\n");
        return 1;
    }
    uint64_t seed = 11;
    for (int dt = 0; dt < TNT_DTYPE_LAST; dt++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                for (int inplace = 0; inplace < 2; inplace++, seed++) {
                    /* the largest count for two representative dtypes only */
                    if (counts[c] > 100000 && dt != TNT_FLOAT32 && dt != TNT_BFLOAT16) {
                        continue;
                    }
                    check_allreduce(comm, dt, op, counts[c], inplace, seed, send, recv);
                }
            }
        }
    }
    /* a count that is one more than a multiple of the rank count */
    check_allreduce(comm, TNT_FLOAT32, TNT_SUM, (size_t)size * 1000 + 1, 1, seed++, send, recv);

    /* broadcast from every root */
    static const size_t bsizes[] = { 0, 1, 1000, 100003, 2000003 };
    unsigned char *bbuf = malloc(2000003);
    for (size_t s = 0; s < 5 && bbuf != NULL; s++) {
        for (int root = 0; root < size; root++) {
            for (size_t i = 0; i < bsizes[s]; i++) {
                bbuf[i] = rank == root ? (unsigned char)(i * 13 + (size_t)root) : 0;
            }
            if (tnt_broadcast(comm, bbuf, bsizes[s], root) != TNT_OK) {
                FAIL("broadcast %zu from %d: %s", bsizes[s], root, tnt_last_error());
                continue;
            }
            for (size_t i = 0; i < bsizes[s]; i++) {
                if (bbuf[i] != (unsigned char)(i * 13 + (size_t)root)) {
                    FAIL("broadcast %zu from %d: byte %zu wrong", bsizes[s], root, i);
                    break;
                }
            }
        }
    }
    free(bbuf);

    /* allgather; 50001 B blocks are read from the peers' buffers where CMA
     * works (TNT_SHM_CMA), and also go in place. */
    static const size_t gsizes[] = { 0, 1, 4099, 50001 };
    for (size_t s = 0; s < 2 * sizeof gsizes / sizeof gsizes[0]; s++) {
        size_t b = gsizes[s / 2];
        int in_place = s % 2;
        if (in_place && b < 50001) {
            continue;
        }
        unsigned char *all = malloc(b * (size_t)size + 1);
        unsigned char *mine = in_place ? all + (size_t)rank * b : (unsigned char *)send;
        for (size_t i = 0; i < b; i++) {
            mine[i] = (unsigned char)(i + (size_t)rank * 5);
        }
        if (tnt_allgather(comm, mine, all, b) != TNT_OK) {
            FAIL("allgather %zu%s: %s", b, in_place ? " in place" : "", tnt_last_error());
        } else {
            for (int r = 0; r < size; r++) {
                for (size_t i = 0; i < b; i++) {
                    if (all[(size_t)r * b + i] != (unsigned char)(i + (size_t)r * 5)) {
                        FAIL("allgather %zu: rank %d's byte %zu wrong", b, r, i);
                        r = size;
                        break;
                    }
                }
            }
        }
        free(all);
    }
    for (int i = 0; i < 20; i++) {
        if (tnt_barrier(comm) != TNT_OK) {
            FAIL("barrier: %s", tnt_last_error());
        }
    }
    free(send);
    free(recv);

    if (large) {
        /* >= 64 MiB: float32 sum in place, bfloat16 average out of place */
        size_t count = large_count;
        char *a = malloc(count * 4), *b = malloc(count * 4);
        if (a == NULL || b == NULL) {
            FAIL("out of memory for the large case");
        } else {
            check_allreduce(comm, TNT_FLOAT32, TNT_SUM, count, 1, seed++, a, b);
            check_allreduce(comm, TNT_BFLOAT16, TNT_AVG, count, 0, seed++, a, b);
        }
        free(a);
        free(b);
    }

    int total = 0;
    tnt_status_t st = tnt_allreduce(comm, &failures, &total, 1, TNT_INT32, TNT_SUM);
    if (rank == 0 && st == TNT_OK) {
        printf("collectives_check: %d ranks, %s: %d failures, %.1f s\n", size,
               large ? "with the large case" : "standard matrix", total, now_s() - t0);
    }
    tnt_finalize(comm);
    return st == TNT_OK && total == 0 ? 0 : 1;
}
