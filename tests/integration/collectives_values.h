/*
 * Test inputs whose reductions are exact in every dtype, shared by the
 * shared-memory unit test (tests/unit/test_shm.c) and the multi-process
 * check (tests/integration/collectives_check.c).
 *
 * Rank r's element i is a small integer chosen per op so that every partial
 * result is exactly representable even in bfloat16 (8 significant bits):
 *   SUM: [-4, 4]; AVG: n * [-4, 4] (so the sum divides by n exactly);
 *   PROD: mostly 1, sometimes -1 or 2 (|product| <= 2^8);
 *   MIN/MAX: [-100, 100].
 * The expected value is then computed in double, which is exact, and
 * compared with == after converting the result back to double.
 */
#ifndef TNT_TESTS_COLLECTIVES_VALUES_H
#define TNT_TESTS_COLLECTIVES_VALUES_H

#include <stdint.h>
#include <string.h>

#include <tnt/tnt.h>

static inline uint64_t cv_mix(uint64_t x)
{
    /* splitmix64 finaliser: a cheap, well-spread hash. */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline double cv_value(tnt_op_t op, int nranks, uint64_t seed, int rank, size_t i)
{
    uint64_t h = cv_mix(seed * 1000003u + (uint64_t)rank * 7919u + (uint64_t)i * 104729u);
    switch (op) {
    case TNT_SUM:
        return (double)((int)(h % 9) - 4);
    case TNT_AVG:
        return (double)nranks * (double)((int)(h % 9) - 4);
    case TNT_PROD: {
        static const int choices[8] = { 1, 1, 1, -1, 2, 1, 1, -1 };
        return (double)choices[h % 8];
    }
    default:
        return (double)((int)(h % 201) - 100);
    }
}

static inline double cv_expected(tnt_dtype_t dtype, tnt_op_t op, int nranks, uint64_t seed,
                                 size_t i)
{
    double acc = cv_value(op, nranks, seed, 0, i);
    for (int r = 1; r < nranks; r++) {
        double v = cv_value(op, nranks, seed, r, i);
        switch (op) {
        case TNT_SUM:
        case TNT_AVG:
            acc += v;
            break;
        case TNT_PROD:
            acc *= v;
            break;
        case TNT_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc = v > acc ? v : acc;
            break;
        }
    }
    if (op == TNT_AVG) {
        if (dtype == TNT_INT32 || dtype == TNT_INT64) {
            acc = (double)((int64_t)acc / nranks);
        } else {
            acc = acc / nranks;
        }
    }
    return acc;
}

/* Exact conversions for the small integers above (no libm). */
static inline uint16_t cv_f16_from_exact(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) == 0) {
        return (uint16_t)(u >> 16);
    }
    uint32_t exp = ((u >> 23) & 0xffu) - 127 + 15;
    return (uint16_t)(((u >> 16) & 0x8000u) | (exp << 10) | ((u >> 13) & 0x3ffu));
}

static inline double cv_f16_to_double(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == 0) {
        return sign * (double)m / 16777216.0;
    }
    uint32_t u = ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return sign * (double)f;
}

static inline void cv_store(tnt_dtype_t dtype, void *buf, size_t i, double v)
{
    switch (dtype) {
    case TNT_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case TNT_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case TNT_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case TNT_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case TNT_FLOAT16:
        ((uint16_t *)buf)[i] = cv_f16_from_exact(v);
        break;
    case TNT_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
        break;
    }
    default:
        break;
    }
}

static inline double cv_load(tnt_dtype_t dtype, const void *buf, size_t i)
{
    switch (dtype) {
    case TNT_FLOAT32:
        return ((const float *)buf)[i];
    case TNT_FLOAT64:
        return ((const double *)buf)[i];
    case TNT_INT32:
        return ((const int32_t *)buf)[i];
    case TNT_INT64:
        return (double)((const int64_t *)buf)[i];
    case TNT_FLOAT16:
        return cv_f16_to_double(((const uint16_t *)buf)[i]);
    case TNT_BFLOAT16: {
        uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default:
        return 0;
    }
}

static inline void cv_fill(tnt_dtype_t dtype, tnt_op_t op, int nranks, uint64_t seed, int rank,
                           void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        cv_store(dtype, buf, i, cv_value(op, nranks, seed, rank, i));
    }
}

/* Index of the first wrong element, or count when all are right. */
static inline size_t cv_check(tnt_dtype_t dtype, tnt_op_t op, int nranks, uint64_t seed,
                              const void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (cv_load(dtype, buf, i) != cv_expected(dtype, op, nranks, seed, i)) {
            return i;
        }
    }
    return count;
}

/* FNV-1a over bytes: ranks compare results bitwise by comparing hashes. */
static inline uint64_t cv_hash(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static const char *const cv_dtype_names[] = { "float32",  "float64", "float16",
                                              "bfloat16", "int32",   "int64" };
static const char *const cv_op_names[] = { "sum", "prod", "min", "max", "avg" };

#endif
