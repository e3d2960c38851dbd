/*
 * The communicator without a launcher: several ranks as threads of this
 * process, bootstrapped by boot/boot_threads.h, go through what tnt_init
 * does after the bootstrap (layout, shared-memory segment) and run the
 * public collectives over the shared-memory transport.
 *
 * Also: a request posted from a second thread while a blocking collective
 * runs must wait for it (the in-flight word), not run beside it on the
 * progress thread, which would interleave two collectives' phases.
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
#include "transport/shm_impl.h"
#include "util/settings.h"
#include "util/wait.h"

#define NUM_RANKS      4
#define COUNT          4099 /* not a multiple of the rank count: uneven slices */
#define TIMEOUT_S      20
#define JOIN_TIMEOUT_S 60

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
    settings->timeout_s = TIMEOUT_S;
    if (tnt_boot_threads_create(ctx->group, ctx->rank, &boot) != TNT_OK) {
        tnt_settings_destroy(settings);
        fail_rank(ctx, "boot: %s", tnt_last_error());
        return NULL;
    }
    if (tnt_comm_create(boot, settings, &comm) != TNT_OK) {
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

int main(void)
{
    setenv("TNT_LOG_LEVEL", "error", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_threads_collectives),
        cmocka_unit_test(test_comm_threads_blocking_vs_posted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
