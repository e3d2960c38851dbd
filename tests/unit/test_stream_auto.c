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

/* The chooser as the shared-memory transport drives it (shm_allreduce.c):
 * each call uses the kind picked at the previous call of its size class
 * (the first call of a class, tnt_stream_auto_first as of the previous
 * call of any class), and the pick for the next call comes before this
 * call's time is learned. */
struct chooser {
    struct tnt_stream_auto a;
    unsigned calls[TNT_STREAM_AUTO_CLASSES];
    int planned[TNT_STREAM_AUTO_CLASSES];
};

static void chooser_init(struct chooser *ch, size_t min_bytes)
{
    tnt_stream_auto_init(&ch->a, min_bytes);
    for (int c = 0; c < TNT_STREAM_AUTO_CLASSES; c++) {
        ch->calls[c] = 0;
        ch->planned[c] = TNT_STREAM_KIND_STREAMED;
    }
}

/* One call that takes factor * cost[kind] per byte; returns the kind. */
static int chooser_call(struct chooser *ch, size_t bytes, const double cost[2], double factor)
{
    const int c = tnt_stream_auto_class_of(&ch->a, bytes);
    const int kind = ch->planned[c];
    ch->calls[c]++;
    ch->planned[c] = tnt_stream_auto_pick(&ch->a, bytes);
    for (int d = 0; d < TNT_STREAM_AUTO_CLASSES; d++) {
        if (ch->calls[d] == 0) {
            ch->planned[d] = tnt_stream_auto_first(&ch->a, d);
        }
    }
    tnt_stream_auto_learn(&ch->a, bytes, kind, (uint64_t)(factor * cost[kind] * (double)bytes));
    return kind;
}

/* calls collectives of `bytes`, each taking cost[kind] per byte. */
static struct run simulate(struct chooser *ch, size_t bytes, const double cost[2], unsigned calls)
{
    struct run r = { { 0, 0 }, 0, calls + 1 };
    const int faster = cost[1] < cost[0];
    for (unsigned i = 0; i < calls; i++) {
        int kind = chooser_call(ch, bytes, cost, 1.0);
        r.calls[kind]++;
        r.time_ns += cost[kind] * (double)bytes;
        if (r.first_switch > calls && tnt_stream_auto_current(&ch->a, bytes) == faster) {
            r.first_switch = i;
        }
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
    struct chooser ch;

    chooser_init(&ch, MIB);
    simulate(&ch, bytes, close_cost, 50); /* learning */
    struct run r = simulate(&ch, bytes, close_cost, 2000);
    assert_int_equal(tnt_stream_auto_current(&ch.a, bytes), TNT_STREAM_KIND_CACHED);
    /* Tries of the slower kind cost at most about 1% (the previous policy,
     * a try every 8th call, cost 6%). */
    assert_true(overhead(&r, bytes, close_cost) < 1.015);

    chooser_init(&ch, MIB);
    simulate(&ch, bytes, far_cost, 50);
    r = simulate(&ch, bytes, far_cost, 2000);
    assert_int_equal(tnt_stream_auto_current(&ch.a, bytes), TNT_STREAM_KIND_STREAMED);
    assert_true(overhead(&r, bytes, far_cost) < 1.015);
}

static void test_follows_placement_changes(void **state)
{
    (void)state;
    const size_t bytes = 64 * MIB;
    struct chooser ch;
    chooser_init(&ch, MIB);
    simulate(&ch, bytes, close_cost, 2000);

    /* close -> far: the cached copies get 3.7x slower, which is noticed
     * after two calls and corrected by the try that follows. */
    struct run r = simulate(&ch, bytes, far_cost, 2000);
    assert_true(r.first_switch <= 3);
    assert_true(overhead(&r, bytes, far_cost) < 1.02);

    /* far -> close: the streamed copies do not get slower, so only the
     * periodic try notices; it comes within PERIOD_MAX calls. */
    r = simulate(&ch, bytes, close_cost, 2000);
    assert_true(r.first_switch <= TNT_STREAM_AUTO_PERIOD_MAX + 1);
    assert_int_equal(tnt_stream_auto_current(&ch.a, bytes), TNT_STREAM_KIND_CACHED);
    assert_true(overhead(&r, bytes, close_cost) < 1.05);
}

/* One call slowed by page faults or a descheduled peer (here 4x) must not
 * switch to the slower kind (the previous moving average switched, and
 * then kept the slower kind for 8 calls or more). */
static void test_one_slow_call_does_not_switch(void **state)
{
    (void)state;
    const size_t bytes = 64 * MIB;
    struct chooser ch;
    chooser_init(&ch, MIB);
    simulate(&ch, bytes, close_cost, 500);
    for (int trial = 0; trial < 50; trial++) {
        /* 4x slower if it is a call of the current (cached) kind. */
        chooser_call(&ch, bytes, (const double[2]){ 4 * close_cost[0], close_cost[1] }, 1.0);
        assert_int_equal(tnt_stream_auto_current(&ch.a, bytes), TNT_STREAM_KIND_CACHED);
        struct run r = simulate(&ch, bytes, close_cost, 5);
        assert_int_equal(tnt_stream_auto_current(&ch.a, bytes), TNT_STREAM_KIND_CACHED);
        assert_true(r.calls[TNT_STREAM_KIND_STREAMED] <= 1);
    }
}

/* Sizes learn apart: 1-4 MiB stay in cache and can favour one kind while
 * 256 MiB favour the other. */
static void test_sizes_learn_apart(void **state)
{
    (void)state;
    struct chooser ch;
    chooser_init(&ch, MIB);
    assert_int_equal(tnt_stream_auto_current(&ch.a, 2 * MIB), TNT_STREAM_KIND_STREAMED);
    for (int i = 0; i < 100; i++) {
        simulate(&ch, 2 * MIB, far_cost, 1);
        simulate(&ch, 256 * MIB, close_cost, 1);
    }
    assert_int_equal(tnt_stream_auto_current(&ch.a, 2 * MIB), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(tnt_stream_auto_current(&ch.a, 3 * MIB), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(tnt_stream_auto_current(&ch.a, 256 * MIB), TNT_STREAM_KIND_CACHED);
    assert_int_equal(tnt_stream_auto_current(&ch.a, 300 * MIB), TNT_STREAM_KIND_CACHED);
    /* A size not used yet starts from the nearest learned one (here the
     * last class, which all larger sizes share). A huge threshold does not
     * overflow the class bounds. */
    assert_int_equal(tnt_stream_auto_current(&ch.a, SIZE_MAX), TNT_STREAM_KIND_CACHED);
    assert_int_equal(tnt_stream_auto_first(&ch.a, 1), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(tnt_stream_auto_first(&ch.a, 3), TNT_STREAM_KIND_CACHED);
    chooser_init(&ch, SIZE_MAX / 2);
    simulate(&ch, SIZE_MAX / 2, close_cost, 1);
    assert_int_equal(tnt_stream_auto_current(&ch.a, SIZE_MAX), TNT_STREAM_KIND_STREAMED);
}

/* The first size learned times both kinds within its first three calls
 * (the pick is one call ahead) and then keeps the faster, with tries of
 * the other whose period doubles while they confirm the choice. A size
 * learned later starts from its neighbour's choice and period. */
static void test_first_calls(void **state)
{
    (void)state;
    const double cost[2] = { 0.1, 0.2 };
    struct chooser ch;
    chooser_init(&ch, MIB);
    assert_int_equal(chooser_call(&ch, 8 * MIB, cost, 1.0), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(chooser_call(&ch, 8 * MIB, cost, 1.0), TNT_STREAM_KIND_STREAMED);
    assert_int_equal(chooser_call(&ch, 8 * MIB, cost, 1.0), TNT_STREAM_KIND_CACHED);
    assert_int_equal(tnt_stream_auto_current(&ch.a, 8 * MIB), TNT_STREAM_KIND_CACHED);
    unsigned tries[2] = { 0, 0 };
    for (int i = 0; i < 400; i++) {
        tries[i / 200] += chooser_call(&ch, 8 * MIB, cost, 1.0) == TNT_STREAM_KIND_STREAMED;
    }
    assert_true(tries[0] >= 2 && tries[0] <= 200 / (2 * TNT_STREAM_AUTO_PERIOD_MIN) + 1);
    assert_true(tries[1] >= 1 && tries[1] <= tries[0]);

    /* 64 MiB, never used: cached from the first call, tries as rare. */
    unsigned streamed = 0;
    for (int i = 0; i < 200; i++) {
        streamed += chooser_call(&ch, 64 * MIB, cost, 1.0) == TNT_STREAM_KIND_STREAMED;
    }
    assert_true(streamed <= tries[1]);
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
