/*
 * Fusion planning (pure): bucket boundaries for thresholds 0, small and huge,
 * dtype changes, zero-count tensors, the empty list, argument errors, and
 * the TNT_FUSION_THRESHOLD_KB parsing behind TNT_FUSION_THRESHOLD_AUTO.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tnt/tnt.h>
#include "fusion/fusion.h"

#define F32(n)           \
    {                    \
        (n), TNT_FLOAT32 \
    }
#define F64(n)           \
    {                    \
        (n), TNT_FLOAT64 \
    }
#define F16(n)           \
    {                    \
        (n), TNT_FLOAT16 \
    }
#define I64(n)         \
    {                  \
        (n), TNT_INT64 \
    }

static size_t plan(const tnt_tensor_desc_t *t, size_t n, size_t threshold, size_t *bucket)
{
    size_t nb = 12345;
    assert_int_equal(tnt_fusion_plan(t, n, threshold, bucket, &nb), TNT_OK);
    return nb;
}

static void test_threshold_zero(void **state)
{
    (void)state;
    const tnt_tensor_desc_t t[] = { F32(10), F32(0), F32(1), F64(5), F32(1000) };
    size_t b[5];
    assert_int_equal(plan(t, 5, 0, b), 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(b[i], i);
    }
}

static void test_threshold_small(void **state)
{
    (void)state;
    /* bytes: 40 40 40 400 8 8 8 8 8 ; threshold 100 */
    const tnt_tensor_desc_t t[] = { F32(10), F32(10), F32(10), F32(100), F32(2),
                                    F32(2),  F32(2),  F32(2),  F32(2) };
    size_t b[9];
    /* 40+40+40 = 120 >= 100 closes after the third; 400 alone; 40 left over */
    const size_t want[9] = { 0, 0, 0, 1, 2, 2, 2, 2, 2 };
    assert_int_equal(plan(t, 9, 100, b), 3);
    assert_memory_equal(b, want, sizeof(want));
    /* exactly the threshold closes the bucket */
    const size_t want80[9] = { 0, 0, 1, 1, 2, 2, 2, 2, 2 };
    assert_int_equal(plan(t, 9, 80, b), 3);
    assert_memory_equal(b, want80, sizeof(want80));
}

static void test_threshold_huge(void **state)
{
    (void)state;
    const tnt_tensor_desc_t t[] = { F32(10), F32(1 << 20), F32(3), F32(0) };
    size_t b[4];
    assert_int_equal(plan(t, 4, SIZE_MAX - 1, b), 1);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(b[i], 0);
    }
}

static void test_dtype_change(void **state)
{
    (void)state;
    const tnt_tensor_desc_t t[] = {
        F32(1), F32(1), F64(1), F64(1), F16(4), F32(1), I64(2), I64(2)
    };
    size_t b[8];
    const size_t want[8] = { 0, 0, 1, 1, 2, 3, 4, 4 };
    assert_int_equal(plan(t, 8, 1 << 20, b), 5);
    assert_memory_equal(b, want, sizeof(want));
    /* a dtype change also closes a bucket that reached the threshold */
    const size_t want8[8] = { 0, 0, 1, 2, 3, 4, 5, 6 };
    assert_int_equal(plan(t, 8, 8, b), 7);
    assert_memory_equal(b, want8, sizeof(want8));
}

static void test_zero_count(void **state)
{
    (void)state;
    const tnt_tensor_desc_t t[] = { F32(0), F32(0), F32(4), F32(0), F32(4), F32(0) };
    size_t b[6];
    /* zero-byte tensors ride along with their neighbours */
    const size_t want[6] = { 0, 0, 0, 1, 1, 2 };
    assert_int_equal(plan(t, 6, 16, b), 3);
    assert_memory_equal(b, want, sizeof(want));
    /* reaching the threshold closes the bucket even when only zero-byte
     * tensors follow: they form a last (empty) bucket of their own */
    const size_t want32[6] = { 0, 0, 0, 0, 0, 1 };
    assert_int_equal(plan(t, 6, 32, b), 2);
    assert_memory_equal(b, want32, sizeof(want32));
}

static void test_empty_list(void **state)
{
    (void)state;
    size_t nb = 77;
    assert_int_equal(tnt_fusion_plan(NULL, 0, 100, NULL, &nb), TNT_OK);
    assert_int_equal(nb, 0);
}

static void test_deterministic_and_monotone(void **state)
{
    (void)state;
    enum { N = 300 };
    tnt_tensor_desc_t t[N];
    size_t b1[N], b2[N];
    unsigned seed = 1;
    for (size_t i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i].count = (seed >> 8) % 5000;
        t[i].dtype = (i % 37 == 0) ? TNT_FLOAT64 : TNT_FLOAT32;
    }
    size_t prev_nb = SIZE_MAX;
    const size_t thresholds[] = { 0, 1024, 16384, 65536, 1 << 20, SIZE_MAX - 1 };
    for (size_t k = 0; k < sizeof(thresholds) / sizeof(thresholds[0]); k++) {
        size_t nb1 = plan(t, N, thresholds[k], b1);
        size_t nb2 = plan(t, N, thresholds[k], b2);
        assert_int_equal(nb1, nb2);
        assert_memory_equal(b1, b2, sizeof(b1));
        /* buckets are numbered consecutively from 0 and never go back */
        assert_int_equal(b1[0], 0);
        for (size_t i = 1; i < N; i++) {
            assert_true(b1[i] == b1[i - 1] || b1[i] == b1[i - 1] + 1);
            if (t[i].dtype != t[i - 1].dtype) {
                assert_int_equal(b1[i], b1[i - 1] + 1);
            }
        }
        assert_int_equal(b1[N - 1] + 1, nb1);
        /* every bucket but the last, if it did not end at a dtype change,
         * reached the threshold */
        size_t bytes = 0;
        for (size_t i = 0; i < N; i++) {
            bytes += t[i].count * tnt_dtype_size(t[i].dtype);
            if (i + 1 < N && b1[i + 1] != b1[i]) {
                if (t[i + 1].dtype == t[i].dtype) {
                    assert_true(bytes >= thresholds[k]);
                }
                bytes = 0;
            }
        }
        /* larger thresholds never give more buckets */
        assert_true(nb1 <= prev_nb);
        prev_nb = nb1;
    }
    /* one bucket per dtype run: 9 float64 singletons (0, 37, ..., 296) and
     * the 9 float32 runs between and after them */
    assert_int_equal(prev_nb, 18);
}

static void test_bad_args(void **state)
{
    (void)state;
    size_t b[2], nb = 99;
    tnt_tensor_desc_t t[2] = { F32(1), { 1, TNT_DTYPE_LAST } };
    assert_int_equal(tnt_fusion_plan(t, 2, 0, b, &nb), TNT_ERR_INVALID_ARG);
    assert_true(strstr(tnt_last_error(), "tensor 1") != NULL);
    assert_int_equal(nb, 99);
    t[1].dtype = TNT_FLOAT32;
    assert_int_equal(tnt_fusion_plan(t, 2, 0, NULL, &nb), TNT_ERR_INVALID_ARG);
    assert_int_equal(tnt_fusion_plan(t, 2, 0, b, NULL), TNT_ERR_INVALID_ARG);
    assert_int_equal(tnt_fusion_plan(NULL, 2, 0, b, &nb), TNT_ERR_INVALID_ARG);
    t[1].count = SIZE_MAX / 2;
    assert_int_equal(tnt_fusion_plan(t, 2, 0, b, &nb), TNT_ERR_INVALID_ARG);
    assert_int_equal(nb, 99);
}

static void test_threshold_env(void **state)
{
    (void)state;
    const tnt_tensor_desc_t t[] = { F32(8192), F32(8192), F32(8192), F32(8192) };
    size_t b[4];
    size_t nb = 99;
    /* AUTO reads TNT_FUSION_THRESHOLD_KB: unset is the default (1 MiB, one
     * bucket for these 128 KiB), 64 KiB gives two, 0 one per tensor. */
    unsetenv("TNT_FUSION_THRESHOLD_KB");
    assert_int_equal(plan(t, 4, TNT_FUSION_THRESHOLD_AUTO, b), 1);
    assert_true(TNT_FUSION_THRESHOLD_DEFAULT_BYTES > 4 * 8192 * 4);
    setenv("TNT_FUSION_THRESHOLD_KB", "64", 1);
    assert_int_equal(plan(t, 4, TNT_FUSION_THRESHOLD_AUTO, b), 2);
    setenv("TNT_FUSION_THRESHOLD_KB", "0", 1);
    assert_int_equal(plan(t, 4, TNT_FUSION_THRESHOLD_AUTO, b), 4);
    /* Bad values are an error naming the variable and the value (they used
     * to fall back to the default with a warning). */
    const char *bad[] = { "-1", "abc", "12k", " 5", "1.5", "99999999999999999999999" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("TNT_FUSION_THRESHOLD_KB", bad[i], 1);
        assert_int_equal(tnt_fusion_plan(t, 4, TNT_FUSION_THRESHOLD_AUTO, b, &nb),
                         TNT_ERR_INVALID_ARG);
        assert_non_null(strstr(tnt_last_error(), "TNT_FUSION_THRESHOLD_KB='"));
        assert_non_null(strstr(tnt_last_error(), bad[i]));
        assert_int_equal(nb, 99);
    }
    unsetenv("TNT_FUSION_THRESHOLD_KB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_zero),
        cmocka_unit_test(test_threshold_small),
        cmocka_unit_test(test_threshold_huge),
        cmocka_unit_test(test_dtype_change),
        cmocka_unit_test(test_zero_count),
        cmocka_unit_test(test_empty_list),
        cmocka_unit_test(test_deterministic_and_monotone),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_threshold_env),
    };
    return cmocka_run_group_tests_name("fusion_plan", tests, NULL, NULL);
}
