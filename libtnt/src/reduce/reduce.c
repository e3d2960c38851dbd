/*
 * Reduction kernels: one small function per dtype x op, each a counted loop
 * over restrict-qualified pointers so that GCC 12 vectorises it at -O3 with
 * plain x86-64 (SSE2), no -march=native. Checked with
 *     gcc -O3 -fopt-info-vec-optimized -c reduce.c
 * which reports "loop vectorized" for every float32/float64/int32 kernel,
 * for the int64 SUM/MIN/MAX kernels, and for the float16/bfloat16 widen,
 * combine and narrow loops. That includes the k2u kernels of
 * tnt_reduce_into, whose sources may be unaligned (unaligned vector loads;
 * checked in the assembly). int64 PROD has no SSE2 vector multiply and stays
 * scalar; it is not a gradient type. The loops are memory bound for the
 * sizes that matter, so a wider ISA would not pay for run-time dispatch.
 *
 * Order: dst = ((s0 op s1) op s2) op ... in source order. Every rank calls
 * these with its sources in local-rank order, which is what makes results
 * bitwise identical on every rank.
 *
 * Sources are processed in blocks of TNT_REDUCE_BLOCK elements: the block's
 * accumulator stays in L1, so each source is read once and dst written once,
 * and dst may alias any source (all sources of a block are read before the
 * block of dst is written).
 *
 * float16 and bfloat16 are widened to float32 with integer bit manipulation
 * (exact), combined across all sources in float32, and rounded once to
 * nearest-even on the way back. NaN stays NaN (quiet, sign and top payload
 * bits kept), Inf stays Inf, float32 results beyond the 16-bit range round
 * to Inf as IEEE requires.
 *
 * Integer SUM and PROD wrap around (computed in unsigned arithmetic, so no
 * undefined behaviour); float MIN/MAX keep the accumulated value when the new
 * one compares false (a NaN in the first source propagates, later NaNs are
 * ignored: deterministic, like the order).
 */
#include "reduce/reduce.h"

#include <stdint.h>
#include <string.h>

#define TNT_REDUCE_BLOCK 2048

typedef uint16_t tnt_half_t;

/* ---- 16-bit float conversions (bit manipulation, branch-free) ---------- */

static inline float tnt_bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t tnt_float_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE binary16 -> binary32, exact. Normal numbers only need the exponent
 * rebiased; Inf/NaN get the maximal exponent; subnormals are built as
 * 2^-14 * (1 + m/1024) and then 2^-14 is subtracted, which is exact. All
 * three are computed and one is selected with integer masks (tnt_select):
 * with ?: GCC keeps branches in these loops and does not vectorise them. */
static inline uint32_t tnt_select(uint32_t cond, uint32_t a, uint32_t b)
{
    uint32_t mask = (uint32_t)0 - cond; /* cond is 0 or 1 */
    return (a & mask) | (b & ~mask);
}

static inline float tnt_half_to_float(tnt_half_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t o = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t exp = o & 0x0f800000u;
    uint32_t normal = o + ((uint32_t)(127 - 15) << 23);
    uint32_t special = o | 0x7f800000u;
    /* Subnormal m * 2^-24: (float)m is exact, then lower the exponent by 24. */
    int32_t mant = h & 0x3ff;
    uint32_t sub = tnt_float_to_bits((float)mant) - ((uint32_t)24 << 23);
    sub = tnt_select(mant == 0, 0u, sub);
    uint32_t r = tnt_select(exp == 0x0f800000u, special, tnt_select(exp == 0u, sub, normal));
    return tnt_bits_to_float(r | sign);
}

/* binary32 -> binary16, round to nearest even. Subnormal results are rounded
 * by the FPU itself: adding 0.5 lines the half-subnormal bits up with the low
 * mantissa bits of the float sum. */
static inline tnt_half_t tnt_float_to_half(float f)
{
    const uint32_t f16max = (uint32_t)(127 + 16) << 23; /* 65536.0f */
    const uint32_t f32inf = (uint32_t)255 << 23;
    const uint32_t denorm_magic_bits = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
    uint32_t u = tnt_float_to_bits(f);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;

    uint32_t big = tnt_select(u > f32inf, 0x7e00u | ((u >> 13) & 0x3ffu), 0x7c00u);
    uint32_t sub = tnt_float_to_bits(tnt_bits_to_float(u) + tnt_bits_to_float(denorm_magic_bits)) -
                   denorm_magic_bits;
    uint32_t mant_odd = (u >> 13) & 1u;
    uint32_t norm = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + mant_odd) >> 13;

    uint32_t o = tnt_select(u >= f16max, big, tnt_select(u < ((uint32_t)113 << 23), sub, norm));
    return (tnt_half_t)(o | (sign >> 16));
}

static inline float tnt_bf16_to_float(tnt_half_t b)
{
    return tnt_bits_to_float((uint32_t)b << 16);
}

static inline tnt_half_t tnt_float_to_bf16(float f)
{
    uint32_t u = tnt_float_to_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    return (tnt_half_t)(((u & 0x7fffffffu) > 0x7f800000u) ? quiet_nan : rounded);
}

/* ---- kernels ----------------------------------------------------------- */

#define TNT_OP_SUM(a, b)  ((a) + (b))
#define TNT_OP_PROD(a, b) ((a) * (b))
#define TNT_OP_MIN(a, b)  ((b) < (a) ? (b) : (a))
#define TNT_OP_MAX(a, b)  ((b) > (a) ? (b) : (a))

/* Integer SUM/PROD go through the unsigned type so that overflow wraps. */
#define TNT_OPU_SUM(T, U, a, b)  ((T)((U)(a) + (U)(b)))
#define TNT_OPU_PROD(T, U, a, b) ((T)((U)(a) * (U)(b)))

/* dst = a op b and acc op= b for one native type. */
#define TNT_DEFINE_KERNELS(name, T, OPEXPR)                                                        \
    static void tnt_k2_##name(T *restrict dst, const T *restrict a, const T *restrict b, size_t n) \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a[i], y = b[i];                                                                  \
            dst[i] = OPEXPR;                                                                       \
        }                                                                                          \
    }                                                                                              \
    static void tnt_kacc_##name(T *restrict acc, const T *restrict b, size_t n)                    \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = acc[i], y = b[i];                                                                \
            acc[i] = OPEXPR;                                                                       \
        }                                                                                          \
    }                                                                                              \
    /* Sources at any address (a transport's receive buffer): a typedef may                    \
     * lower the alignment GCC assumes, so these loads are legal unaligned ones. */   \
    typedef T tnt_unaligned_##name __attribute__((aligned(1)));                                    \
    static void tnt_k2u_##name(T *restrict dst, const tnt_unaligned_##name *restrict a,            \
                               const tnt_unaligned_##name *restrict b, size_t n)                   \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a[i], y = b[i];                                                                  \
            dst[i] = OPEXPR;                                                                       \
        }                                                                                          \
    }

TNT_DEFINE_KERNELS(f32_sum, float, TNT_OP_SUM(x, y))
TNT_DEFINE_KERNELS(f32_prod, float, TNT_OP_PROD(x, y))
TNT_DEFINE_KERNELS(f32_min, float, TNT_OP_MIN(x, y))
TNT_DEFINE_KERNELS(f32_max, float, TNT_OP_MAX(x, y))
TNT_DEFINE_KERNELS(f64_sum, double, TNT_OP_SUM(x, y))
TNT_DEFINE_KERNELS(f64_prod, double, TNT_OP_PROD(x, y))
TNT_DEFINE_KERNELS(f64_min, double, TNT_OP_MIN(x, y))
TNT_DEFINE_KERNELS(f64_max, double, TNT_OP_MAX(x, y))
TNT_DEFINE_KERNELS(i32_sum, int32_t, TNT_OPU_SUM(int32_t, uint32_t, x, y))
TNT_DEFINE_KERNELS(i32_prod, int32_t, TNT_OPU_PROD(int32_t, uint32_t, x, y))
TNT_DEFINE_KERNELS(i32_min, int32_t, TNT_OP_MIN(x, y))
TNT_DEFINE_KERNELS(i32_max, int32_t, TNT_OP_MAX(x, y))
TNT_DEFINE_KERNELS(i64_sum, int64_t, TNT_OPU_SUM(int64_t, uint64_t, x, y))
TNT_DEFINE_KERNELS(i64_prod, int64_t, TNT_OPU_PROD(int64_t, uint64_t, x, y))
TNT_DEFINE_KERNELS(i64_min, int64_t, TNT_OP_MIN(x, y))
TNT_DEFINE_KERNELS(i64_max, int64_t, TNT_OP_MAX(x, y))

/* 16-bit floats: widen into a float32 accumulator, combine, narrow once. */
#define TNT_DEFINE_WIDEN(name, TO_FLOAT)                                                        \
    static void tnt_widen_##name(float *restrict acc, const tnt_half_t *restrict src, size_t n) \
    {                                                                                           \
        for (size_t i = 0; i < n; i++)                                                          \
            acc[i] = TO_FLOAT(src[i]);                                                          \
    }

#define TNT_DEFINE_NARROW(name, FROM_FLOAT)                                                      \
    static void tnt_narrow_##name(tnt_half_t *restrict dst, const float *restrict acc, size_t n) \
    {                                                                                            \
        for (size_t i = 0; i < n; i++)                                                           \
            dst[i] = FROM_FLOAT(acc[i]);                                                         \
    }

/* dst = FROM_FLOAT(src * s): the product is formed in float32 and rounded to
 * 16 bits once more (gradient compression's one pass over the data). */
#define TNT_DEFINE_NARROW_SCALED(name, FROM_FLOAT)                                        \
    static void tnt_narrow_scaled_##name(tnt_half_t *restrict dst, const float *restrict src, \
                                         size_t n, float s)                               \
    {                                                                                     \
        for (size_t i = 0; i < n; i++)                                                    \
            dst[i] = FROM_FLOAT(src[i] * s);                                              \
    }

#define TNT_DEFINE_KACC16(name, TO_FLOAT, OPEXPR)                                              \
    static void tnt_kacc16_##name(float *restrict acc, const tnt_half_t *restrict b, size_t n) \
    {                                                                                          \
        for (size_t i = 0; i < n; i++) {                                                       \
            float x = acc[i], y = TO_FLOAT(b[i]);                                              \
            acc[i] = OPEXPR;                                                                   \
        }                                                                                      \
    }

TNT_DEFINE_WIDEN(f16, tnt_half_to_float)
TNT_DEFINE_NARROW(f16, tnt_float_to_half)
TNT_DEFINE_WIDEN(bf16, tnt_bf16_to_float)
TNT_DEFINE_NARROW(bf16, tnt_float_to_bf16)
TNT_DEFINE_NARROW_SCALED(f16, tnt_float_to_half)
TNT_DEFINE_NARROW_SCALED(bf16, tnt_float_to_bf16)
TNT_DEFINE_KACC16(f16_sum, tnt_half_to_float, TNT_OP_SUM(x, y))
TNT_DEFINE_KACC16(f16_prod, tnt_half_to_float, TNT_OP_PROD(x, y))
TNT_DEFINE_KACC16(f16_min, tnt_half_to_float, TNT_OP_MIN(x, y))
TNT_DEFINE_KACC16(f16_max, tnt_half_to_float, TNT_OP_MAX(x, y))
TNT_DEFINE_KACC16(bf16_sum, tnt_bf16_to_float, TNT_OP_SUM(x, y))
TNT_DEFINE_KACC16(bf16_prod, tnt_bf16_to_float, TNT_OP_PROD(x, y))
TNT_DEFINE_KACC16(bf16_min, tnt_bf16_to_float, TNT_OP_MIN(x, y))
TNT_DEFINE_KACC16(bf16_max, tnt_bf16_to_float, TNT_OP_MAX(x, y))

/* ---- dispatch tables --------------------------------------------------- */

typedef void (*tnt_k2_fn)(void *restrict, const void *restrict, const void *restrict, size_t);
typedef void (*tnt_kacc_fn)(void *restrict, const void *restrict, size_t);
typedef void (*tnt_widen_fn)(float *restrict, const tnt_half_t *restrict, size_t);
typedef void (*tnt_narrow_fn)(tnt_half_t *restrict, const float *restrict, size_t);
typedef void (*tnt_kacc16_fn)(float *restrict, const tnt_half_t *restrict, size_t);

/* Indexed by op (SUM, PROD, MIN, MAX; AVG reduces like SUM). */
#define TNT_TABLE4(prefix, name, cast)                                                  \
    {                                                                                   \
        (cast) prefix##name##_sum, (cast)prefix##name##_prod, (cast)prefix##name##_min, \
            (cast)prefix##name##_max, (cast)prefix##name##_sum                          \
    }

/* Rows for the native types: FLOAT32, FLOAT64, (16-bit rows unused), INT32, INT64. */
static const tnt_k2_fn tnt_k2_table[TNT_DTYPE_LAST][TNT_OP_LAST] = {
    [TNT_FLOAT32] = TNT_TABLE4(tnt_k2_, f32, tnt_k2_fn),
    [TNT_FLOAT64] = TNT_TABLE4(tnt_k2_, f64, tnt_k2_fn),
    [TNT_INT32] = TNT_TABLE4(tnt_k2_, i32, tnt_k2_fn),
    [TNT_INT64] = TNT_TABLE4(tnt_k2_, i64, tnt_k2_fn),
};
static const tnt_kacc_fn tnt_kacc_table[TNT_DTYPE_LAST][TNT_OP_LAST] = {
    [TNT_FLOAT32] = TNT_TABLE4(tnt_kacc_, f32, tnt_kacc_fn),
    [TNT_FLOAT64] = TNT_TABLE4(tnt_kacc_, f64, tnt_kacc_fn),
    [TNT_INT32] = TNT_TABLE4(tnt_kacc_, i32, tnt_kacc_fn),
    [TNT_INT64] = TNT_TABLE4(tnt_kacc_, i64, tnt_kacc_fn),
};
static const tnt_k2_fn tnt_k2u_table[TNT_DTYPE_LAST][TNT_OP_LAST] = {
    [TNT_FLOAT32] = TNT_TABLE4(tnt_k2u_, f32, tnt_k2_fn),
    [TNT_FLOAT64] = TNT_TABLE4(tnt_k2u_, f64, tnt_k2_fn),
    [TNT_INT32] = TNT_TABLE4(tnt_k2u_, i32, tnt_k2_fn),
    [TNT_INT64] = TNT_TABLE4(tnt_k2u_, i64, tnt_k2_fn),
};
static const tnt_kacc16_fn tnt_kacc16_table[2][TNT_OP_LAST] = {
    TNT_TABLE4(tnt_kacc16_, f16, tnt_kacc16_fn),
    TNT_TABLE4(tnt_kacc16_, bf16, tnt_kacc16_fn),
};

/* ---- divide and scale (element-wise, in the dtype's arithmetic) -------- */

static void tnt_div_f32(float *restrict buf, size_t n, float d)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = buf[i] / d;
    }
}

static void tnt_div_f64(double *restrict buf, size_t n, double d)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = buf[i] / d;
    }
}

static void tnt_mul_f32(float *restrict buf, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = buf[i] * s;
    }
}

static void tnt_mul_f64(double *restrict buf, size_t n, double s)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = buf[i] * s;
    }
}

/* ---- public entry points ----------------------------------------------- */

static void tnt_reduce_n_16(tnt_dtype_t dtype, tnt_op_t op, tnt_half_t *dst,
                            const void *const *srcs, int num_srcs, size_t count, int divisor)
{
    int is_bf16 = dtype == TNT_BFLOAT16;
    tnt_widen_fn widen = is_bf16 ? tnt_widen_bf16 : tnt_widen_f16;
    tnt_narrow_fn narrow = is_bf16 ? tnt_narrow_bf16 : tnt_narrow_f16;
    tnt_kacc16_fn kacc = tnt_kacc16_table[is_bf16][op];
    float acc[TNT_REDUCE_BLOCK];

    for (size_t base = 0; base < count; base += TNT_REDUCE_BLOCK) {
        size_t n = count - base < TNT_REDUCE_BLOCK ? count - base : TNT_REDUCE_BLOCK;
        widen(acc, (const tnt_half_t *)srcs[0] + base, n);
        for (int s = 1; s < num_srcs; s++) {
            kacc(acc, (const tnt_half_t *)srcs[s] + base, n);
        }
        if (divisor > 1) {
            tnt_div_f32(acc, n, (float)divisor);
        }
        narrow(dst + base, acc, n);
    }
}

static int tnt_ranges_overlap(const void *a, const void *b, size_t bytes)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bytes && y < x + bytes;
}

void tnt_reduce_n_div(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *const *srcs,
                      int num_srcs, size_t count, int divisor)
{
    size_t esize = tnt_dtype_size(dtype);
    if (esize == 0 || (unsigned)op >= TNT_OP_LAST || num_srcs < 1 || count == 0) {
        return;
    }
    if (dtype == TNT_FLOAT16 || dtype == TNT_BFLOAT16) {
        tnt_reduce_n_16(dtype, op, dst, srcs, num_srcs, count, divisor);
        return;
    }

    if (num_srcs == 1) {
        if (dst != srcs[0]) {
            memmove(dst, srcs[0], count * esize);
        }
    } else if (num_srcs == 2 && !tnt_ranges_overlap(dst, srcs[0], count * esize) &&
               !tnt_ranges_overlap(dst, srcs[1], count * esize)) {
        /* The common two-rank case: one pass, no accumulator. */
        tnt_k2_table[dtype][op](dst, srcs[0], srcs[1], count);
    } else {
        tnt_k2_fn k2 = tnt_k2_table[dtype][op];
        tnt_kacc_fn kacc = tnt_kacc_table[dtype][op];
        /* Block accumulator in L1; 16 KiB covers 2048 doubles. */
        _Alignas(64) unsigned char acc[TNT_REDUCE_BLOCK * 8];
        for (size_t base = 0; base < count; base += TNT_REDUCE_BLOCK) {
            size_t n = count - base < TNT_REDUCE_BLOCK ? count - base : TNT_REDUCE_BLOCK;
            size_t off = base * esize;
            k2(acc, (const char *)srcs[0] + off, (const char *)srcs[1] + off, n);
            for (int s = 2; s < num_srcs; s++) {
                kacc(acc, (const char *)srcs[s] + off, n);
            }
            memcpy((char *)dst + off, acc, n * esize);
        }
    }
    if (divisor > 1) {
        tnt_reduce_divide(dtype, dst, count, divisor);
    }
}

void tnt_reduce_into(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *in, int in_first,
                     size_t count, int divisor)
{
    size_t esize = tnt_dtype_size(dtype);
    /* One L1 block: the result of a block goes here and then to dst, which
     * is also an operand (the kernels' pointers do not alias). */
    _Alignas(64) unsigned char block[TNT_REDUCE_BLOCK * 8];
    tnt_k2_fn k2u;

    if (esize == 0 || (unsigned)op >= TNT_OP_LAST || count == 0) {
        return;
    }
    k2u = tnt_k2u_table[dtype][op];
    for (size_t base = 0; base < count; base += TNT_REDUCE_BLOCK) {
        size_t n = count - base < TNT_REDUCE_BLOCK ? count - base : TNT_REDUCE_BLOCK;
        size_t off = base * esize;
        char *d = (char *)dst + off;
        const char *s = (const char *)in + off;

        if (k2u == NULL) {
            /* 16-bit floats: an aligned copy of the block, then the usual
             * widen-combine-narrow. */
            const void *srcs[2] = { in_first ? (const void *)block : d,
                                    in_first ? (const void *)d : block };
            memcpy(block, s, n * esize);
            tnt_reduce_n_div(dtype, op, d, srcs, 2, n, divisor);
            continue;
        }
        k2u(block, in_first ? s : d, in_first ? d : s, n);
        if (divisor > 1) {
            tnt_reduce_divide(dtype, block, n, divisor);
        }
        memcpy(d, block, n * esize);
    }
}

void tnt_reduce_n(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *const *srcs, int num_srcs,
                  size_t count)
{
    tnt_reduce_n_div(dtype, op, dst, srcs, num_srcs, count, 1);
}

void tnt_reduce_divide(tnt_dtype_t dtype, void *buf, size_t count, int divisor)
{
    if (divisor == 1 || divisor == 0) {
        return;
    }
    switch (dtype) {
    case TNT_FLOAT32:
        tnt_div_f32(buf, count, (float)divisor);
        break;
    case TNT_FLOAT64:
        tnt_div_f64(buf, count, (double)divisor);
        break;
    case TNT_INT32: {
        int32_t *p = buf;
        for (size_t i = 0; i < count; i++) {
            p[i] = (int32_t)(p[i] / divisor);
        }
        break;
    }
    case TNT_INT64: {
        int64_t *p = buf;
        for (size_t i = 0; i < count; i++) {
            p[i] = p[i] / divisor;
        }
        break;
    }
    case TNT_FLOAT16:
    case TNT_BFLOAT16: {
        const void *src[1] = { buf };
        tnt_reduce_n_16(dtype, TNT_SUM, buf, src, 1, count, divisor);
        break;
    }
    default:
        break;
    }
}

/* Without libm: the truncating conversion after adding +-0.5. */
static double tnt_round_half_away(double x)
{
    return x < 0 ? (double)(int64_t)(x - 0.5) : (double)(int64_t)(x + 0.5);
}

void tnt_reduce_scale(tnt_dtype_t dtype, void *buf, size_t count, double scale)
{
    if (scale == 1.0) {
        return;
    }
    switch (dtype) {
    case TNT_FLOAT32:
        tnt_mul_f32(buf, count, (float)scale);
        break;
    case TNT_FLOAT64:
        tnt_mul_f64(buf, count, scale);
        break;
    case TNT_INT32: {
        /* Integers: product in double, rounded half away from zero. */
        int32_t *p = buf;
        for (size_t i = 0; i < count; i++) {
            p[i] = (int32_t)tnt_round_half_away((double)p[i] * scale);
        }
        break;
    }
    case TNT_INT64: {
        int64_t *p = buf;
        for (size_t i = 0; i < count; i++) {
            p[i] = (int64_t)tnt_round_half_away((double)p[i] * scale);
        }
        break;
    }
    case TNT_FLOAT16:
    case TNT_BFLOAT16: {
        int is_bf16 = dtype == TNT_BFLOAT16;
        tnt_half_t *p = buf;
        float acc[TNT_REDUCE_BLOCK];
        for (size_t base = 0; base < count; base += TNT_REDUCE_BLOCK) {
            size_t n = count - base < TNT_REDUCE_BLOCK ? count - base : TNT_REDUCE_BLOCK;
            (is_bf16 ? tnt_widen_bf16 : tnt_widen_f16)(acc, p + base, n);
            tnt_mul_f32(acc, n, (float)scale);
            (is_bf16 ? tnt_narrow_bf16 : tnt_narrow_f16)(p + base, acc, n);
        }
        break;
    }
    default:
        break;
    }
}

void tnt_reduce_widen(tnt_dtype_t dtype, const void *src, float *dst, size_t count)
{
    if (dtype == TNT_FLOAT16) {
        tnt_widen_f16(dst, src, count);
    } else if (dtype == TNT_BFLOAT16) {
        tnt_widen_bf16(dst, src, count);
    }
}

void tnt_reduce_narrow(tnt_dtype_t dtype, const float *src, void *dst, size_t count)
{
    if (dtype == TNT_FLOAT16) {
        tnt_narrow_f16(dst, src, count);
    } else if (dtype == TNT_BFLOAT16) {
        tnt_narrow_bf16(dst, src, count);
    }
}

void tnt_reduce_narrow_scaled(tnt_dtype_t dtype, const float *src, void *dst, size_t count,
                              double scale)
{
    if (scale == 1.0) {
        tnt_reduce_narrow(dtype, src, dst, count);
    } else if (dtype == TNT_FLOAT16) {
        tnt_narrow_scaled_f16(dst, src, count, (float)scale);
    } else if (dtype == TNT_BFLOAT16) {
        tnt_narrow_scaled_bf16(dst, src, count, (float)scale);
    }
}

void tnt_reduce_copy_scaled(tnt_dtype_t dtype, void *restrict dst, const void *restrict src,
                            size_t count, double scale)
{
    if (scale == 1.0) {
        memcpy(dst, src, count * tnt_dtype_size(dtype));
    } else if (dtype == TNT_FLOAT32) {
        float *restrict d = dst;
        const float *restrict s = src;
        const float f = (float)scale;
        for (size_t i = 0; i < count; i++) {
            d[i] = s[i] * f;
        }
    } else if (dtype == TNT_FLOAT64) {
        double *restrict d = dst;
        const double *restrict s = src;
        for (size_t i = 0; i < count; i++) {
            d[i] = s[i] * scale;
        }
    } else {
        memcpy(dst, src, count * tnt_dtype_size(dtype));
        tnt_reduce_scale(dtype, dst, count, scale);
    }
}
