/*
 * TNT_SHM_STREAM=auto's choice (transport/shm_stream_auto.c), driven with
 * the per-byte costs measured on this project's VMs (docs/benchmarks.md):
 * close placement, cached copies 1.5x faster than streamed; far placement,
 * streamed 3.5x faster than cached. What a user relies on: auto costs
 * little against the right fixed choice in each placement, follows a
 * placement change quickly, and is not thrown off by one slow call.
 */
#include "transport/shm_stream_auto.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define MIB (1024u * 1024u)

/* Per-byte costs in ns: cached, streamed. */
static const double close_cost[2] = { 0.12, 0.18 };
static const double far_cost[2] = { 0.45, 0.13 };

struct run {
    unsigned calls[2]; /* per kind */
    double time_ns;
    unsigned first_switch; /* call index of the first use of the placement's faster kind as the
                              current choice, or calls + 1 */
};

/* calls collectives of `bytes`, each taking cost[kind] per byte. */
static struct run simulate(struct tnt_stream_auto *a, size_t bytes, const double cost[2],
                           unsigned calls)
{
    struct run r = { { 0, 0 }, 0, calls + 1 };
    const int faster = cost[1] < cost[0];
    for (unsigned i = 0; i < calls; i++) {
        int kind = tnt_stream_auto_pick(a, bytes);
        double ns = cost[kind] * (double)bytes;
        tnt_stream_auto_learn(a, bytes, kind, (uint64_t)ns);
        r.calls[kind]++;
        r.time_ns += ns;
        if (r.first_switch > calls && tnt_stream_auto_current(a, bytes) == faster)
            r.first_switch = i;
    }
    return r;
}

/* Time over the time of always using the faster kind. */
static double overhead(const struct run *r, size_t bytes, const double cost[2])
{
    double best = cost[0] < cost[1] ? cost[0] : cost[1];
    return r->time_ns / (best * (double)bytes * (r->calls[0] + r->calls[1]));
}

static void test_steady_placements_cost_little(void **state)
{
    (void)state;
    const size_t bytes = 64 * MIB;
    struct tnt_stream_auto a;

    tnt_stream_auto_init(&a, MIB);
    simulate(&a, bytes, close_cost, 50); /* learning */
    struct run r = simulate(&a, bytes, close_cost, 2000);
    assert_int_equal(tnt_stream_auto_current(&a, bytes), TNT_STREAM_KIND_CACHED);
    /* Tries of the slower kind cost at most about 1% (the previous policy,
     * a try every 8th call, cost 6%). */
    assert_true(overhead(&r, bytes, close_cost) < 1.015);

    tnt_stream_auto_init(&a, MIB);
    simulate(&a, bytes, far_cost, 50);
    r = simulate(&a, bytes, far_cost, 2000);
    assert_int_equal(tnt_stream_auto_current(&a, bytes), TNT_STREAM_KIND_STREAMED);
    assert_true(overhead(&r, bytes, far_cost) < 1.015);
}

static void test_follows_placement_changes(void **state)
{
    (void)state;
    const size_t bytes = 64 * MIB;
    struct tnt_stream_auto a;
    tnt_stream_auto_init(&a, MIB);
    simulate(&a, bytes, close_cost, 2000);

    /* close -> far: the cached copies get 3.7x slower, which is noticed
     * after two calls and corrected by the try that follows. */
    struct run r = simulate(&a, bytes, far_cost, 2000);
    assert_true(r.first_switch <= 3);
    assert_true(overhead(&r, bytes, far_cost) < 1.02);

    /* far -> close: the streamed copies do not get slower, so only the
     * periodic try notices; it comes within PERIOD_MAX calls. */
    r = simulate(&a, bytes, close_cost, 2000);
    assert_true(r.first_switch <= TNT_STREAM_AUTO_PERIOD_MAX + 1);
    assert_int_equal(tnt_stream_auto_current(&a, bytes), TNT_STREAM_KIND_CACHED);
    assert_true(overhead(&r, bytes, close_cost) < 1.05);
}

/* One call slowed by page faults or a descheduled peer (here 4x) must not
 * switch to the slower kind (the previous moving average switched, and
 * then kept the slower kind for 8 calls or more). */
static void test_one_slow_call_does_not_switch(void **state)
{
    (void)state;
    const size_t bytes = 64 * MIB;
    struct tnt_stream_auto a;
    tnt_stream_auto_init(&a, MIB);
    simulate(&a, bytes, close_cost, 500);
    for (int trial = 0; trial < 50; trial++) {
        int kind = tnt_stream_auto_pick(&a, bytes);
        double slow = kind == TNT_STREAM_KIND_CACHED ? 4.0 : 1.0;
        tnt_stream_auto_learn(&a, bytes, kind, (uint64_t)(slow * close_cost[kind] * bytes));
        assert_int_equal(tnt_stream_auto_current(&a, bytes), TNT_STREAM_KIND_CACHED);
        struct run r = simulate(&a, bytes, close_cost, 5);
        assert_int_equal(tnt_stream_auto_current(&a, bytes), TNT_STREAM_KIND_CACHED);
        assert_true(r.calls[TNT_STREAM_KIND_STREAMED] <= 1);
    }
}

/* Sizes learn apart: 1-4 MiB stay in cache and can favour one kind while
 * 256 MiB favour the other. */
static void test_sizes_learn_apart(void **state)
{
    (void)state;
    struct tnt_stream_auto a;
    tnt_stream_auto_init(&a, MIB);
    assert_int_equal(tnt_stream_auto_current(&a, 2 * MIB), TNT_STREAM_KIND_STREAMED);
    for (int i = 0; i < 100; i++) {
        simulate(&a, 2 * MIB, far_cost, 1);
        simulate(&a, 256 * MIB, close_cost, 1);
    }
    assert_int_equal(tnt_stream_auto_current(&a, 2 * MIB), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(tnt_stream_auto_current(&a, 3 * MIB), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(tnt_stream_auto_current(&a, 256 * MIB), TNT_STREAM_KIND_CACHED);
    assert_int_equal(tnt_stream_auto_current(&a, 300 * MIB), TNT_STREAM_KIND_CACHED);
    /* Beyond the last class, sizes share it; a huge threshold does not
     * overflow the class bounds. */
    assert_int_equal(tnt_stream_auto_current(&a, SIZE_MAX), TNT_STREAM_KIND_STREAMED);
    tnt_stream_auto_init(&a, SIZE_MAX / 2);
    simulate(&a, SIZE_MAX / 2, close_cost, 1);
    assert_int_equal(tnt_stream_auto_current(&a, SIZE_MAX), TNT_STREAM_KIND_STREAMED);
}

/* First calls: each kind once (streamed first), then the faster. */
static void test_first_calls(void **state)
{
    (void)state;
    struct tnt_stream_auto a;
    tnt_stream_auto_init(&a, MIB);
    assert_int_equal(tnt_stream_auto_pick(&a, 8 * MIB), TNT_STREAM_KIND_STREAMED);
    tnt_stream_auto_learn(&a, 8 * MIB, TNT_STREAM_KIND_STREAMED, 2000000);
    assert_int_equal(tnt_stream_auto_pick(&a, 8 * MIB), TNT_STREAM_KIND_CACHED);
    tnt_stream_auto_learn(&a, 8 * MIB, TNT_STREAM_KIND_CACHED, 1000000);
    assert_int_equal(tnt_stream_auto_current(&a, 8 * MIB), TNT_STREAM_KIND_CACHED);
    for (unsigned i = 0; i < TNT_STREAM_AUTO_PERIOD_MIN; i++)
        assert_int_equal(tnt_stream_auto_pick(&a, 8 * MIB), TNT_STREAM_KIND_CACHED);
    assert_int_equal(tnt_stream_auto_pick(&a, 8 * MIB), TNT_STREAM_KIND_STREAMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_calls),
        cmocka_unit_test(test_steady_placements_cost_little),
        cmocka_unit_test(test_follows_placement_changes),
        cmocka_unit_test(test_one_slow_call_does_not_switch),
        cmocka_unit_test(test_sizes_learn_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
