/*
 * The communicator without a launcher: several ranks as threads of this
 * process, bootstrapped by boot/boot_threads.h, go through what tnt_init
 * does after the bootstrap (layout, shared-memory segment) and run the
 * public collectives over the shared-memory transport.
 *
 * Also: a request posted from a second thread while a blocking collective
 * runs must wait for it (the in-flight word), not run beside it on the
 * progress thread, which would interleave two collectives' phases.
 *
 * And the waits that run queued requests themselves ("caller runs",
 * comm/progress.c): ranks post many requests of different sizes and wait
 * for them in different orders (each rank its own), with blocking calls in
 * between, so a wait that ran its own request ahead of older ones, or beside
 * the progress thread, would mismatch the ranks' collectives or their data;
 * and a failed request's message stays with that request, whichever thread
 * ran it. Both with posts that wake the progress thread (TNT_OVERLAP=on) and
 * with posts left to their waiters (off), where tnt_test alone must still
 * get a request done.
 *
 * And the collective set on one node: one phase per small call, its
 * arguments agreed in the collective's own signature, and every error
 * still on every rank at once; sizes whose byte count overflows a size_t
 * (ranks x bytes, count x element, a sum of per-rank counts) are refused
 * by name before a byte moves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boot/boot_threads.h"
#include "comm/comm.h"
#include "core/init.h"
#include "transport/shm_impl.h"
#include "util/settings.h"
#include "util/wait.h"

#define NUM_RANKS      4
#define COUNT          4099 /* not a multiple of the rank count: uneven slices */
#define TIMEOUT_S      20
#define JOIN_TIMEOUT_S 60

/* TNT_OVERLAP of the ranks of the running test. */
static tnt_settings_overlap_t g_overlap = TNT_SETTINGS_OVERLAP_AUTO;

struct rank_ctx;
typedef int (*rank_body_fn)(struct rank_ctx *ctx, tnt_comm_t *comm);

struct rank_ctx {
    tnt_boot_threads_group_t *group;
    rank_body_fn body;
    int rank;
    pthread_t thread;
    char failure[1024]; /* empty when every check passed */
};

static void fail_rank(struct rank_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail_rank(struct rank_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->failure, sizeof(ctx->failure), fmt, ap);
    va_end(ap);
}

static int collectives(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    static _Thread_local float in[COUNT], out[COUNT];
    const int rank = ctx->rank;

    if (tnt_rank(comm) != rank || tnt_size(comm) != NUM_RANKS || tnt_local_rank(comm) != rank ||
        tnt_local_size(comm) != NUM_RANKS || tnt_num_nodes(comm) != 1 || tnt_node_id(comm) != 0) {
        fail_rank(ctx, "layout: rank %d of %d, local %d of %d, node %d of %d", tnt_rank(comm),
                  tnt_size(comm), tnt_local_rank(comm), tnt_local_size(comm), tnt_node_id(comm),
                  tnt_num_nodes(comm));
        return -1;
    }
    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)(rank + 1) * (float)(i % 17);
    }
    if (tnt_allreduce(comm, in, out, COUNT, TNT_FLOAT32, TNT_SUM) != TNT_OK) {
        fail_rank(ctx, "allreduce: %s", tnt_last_error());
        return -1;
    }
    /* 1 + 2 + 3 + 4 = 10: exact in float32. */
    for (int i = 0; i < COUNT; i++) {
        if (out[i] != 10.0f * (float)(i % 17)) {
            fail_rank(ctx, "allreduce: element %d is %g", i, (double)out[i]);
            return -1;
        }
    }

    int64_t value = rank == 2 ? 424242 : -1;
    if (tnt_broadcast(comm, &value, sizeof(value), 2) != TNT_OK || value != 424242) {
        fail_rank(ctx, "broadcast: %lld: %s", (long long)value, tnt_last_error());
        return -1;
    }

    int32_t mine = 100 + rank, all[NUM_RANKS];
    if (tnt_allgather(comm, &mine, all, sizeof(mine)) != TNT_OK) {
        fail_rank(ctx, "allgather: %s", tnt_last_error());
        return -1;
    }
    for (int r = 0; r < NUM_RANKS; r++) {
        if (all[r] != 100 + r) {
            fail_rank(ctx, "allgather: block %d is %d", r, all[r]);
            return -1;
        }
    }

    /* Nonblocking, through the progress thread of each rank's communicator. */
    double x = rank, max = -1;
    tnt_request_t *req;
    if (tnt_allreduce_post(comm, &x, &max, 1, TNT_FLOAT64, TNT_MAX, &req) != TNT_OK ||
        tnt_wait(req) != TNT_OK || max != NUM_RANKS - 1) {
        fail_rank(ctx, "allreduce_post: %g: %s", max, tnt_last_error());
        return -1;
    }
    if (tnt_barrier(comm) != TNT_OK) {
        fail_rank(ctx, "barrier: %s", tnt_last_error());
        return -1;
    }
    return 0;
}

/* TNT_TIMEOUT of the ranks' communicators. */
static double g_timeout_s = TIMEOUT_S;

static void *rank_main(void *arg)
{
    struct rank_ctx *ctx = arg;
    tnt_boot_t *boot;
    tnt_settings_t *settings;
    tnt_comm_t *comm;

    if (tnt_settings_create(&settings) != TNT_OK) {
        fail_rank(ctx, "settings: %s", tnt_last_error());
        return NULL;
    }
    settings->timeout_s = g_timeout_s;
    settings->overlap = g_overlap;
    if (tnt_boot_threads_create(ctx->group, ctx->rank, &boot) != TNT_OK) {
        tnt_settings_destroy(settings);
        fail_rank(ctx, "boot: %s", tnt_last_error());
        return NULL;
    }
    if (tnt_comm_create(boot, settings, "threads", &comm) != TNT_OK) {
        fail_rank(ctx, "tnt_comm_create: %s", tnt_last_error());
        return NULL;
    }
    ctx->body(ctx, comm);
    tnt_finalize(comm);
    return NULL;
}

/* ---- a blocking collective and a request posted meanwhile ---------------- */

#define BIG_COUNT (4u << 20) /* 16 MiB of float32: dozens of phases */

struct poster {
    tnt_comm_t *comm;
    uint64_t start_seq;
    double value, max;
    tnt_status_t status;
    char error[1024];
};

/* Waits until this rank's blocking allreduce is a few phases in, then posts
 * a small allreduce and waits for it. */
static void *poster_main(void *arg)
{
    struct poster *p = arg;
    _Atomic uint64_t *seq = &p->comm->shm->ctl[p->comm->local_rank].seq;
    uint64_t deadline = tnt_time_ns() + (uint64_t)TIMEOUT_S * 1000000000u;
    while (atomic_load_explicit(seq, memory_order_relaxed) < p->start_seq + 4) {
        if (tnt_time_ns() > deadline) {
            p->status = TNT_ERR_TIMEOUT;
            snprintf(p->error, sizeof(p->error), "the blocking allreduce never started");
            return NULL;
        }
        sched_yield();
    }
    tnt_request_t *req;
    p->status = tnt_allreduce_post(p->comm, &p->value, &p->max, 1, TNT_FLOAT64, TNT_MAX, &req);
    if (p->status == TNT_OK) {
        p->status = tnt_wait(req);
    }
    if (p->status != TNT_OK) {
        snprintf(p->error, sizeof(p->error), "%s", tnt_last_error());
    }
    return NULL;
}

static int blocking_vs_posted(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    float *big = malloc(BIG_COUNT * sizeof(*big));
    if (big == NULL) {
        fail_rank(ctx, "malloc");
        return -1;
    }
    for (size_t i = 0; i < BIG_COUNT; i++) {
        big[i] = (float)(ctx->rank + 1) * (float)(i % 5);
    }
    struct poster p = { comm, 0, ctx->rank, -1, TNT_OK, "" };
    p.start_seq = atomic_load_explicit(&comm->shm->ctl[comm->local_rank].seq, memory_order_relaxed);
    pthread_t thread;
    if (pthread_create(&thread, NULL, poster_main, &p) != 0) {
        free(big);
        fail_rank(ctx, "pthread_create");
        return -1;
    }
    tnt_status_t st = tnt_allreduce(comm, big, big, BIG_COUNT, TNT_FLOAT32, TNT_SUM);
    pthread_join(thread, NULL);
    int rc = 0;
    if (st != TNT_OK) {
        fail_rank(ctx, "blocking allreduce: %s", tnt_last_error());
        rc = -1;
    } else if (p.status != TNT_OK || p.max != NUM_RANKS - 1) {
        fail_rank(ctx, "posted allreduce: %g: %s", p.max, p.error);
        rc = -1;
    } else {
        for (size_t i = 0; i < BIG_COUNT; i++) {
            if (big[i] != 10.0f * (float)(i % 5)) {
                fail_rank(ctx, "blocking allreduce: element %zu is %g", i, (double)big[i]);
                rc = -1;
                break;
            }
        }
    }
    free(big);
    return rc;
}

/* ---- caller runs: posts waited for in any order -------------------------- */

#define ANY_ROUNDS 24
#define ANY_REQS   8

static const size_t any_counts[ANY_REQS] = { 1, 7, COUNT, 65536, 3, 300000, 17, 1024 };

static float any_value(int rank, int round, int j, size_t i)
{
    return (float)((rank + 1) * (j + 1 + round % 3)) + (float)(i % 7);
}

/* Rank r waits in its own order: a rotation, reversed on odd ranks and
 * rounds, so waiters keep asking for requests that are not next in line. */
static int any_order(int rank, int round, int k)
{
    int j = (k + rank * 3 + round) % ANY_REQS;
    return (rank + round) % 2 ? ANY_REQS - 1 - j : j;
}

static int posted_any_order(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    float *buf[ANY_REQS];
    tnt_request_t *req[ANY_REQS];
    double blocking_sum = 0;
    int rc = -1;

    memset(buf, 0, sizeof(buf));
    for (int j = 0; j < ANY_REQS; j++) {
        buf[j] = malloc(any_counts[j] * sizeof(float));
        if (buf[j] == NULL) {
            fail_rank(ctx, "malloc");
            goto out;
        }
    }
    for (int round = 0; round < ANY_ROUNDS; round++) {
        for (int j = 0; j < ANY_REQS; j++) {
            for (size_t i = 0; i < any_counts[j]; i++) {
                buf[j][i] = any_value(ctx->rank, round, j, i);
            }
        }
        for (int j = 0; j < ANY_REQS; j++) {
            if (tnt_allreduce_post(comm, buf[j], buf[j], any_counts[j], TNT_FLOAT32, TNT_SUM,
                                   &req[j]) != TNT_OK) {
                fail_rank(ctx, "round %d: post %d: %s", round, j, tnt_last_error());
                goto out;
            }
            if (j == 2 && round % 2 == 0) {
                /* A blocking call behind queued requests runs after them. */
                double x = ctx->rank + round;
                if (tnt_allreduce(comm, &x, &blocking_sum, 1, TNT_FLOAT64, TNT_SUM) != TNT_OK) {
                    fail_rank(ctx, "round %d: blocking: %s", round, tnt_last_error());
                    goto out;
                }
                double want = NUM_RANKS * (NUM_RANKS - 1) / 2.0 + NUM_RANKS * round;
                if (blocking_sum != want) {
                    fail_rank(ctx, "round %d: blocking sum %g, not %g", round, blocking_sum, want);
                    goto out;
                }
            }
            if (round % 3 == 1 && j % 3 == 0) {
                /* Let the progress thread take some of the queue. */
                struct timespec ts = { 0, 200000 };
                nanosleep(&ts, NULL);
            }
        }
        for (int k = 0; k < ANY_REQS; k++) {
            int j = any_order(ctx->rank, round, k);
            if (tnt_wait(req[j]) != TNT_OK) {
                fail_rank(ctx, "round %d: wait %d: %s", round, j, tnt_last_error());
                goto out;
            }
        }
        for (int j = 0; j < ANY_REQS; j++) {
            for (size_t i = 0; i < any_counts[j]; i++) {
                float want = 0;
                for (int r = 0; r < NUM_RANKS; r++) {
                    want += any_value(r, round, j, i);
                }
                if (buf[j][i] != want) {
                    fail_rank(ctx, "round %d: request %d element %zu is %g, not %g", round, j, i,
                              (double)buf[j][i], (double)want);
                    goto out;
                }
            }
        }
    }
    rc = 0;
out:
    for (int j = 0; j < ANY_REQS; j++) {
        free(buf[j]);
    }
    return rc;
}

/* Three posts, the middle one mismatched (rank 0 sends another count); the
 * last is waited for first, so its waiter may run all three. Each wait must
 * report its own request's failure. */
static int posted_errors(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    float a[5] = { 1, 1, 1, 1, 1 }, b[5] = { 2, 2, 2, 2, 2 }, c[5] = { 3, 3, 3, 3, 3 };
    tnt_request_t *ra, *rb, *rc;
    char msg_c[1024];

    if (tnt_allreduce_post(comm, a, a, 5, TNT_FLOAT32, TNT_SUM, &ra) != TNT_OK ||
        tnt_allreduce_post(comm, b, b, ctx->rank == 0 ? 3 : 5, TNT_FLOAT32, TNT_SUM, &rb) !=
            TNT_OK ||
        tnt_allreduce_post(comm, c, c, 5, TNT_FLOAT32, TNT_SUM, &rc) != TNT_OK) {
        fail_rank(ctx, "post: %s", tnt_last_error());
        return -1;
    }
    tnt_status_t sc = tnt_wait(rc);
    snprintf(msg_c, sizeof(msg_c), "%s", tnt_last_error());
    tnt_status_t sa = tnt_wait(ra);
    tnt_status_t sb = tnt_wait(rb);
    const char *msg_b = tnt_last_error();
    if (sa != TNT_OK || a[0] != NUM_RANKS) {
        fail_rank(ctx, "first request: %s, a[0] = %g", tnt_status_string(sa), (double)a[0]);
        return -1;
    }
    if (sb != TNT_ERR_MISMATCH || strstr(msg_b, "not started") != NULL) {
        fail_rank(ctx, "mismatched request: %s: %s", tnt_status_string(sb), msg_b);
        return -1;
    }
    if (sc != TNT_ERR_PEER_FAILED || strstr(msg_c, "not started") == NULL) {
        fail_rank(ctx, "request after the mismatch: %s: %s", tnt_status_string(sc), msg_c);
        return -1;
    }
    return 0;
}

/* Only tnt_test: with deferred posts, testing must get the request run (it
 * wakes the thread). The deadline is for the whole loop: without that
 * wake-up each round would wait for the thread's one-second safety timeout,
 * 20 s in all; with it the loop takes milliseconds. */
static int posted_tested(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const uint64_t deadline = tnt_time_ns() + 10000000000ull;
    for (int round = 0; round < 20; round++) {
        double x = ctx->rank + round, sum = -1;
        tnt_request_t *req;
        if (tnt_allreduce_post(comm, &x, &sum, 1, TNT_FLOAT64, TNT_SUM, &req) != TNT_OK) {
            fail_rank(ctx, "post: %s", tnt_last_error());
            return -1;
        }
        tnt_status_t st;
        while ((st = tnt_test(req)) == TNT_IN_PROGRESS) {
            if (tnt_time_ns() > deadline) {
                fail_rank(ctx, "round %d: tnt_test still says in progress, 10 s after the first",
                          round);
                return -1; /* the request leaks: the rank is done anyway */
            }
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
        if (st != TNT_OK || tnt_wait(req) != TNT_OK) {
            fail_rank(ctx, "round %d: %s", round, tnt_last_error());
            return -1;
        }
        double want = NUM_RANKS * (NUM_RANKS - 1) / 2.0 + NUM_RANKS * round;
        if (sum != want) {
            fail_rank(ctx, "round %d: sum %g, not %g", round, sum, want);
            return -1;
        }
    }
    return 0;
}

/* ---- the collective set on one node: the agreement rides along --------- */

/* One call of the collective set: its status, its message, and how many
 * shared-memory phases and seconds it took on this rank. */
struct set_call {
    tnt_status_t status;
    uint64_t phases;
    double seconds;
    char error[1024];
};

#define SET_CALL(out, call)                                                                        \
    do {                                                                                           \
        uint64_t phase0_ = comm->shm->phase, t0_ = tnt_time_ns();                                  \
        (out).status = (call);                                                                     \
        (out).seconds = (double)(tnt_time_ns() - t0_) / 1e9;                                       \
        (out).phases = comm->shm->phase - phase0_;                                                 \
        snprintf((out).error, sizeof((out).error), "%s", tnt_last_error());                      \
    } while (0)

/* Small calls of the collective set take one phase each on one node, the
 * collective's own, whose signature also carries what every rank passed
 * (there used to be an agreement allgather before each); a bad argument
 * on one rank and arguments that differ still fail every rank at once,
 * with the message naming the rank and the values, and the communicator
 * goes on. */
#define BIG_BLOCK 8192 /* above TNT_SHM_EAGER_MAX */

static int set_one_phase(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank, n = NUM_RANKS;
    float in[2 * NUM_RANKS], out[2 * NUM_RANKS];
    unsigned char mine[2 * NUM_RANKS], all[2 * NUM_RANKS];
    size_t vb[NUM_RANKS], vb_other[NUM_RANKS];
    struct set_call c;

    for (int i = 0; i < 2 * n; i++) {
        in[i] = (float)(me + 1) * (float)(i + 1);
        mine[i] = (unsigned char)(me * 16 + i);
    }
    for (int r = 0; r < n; r++) {
        vb[r] = 2;
        vb_other[r] = r == 0 ? 3 : 2;
    }
    const float rank_sum = (float)(n * (n + 1) / 2);

    /* Every call of 8 bytes: one phase. */
    SET_CALL(c, tnt_reduce(comm, in, out, 2, TNT_FLOAT32, TNT_SUM, 1));
    if (c.status != TNT_OK || c.phases != 1 || (me == 1 && out[1] != 2 * rank_sum)) {
        fail_rank(ctx, "reduce: %s, %llu phases, %g: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, (double)out[1], c.error);
        return -1;
    }
    SET_CALL(c, tnt_reduce_scatter(comm, in, out, 1, TNT_FLOAT32, TNT_SUM));
    if (c.status != TNT_OK || c.phases != 1 || out[0] != (float)(me + 1) * rank_sum) {
        fail_rank(ctx, "reduce_scatter: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }
    SET_CALL(c, tnt_gather(comm, mine, all, 2, 0));
    if (c.status != TNT_OK || c.phases != 1 || (me == 0 && all[2 * (n - 1)] != (n - 1) * 16)) {
        fail_rank(ctx, "gather: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }
    SET_CALL(c, tnt_scatter(comm, mine, all, 2, 3));
    if (c.status != TNT_OK || c.phases != 1 || all[0] != 3 * 16 + 2 * me) {
        fail_rank(ctx, "scatter: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }
    SET_CALL(c, tnt_allgatherv(comm, mine, all, vb));
    if (c.status != TNT_OK || c.phases != 1 || all[2 * (n - 1)] != (n - 1) * 16) {
        fail_rank(ctx, "allgatherv: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }
    SET_CALL(c, tnt_alltoall(comm, mine, all, 2));
    if (c.status != TNT_OK || c.phases != 1 || all[2 * (n - 1)] != (n - 1) * 16 + 2 * me) {
        fail_rank(ctx, "alltoall: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }
    SET_CALL(c, tnt_gather(comm, mine, all, 0, 0)); /* nothing to move: still agreed */
    if (c.status != TNT_OK || c.phases != 1) {
        fail_rank(ctx, "empty gather: %s, %llu phases: %s", tnt_status_string(c.status),
                  (unsigned long long)c.phases, c.error);
        return -1;
    }

    /* A root out of range on rank 2 alone: an error on every rank, at
     * once, not after TNT_TIMEOUT. Above the eager size: a small gather's
     * non-roots would have handed their bytes off and returned (see
     * eager_mismatch for that). */
    unsigned char *big = calloc((size_t)n + 1, BIG_BLOCK);
    if (big == NULL) {
        fail_rank(ctx, "out of memory");
        return -1;
    }
    SET_CALL(c, tnt_gather(comm, big, big + BIG_BLOCK, BIG_BLOCK, me == 2 ? n : 0));
    if (c.status != TNT_ERR_INVALID_ARG || c.seconds > 1.0 ||
        strstr(c.error, me == 2 ? "root 4" : "rank 2") == NULL) {
        fail_rank(ctx, "a bad root on rank 2: %s after %g s: %s", tnt_status_string(c.status),
                  c.seconds, c.error);
        return -1;
    }
    /* The same on every rank: each names its own. */
    SET_CALL(c, tnt_reduce(comm, in, out, 2, TNT_FLOAT32, TNT_SUM, -1));
    if (c.status != TNT_ERR_INVALID_ARG || strstr(c.error, "root -1") == NULL) {
        fail_rank(ctx, "a bad root everywhere: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    SET_CALL(c, tnt_reduce_scatter(comm, in, out, me == 3 ? 2 : 1, TNT_FLOAT32, TNT_SUM));
    if (c.status != TNT_ERR_MISMATCH || strstr(c.error, "rank 3 passes count 2") == NULL) {
        fail_rank(ctx, "counts that differ: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    /* Sizes whose byte count does not fit a size_t, the same on every rank:
     * each rank names the overflow, none reads or writes a byte. */
    size_t huge[16];
    if (n > 16) {
        fail_rank(ctx, "the overflow checks assume at most 16 ranks");
        return -1;
    }
    for (int r = 0; r < n; r++) {
        huge[r] = r < 2 ? SIZE_MAX / 2 : 1; /* elements: their sum overflows */
    }
    static const char *const overflow[] = {
        "gather, ranks x bytes",
        "scatter, ranks x bytes",
        "allgather, ranks x bytes",
        "reduce, count x 8",
        "reduce_scatter, count x 4 x ranks",
        "reduce_scatterv, sum of counts",
        "reduce_scatterv, sum x 4",
        "alltoallv, sum of sizes",
    };
    size_t quarter[16];
    for (int r = 0; r < n; r++) {
        quarter[r] = SIZE_MAX / 4 / (size_t)n + 1; /* sums to over SIZE_MAX / 4 */
    }
    for (size_t i = 0; i < sizeof(overflow) / sizeof(overflow[0]); i++) {
        tnt_status_t status;
        switch (i) {
        case 0: status = tnt_gather(comm, big, big, SIZE_MAX / 2 + 1, 0); break;
        case 1: status = tnt_scatter(comm, big, big, SIZE_MAX / 2 + 1, 0); break;
        case 2: status = tnt_allgather(comm, big, big, SIZE_MAX / 2 + 1); break;
        case 3:
            status = tnt_reduce(comm, big, big, SIZE_MAX / 4 + 1, TNT_FLOAT64, TNT_SUM, 0);
            break;
        case 4:
            status = tnt_reduce_scatter(comm, big, big, SIZE_MAX / 4 / (size_t)n + 1, TNT_FLOAT32,
                                        TNT_SUM);
            break;
        case 5:
            status = tnt_reduce_scatterv(comm, big, big, huge, TNT_FLOAT32, TNT_SUM);
            break;
        case 6:
            status = tnt_reduce_scatterv(comm, big, big, quarter, TNT_FLOAT32, TNT_SUM);
            break;
        default: status = tnt_alltoallv(comm, big, huge, big, huge); break;
        }
        const char *error = tnt_last_error();
        if (status != TNT_ERR_INVALID_ARG || strstr(error, "overflows the address space") == NULL) {
            fail_rank(ctx, "%s: %s: %s", overflow[i], tnt_status_string(status), error);
            free(big);
            return -1;
        }
    }
    SET_CALL(c, tnt_scatter(comm, big + BIG_BLOCK, big, me == 1 ? 0 : BIG_BLOCK, 0));
    free(big);
    if (c.status != TNT_ERR_MISMATCH || strstr(c.error, "rank 1 passes count 0") == NULL) {
        fail_rank(ctx, "an empty call beside full ones: %s: %s", tnt_status_string(c.status),
                  c.error);
        return -1;
    }
    SET_CALL(c, me == 0 ? tnt_gather(comm, mine, all, 2, 0) : tnt_scatter(comm, mine, all, 2, 0));
    if (c.status != TNT_ERR_MISMATCH || strstr(c.error, "called tnt_scatter") == NULL) {
        fail_rank(ctx, "gather beside scatter: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    SET_CALL(c, tnt_allgatherv(comm, mine, all, me == 2 ? vb_other : vb));
    if (c.status != TNT_ERR_MISMATCH || strstr(c.error, "per-rank counts") == NULL) {
        fail_rank(ctx, "per-rank counts that differ: %s: %s", tnt_status_string(c.status),
                  c.error);
        return -1;
    }
    /* alltoall beside alltoallv (whose first phase carries the sizes):
     * the same error. */
    SET_CALL(c, me == 0 ? tnt_alltoall(comm, mine, all, 2)
                        : tnt_alltoallv(comm, mine, vb, all, vb));
    if (c.status != TNT_ERR_MISMATCH || strstr(c.error, "rank 1 passes count 0") == NULL) {
        fail_rank(ctx, "alltoall beside alltoallv: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    tnt_request_t *req;
    if (tnt_alltoall_post(comm, me == 1 ? NULL : mine, all, 2, &req) != TNT_OK) {
        fail_rank(ctx, "alltoall_post: %s", tnt_last_error());
        return -1;
    }
    c.status = tnt_wait(req);
    if (c.status != TNT_ERR_INVALID_ARG ||
        strstr(tnt_last_error(), me == 1 ? "sendbuf" : "rank 1") == NULL) {
        fail_rank(ctx, "a posted NULL sendbuf on rank 1: %s: %s", tnt_status_string(c.status),
                  tnt_last_error());
        return -1;
    }

    /* Still in step, and not broken. */
    SET_CALL(c, tnt_reduce(comm, in, out, 2, TNT_FLOAT32, TNT_MAX, 0));
    if (c.status != TNT_OK || c.phases != 1 || (me == 0 && out[0] != (float)n)) {
        fail_rank(ctx, "reduce after the errors: %s, %llu phases: %s",
                  tnt_status_string(c.status), (unsigned long long)c.phases, c.error);
        return -1;
    }
    return 0;
}

static void run_thread_ranks(rank_body_fn body)
{
    tnt_boot_threads_group_t *group;
    struct rank_ctx ranks[NUM_RANKS];

    assert_int_equal(tnt_boot_threads_group_create(NUM_RANKS, NULL, TIMEOUT_S, &group), TNT_OK);
    memset(ranks, 0, sizeof(ranks));
    for (int r = 0; r < NUM_RANKS; r++) {
        ranks[r].group = group;
        ranks[r].body = body;
        ranks[r].rank = r;
        assert_int_equal(pthread_create(&ranks[r].thread, NULL, rank_main, &ranks[r]), 0);
    }
    for (int r = 0; r < NUM_RANKS; r++) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += JOIN_TIMEOUT_S;
        assert_int_equal(pthread_timedjoin_np(ranks[r].thread, NULL, &deadline), 0);
    }
    for (int r = 0; r < NUM_RANKS; r++) {
        if (ranks[r].failure[0] != '\0') {
            fail_msg("rank %d: %s", r, ranks[r].failure);
        }
    }
    tnt_boot_threads_group_destroy(group);
}

static void test_comm_threads_collectives(void **state)
{
    (void)state;
    run_thread_ranks(collectives);
}

static void test_comm_threads_blocking_vs_posted(void **state)
{
    (void)state;
    run_thread_ranks(blocking_vs_posted);
}

static void test_comm_threads_posted_any_order(void **state)
{
    (void)state;
    g_overlap = TNT_SETTINGS_OVERLAP_ON;
    run_thread_ranks(posted_any_order);
    g_overlap = TNT_SETTINGS_OVERLAP_OFF;
    run_thread_ranks(posted_any_order);
    g_overlap = TNT_SETTINGS_OVERLAP_AUTO;
}

static void test_comm_threads_posted_errors(void **state)
{
    (void)state;
    g_overlap = TNT_SETTINGS_OVERLAP_ON;
    run_thread_ranks(posted_errors);
    g_overlap = TNT_SETTINGS_OVERLAP_OFF;
    run_thread_ranks(posted_errors);
    g_overlap = TNT_SETTINGS_OVERLAP_AUTO;
}

static void test_comm_threads_set_one_phase(void **state)
{
    (void)state;
    run_thread_ranks(set_one_phase);
}

static void test_comm_threads_posted_tested(void **state)
{
    (void)state;
    g_overlap = TNT_SETTINGS_OVERLAP_ON;
    run_thread_ranks(posted_tested);
    g_overlap = TNT_SETTINGS_OVERLAP_OFF;
    run_thread_ranks(posted_tested);
    g_overlap = TNT_SETTINGS_OVERLAP_AUTO;
}

/* ---- eager rooted calls -------------------------------------------------- */

/* The receiving side of a small rooted call fails at once when the calls
 * differ; the ranks that had handed their bytes off and returned learn it
 * in their next call, with the same description, and the communicator is
 * out of step on every rank from then on. */
static int eager_mismatch(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank;
    unsigned char mine[2] = { (unsigned char)me, 1 }, all[2 * NUM_RANKS];
    struct set_call c;

    SET_CALL(c, tnt_gather(comm, mine, all, 2, 0));
    if (c.status != TNT_OK || c.phases != 1 || (me == 0 && all[6] != 3)) {
        fail_rank(ctx, "gather: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    /* Rank 3 names root 1: every non-root (1, 2, 3) sends; rank 0 receives. */
    SET_CALL(c, tnt_gather(comm, mine, all, 2, me == 3 ? 1 : 0));
    if (me == 0 && (c.status != TNT_ERR_MISMATCH || c.seconds > 1.0 ||
                    strstr(c.error, "rank 3 called gather #") == NULL ||
                    strstr(c.error, " of 2 bytes per rank, root local rank 1 (sent eagerly)") == NULL)) {
        fail_rank(ctx, "the receiver: %s after %g s: %s", tnt_status_string(c.status), c.seconds,
                  c.error);
        return -1;
    }
    if (me != 0 && c.status != TNT_OK) {
        fail_rank(ctx, "a sender: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    /* The next call: the senders learn it now, naming the same ranks and
     * values; the receiver's communicator is already out of step. */
    int64_t one = 1, sum = 0;
    SET_CALL(c, tnt_allreduce(comm, &one, &sum, 1, TNT_INT64, TNT_SUM));
    if (me != 0 && (c.status != TNT_ERR_MISMATCH || c.seconds > 1.0 ||
                    strstr(c.error, "rank 3 called gather #") == NULL ||
                    strstr(c.error, " of 2 bytes per rank, root local rank 1 (sent eagerly)") == NULL ||
                    strstr(c.error, "had already returned") == NULL)) {
        fail_rank(ctx, "a sender's next call: %s after %g s: %s", tnt_status_string(c.status),
                  c.seconds, c.error);
        return -1;
    }
    if (me == 0 && (c.status == TNT_OK || strstr(c.error, "failed before it") == NULL)) {
        fail_rank(ctx, "the receiver's next call: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    SET_CALL(c, tnt_gather(comm, mine, all, 2, 0));
    if (c.status == TNT_OK) {
        fail_rank(ctx, "a call after the mismatch succeeded");
        return -1;
    }
    return 0;
}

/* A bad argument on the receiving side while the others send: the same
 * (the senders cannot wait for its verdict), never a hang. */
static int eager_bad_receiver(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank;
    float in[2] = { 1, 2 };
    struct set_call c;
    SET_CALL(c, tnt_reduce(comm, in, me == 2 ? NULL : in, 2, TNT_FLOAT32, TNT_SUM, 2));
    if (me == 2 && (c.status != TNT_ERR_MISMATCH || c.seconds > 1.0 ||
                    strstr(c.error, " of 2 float32 elements, sum, root local rank 2 (sent eagerly)") ==
                        NULL)) {
        fail_rank(ctx, "the bad receiver: %s after %g s: %s", tnt_status_string(c.status),
                  c.seconds, c.error);
        return -1;
    }
    if (me != 2 && c.status != TNT_OK) {
        fail_rank(ctx, "a sender: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    SET_CALL(c, tnt_barrier(comm));
    if (me != 2 && (c.status != TNT_ERR_MISMATCH || strstr(c.error, "a bad argument") == NULL)) {
        fail_rank(ctx, "a sender's next call: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    return 0;
}

/* Thousands of small rooted calls back to back, roots and sizes varying,
 * blocking and posted, each checked against the serial result: slots are
 * reused only once their receivers have read them. */
#define EAGER_CALLS 3000
static unsigned char eager_byte(int rank, int call, size_t i)
{
    return (unsigned char)(rank * 31 + call * 7 + (int)i);
}

/* After a run of eager calls: an allreduce, which settles every send and
 * finds the communicator in step (its n ranks' ones sum to n). */
static int allreduce_after_the_calls(struct rank_ctx *ctx, tnt_comm_t *comm, int n)
{
    int64_t one = 1, sum = 0;
    if (tnt_allreduce(comm, &one, &sum, 1, TNT_INT64, TNT_SUM) != TNT_OK || sum != n) {
        fail_rank(ctx, "allreduce after the calls: %s", tnt_last_error());
        return -1;
    }
    return 0;
}

static int eager_many(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank, n = NUM_RANKS;
    unsigned char send[64 * NUM_RANKS], recv[64 * NUM_RANKS];
    float fin[16], fout[16];
    for (int k = 0; k < EAGER_CALLS; k++) {
        const int root = (k * 7 + k / 5) % n, kind = k % 3, posted = k % 11 == 0;
        const size_t bytes = 1 + (size_t)(k * 13) % 64, count = 1 + (size_t)k % 16;
        tnt_request_t *req = NULL;
        tnt_status_t st;
        memset(recv, 0xee, sizeof recv);
        if (kind == 0) {
            for (size_t i = 0; i < bytes; i++) {
                send[i] = eager_byte(me, k, i);
            }
            st = posted ? tnt_gather_post(comm, send, recv, bytes, root, &req)
                        : tnt_gather(comm, send, recv, bytes, root);
        } else if (kind == 1) {
            for (int j = 0; j < n; j++) {
                for (size_t i = 0; i < bytes; i++) {
                    send[(size_t)j * bytes + i] = eager_byte(j + me * 0 + root * 100, k, i);
                }
            }
            st = posted ? tnt_scatter_post(comm, send, recv, bytes, root, &req)
                        : tnt_scatter(comm, send, recv, bytes, root);
        } else {
            for (size_t i = 0; i < count; i++) {
                fin[i] = (float)((me + 1) * (k % 97) + (int)i);
            }
            st = posted ? tnt_reduce_post(comm, fin, fout, count, TNT_FLOAT32, TNT_SUM, root, &req)
                        : tnt_reduce(comm, fin, fout, count, TNT_FLOAT32, TNT_SUM, root);
        }
        if (st == TNT_OK && req != NULL) {
            st = tnt_wait(req);
        }
        if (st != TNT_OK) {
            fail_rank(ctx, "call %d (kind %d, root %d): %s: %s", k, kind, root,
                      tnt_status_string(st), tnt_last_error());
            return -1;
        }
        for (int j = 0; kind == 0 && me == root && j < n; j++) {
            for (size_t i = 0; i < bytes; i++) {
                if (recv[(size_t)j * bytes + i] != eager_byte(j, k, i)) {
                    fail_rank(ctx, "gather %d: block %d byte %zu", k, j, i);
                    return -1;
                }
            }
        }
        for (size_t i = 0; kind == 1 && i < bytes; i++) {
            if (recv[i] != eager_byte(me + root * 100, k, i)) {
                fail_rank(ctx, "scatter %d: byte %zu", k, i);
                return -1;
            }
        }
        for (size_t i = 0; kind == 2 && me == root && i < count; i++) {
            float want = (float)((n * (n + 1) / 2) * (k % 97) + n * (int)i);
            if (fout[i] != want) {
                fail_rank(ctx, "reduce %d: element %zu is %g, not %g", k, i, (double)fout[i],
                          (double)want);
                return -1;
            }
        }
    }
    return allreduce_after_the_calls(ctx, comm, n);
}

/* A receiver that never comes: the senders' next call waits for it within
 * TNT_TIMEOUT (1 s here), then fails naming it, as any wait does. */
static int eager_receiver_missing(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank;
    unsigned char mine[2] = { 1, 2 }, all[2 * NUM_RANKS];
    struct set_call c;
    if (me == 0) {
        struct timespec nap = { 3, 0 }; /* past the others' timeout, alive */
        nanosleep(&nap, NULL);
        return 0;
    }
    SET_CALL(c, tnt_gather(comm, mine, all, 2, 0));
    if (c.status != TNT_OK) {
        fail_rank(ctx, "a sender: %s: %s", tnt_status_string(c.status), c.error);
        return -1;
    }
    SET_CALL(c, tnt_barrier(comm));
    if (c.status != TNT_ERR_TIMEOUT || c.seconds > 2.5 || strstr(c.error, "rank 0") == NULL) {
        fail_rank(ctx, "a sender's next call: %s after %g s: %s", tnt_status_string(c.status),
                  c.seconds, c.error);
        return -1;
    }
    return 0;
}

/* Senders run ahead of a receiver that comes late: the non-roots of
 * AHEAD_CALLS small gathers and reduces to rank 0 return from all of them
 * while rank 0 still sleeps (each call's bytes wait in the sender's eager
 * ring), and rank 0 then receives every one of them right. After that,
 * thousands of rooted calls in which the receivers sleep a little before
 * each call, roots and kinds varying, each checked. */
#define AHEAD_CALLS 6 /* fewer than TNT_SHM_RING */
#define AHEAD_NAP_NS 300000000L
#define SLOW_CALLS 600
#define SLOW_BYTES 40 /* gather and scatter blocks: 1 to 40 bytes, inline and not */

static int eager_ahead(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank, n = NUM_RANKS;
    unsigned char send[8 * NUM_RANKS], recv[AHEAD_CALLS][8 * NUM_RANKS];
    float fin[3], fout[AHEAD_CALLS][3];
    if (me == 0) {
        struct timespec nap = { 0, AHEAD_NAP_NS };
        nanosleep(&nap, NULL);
    }
    uint64_t t0 = tnt_time_ns();
    for (int k = 0; k < AHEAD_CALLS; k++) {
        tnt_status_t st;
        if (k % 2 == 0) {
            for (size_t i = 0; i < 8; i++) {
                send[i] = eager_byte(me, k, i);
            }
            st = tnt_gather(comm, send, recv[k], 8, 0);
        } else {
            for (int i = 0; i < 3; i++) {
                fin[i] = (float)((me + 1) * k + i);
            }
            st = tnt_reduce(comm, fin, fout[k], 3, TNT_FLOAT32, TNT_SUM, 0);
        }
        if (st != TNT_OK) {
            fail_rank(ctx, "ahead call %d: %s: %s", k, tnt_status_string(st), tnt_last_error());
            return -1;
        }
    }
    double ahead_s = (double)(tnt_time_ns() - t0) / 1e9;
    if (me != 0 && ahead_s > (double)AHEAD_NAP_NS / 2e9) {
        fail_rank(ctx, "a sender took %g s for %d eager calls: it waited for the receiver", ahead_s,
                  AHEAD_CALLS);
        return -1;
    }
    for (int k = 0; me == 0 && k < AHEAD_CALLS; k++) {
        for (int j = 0; k % 2 == 0 && j < n; j++) {
            for (size_t i = 0; i < 8; i++) {
                if (recv[k][(size_t)j * 8 + i] != eager_byte(j, k, i)) {
                    fail_rank(ctx, "ahead gather %d: block %d byte %zu", k, j, i);
                    return -1;
                }
            }
        }
        for (int i = 0; k % 2 == 1 && i < 3; i++) {
            float want = (float)((n * (n + 1) / 2) * k + n * i);
            if (fout[k][i] != want) {
                fail_rank(ctx, "ahead reduce %d: element %d is %g, not %g", k, i,
                          (double)fout[k][i], (double)want);
                return -1;
            }
        }
    }

    unsigned char sbuf[SLOW_BYTES * NUM_RANKS], rbuf[SLOW_BYTES * NUM_RANKS];
    for (int k = 0; k < SLOW_CALLS; k++) {
        const int root = (k / 3 + k / 17) % n, kind = k % 3;
        const size_t bytes = 1 + (size_t)(k * 5) % SLOW_BYTES, count = 1 + (size_t)k % 9;
        const int receives = kind == 1 ? me != root : me == root;
        tnt_status_t st;
        if (receives && k % 4 != 0) {
            struct timespec nap = { 0, 50000L * (k % 5) };
            nanosleep(&nap, NULL);
        }
        memset(rbuf, 0xee, sizeof rbuf);
        if (kind == 0) {
            for (size_t i = 0; i < bytes; i++) {
                sbuf[i] = eager_byte(me, k, i);
            }
            st = tnt_gather(comm, sbuf, rbuf, bytes, root);
        } else if (kind == 1) {
            for (int j = 0; j < n; j++) {
                for (size_t i = 0; i < bytes; i++) {
                    sbuf[(size_t)j * bytes + i] = eager_byte(j + root * 100, k, i);
                }
            }
            st = tnt_scatter(comm, sbuf, rbuf, bytes, root);
        } else {
            float vin[9], vout[9];
            for (size_t i = 0; i < count; i++) {
                vin[i] = (float)((me + 1) * (k % 89) + (int)i);
            }
            st = tnt_reduce(comm, vin, vout, count, TNT_FLOAT32, TNT_SUM, root);
            for (size_t i = 0; st == TNT_OK && me == root && i < count; i++) {
                float want = (float)((n * (n + 1) / 2) * (k % 89) + n * (int)i);
                if (vout[i] != want) {
                    fail_rank(ctx, "slow reduce %d: element %zu is %g, not %g", k, i,
                              (double)vout[i], (double)want);
                    return -1;
                }
            }
        }
        if (st != TNT_OK) {
            fail_rank(ctx, "slow call %d (kind %d, root %d): %s: %s", k, kind, root,
                      tnt_status_string(st), tnt_last_error());
            return -1;
        }
        for (int j = 0; kind == 0 && me == root && j < n; j++) {
            for (size_t i = 0; i < bytes; i++) {
                if (rbuf[(size_t)j * bytes + i] != eager_byte(j, k, i)) {
                    fail_rank(ctx, "slow gather %d: block %d byte %zu", k, j, i);
                    return -1;
                }
            }
        }
        for (size_t i = 0; kind == 1 && i < bytes; i++) {
            if (rbuf[i] != eager_byte(me + root * 100, k, i)) {
                fail_rank(ctx, "slow scatter %d: byte %zu", k, i);
                return -1;
            }
        }
    }
    return allreduce_after_the_calls(ctx, comm, n);
}

/* An argument that differs in a call the senders handed off several calls
 * ahead of the receiver: the receiver fails at that call, naming the rank
 * and its value, and each sender in its next call that waits, with the
 * same description. */
static int eager_mismatch_ahead(struct rank_ctx *ctx, tnt_comm_t *comm)
{
    const int me = ctx->rank;
    unsigned char mine[3] = { (unsigned char)me, 1, 2 }, all[3 * NUM_RANKS];
    struct set_call c;
    if (me == 0) {
        struct timespec nap = { 0, AHEAD_NAP_NS };
        nanosleep(&nap, NULL);
    }
    for (int k = 0; k < 5; k++) {
        /* Call 2 (the third): rank 3 sends 3 bytes, the others 2. */
        SET_CALL(c, tnt_gather(comm, mine, all, k == 2 && me == 3 ? 3 : 2, 0));
        int want_fail = me == 0 && k >= 2;
        if (!want_fail && c.status != TNT_OK) {
            fail_rank(ctx, "gather %d: %s: %s", k, tnt_status_string(c.status), c.error);
            return -1;
        }
        if (me == 0 && k == 2 &&
            (c.status != TNT_ERR_MISMATCH || c.seconds > 1.0 ||
             strstr(c.error, "rank 3 called gather #") == NULL ||
             strstr(c.error, " of 3 bytes per rank, root local rank 0 (sent eagerly)") == NULL)) {
            fail_rank(ctx, "the receiver: %s after %g s: %s", tnt_status_string(c.status),
                      c.seconds, c.error);
            return -1;
        }
        if (me == 0 && k > 2 && c.status == TNT_OK) {
            fail_rank(ctx, "the receiver's gather %d after the mismatch succeeded", k);
            return -1;
        }
    }
    int64_t one = 1, sum = 0;
    SET_CALL(c, tnt_allreduce(comm, &one, &sum, 1, TNT_INT64, TNT_SUM));
    if (me != 0 && (c.status != TNT_ERR_MISMATCH || c.seconds > 1.0 ||
                    strstr(c.error, "rank 3 called gather #") == NULL ||
                    strstr(c.error, " of 3 bytes per rank, root local rank 0 (sent eagerly)") ==
                        NULL ||
                    strstr(c.error, "had already returned") == NULL)) {
        fail_rank(ctx, "a sender's next call: %s after %g s: %s", tnt_status_string(c.status),
                  c.seconds, c.error);
        return -1;
    }
    if (me == 0 && c.status == TNT_OK) {
        fail_rank(ctx, "the receiver's allreduce after the mismatch succeeded");
        return -1;
    }
    return 0;
}

static void test_comm_threads_eager_ahead(void **state)
{
    (void)state;
    run_thread_ranks(eager_ahead);
    run_thread_ranks(eager_mismatch_ahead);
}

static void test_comm_threads_eager_missing(void **state)
{
    (void)state;
    g_timeout_s = 1;
    run_thread_ranks(eager_receiver_missing);
    g_timeout_s = TIMEOUT_S;
}

static void test_comm_threads_eager_mismatch(void **state)
{
    (void)state;
    run_thread_ranks(eager_mismatch);
    run_thread_ranks(eager_bad_receiver);
}

static void test_comm_threads_eager_many(void **state)
{
    (void)state;
    run_thread_ranks(eager_many);
}

int main(void)
{
    setenv("TNT_LOG_LEVEL", "error", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_threads_collectives),
        cmocka_unit_test(test_comm_threads_blocking_vs_posted),
        cmocka_unit_test(test_comm_threads_posted_any_order),
        cmocka_unit_test(test_comm_threads_posted_errors),
        cmocka_unit_test(test_comm_threads_posted_tested),
        cmocka_unit_test(test_comm_threads_set_one_phase),
        cmocka_unit_test(test_comm_threads_eager_mismatch),
        cmocka_unit_test(test_comm_threads_eager_many),
        cmocka_unit_test(test_comm_threads_eager_ahead),
        cmocka_unit_test(test_comm_threads_eager_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
