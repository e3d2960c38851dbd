/*
 * Shard arithmetic: micro-batch ranges, the seeded permutation and per-step
 * ranges. The golden permutations pin the documented algorithm
 * (splitmix64-seeded xoshiro256**, Lemire bounded sampling, Fisher-Yates from
 * the top); they were cross-checked against an independent Python
 * implementation of the description in shard.c / docs/tuning.md. If one of
 * them changes, every user's data order changes: do not "fix" the numbers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tnt/tnt.h>

static void check_is_permutation(const uint64_t *perm, uint64_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    assert_non_null(seen);
    for (uint64_t i = 0; i < n; i++) {
        assert_true(perm[i] < n);
        assert_int_equal(seen[perm[i]], 0);
        seen[perm[i]] = 1;
    }
    free(seen);
}

static void test_range_rule(void **state)
{
    (void)state;
    /* 10 over 4: 3 3 2 2 */
    const uint64_t begins[4] = { 0, 3, 6, 8 };
    const uint64_t ends[4] = { 3, 6, 8, 10 };
    for (int r = 0; r < 4; r++) {
        tnt_range_t range = tnt_shard_range(10, r, 4);
        assert_int_equal(range.begin, begins[r]);
        assert_int_equal(range.end, ends[r]);
    }
    /* batch smaller than the rank count: the last ranks get nothing */
    for (int r = 0; r < 5; r++) {
        tnt_range_t range = tnt_shard_range(3, r, 5);
        assert_int_equal(range.end - range.begin, r < 3 ? 1 : 0);
        assert_int_equal(range.begin, (uint64_t)(r < 3 ? r : 3));
    }
    /* invalid arguments give an empty range */
    tnt_range_t bad = tnt_shard_range(10, 4, 4);
    assert_int_equal(bad.begin, 0);
    assert_int_equal(bad.end, 0);
    bad = tnt_shard_range(10, -1, 4);
    assert_int_equal(bad.end, 0);
    bad = tnt_shard_range(10, 0, 0);
    assert_int_equal(bad.end, 0);
}

/* Every batch size and rank count: ranges are contiguous, in rank order,
 * cover [0, batch) exactly and follow the floor/extra rule. */
static void test_range_coverage(void **state)
{
    (void)state;
    for (int p = 1; p <= 17; p++) {
        for (uint64_t b = 0; b <= 100; b++) {
            uint64_t next = 0;
            for (int r = 0; r < p; r++) {
                tnt_range_t range = tnt_shard_range(b, r, p);
                assert_int_equal(range.begin, next);
                assert_int_equal(range.end - range.begin,
                                 b / (uint64_t)p + ((uint64_t)r < b % (uint64_t)p ? 1 : 0));
                next = range.end;
            }
            assert_int_equal(next, b);
        }
    }
}

static void test_range_large(void **state)
{
    (void)state;
    const uint64_t b = UINT64_MAX;
    const int p = 7;
    uint64_t next = 0;
    for (int r = 0; r < p; r++) {
        tnt_range_t range = tnt_shard_range(b, r, p);
        assert_true(range.begin == next);
        assert_true(range.end >= range.begin);
        next = range.end;
    }
    assert_true(next == b);
    tnt_range_t last = tnt_shard_range(b, 65535, 65536);
    assert_true(last.end == b);
}

static void test_permutation_golden(void **state)
{
    (void)state;
    uint64_t perm[16];
    const uint64_t golden_10_0[10] = { 7, 8, 3, 1, 5, 4, 2, 0, 9, 6 };
    const uint64_t golden_10_42[10] = { 9, 1, 4, 2, 8, 7, 6, 5, 3, 0 };
    const uint64_t golden_16_12345[16] = { 9, 10, 5, 7, 8, 4, 15, 3, 2, 14, 12, 6, 0, 13, 1, 11 };

    assert_int_equal(tnt_shard_permutation(10, 0, perm), TNT_OK);
    assert_memory_equal(perm, golden_10_0, sizeof(golden_10_0));
    assert_int_equal(tnt_shard_permutation(10, 42, perm), TNT_OK);
    assert_memory_equal(perm, golden_10_42, sizeof(golden_10_42));
    assert_int_equal(tnt_shard_permutation(16, 12345, perm), TNT_OK);
    assert_memory_equal(perm, golden_16_12345, sizeof(golden_16_12345));

    /* a longer one, summarised: first entries and sum(i * perm[i]) */
    uint64_t *big = malloc(1000 * sizeof(*big));
    assert_non_null(big);
    assert_int_equal(tnt_shard_permutation(1000, 2026, big), TNT_OK);
    const uint64_t head[8] = { 547, 513, 686, 339, 94, 713, 38, 867 };
    assert_memory_equal(big, head, sizeof(head));
    uint64_t weighted = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        weighted += i * big[i];
    }
    assert_int_equal(weighted, 250810372);
    free(big);
}

static void test_permutation_properties(void **state)
{
    (void)state;
    const uint64_t n = 5000;
    uint64_t *a = malloc(n * sizeof(*a));
    uint64_t *b = malloc(n * sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);

    for (uint64_t len = 0; len <= 40; len++) {
        assert_int_equal(tnt_shard_permutation(len, len * 31 + 1, a), TNT_OK);
        check_is_permutation(a, len);
    }
    assert_int_equal(tnt_shard_permutation(n, 7, a), TNT_OK);
    check_is_permutation(a, n);
    /* same seed, same order (what every rank relies on) */
    assert_int_equal(tnt_shard_permutation(n, 7, b), TNT_OK);
    assert_memory_equal(a, b, n * sizeof(*a));
    /* another seed, another order */
    assert_int_equal(tnt_shard_permutation(n, 8, b), TNT_OK);
    assert_memory_not_equal(a, b, n * sizeof(*a));
    /* not the identity */
    uint64_t fixed = 0;
    for (uint64_t i = 0; i < n; i++) {
        fixed += a[i] == i;
    }
    assert_true(fixed < 20);

    /* n == 0 needs no array; NULL with n > 0 is an error */
    assert_int_equal(tnt_shard_permutation(0, 1, NULL), TNT_OK);
    assert_int_equal(tnt_shard_permutation(3, 1, NULL), TNT_ERR_INVALID_ARG);
    assert_true(strstr(tnt_last_error(), "perm") != NULL);
    free(a);
    free(b);
}

/* The permutation takes no rank count, so any p sees the same epoch order;
 * here the union of all ranks' step ranges, for several p, walks the same
 * permutation once. */
static void test_permutation_rank_independent(void **state)
{
    (void)state;
    const uint64_t n = 103, batch = 10;
    uint64_t perm[103];
    assert_int_equal(tnt_shard_permutation(n, 99, perm), TNT_OK);
    for (int p = 1; p <= 8; p++) {
        unsigned char seen[103] = { 0 };
        uint64_t total = 0;
        const uint64_t steps = tnt_shard_num_steps(n, batch, 0);
        for (uint64_t s = 0; s < steps; s++) {
            for (int r = 0; r < p; r++) {
                tnt_range_t range = tnt_shard_step_range(n, batch, 0, s, r, p);
                for (uint64_t i = range.begin; i < range.end; i++) {
                    assert_int_equal(seen[perm[i]], 0);
                    seen[perm[i]] = 1;
                    total++;
                }
            }
        }
        assert_int_equal(total, n);
    }
}

static void test_num_steps(void **state)
{
    (void)state;
    assert_int_equal(tnt_shard_num_steps(100, 10, 0), 10);
    assert_int_equal(tnt_shard_num_steps(100, 10, 1), 10);
    assert_int_equal(tnt_shard_num_steps(105, 10, 0), 11);
    assert_int_equal(tnt_shard_num_steps(105, 10, 1), 10);
    assert_int_equal(tnt_shard_num_steps(5, 10, 0), 1);
    assert_int_equal(tnt_shard_num_steps(5, 10, 1), 0);
    assert_int_equal(tnt_shard_num_steps(0, 10, 0), 0);
    assert_int_equal(tnt_shard_num_steps(10, 0, 0), 0);
    assert_true(tnt_shard_num_steps(UINT64_MAX, 2, 0) == UINT64_MAX / 2 + 1);
    assert_true(tnt_shard_num_steps(UINT64_MAX, 2, 1) == UINT64_MAX / 2);
}

static void test_step_range(void **state)
{
    (void)state;
    /* n = 23, batch 8, 3 ranks: steps [0,8) [8,16) and the partial [16,23) */
    tnt_range_t r;
    r = tnt_shard_step_range(23, 8, 0, 0, 0, 3);
    assert_int_equal(r.begin, 0);
    assert_int_equal(r.end, 3);
    r = tnt_shard_step_range(23, 8, 0, 1, 2, 3);
    assert_int_equal(r.begin, 8 + 6);
    assert_int_equal(r.end, 16);
    /* last partial batch of 7 over 3 ranks: 3 2 2 */
    r = tnt_shard_step_range(23, 8, 0, 2, 0, 3);
    assert_int_equal(r.begin, 16);
    assert_int_equal(r.end, 19);
    r = tnt_shard_step_range(23, 8, 0, 2, 2, 3);
    assert_int_equal(r.begin, 21);
    assert_int_equal(r.end, 23);
    /* drop_remainder: the partial batch does not exist */
    r = tnt_shard_step_range(23, 8, 1, 2, 0, 3);
    assert_int_equal(r.end - r.begin, 0);
    r = tnt_shard_step_range(23, 8, 1, 1, 0, 3);
    assert_int_equal(r.begin, 8);
    assert_int_equal(r.end, 11);

    /* empty ranks: last batch of 2 samples over 4 ranks */
    uint64_t got = 0;
    for (int rank = 0; rank < 4; rank++) {
        r = tnt_shard_step_range(10, 4, 0, 2, rank, 4);
        assert_int_equal(r.end - r.begin, rank < 2 ? 1 : 0);
        got += r.end - r.begin;
    }
    assert_int_equal(got, 2);

    /* out of range step and bad rank: empty */
    r = tnt_shard_step_range(23, 8, 0, 3, 0, 3);
    assert_int_equal(r.end - r.begin, 0);
    r = tnt_shard_step_range(23, 8, 0, 0, 3, 3);
    assert_int_equal(r.end - r.begin, 0);
    r = tnt_shard_step_range(23, 0, 0, 0, 0, 3);
    assert_int_equal(r.end - r.begin, 0);
}

/* Every (n, batch, p, drop) small combination: each step's ranges tile the
 * step's batch in rank order, steps tile [0, n) (or [0, n - n % batch)). */
static void test_step_range_coverage(void **state)
{
    (void)state;
    for (uint64_t n = 0; n <= 40; n++) {
        for (uint64_t batch = 1; batch <= 12; batch++) {
            for (int p = 1; p <= 5; p++) {
                for (int drop = 0; drop <= 1; drop++) {
                    uint64_t next = 0;
                    const uint64_t steps = tnt_shard_num_steps(n, batch, drop);
                    for (uint64_t s = 0; s < steps; s++) {
                        for (int rank = 0; rank < p; rank++) {
                            tnt_range_t r = tnt_shard_step_range(n, batch, drop, s, rank, p);
                            assert_int_equal(r.begin, next);
                            assert_true(r.end >= r.begin);
                            next = r.end;
                        }
                    }
                    assert_int_equal(next, drop ? n - n % batch : n);
                }
            }
        }
    }
}

static void test_step_range_large(void **state)
{
    (void)state;
    const uint64_t n = UINT64_MAX - 3, batch = UINT64_C(1) << 40;
    const uint64_t steps = tnt_shard_num_steps(n, batch, 0);
    tnt_range_t r = tnt_shard_step_range(n, batch, 0, steps - 1, 4, 5);
    assert_true(r.end == n);
    assert_true(r.begin < r.end);
    r = tnt_shard_step_range(n, batch, 1, steps - 1, 4, 5);
    assert_true(r.end == r.begin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_rule),
        cmocka_unit_test(test_range_coverage),
        cmocka_unit_test(test_range_large),
        cmocka_unit_test(test_permutation_golden),
        cmocka_unit_test(test_permutation_properties),
        cmocka_unit_test(test_permutation_rank_independent),
        cmocka_unit_test(test_num_steps),
        cmocka_unit_test(test_step_range),
        cmocka_unit_test(test_step_range_coverage),
        cmocka_unit_test(test_step_range_large),
    };
    return cmocka_run_group_tests_name("shard", tests, NULL, NULL);
}
