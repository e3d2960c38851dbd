/*
 * Unit tests of the bootstrap interface with no launcher: several ranks as
 * threads over the in-process bootstrap (allgather, hostnames and
 * the launcher's local layout, a rank that never arrives, a size mismatch, an
 * abort) and the singleton a process without PMIx gets.
 */
/* pthread_timedjoin_np needs _GNU_SOURCE, which the build defines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot/boot.h"
#include "boot/boot_threads.h"
#include "util/log.h"
#include "util/wait.h"

#define MAX_RANKS 8
/* No thread of these tests may take longer than this to finish. */
#define JOIN_TIMEOUT_S 30

struct rank_ctx {
    tnt_boot_threads_group_t *group;
    int rank;
    int size;
    tnt_boot_t *boot;
    /* What the rank's body reports back: the first failed step, if any. */
    tnt_status_t status;
    char message[1024];
    double elapsed_s;
};

typedef void (*rank_body_t)(struct rank_ctx *ctx);

struct rank_thread {
    struct rank_ctx ctx;
    rank_body_t body;
    pthread_t thread;
};

static void *rank_main(void *arg)
{
    struct rank_thread *t = arg;
    t->ctx.status = tnt_boot_threads_create(t->ctx.group, t->ctx.rank, &t->ctx.boot);
    if (t->ctx.status == TNT_OK) {
        t->body(&t->ctx);
    }
    return NULL;
}

static void join_bounded(pthread_t thread)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += JOIN_TIMEOUT_S;
    assert_int_equal(pthread_timedjoin_np(thread, NULL, &deadline), 0);
}

/* Runs body on ranks 0..started-1 of a group of size ranks (the others never
 * arrive), joins them, and leaves each rank's report in threads. */
static void run_ranks(int size, int started, const char *const *hostnames, double timeout_s,
                      rank_body_t body, struct rank_thread *threads,
                      tnt_boot_threads_group_t **group_p)
{
    tnt_boot_threads_group_t *group;
    assert_int_equal(tnt_boot_threads_group_create(size, hostnames, timeout_s, &group), TNT_OK);
    for (int r = 0; r < started; r++) {
        memset(&threads[r], 0, sizeof(threads[r]));
        threads[r].ctx.group = group;
        threads[r].ctx.rank = r;
        threads[r].ctx.size = size;
        threads[r].body = body;
        assert_int_equal(pthread_create(&threads[r].thread, NULL, rank_main, &threads[r]), 0);
    }
    for (int r = 0; r < started; r++) {
        join_bounded(threads[r].thread);
    }
    *group_p = group;
}

static void finish(tnt_boot_threads_group_t *group, struct rank_thread *threads, int started)
{
    for (int r = 0; r < started; r++) {
        tnt_boot_finalize(threads[r].ctx.boot);
    }
    tnt_boot_threads_group_destroy(group);
}

/* Records the first failure of a rank (cmocka's asserts are for the main
 * thread only). */
static int report(struct rank_ctx *ctx, tnt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int report(struct rank_ctx *ctx, tnt_status_t status, const char *fmt, ...)
{
    if (ctx->status == TNT_OK && status != TNT_OK) {
        va_list ap;
        ctx->status = status;
        va_start(ap, fmt);
        vsnprintf(ctx->message, sizeof(ctx->message), fmt, ap);
        va_end(ap);
    }
    return status != TNT_OK;
}

/* ---- many rounds ------------------------------------------------------------ */

#define ROUNDS 50

static const char *const two_nodes[] = { "n0", "n0", "n1", "n1", "n0" };

static void body_rounds(struct rank_ctx *ctx)
{
    const struct tnt_boot_info *info = tnt_boot_info(ctx->boot);
    static const int local_rank[] = { 0, 1, 0, 1, 2 };
    static const int local_size[] = { 3, 3, 2, 2, 3 };
    uint64_t all[MAX_RANKS];
    unsigned char varying[MAX_RANKS * ROUNDS];

    if (info->rank != ctx->rank || info->size != ctx->size || info->is_singleton ||
        info->local_rank != local_rank[ctx->rank] || info->local_size != local_size[ctx->rank] ||
        strcmp(info->hostname, two_nodes[ctx->rank]) != 0) {
        report(ctx, TNT_ERR_MISMATCH, "info: rank %d of %d, local %d of %d on %s", info->rank,
               info->size, info->local_rank, info->local_size, info->hostname);
        return;
    }
    for (int round = 0; round < ROUNDS; round++) {
        /* Uneven work makes ranks run into the next round while others still
         * read the last one. */
        if ((round + ctx->rank) % 7 == 0) {
            usleep(200);
        }
        uint64_t mine = (uint64_t)ctx->rank << 32 | (uint64_t)round;
        if (report(ctx, tnt_boot_allgather(ctx->boot, &mine, all, sizeof(mine)), "allgather: %s",
                   tnt_last_error())) {
            return;
        }
        for (int r = 0; r < ctx->size; r++) {
            if (all[r] != ((uint64_t)r << 32 | (uint64_t)round)) {
                report(ctx, TNT_ERR_MISMATCH, "round %d: block of rank %d is %llx", round, r,
                       (unsigned long long)all[r]);
                return;
            }
        }
        /* A size that changes every round, 0 bytes included. */
        unsigned char block[ROUNDS];
        memset(block, 'a' + ctx->rank, sizeof(block));
        if (report(ctx, tnt_boot_allgather(ctx->boot, block, varying, (size_t)round),
                   "allgather of %d bytes: %s", round, tnt_last_error())) {
            return;
        }
        for (int r = 0; r < ctx->size; r++) {
            for (int i = 0; i < round; i++) {
                if (varying[r * round + i] != 'a' + r) {
                    report(ctx, TNT_ERR_MISMATCH, "round %d: byte %d of rank %d", round, i, r);
                    return;
                }
            }
        }
    }
    /* Node identity as tnt_init learns it: every rank's host, gathered. */
    char hosts[5][TNT_BOOT_HOSTNAME_MAX];
    if (report(ctx, tnt_boot_allgather(ctx->boot, info->hostname, hosts, sizeof(hosts[0])),
               "hostname allgather: %s", tnt_last_error())) {
        return;
    }
    for (int r = 0; r < ctx->size; r++) {
        if (strcmp(hosts[r], two_nodes[r]) != 0) {
            report(ctx, TNT_ERR_MISMATCH, "rank %d's host is %s", r, hosts[r]);
            return;
        }
    }
}

static void test_threads_rounds(void **state)
{
    (void)state;
    struct rank_thread threads[5];
    tnt_boot_threads_group_t *group;

    run_ranks(5, 5, two_nodes, 20, body_rounds, threads, &group);
    for (int r = 0; r < 5; r++) {
        if (threads[r].ctx.status != TNT_OK) {
            fail_msg("rank %d: %s", r, threads[r].ctx.message);
        }
    }
    /* One job: one id. */
    for (int r = 1; r < 5; r++) {
        assert_string_equal(tnt_boot_info(threads[r].ctx.boot)->job_id,
                            tnt_boot_info(threads[0].ctx.boot)->job_id);
    }
    assert_int_equal(tnt_boot_threads_abort_code(group, NULL, 0), 0);
    finish(group, threads, 5);
}

/* ---- a rank that never arrives ----------------------------------------------- */

#define SHORT_TIMEOUT_S 0.3

static void body_allgather_twice(struct rank_ctx *ctx)
{
    uint64_t t0 = tnt_time_ns();
    int one = 1, gathered[4];
    ctx->status = tnt_boot_allgather(ctx->boot, &one, gathered, sizeof(one));
    ctx->elapsed_s = (double)(tnt_time_ns() - t0) / 1e9;
    snprintf(ctx->message, sizeof(ctx->message), "%s", tnt_last_error());
    if (ctx->status == TNT_OK) {
        return;
    }
    /* The job is broken: the next collective fails at once, with the same
     * cause, instead of waiting out another timeout. */
    int x = 1, out[4];
    t0 = tnt_time_ns();
    tnt_status_t again = tnt_boot_allgather(ctx->boot, &x, out, sizeof(x));
    double again_s = (double)(tnt_time_ns() - t0) / 1e9;
    if (again != ctx->status || again_s > SHORT_TIMEOUT_S / 2 ||
        strstr(tnt_last_error(), "rank 2 (1 of 3)") == NULL) {
        ctx->status = TNT_ERR_MISMATCH;
        snprintf(ctx->message, sizeof(ctx->message), "after the timeout: %d in %.3f s: %s", again,
                 again_s, tnt_last_error());
    }
}

static void test_threads_timeout(void **state)
{
    (void)state;
    struct rank_thread threads[3];
    tnt_boot_threads_group_t *group;

    /* Ranks 0 and 1 of 3 start; rank 2 never does. */
    run_ranks(3, 2, NULL, SHORT_TIMEOUT_S, body_allgather_twice, threads, &group);
    for (int r = 0; r < 2; r++) {
        struct rank_ctx *ctx = &threads[r].ctx;
        if (ctx->status != TNT_ERR_TIMEOUT) {
            fail_msg("rank %d: status %d: %s", r, ctx->status, ctx->message);
        }
        assert_non_null(strstr(ctx->message, "allgather #0"));
        assert_non_null(strstr(ctx->message, "rank 2 (1 of 3) did not arrive"));
        assert_null(strstr(ctx->message, "ranks"));
        /* The rank that timed out first waited its whole timeout, and nobody
         * waited much longer than that. */
        assert_true(ctx->elapsed_s < SHORT_TIMEOUT_S + 5);
    }
    assert_true(threads[0].ctx.elapsed_s >= SHORT_TIMEOUT_S ||
                threads[1].ctx.elapsed_s >= SHORT_TIMEOUT_S);
    finish(group, threads, 2);
}

/* ---- ranks that disagree --------------------------------------------------- */

static void body_mismatch(struct rank_ctx *ctx)
{
    uint64_t in[2] = { 1, 2 }, out[8];
    /* Rank 1 contributes twice as much as the others. */
    size_t bytes = ctx->rank == 1 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    ctx->status = tnt_boot_allgather(ctx->boot, in, out, bytes);
    snprintf(ctx->message, sizeof(ctx->message), "%s", tnt_last_error());
}

static void test_threads_mismatch(void **state)
{
    (void)state;
    struct rank_thread threads[3];
    tnt_boot_threads_group_t *group;

    run_ranks(3, 3, NULL, 10, body_mismatch, threads, &group);
    for (int r = 0; r < 3; r++) {
        struct rank_ctx *ctx = &threads[r].ctx;
        if (ctx->status != TNT_ERR_MISMATCH) {
            fail_msg("rank %d: status %d: %s", r, ctx->status, ctx->message);
        }
        assert_non_null(strstr(ctx->message, "not running the same code path"));
    }
    finish(group, threads, 3);
}

/* ---- abort ------------------------------------------------------------------- */

static void body_abort(struct rank_ctx *ctx)
{
    if (ctx->rank == 1) {
        tnt_boot_abort(ctx->boot, 3, "loss is NaN at step 12");
    }
    int one = 1, gathered[3];
    ctx->status = tnt_boot_allgather(ctx->boot, &one, gathered, sizeof(one));
    snprintf(ctx->message, sizeof(ctx->message), "%s", tnt_last_error());
}

static void test_threads_abort(void **state)
{
    (void)state;
    struct rank_thread threads[3];
    tnt_boot_threads_group_t *group;
    char message[256];

    run_ranks(3, 3, NULL, 10, body_abort, threads, &group);
    for (int r = 0; r < 3; r += 2) {
        struct rank_ctx *ctx = &threads[r].ctx;
        if (ctx->status != TNT_ERR_PEER_FAILED) {
            fail_msg("rank %d: status %d: %s", r, ctx->status, ctx->message);
        }
        assert_non_null(strstr(ctx->message, "rank 1 aborted the job (exit code 3)"));
        assert_non_null(strstr(ctx->message, "loss is NaN at step 12"));
    }
    assert_int_equal(tnt_boot_threads_abort_code(group, message, sizeof(message)), 3);
    assert_string_equal(message, "loss is NaN at step 12");
    finish(group, threads, 3);
}

/* ---- arguments and the singleton ------------------------------------------------- */

static void test_threads_arguments(void **state)
{
    (void)state;
    tnt_boot_threads_group_t *group;
    tnt_boot_t *boot, *again;
    char host[64];

    assert_int_equal(tnt_boot_threads_group_create(2, NULL, 0, &group), TNT_ERR_INVALID_ARG);
    assert_int_equal(tnt_boot_threads_group_create(0, NULL, 1, &group), TNT_ERR_INVALID_ARG);
    assert_int_equal(tnt_boot_threads_group_create(2, NULL, 1, &group), TNT_OK);
    assert_int_equal(tnt_boot_threads_create(group, 2, &boot), TNT_ERR_INVALID_ARG);
    assert_int_equal(tnt_boot_threads_create(group, 1, &boot), TNT_OK);
    assert_int_equal(tnt_boot_threads_create(group, 1, &again), TNT_ERR_INVALID_ARG);
    assert_string_equal(tnt_boot_info(boot)->hostname, "localhost");
    assert_int_equal(tnt_boot_allgather(boot, NULL, host, 4), TNT_ERR_INVALID_ARG);
    tnt_boot_finalize(boot);
    tnt_boot_threads_group_destroy(group);
}

static void test_singleton(void **state)
{
    (void)state;
    tnt_boot_t *boot;
    int in[3] = { 7, 8, 9 }, out[3] = { 0 };

    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
    assert_int_equal(tnt_boot_init(5, &boot), TNT_OK);
    const struct tnt_boot_info *info = tnt_boot_info(boot);
    assert_int_equal(info->rank, 0);
    assert_int_equal(info->size, 1);
    assert_int_equal(info->is_singleton, 1);
    assert_non_null(strstr(info->job_id, "singleton-"));
    assert_int_equal(tnt_boot_allgather(boot, in, out, sizeof(in)), TNT_OK);
    assert_memory_equal(in, out, sizeof(in));
    assert_true(info->hostname[0] != '\0');
    tnt_boot_finalize(boot);
}

/* PMIX_JOB_SIZE arrives as a long: it is bounded before it becomes an int
 * (2^32 + 2 used to pass the check and become a job of 2 ranks). */
static void test_pmix_job_size(void **state)
{
    (void)state;
    assert_int_equal(tnt_boot_pmix_check_size(1, 0), 0);
    assert_int_equal(tnt_boot_pmix_check_size(4, 3), 0);
    assert_int_equal(tnt_boot_pmix_check_size(TNT_BOOT_MAX_SIZE, 0), 0);
    assert_int_equal(tnt_boot_pmix_check_size(4, 4), -1);
    assert_int_equal(tnt_boot_pmix_check_size(0, 0), -1);
    assert_int_equal(tnt_boot_pmix_check_size(-1, 0), -1);
    assert_int_equal(tnt_boot_pmix_check_size((1L << 32) + 2, 0), -1);
    assert_int_equal(tnt_boot_pmix_check_size(LONG_MAX, 0), -1);
    assert_int_equal(tnt_boot_pmix_check_size(TNT_BOOT_MAX_SIZE + 1, 0), -1);
    /* PMIX_RANK_WILDCARD and friends are near UINT32_MAX. */
    assert_int_equal(tnt_boot_pmix_check_size(8, 0xfffffffeul), -1);
}

int main(void)
{
    /* Keep the expected error lines of these tests off the output. */
    setenv("TNT_LOG_LEVEL", "error", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_rounds),    cmocka_unit_test(test_threads_timeout),
        cmocka_unit_test(test_threads_mismatch),  cmocka_unit_test(test_threads_abort),
        cmocka_unit_test(test_threads_arguments), cmocka_unit_test(test_singleton),
        cmocka_unit_test(test_pmix_job_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
