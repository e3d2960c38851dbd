/*
 * Unit tests of the core glue that need no other process: logging and the
 * last error, TNT_TIMEOUT through the settings and the bounded backoff,
 * status strings, the progress queue (order, wake-up, drain, error hand-over
 * per request, finalize) and the collective dispatch of a one-rank
 * communicator (and of a broken one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll.h"
#include "comm/comm.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/wait.h"

static void test_log_level_parse(void **state)
{
    (void)state;
    static const char *names[] = { "error", "warn", "info", "debug", "trace" };
    tnt_log_level_t level;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tnt_log_level_parse(names[i], &level), 0);
        assert_int_equal(level, i);
    }
    assert_int_equal(tnt_log_level_parse("WARNING", &level), 0);
    assert_int_equal(level, TNT_LOG_WARN);
    assert_int_equal(tnt_log_level_parse("loud", &level), -1);
    assert_int_equal(tnt_log_level_parse("", &level), -1);
    assert_int_equal(tnt_log_level_parse(NULL, &level), -1);
}

/* TNT_TIMEOUT through the settings parser tnt_init uses (test_settings.c
 * covers the parser as a whole). */
static double timeout_from(const char *value, tnt_status_t *status_p)
{
    tnt_settings_t settings;
    if (value != NULL) {
        setenv("TNT_TIMEOUT", value, 1);
    } else {
        unsetenv("TNT_TIMEOUT");
    }
    settings.timeout_s = -1;
    *status_p = tnt_settings_load(&settings);
    unsetenv("TNT_TIMEOUT");
    return settings.timeout_s;
}

static void test_env_timeout(void **state)
{
    (void)state;
    tnt_status_t status;
    assert_true(timeout_from(NULL, &status) == 300.0);
    assert_int_equal(status, TNT_OK);
    assert_true(timeout_from("30", &status) == 30.0);
    assert_true(timeout_from("2.5", &status) == 2.5);
    assert_true(timeout_from("0", &status) == 0.0);
    assert_true(timeout_from("45s", &status) == 45.0);
    assert_int_equal(status, TNT_OK);
    /* Bad values are rejected, naming the variable, the value and the range
     * (they used to fall back to the default with a warning). */
    static const char *bad[] = { "abc", "-1", "10x", "nan", "inf", "1e999" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        (void)timeout_from(bad[i], &status);
        assert_int_equal(status, TNT_ERR_INVALID_ARG);
        assert_non_null(strstr(tnt_last_error(), "TNT_TIMEOUT='"));
        assert_non_null(strstr(tnt_last_error(), bad[i]));
        assert_non_null(strstr(tnt_last_error(), "seconds from 0 to"));
    }
}

static void test_backoff_deadline(void **state)
{
    (void)state;
    tnt_backoff_t b;
    uint64_t t0 = tnt_time_ns();
    tnt_backoff_init(&b, 0.05);
    uint32_t steps = 0;
    while (tnt_backoff_wait(&b) == 0) {
        steps++;
    }
    double elapsed = (double)(tnt_time_ns() - t0) / 1e9;
    assert_true(elapsed >= 0.05);
    assert_true(elapsed < 0.5);
    /* It went through spinning and yielding into sleeping, so a 50 ms wait
     * took far fewer steps than a busy loop would. */
    assert_true(steps > 64);
    assert_true(steps < 5000);

    /* Timeout 0: no deadline. */
    tnt_backoff_init(&b, 0);
    assert_true(b.deadline_ns == UINT64_MAX);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(tnt_backoff_wait(&b), 0);
    }
    /* Monotonic. */
    uint64_t a = tnt_time_ns(), c = tnt_time_ns();
    assert_true(c >= a);
}

static void test_last_error(void **state)
{
    (void)state;
    tnt_error_clear();
    assert_string_equal(tnt_last_error(), "");
    assert_int_equal(tnt_error_set(TNT_ERR_TIMEOUT, "x %d", 7), TNT_ERR_TIMEOUT);
    assert_string_equal(tnt_last_error(), "x 7");

    tnt_log_set_identity(3, "node7");
    tnt_error_set(TNT_ERR_INVALID_ARG, "bad %s", "dtype");
    assert_string_equal(tnt_last_error(), "rank 3: bad dtype");
    /* A message that already names the rank gets the prefix once. */
    tnt_error_set(TNT_ERR_TIMEOUT, "rank 3: peer rank 5 did not join");
    assert_string_equal(tnt_last_error(), "rank 3: peer rank 5 did not join");
    /* raise returns the status and records the same way. */
    assert_int_equal(tnt_error_raise(TNT_ERR_MISMATCH, "plans differ"), TNT_ERR_MISMATCH);
    assert_string_equal(tnt_last_error(), "rank 3: plans differ");
    assert_int_equal(tnt_error_printed(), 1);
    /* The same words recorded without printing are not "printed": the flag
     * travels with the error, not with its text (it was a text compare). */
    tnt_error_set(TNT_ERR_MISMATCH, "plans differ");
    assert_string_equal(tnt_last_error(), "rank 3: plans differ");
    assert_int_equal(tnt_error_printed(), 0);
    tnt_error_restore("rank 1: from another thread", 1);
    assert_string_equal(tnt_last_error(), "rank 1: from another thread");
    assert_int_equal(tnt_error_printed(), 1);
    tnt_error_restore("rank 1: from another thread", 0);
    assert_int_equal(tnt_error_printed(), 0);
    tnt_error_clear();
    assert_string_equal(tnt_last_error(), "");
    assert_int_equal(tnt_error_printed(), 0);
}

static void test_status_strings(void **state)
{
    (void)state;
    for (int s = TNT_IN_PROGRESS; s >= TNT_ERR_SYSTEM; s--) {
        assert_string_not_equal(tnt_status_string((tnt_status_t)s), "unknown status");
    }
    assert_string_equal(tnt_status_string((tnt_status_t)-99), "unknown status");
    assert_int_equal(tnt_dtype_size(TNT_BFLOAT16), 2);
    assert_int_equal(tnt_dtype_size((tnt_dtype_t)-1), 0);
    assert_int_equal(tnt_dtype_size(TNT_DTYPE_LAST), 0);
    assert_non_null(tnt_version());
}

/* ---- progress queue ------------------------------------------------------ */

#define NUM_REQ 64

static int order[NUM_REQ];
static _Atomic int next_slot;

static tnt_status_t record(tnt_comm_t *comm, struct tnt_request *req)
{
    (void)comm;
    int id = (int)(intptr_t)req->args.user;
    if (id % 16 == 0) {
        usleep(1000); /* some take a while, so waiters block */
    }
    order[atomic_fetch_add(&next_slot, 1)] = id;
    return TNT_OK;
}

static tnt_status_t fail_peer(tnt_comm_t *comm, struct tnt_request *req)
{
    (void)comm;
    (void)req;
    return tnt_error_raise(TNT_ERR_PEER_FAILED, "peer rank 9 died during allreduce #4");
}

static tnt_comm_t *fake_comm(int size)
{
    tnt_comm_t *comm = calloc(1, sizeof(*comm));
    assert_non_null(comm);
    comm->size = size;
    comm->local_size = size;
    comm->num_nodes = 1;
    comm->timeout_s = 30;
    assert_int_equal(tnt_progress_init(comm), TNT_OK);
    return comm;
}

/* One rank alone: a post runs at once on the posting thread, in order, and
 * no progress thread is ever started (a one-rank communicator costs next to
 * nothing). */
static void test_progress_alone_runs_inline(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(1);
    static struct tnt_request reqs[8];

    atomic_store(&next_slot, 0);
    memset(reqs, 0, sizeof(reqs));
    for (int i = 0; i < 8; i++) {
        reqs[i].execute = record;
        reqs[i].args.user = (void *)(intptr_t)i;
        assert_int_equal(tnt_progress_post(comm, &reqs[i]), TNT_OK);
        assert_int_equal(atomic_load(&reqs[i].status), TNT_OK);
        assert_int_equal(order[i], i);
    }
    assert_int_equal(comm->progress_running, 0);
    assert_int_equal(tnt_progress_wait(comm, &reqs[7]), TNT_OK);
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

static void test_progress_order(void **state)
{
    (void)state;
    /* Two ranks' worth: a one-rank communicator never starts the thread. */
    tnt_comm_t *comm = fake_comm(2);
    static struct tnt_request reqs[NUM_REQ];

    atomic_store(&next_slot, 0);
    memset(reqs, 0, sizeof(reqs));
    /* Nothing posted: drain returns at once, and no thread was started. */
    assert_int_equal(tnt_progress_drain(comm), TNT_OK);
    assert_int_equal(comm->progress_running, 0);

    for (int i = 0; i < NUM_REQ; i++) {
        reqs[i].execute = record;
        reqs[i].args.user = (void *)(intptr_t)i;
        assert_int_equal(tnt_progress_post(comm, &reqs[i]), TNT_OK);
        assert_ptr_equal(reqs[i].comm, comm);
    }
    assert_int_equal(comm->progress_running, 1);
    /* Waiting for the last implies all earlier ones ran, in order. */
    assert_int_equal(tnt_progress_wait(comm, &reqs[NUM_REQ - 1]), TNT_OK);
    for (int i = 0; i < NUM_REQ; i++) {
        assert_int_equal(atomic_load(&reqs[i].status), TNT_OK);
        assert_int_equal(order[i], i);
    }
    assert_int_equal(tnt_progress_drain(comm), TNT_OK);
    assert_int_equal(atomic_load(&comm->completed), NUM_REQ);

    /* A second round reuses the same requests (the fusion engine does). */
    atomic_store(&next_slot, 0);
    for (int i = 0; i < NUM_REQ; i++) {
        assert_int_equal(tnt_progress_post(comm, &reqs[i]), TNT_OK);
    }
    assert_int_equal(tnt_progress_drain(comm), TNT_OK);
    for (int i = 0; i < NUM_REQ; i++) {
        assert_int_equal(order[i], i);
    }
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

static void test_progress_error_handover(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(2);
    struct tnt_request req = { .execute = fail_peer };

    tnt_error_clear();
    assert_int_equal(tnt_progress_post(comm, &req), TNT_OK);
    assert_int_equal(tnt_progress_wait(comm, &req), TNT_ERR_PEER_FAILED);
    /* The progress thread's message is now this thread's last error. */
    assert_non_null(strstr(tnt_last_error(), "peer rank 9 died during allreduce #4"));
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

static tnt_status_t fail_with_user_message(tnt_comm_t *comm, struct tnt_request *req)
{
    (void)comm;
    return tnt_error_raise(TNT_ERR_TIMEOUT, "%s", (const char *)req->args.user);
}

/* Two requests fail, one after the other, before anybody waits: each wait
 * reports its own request's cause, not the latest failure of the queue. */
static void test_progress_error_per_request(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(2);
    struct tnt_request first = { .execute = fail_with_user_message,
                                 .args.user = "rank 1 did not join allreduce #4" };
    struct tnt_request second = { .execute = fail_with_user_message,
                                  .args.user = "rank 3 did not join barrier #5" };
    struct tnt_request ok = { .execute = record, .args.user = (void *)(intptr_t)1 };

    atomic_store(&next_slot, 0);
    assert_int_equal(tnt_progress_post(comm, &first), TNT_OK);
    assert_int_equal(tnt_progress_post(comm, &second), TNT_OK);
    assert_int_equal(tnt_progress_post(comm, &ok), TNT_OK);
    /* Posting order is execution order: all three have finished. */
    tnt_error_clear();
    assert_int_equal(tnt_progress_wait(comm, &ok), TNT_OK);
    assert_string_equal(tnt_last_error(), "");

    assert_int_equal(tnt_progress_wait(comm, &first), TNT_ERR_TIMEOUT);
    assert_non_null(strstr(tnt_last_error(), "allreduce #4"));
    assert_null(strstr(tnt_last_error(), "barrier #5"));
    assert_int_equal(tnt_progress_wait(comm, &second), TNT_ERR_TIMEOUT);
    assert_non_null(strstr(tnt_last_error(), "barrier #5"));
    /* Waiting again gives the same answer (tnt_test then tnt_wait does). */
    assert_int_equal(tnt_progress_wait(comm, &first), TNT_ERR_TIMEOUT);
    assert_non_null(strstr(tnt_last_error(), "allreduce #4"));
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

static void test_progress_finalize_drains(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(1);
    static struct tnt_request reqs[8];

    atomic_store(&next_slot, 0);
    memset(reqs, 0, sizeof(reqs));
    for (int i = 0; i < 8; i++) {
        reqs[i].execute = record;
        reqs[i].args.user = (void *)(intptr_t)(i * 16); /* each sleeps 1 ms */
        assert_int_equal(tnt_progress_post(comm, &reqs[i]), TNT_OK);
    }
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(atomic_load(&reqs[i].status), TNT_OK);
    }
    assert_int_equal(atomic_load(&next_slot), 8);
    free(comm);
}

/* ---- dispatch --------------------------------------------------------------- */

static void test_coll_size1(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(1);
    double in[5] = { 1, 2, 3, 4, 5 }, out[5] = { 0 };

    assert_int_equal(tnt_coll_allreduce(comm, in, out, 5, TNT_FLOAT64, TNT_AVG), TNT_OK);
    assert_memory_equal(in, out, sizeof(in));
    assert_int_equal(tnt_coll_allreduce(comm, in, in, 5, TNT_FLOAT64, TNT_PROD), TNT_OK);
    assert_true(in[4] == 5);
    char g[3] = "ab", h[3] = "";
    assert_int_equal(tnt_coll_allgather(comm, g, h, 3), TNT_OK);
    assert_string_equal(h, "ab");
    assert_int_equal(tnt_coll_broadcast(comm, g, 3, 0), TNT_OK);
    assert_int_equal(tnt_coll_barrier(comm), TNT_OK);
    assert_int_equal(comm->coll_seq, 5);
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

static void test_coll_broken_fails_fast(void **state)
{
    (void)state;
    tnt_comm_t *comm = fake_comm(4);
    comm->coll_seq = 7;
    comm->broken_status = TNT_ERR_TIMEOUT;
    comm->broken_seq = 7;
    comm->broken_name = "barrier";

    float x = 1;
    assert_int_equal(tnt_coll_allreduce(comm, &x, &x, 1, TNT_FLOAT32, TNT_SUM),
                     TNT_ERR_PEER_FAILED);
    assert_non_null(strstr(tnt_last_error(), "allreduce #8 not started: barrier #7 failed"));
    assert_int_equal(tnt_coll_barrier(comm), TNT_ERR_PEER_FAILED);
    assert_non_null(strstr(tnt_last_error(), "barrier #9"));
    assert_int_equal(tnt_progress_finalize(comm), TNT_OK);
    free(comm);
}

int main(void)
{
    /* Keep the expected error lines of these tests off the output. */
    setenv("TNT_LOG_LEVEL", "error", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_level_parse),
        cmocka_unit_test(test_env_timeout),
        cmocka_unit_test(test_backoff_deadline),
        cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_progress_alone_runs_inline),
        cmocka_unit_test(test_progress_order),
        cmocka_unit_test(test_progress_error_handover),
        cmocka_unit_test(test_progress_error_per_request),
        cmocka_unit_test(test_progress_finalize_drains),
        cmocka_unit_test(test_coll_size1),
        cmocka_unit_test(test_coll_broken_fails_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
