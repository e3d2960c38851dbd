/*
 * Reduction kernels against independent references: every dtype x op for
 * 1..9 sources and counts around the kernels' block size, bitwise equal to
 * a plain sequential loop in source order; dst aliasing any source;
 * float16/bfloat16 conversions against a brute-force nearest-value search
 * over all 65536 bit patterns (ties to even, overflow to Inf, subnormals,
 * NaN, signed zero); rounding once after float32 accumulation; integer AVG
 * (truncating division); divide and scale.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"

static uint64_t rng_state = 12345;

static uint64_t rng(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- reference 16-bit formats (decode by definition, encode by search) -- */

struct fmt16 {
    int mant_bits, exp_bits;
    double table[65536]; /* value of each non-negative finite pattern, ascending */
    int num;             /* finite non-negative patterns, plus one "Inf" entry */
};
static struct fmt16 ref_f16 = { 10, 5, { 0 }, 0 }, ref_bf16 = { 7, 8, { 0 }, 0 };

static double pow2(int e)
{
    double r = 1.0;
    for (; e > 0; e--) {
        r *= 2.0;
    }
    for (; e < 0; e++) {
        r /= 2.0;
    }
    return r;
}

static double decode(const struct fmt16 *f, uint16_t h)
{
    int bias = (1 << (f->exp_bits - 1)) - 1;
    int e = (h >> f->mant_bits) & ((1 << f->exp_bits) - 1);
    int m = h & ((1 << f->mant_bits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) {
        return sign * m * pow2(1 - bias - f->mant_bits);
    }
    return sign * (double)((1 << f->mant_bits) + m) * pow2(e - bias - f->mant_bits);
}

static void build(struct fmt16 *f)
{
    uint16_t inf = (uint16_t)(((1 << f->exp_bits) - 1) << f->mant_bits);
    for (uint32_t h = 0; h < inf; h++) {
        f->table[h] = decode(f, (uint16_t)h);
    }
    /* Inf behaves like the next value after the largest finite one. */
    f->table[inf] = f->table[inf - 1] * 2 - f->table[inf - 2];
    f->num = inf + 1;
}

/* Nearest pattern, ties to even; pattern index == bit pattern for x >= 0. */
static uint16_t encode(const struct fmt16 *f, float x)
{
    uint32_t u = f_bits(x);
    uint16_t sign = (u >> 31) ? 0x8000 : 0;
    double a = x < 0 ? -(double)x : (double)x;
    if (a >= f->table[f->num - 1]) {
        return sign | (uint16_t)(f->num - 1);
    }
    int lo = 0, hi = f->num - 1; /* table[lo] <= a < table[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (f->table[mid] <= a) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    double dlo = a - f->table[lo], dhi = f->table[hi] - a;
    int pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    return sign | (uint16_t)pick;
}

static int is_nan16(const struct fmt16 *f, uint16_t h)
{
    uint16_t inf = (uint16_t)(((1 << f->exp_bits) - 1) << f->mant_bits);
    return (h & 0x7fff) > inf;
}

static void test_widen_all_patterns(void **state)
{
    (void)state;
    static const tnt_dtype_t dtypes[2] = { TNT_FLOAT16, TNT_BFLOAT16 };
    const struct fmt16 *fmts[2] = { &ref_f16, &ref_bf16 };
    uint16_t *h = malloc(65536 * 2);
    float *f = malloc(65536 * 4);
    assert_non_null(h);
    assert_non_null(f);
    for (uint32_t i = 0; i < 65536; i++) {
        h[i] = (uint16_t)i;
    }
    for (int d = 0; d < 2; d++) {
        tnt_reduce_widen(dtypes[d], h, f, 65536);
        uint16_t inf = (uint16_t)(fmts[d]->num - 1);
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t a = (uint16_t)(i & 0x7fff);
            if (a > inf) {
                assert_true(f[i] != f[i]); /* NaN */
            } else if (a == inf) {
                assert_true(f[i] == ((i & 0x8000) ? -1.0f : 1.0f) / 0.0f);
            } else {
                assert_true((double)f[i] == decode(fmts[d], (uint16_t)i));
                assert_int_equal(f_bits(f[i]) >> 31, i >> 15); /* -0 stays -0 */
            }
        }
        /* widen then narrow is the identity (NaNs stay NaN) */
        uint16_t *back = malloc(65536 * 2);
        assert_non_null(back);
        tnt_reduce_narrow(dtypes[d], f, back, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            if (is_nan16(fmts[d], (uint16_t)i)) {
                assert_true(is_nan16(fmts[d], back[i]));
            } else {
                assert_int_equal(back[i], i);
            }
        }
        free(back);
    }
    free(h);
    free(f);
}

static void check_narrow(tnt_dtype_t dtype, const struct fmt16 *fmt, const float *x, size_t n)
{
    uint16_t *out = malloc(n * 2);
    assert_non_null(out);
    tnt_reduce_narrow(dtype, x, out, n);
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i]) {
            assert_true(is_nan16(fmt, out[i]));
            continue;
        }
        uint16_t want = encode(fmt, x[i]);
        if (out[i] != want) {
            fail_msg("%s: %a (0x%08x) -> 0x%04x, expected 0x%04x",
                     dtype == TNT_FLOAT16 ? "float16" : "bfloat16", (double)x[i], f_bits(x[i]),
                     out[i], want);
        }
    }
    free(out);
}

static void test_narrow_rounding(void **state)
{
    (void)state;
    static const tnt_dtype_t dtypes[2] = { TNT_FLOAT16, TNT_BFLOAT16 };
    const struct fmt16 *fmts[2] = { &ref_f16, &ref_bf16 };
    size_t cap = 65536 * 8 + 200000;
    float *x = malloc(cap * sizeof *x);
    assert_non_null(x);
    for (int d = 0; d < 2; d++) {
        const struct fmt16 *fmt = fmts[d];
        size_t n = 0;
        /* every value, every midpoint (a tie) and the floats next to it */
        for (int i = 0; i + 1 < fmt->num; i++) {
            float v = (float)fmt->table[i];
            float mid = (float)((fmt->table[i] + fmt->table[i + 1]) / 2);
            float vals[4] = { v, mid, bits_f(f_bits(mid) + 1), bits_f(f_bits(mid) - 1) };
            for (int k = 0; k < 4; k++) {
                x[n++] = vals[k];
                x[n++] = -vals[k];
            }
            if (n + 8 > cap - 200000) {
                break;
            }
        }
        /* random bit patterns, including NaN and Inf */
        for (int k = 0; k < 100000; k++) {
            x[n++] = bits_f((uint32_t)rng());
        }
        float specials[] = { 0.0f,           -0.0f,          1.0f / 0.0f, -1.0f / 0.0f, 0.0f / 0.0f,
                             65504.0f,       65519.99f,      65520.0f,    65536.0f,     1e-8f,
                             2.9802322e-08f, 5.9604645e-08f, 3.4e38f,     3.39e38f,     1e-40f };
        for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
            x[n++] = specials[k];
        }
        check_narrow(dtypes[d], fmt, x, n);
    }
    free(x);
}

/* ---- every dtype x op against a sequential reference ------------------- */

static size_t esize(tnt_dtype_t d)
{
    return d == TNT_FLOAT16 || d == TNT_BFLOAT16 ? 2 : d == TNT_FLOAT64 || d == TNT_INT64 ? 8 : 4;
}

static void fill_random(tnt_dtype_t d, tnt_op_t op, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        double v = (double)(r >> 11) / 9007199254740992.0 * 4.0 - 2.0; /* [-2, 2) */
        if (op == TNT_PROD) {
            v = 0.5 + (double)(r >> 11) / 9007199254740992.0; /* no overflow to Inf */
        }
        switch (d) {
        case TNT_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case TNT_FLOAT64:
            ((double *)buf)[i] = v;
            break;
        case TNT_FLOAT16:
            ((uint16_t *)buf)[i] = encode(&ref_f16, (float)v);
            break;
        case TNT_BFLOAT16:
            ((uint16_t *)buf)[i] = encode(&ref_bf16, (float)v);
            break;
        /* integers: full range, so SUM and PROD wrap */
        case TNT_INT32:
            ((int32_t *)buf)[i] = (int32_t)(uint32_t)r;
            break;
        default:
            ((int64_t *)buf)[i] = (int64_t)r;
            break;
        }
    }
}

#define COMBINE(op, a, b)                        \
    ((op) == TNT_PROD  ? (a) * (b)               \
     : (op) == TNT_MIN ? ((b) < (a) ? (b) : (a)) \
     : (op) == TNT_MAX ? ((b) > (a) ? (b) : (a)) \
                       : (a) + (b))

static void reference(tnt_dtype_t d, tnt_op_t op, void *dst, void **srcs, int ns, size_t n,
                      int divisor)
{
    for (size_t i = 0; i < n; i++) {
        switch (d) {
        case TNT_FLOAT32: {
            float a = ((float *)srcs[0])[i];
            for (int s = 1; s < ns; s++) {
                a = COMBINE(op, a, ((float *)srcs[s])[i]);
            }
            ((float *)dst)[i] = divisor > 1 ? a / (float)divisor : a;
            break;
        }
        case TNT_FLOAT64: {
            double a = ((double *)srcs[0])[i];
            for (int s = 1; s < ns; s++) {
                a = COMBINE(op, a, ((double *)srcs[s])[i]);
            }
            ((double *)dst)[i] = divisor > 1 ? a / divisor : a;
            break;
        }
        case TNT_FLOAT16:
        case TNT_BFLOAT16: {
            const struct fmt16 *f = d == TNT_FLOAT16 ? &ref_f16 : &ref_bf16;
            float a = (float)decode(f, ((uint16_t *)srcs[0])[i]);
            for (int s = 1; s < ns; s++) {
                a = COMBINE(op, a, (float)decode(f, ((uint16_t *)srcs[s])[i]));
            }
            ((uint16_t *)dst)[i] = encode(f, divisor > 1 ? a / (float)divisor : a);
            break;
        }
        case TNT_INT32: {
            uint32_t a = (uint32_t)((int32_t *)srcs[0])[i];
            for (int s = 1; s < ns; s++) {
                uint32_t b = (uint32_t)((int32_t *)srcs[s])[i];
                a = op == TNT_PROD                   ? a * b
                    : op == TNT_SUM || op == TNT_AVG ? a + b
                    : op == TNT_MIN                  ? ((int32_t)b < (int32_t)a ? b : a)
                                                     : ((int32_t)b > (int32_t)a ? b : a);
            }
            ((int32_t *)dst)[i] = divisor > 1 ? (int32_t)a / divisor : (int32_t)a;
            break;
        }
        default: {
            uint64_t a = (uint64_t)((int64_t *)srcs[0])[i];
            for (int s = 1; s < ns; s++) {
                uint64_t b = (uint64_t)((int64_t *)srcs[s])[i];
                a = op == TNT_PROD                   ? a * b
                    : op == TNT_SUM || op == TNT_AVG ? a + b
                    : op == TNT_MIN                  ? ((int64_t)b < (int64_t)a ? b : a)
                                                     : ((int64_t)b > (int64_t)a ? b : a);
            }
            ((int64_t *)dst)[i] = divisor > 1 ? (int64_t)a / divisor : (int64_t)a;
            break;
        }
        }
    }
}

static void test_all_dtypes_ops(void **state)
{
    (void)state;
    static const size_t counts[] = { 0, 1, 3, 17, 2047, 2048, 2049, 5003 };
    enum { MAXS = 9, MAXN = 5003 };
    void *srcs[MAXS], *copy[MAXS];
    char *dst = malloc(MAXN * 8), *ref = malloc(MAXN * 8);
    assert_non_null(dst);
    assert_non_null(ref);
    for (int s = 0; s < MAXS; s++) {
        srcs[s] = malloc(MAXN * 8);
        copy[s] = malloc(MAXN * 8);
        assert_non_null(srcs[s]);
        assert_non_null(copy[s]);
    }
    for (int d = 0; d < TNT_DTYPE_LAST; d++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (int ns = 1; ns <= MAXS; ns++) {
                for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                    size_t n = counts[c], bytes = n * esize(d);
                    for (int s = 0; s < ns; s++) {
                        fill_random(d, op, srcs[s], n);
                        memcpy(copy[s], srcs[s], bytes);
                    }
                    int divisor = op == TNT_AVG ? ns : 1;
                    reference(d, op, ref, srcs, ns, n, divisor);
                    /* out of place */
                    tnt_reduce_n_div(d, op, dst, (const void *const *)srcs, ns, n, divisor);
                    if (memcmp(dst, ref, bytes) != 0) {
                        fail_msg("dtype %d op %d sources %d count %zu", d, op, ns, n);
                    }
                    for (int s = 0; s < ns; s++) {
                        assert_true(memcmp(copy[s], srcs[s], bytes) == 0);
                    }
                    /* dst aliasing the first, the second and the last source */
                    int aliases[3] = { 0, ns > 1 ? 1 : 0, ns - 1 };
                    for (int k = 0; k < 3; k++) {
                        int a = aliases[k];
                        tnt_reduce_n_div(d, op, srcs[a], (const void *const *)srcs, ns, n, divisor);
                        if (memcmp(srcs[a], ref, bytes) != 0) {
                            fail_msg("alias %d: dtype %d op %d sources %d count %zu", a, d, op, ns,
                                     n);
                        }
                        memcpy(srcs[a], copy[a], bytes);
                    }
                    /* tnt_reduce_n is the SUM for AVG, without division */
                    if (op != TNT_AVG && ns > 1) {
                        tnt_reduce_n(d, op, dst, (const void *const *)srcs, ns, n);
                        assert_true(memcmp(dst, ref, bytes) == 0);
                    }
                }
            }
        }
    }
    for (int s = 0; s < MAXS; s++) {
        free(srcs[s]);
        free(copy[s]);
    }
    free(dst);
    free(ref);
}

/* Float MIN/MAX keep the first operand when a comparison is false, so with
 * NaNs in either operand only the right operand order gives the reference
 * result: NaN in every 5th element of a and every 3rd of b. */
static void put_nans(tnt_dtype_t d, void *a, void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d == TNT_FLOAT32) {
            if (i % 5 == 0) {
                ((float *)a)[i] = NAN;
            }
            if (i % 3 == 0) {
                ((float *)b)[i] = NAN;
            }
        } else if (d == TNT_FLOAT64) {
            if (i % 5 == 0) {
                ((double *)a)[i] = NAN;
            }
            if (i % 3 == 0) {
                ((double *)b)[i] = NAN;
            }
        }
    }
}

/* tnt_reduce_into (a received fragment combined into the result) gives
 * bitwise what tnt_reduce_n_div gives for the same two sources, for either
 * operand order, with a divisor, and with the received operand at every
 * misalignment a transport's header can leave it at. */
static void test_reduce_into_unaligned(void **state)
{
    (void)state;
    static const size_t counts[] = { 1, 3, 2047, 2048, 2049, 5003 };
    enum { MAXN = 5003 };
    char *in_store = malloc(MAXN * 8 + 8), *dst = malloc(MAXN * 8), *ref = malloc(MAXN * 8);
    char *in_aligned = malloc(MAXN * 8);
    assert_non_null(in_store);
    assert_non_null(dst);
    assert_non_null(ref);
    assert_non_null(in_aligned);
    for (int d = 0; d < TNT_DTYPE_LAST; d++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                for (int shift = 0; shift < 8; shift++) {
                    for (int in_first = 0; in_first < 2; in_first++) {
                        size_t n = counts[c], bytes = n * esize(d);
                        int divisor = op == TNT_AVG || op == TNT_SUM ? 3 : 1;
                        char *in = in_store + shift;
                        const void *srcs[2] = { in_first ? in_aligned : ref,
                                                in_first ? ref : in_aligned };
                        fill_random(d, op, in_aligned, n);
                        fill_random(d, op, dst, n);
                        if (op == TNT_MIN || op == TNT_MAX) {
                            put_nans(d, in_aligned, dst, n); /* order decides */
                        }
                        memcpy(in, in_aligned, bytes);
                        memcpy(ref, dst, bytes);
                        tnt_reduce_n_div(d, op, ref, srcs, 2, n, divisor);
                        tnt_reduce_into(d, op, dst, in, in_first, n, divisor);
                        if (memcmp(dst, ref, bytes) != 0) {
                            fail_msg("dtype %d op %d count %zu shift %d in_first %d", d, op, n,
                                     shift, in_first);
                        }
                        assert_true(memcmp(in, in_aligned, bytes) == 0);
                    }
                }
            }
        }
    }
    free(in_store);
    free(in_aligned);
    free(dst);
    free(ref);
}

/* float16 sums are rounded once after float32 accumulation: 2048 + 1 + 1
 * is 2050 (rounding each step gives 2048 twice, ties to even), and
 * 1 + 3 * 2^-11 rounds to 1 + 2^-9 instead of staying 1. */
static void test_round_once(void **state)
{
    (void)state;
    float vals[4][2] = { { 2048, 1 }, { 1, 1.0f / 2048 }, { 1, 1.0f / 2048 }, { 0, 1.0f / 2048 } };
    uint16_t in[4][2];
    const void *srcs[4];
    for (int s = 0; s < 4; s++) {
        in[s][0] = encode(&ref_f16, vals[s][0]);
        in[s][1] = encode(&ref_f16, vals[s][1]);
        srcs[s] = in[s];
    }
    uint16_t out[2];
    tnt_reduce_n(TNT_FLOAT16, TNT_SUM, out, srcs, 4, 2);
    assert_int_equal(out[0], encode(&ref_f16, 2050.0f));
    assert_int_equal(out[1], encode(&ref_f16, 1.0f + 1.0f / 512));
    /* AVG of float16: divided in float32 before the one rounding */
    uint16_t a[1] = { encode(&ref_f16, 1.0f) }, b[1] = { encode(&ref_f16, 1.0f / 1024) };
    const void *two[2] = { a, b };
    tnt_reduce_n_div(TNT_FLOAT16, TNT_SUM, out, two, 2, 1, 2);
    assert_int_equal(out[0], encode(&ref_f16, (1.0f + 1.0f / 1024) / 2));
    /* Inf and NaN survive a reduction */
    uint16_t inf[1] = { 0x7c00 }, nan[1] = { 0x7e00 }, one[1] = { 0x3c00 };
    const void *s3[2] = { inf, one };
    tnt_reduce_n(TNT_FLOAT16, TNT_SUM, out, s3, 2, 1);
    assert_int_equal(out[0], 0x7c00);
    const void *s4[2] = { nan, one };
    tnt_reduce_n(TNT_FLOAT16, TNT_SUM, out, s4, 2, 1);
    assert_true(is_nan16(&ref_f16, out[0]));
    uint16_t bnan[1] = { 0x7fc1 }, bone[1] = { 0x3f80 };
    const void *s5[2] = { bnan, bone };
    tnt_reduce_n(TNT_BFLOAT16, TNT_PROD, out, s5, 2, 1);
    assert_true(is_nan16(&ref_bf16, out[0]));
}

static void test_integer_avg_and_divide(void **state)
{
    (void)state;
    int32_t a[4] = { 7, -7, 5, INT32_MAX }, b[4] = { 0, 0, 0, 1 };
    const void *srcs[2] = { a, b };
    int32_t out[4];
    tnt_reduce_n_div(TNT_INT32, TNT_AVG, out, srcs, 2, 4, 2);
    assert_int_equal(out[0], 3); /* truncates toward zero */
    assert_int_equal(out[1], -3);
    assert_int_equal(out[2], 2);
    assert_int_equal(out[3], INT32_MIN / 2); /* the sum wrapped, then divided */
    int64_t c[3] = { -9, 9, 10 };
    tnt_reduce_divide(TNT_INT64, c, 3, 4);
    assert_int_equal(c[0], -2);
    assert_int_equal(c[1], 2);
    assert_int_equal(c[2], 2);
    double d[2] = { 1.0, 3.0 };
    tnt_reduce_divide(TNT_FLOAT64, d, 2, 3);
    assert_true(d[0] == 1.0 / 3 && d[1] == 1.0);
    uint16_t h[1] = { encode(&ref_bf16, 3.0f) };
    tnt_reduce_divide(TNT_BFLOAT16, h, 1, 2);
    assert_int_equal(h[0], encode(&ref_bf16, 1.5f));
}

static void test_scale(void **state)
{
    (void)state;
    float f[3] = { 1.0f, -2.0f, 3.0f };
    tnt_reduce_scale(TNT_FLOAT32, f, 3, 0.5);
    assert_true(f[0] == 0.5f && f[1] == -1.0f && f[2] == 1.5f);
    double g[1] = { 3.0 };
    tnt_reduce_scale(TNT_FLOAT64, g, 1, 1.0 / 3);
    assert_true(g[0] == 3.0 * (1.0 / 3));
    int32_t i[4] = { 3, -3, 10, 7 };
    tnt_reduce_scale(TNT_INT32, i, 4, 0.5);
    assert_int_equal(i[0], 2); /* 1.5 rounds half away from zero */
    assert_int_equal(i[1], -2);
    assert_int_equal(i[2], 5);
    assert_int_equal(i[3], 4);
    int64_t l[1] = { 1000000000000ll };
    tnt_reduce_scale(TNT_INT64, l, 1, 3.0);
    assert_int_equal(l[0], 3000000000000ll);
    uint16_t h[2] = { encode(&ref_f16, 3.0f), encode(&ref_f16, 65504.0f) };
    tnt_reduce_scale(TNT_FLOAT16, h, 2, 2.0);
    assert_int_equal(h[0], encode(&ref_f16, 6.0f));
    assert_int_equal(h[1], 0x7c00); /* overflow to Inf */
}

int main(void)
{
    build(&ref_f16);
    build(&ref_bf16);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widen_all_patterns),     cmocka_unit_test(test_narrow_rounding),
        cmocka_unit_test(test_all_dtypes_ops),         cmocka_unit_test(test_round_once),
        cmocka_unit_test(test_integer_avg_and_divide), cmocka_unit_test(test_scale),
        cmocka_unit_test(test_reduce_into_unaligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
