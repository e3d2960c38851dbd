/*
 * Fusion engine through real ranks. One program, several scenarios:
 *
 *   fusion_check results   thresholds 0 / small / 64 KiB / huge / AUTO, all
 *                          dtypes mixed, zero-count and prime-sized tensors,
 *                          per-rank scale factors, several steps on one
 *                          engine, every rank marking in its own order; the
 *                          expected sums are computed exactly.
 *   fusion_check mismatch  ranks 2 and 3 (of 4) register a different plan:
 *                          every rank gets TNT_ERR_MISMATCH naming them, and
 *                          the communicator still works afterwards; rank 1
 *                          passes an invalid list: it gets its argument
 *                          error, the others a mismatch naming it.
 *   fusion_check unmarked  rank 1 forgets a tensor in one step: it gets
 *                          TNT_ERR_INVALID_ARG naming the tensor, the others
 *                          TNT_ERR_MISMATCH naming rank 1, nobody hangs, and
 *                          the next step is correct again. Also local misuse
 *                          (double mark, bad index), and rank 1 destroying
 *                          its engine mid-step (the others fail, no hang).
 *   fusion_check compressed tnt_fusion_create_compressed: bad compression
 *                          values and ops are refused on every rank; an AVG
 *                          over bf16 and fp16 (fused small tensors, a large
 *                          one, a float64 one that stays uncompressed) is
 *                          within 16-bit rounding of the exact average, on
 *                          the 16-bit grid, and bitwise the same on every
 *                          rank, for several steps; fp16 averages of values
 *                          near 65504 do not overflow (pre-scaling).
 *
 * Prints "fusion_check <scenario>: OK" on rank 0 and exits 0 on success;
 * any failure prints the rank and what differed and exits 1.
 */
#include <tnt/tnt.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = -1;

#define CHECK_PROGRAM "fusion_check"
#define CHECK_RANK    g_rank
#include "check.h"

/* ---- 16-bit float conversions, exact for the small values used here ---- */

static uint16_t to_half(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    if ((b & 0x7fffffff) == 0) {
        return sign;
    }
    int exp = (int)((b >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (uint16_t)(exp << 10) | (uint16_t)((b >> 13) & 0x3ff));
}

static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t b = sign;
    if (exp != 0) {
        b |= ((exp - 15 + 127) << 23) | (mant << 13);
    } else if (mant != 0) {
        float f = (float)mant / 1024.0f / 16384.0f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* ---- test data ---- */

/* Value rank r contributes for element i of tensor t at step s: a small
 * integer, so sums of scaled values are exact in every dtype. */
static int value_of(int r, int s, size_t t, size_t i)
{
    return (int)((r * 7 + s * 3 + (int)t * 5 + (int)(i % 11)) % 5) - 2;
}

/* Per-rank weights: powers of two for floats (exact), small integers for
 * integer types. */
static double float_scale(int r, int s)
{
    static const double scales[4] = { 1.0, 0.5, 2.0, 0.25 };
    return scales[(r + s) % 4];
}

static double int_scale(int r, int s)
{
    static const double scales[4] = { 1.0, 2.0, 3.0, 1.0 };
    return scales[(r + s) % 4];
}

static int is_int(tnt_dtype_t d)
{
    return d == TNT_INT32 || d == TNT_INT64;
}

static void fill(void *buf, tnt_dtype_t d, size_t count, int r, int s, size_t t)
{
    for (size_t i = 0; i < count; i++) {
        int v = value_of(r, s, t, i);
        switch (d) {
        case TNT_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case TNT_FLOAT64:
            ((double *)buf)[i] = v;
            break;
        case TNT_FLOAT16:
            ((uint16_t *)buf)[i] = to_half((float)v);
            break;
        case TNT_BFLOAT16:
            ((uint16_t *)buf)[i] = to_bf16((float)v);
            break;
        case TNT_INT32:
            ((int32_t *)buf)[i] = v;
            break;
        case TNT_INT64:
            ((int64_t *)buf)[i] = v;
            break;
        default:
            break;
        }
    }
}

static double get(const void *buf, tnt_dtype_t d, size_t i)
{
    switch (d) {
    case TNT_FLOAT32:
        return ((const float *)buf)[i];
    case TNT_FLOAT64:
        return ((const double *)buf)[i];
    case TNT_FLOAT16:
        return from_half(((const uint16_t *)buf)[i]);
    case TNT_BFLOAT16:
        return from_bf16(((const uint16_t *)buf)[i]);
    case TNT_INT32:
        return ((const int32_t *)buf)[i];
    case TNT_INT64:
        return (double)((const int64_t *)buf)[i];
    default:
        return NAN;
    }
}

static void check_results(void **data, const tnt_tensor_desc_t *desc, size_t n, int size, int s,
                          tnt_op_t op, const char *what)
{
    for (size_t t = 0; t < n; t++) {
        for (size_t i = 0; i < desc[t].count; i++) {
            double want = 0;
            for (int r = 0; r < size; r++) {
                double sc = is_int(desc[t].dtype) ? int_scale(r, s) : float_scale(r, s);
                want += sc * value_of(r, s, t, i);
            }
            if (op == TNT_AVG) {
                want /= size;
                if (is_int(desc[t].dtype)) {
                    want = trunc(want);
                }
            }
            double got = get(data[t], desc[t].dtype, i);
            /* Exact except AVG by a rank count that is not a power of two. */
            double tol = op == TNT_AVG ? 1e-2 * (fabs(want) + 1) : 0;
            CHECK(fabs(got - want) <= tol,
                  "%s step %d: tensor %zu (dtype %d) element %zu = %g, want %g", what, s, t,
                  (int)desc[t].dtype, i, got, want);
        }
    }
}

/* layout: 0 = one allocation per tensor (the engine copies through its
 * staging buffers), 1 = all tensors back to back in one buffer in tensor
 * order (fused buckets are reduced in place, no copy), 2 = the same buffer
 * with an 8-byte gap after every third tensor (some buckets contiguous,
 * others not). */
static void run_engine_layout(tnt_comm_t *comm, const tnt_tensor_desc_t *desc, size_t n,
                              size_t threshold, tnt_op_t op, size_t want_buckets, int steps,
                              const char *what, int layout)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    tnt_fusion_t *fusion = NULL;
    void **data = calloc(n ? n : 1, sizeof(*data));
    uint64_t *order = calloc(n ? n : 1, sizeof(*order));
    unsigned char *flat = NULL;
    tnt_status_t st;

    CHECK(data != NULL && order != NULL, "out of memory");
    if (layout == 0) {
        for (size_t t = 0; t < n; t++) {
            data[t] = malloc(desc[t].count * tnt_dtype_size(desc[t].dtype) + 1);
            CHECK(data[t] != NULL, "out of memory");
        }
    } else {
        size_t total = 0;
        for (size_t t = 0; t < n; t++) {
            total += desc[t].count * tnt_dtype_size(desc[t].dtype) + 16;
        }
        flat = malloc(total + 1);
        CHECK(flat != NULL, "out of memory");
        size_t off = 0;
        for (size_t t = 0; t < n; t++) {
            /* Align where the dtype changes (buckets never span a dtype
             * change, so this keeps every bucket contiguous). */
            if (t > 0 && desc[t].dtype != desc[t - 1].dtype) {
                off = (off + 7) / 8 * 8;
            }
            data[t] = flat + off;
            off += desc[t].count * tnt_dtype_size(desc[t].dtype);
            if (layout == 2 && t % 3 == 2) {
                off += 8;
            }
        }
    }
    st = tnt_fusion_create(comm, desc, n, threshold, op, &fusion);
    CHECK(st == TNT_OK, "%s: tnt_fusion_create: %s", what, tnt_last_error());
    if (want_buckets != SIZE_MAX) {
        CHECK(tnt_fusion_num_buckets(fusion) == want_buckets, "%s: %zu buckets, want %zu", what,
              tnt_fusion_num_buckets(fusion), want_buckets);
    }
    for (int s = 0; s < steps; s++) {
        /* Each rank marks in its own order, different every step. */
        st = tnt_shard_permutation(n, (uint64_t)(1000 * s + rank), order);
        CHECK(st == TNT_OK, "permutation");
        for (size_t k = 0; k < n; k++) {
            size_t t = (size_t)order[k];
            fill(data[t], desc[t].dtype, desc[t].count, rank, s, t);
            double sc = is_int(desc[t].dtype) ? int_scale(rank, s) : float_scale(rank, s);
            st = tnt_fusion_mark_ready(fusion, t, data[t], sc);
            CHECK(st == TNT_OK, "%s step %d: mark_ready(%zu): %s", what, s, t, tnt_last_error());
        }
        st = tnt_fusion_wait(fusion);
        CHECK(st == TNT_OK, "%s step %d: wait: %s", what, s, tnt_last_error());
        check_results(data, desc, n, size, s, op, what);
    }
    tnt_fusion_destroy(fusion);
    if (flat == NULL) {
        for (size_t t = 0; t < n; t++) {
            free(data[t]);
        }
    }
    free(flat);
    free(data);
    free(order);
}

static void run_engine(tnt_comm_t *comm, const tnt_tensor_desc_t *desc, size_t n, size_t threshold,
                       tnt_op_t op, size_t want_buckets, int steps, const char *what)
{
    run_engine_layout(comm, desc, n, threshold, op, want_buckets, steps, what, 0);
}

static void scenario_results(tnt_comm_t *comm)
{
    /* Mixed dtypes, zero-count and prime sizes; runs of one dtype so that
     * small thresholds fuse several tensors. */
    const tnt_tensor_desc_t desc[] = {
        { 1000, TNT_FLOAT32 }, { 7, TNT_FLOAT32 },   { 0, TNT_FLOAT32 },      { 4099, TNT_FLOAT32 },
        { 3, TNT_FLOAT32 },    { 131, TNT_FLOAT64 }, { 1, TNT_FLOAT64 },      { 257, TNT_FLOAT16 },
        { 33, TNT_FLOAT16 },   { 65, TNT_BFLOAT16 }, { 17, TNT_INT32 },       { 0, TNT_INT32 },
        { 29, TNT_INT64 },     { 5, TNT_INT64 },     { 200003, TNT_FLOAT32 }, { 11, TNT_FLOAT32 },
        { 0, TNT_FLOAT64 },    { 0, TNT_FLOAT64 }, /* a bucket with nothing to reduce */
    };
    const size_t n = sizeof(desc) / sizeof(desc[0]);

    run_engine(comm, desc, n, 0, TNT_SUM, n, 3, "threshold 0");
    run_engine(comm, desc, n, 256, TNT_SUM, SIZE_MAX, 3, "threshold 256 B");
    run_engine(comm, desc, n, 64 << 10, TNT_SUM, SIZE_MAX, 3, "threshold 64 KiB");
    /* Huge threshold: one bucket per dtype run. */
    run_engine(comm, desc, n, SIZE_MAX - 1, TNT_SUM, 8, 3, "threshold huge");
    run_engine(comm, desc, n, 1024, TNT_AVG, SIZE_MAX, 2, "threshold 1 KiB, avg");
    /* Tensors back to back in one buffer: fused buckets reduce in place. */
    run_engine_layout(comm, desc, n, 256, TNT_SUM, SIZE_MAX, 2, "flat, 256 B", 1);
    run_engine_layout(comm, desc, n, SIZE_MAX - 1, TNT_SUM, 8, 2, "flat, huge", 1);
    run_engine_layout(comm, desc, n, 256, TNT_SUM, SIZE_MAX, 2, "gaps, 256 B", 2);
    /* AUTO follows TNT_FUSION_THRESHOLD_KB, which the test sets to 4. */
    size_t plan[32], nb = 0;
    tnt_status_t st = tnt_fusion_plan(desc, n, 4096, plan, &nb);
    CHECK(st == TNT_OK, "plan");
    const char *env = getenv("TNT_FUSION_THRESHOLD_KB");
    run_engine(comm, desc, n, TNT_FUSION_THRESHOLD_AUTO, TNT_SUM,
               env != NULL && strcmp(env, "4") == 0 ? nb : SIZE_MAX, 2, "threshold AUTO");
    /* Empty engine: wait still works (and still synchronises). */
    run_engine(comm, NULL, 0, 0, TNT_SUM, 0, 2, "no tensors");
}

static void scenario_mismatch(tnt_comm_t *comm)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    tnt_tensor_desc_t desc[4] = {
        { 100, TNT_FLOAT32 }, { 50, TNT_FLOAT32 }, { 10, TNT_FLOAT64 }, { 3, TNT_FLOAT32 }
    };
    size_t n = 3;
    size_t threshold = 1024;
    tnt_fusion_t *fusion = (tnt_fusion_t *)&desc; /* must stay untouched on error */

    CHECK(size == 4, "run the mismatch scenario on 4 ranks (got %d)", size);
    if (rank == 2) {
        n = 4; /* one tensor more */
    } else if (rank == 3) {
        threshold = 0; /* another threshold */
    }
    tnt_status_t st = tnt_fusion_create(comm, desc, n, threshold, TNT_SUM, &fusion);
    CHECK(st == TNT_ERR_MISMATCH, "create returned %d (%s), want TNT_ERR_MISMATCH", (int)st,
          tnt_last_error());
    CHECK(fusion == (tnt_fusion_t *)&desc, "fusion_p was written on error");
    const char *msg = tnt_last_error();
    CHECK(strstr(msg, "rank(s) 2, 3") != NULL && strstr(msg, "same order") != NULL,
          "message does not name ranks 2, 3: '%s'", msg);
    if (rank == 0) {
        printf("rank 0 error: %s\n", msg);
    }
    /* The communicator is still in step: a plain allreduce works. */
    double x = rank + 1;
    st = tnt_allreduce(comm, &x, &x, 1, TNT_FLOAT64, TNT_SUM);
    CHECK(st == TNT_OK && x == 10.0, "allreduce after mismatch: %d %g", (int)st, x);

    /* Rank 1 passes an invalid tensor list: it gets its own argument error,
     * the others fail at once naming it (nobody waits until TNT_TIMEOUT). */
    tnt_tensor_desc_t bad[3] = { { 100, TNT_FLOAT32 }, { 50, TNT_FLOAT32 }, { 10, TNT_FLOAT64 } };
    if (rank == 1) {
        bad[1].dtype = TNT_DTYPE_LAST;
    }
    st = tnt_fusion_create(comm, bad, 3, 1024, TNT_SUM, &fusion);
    msg = tnt_last_error();
    if (rank == 1) {
        CHECK(st == TNT_ERR_INVALID_ARG && strstr(msg, "tensor 1 has invalid dtype") != NULL,
              "bad list: rank 1 got %d '%s'", (int)st, msg);
    } else {
        CHECK(st == TNT_ERR_MISMATCH && strstr(msg, "rank(s) 1 could not set up") != NULL,
              "bad list: got %d '%s'", (int)st, msg);
    }
    CHECK(fusion == (tnt_fusion_t *)&desc, "fusion_p was written on error");

    /* Same plan again on every rank: works. */
    st = tnt_fusion_create(comm, desc, 3, 1024, TNT_SUM, &fusion);
    CHECK(st == TNT_OK, "create after mismatch: %s", tnt_last_error());
    tnt_fusion_destroy(fusion);
}

static void scenario_unmarked(tnt_comm_t *comm)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    const tnt_tensor_desc_t desc[] = { { 64, TNT_FLOAT32 },   { 64, TNT_FLOAT32 },
                                       { 300, TNT_FLOAT32 },  { 64, TNT_FLOAT32 },
                                       { 1000, TNT_FLOAT32 }, { 64, TNT_FLOAT32 } };
    const size_t n = 6;
    float *data[6];
    tnt_fusion_t *fusion = NULL;
    tnt_status_t st;

    CHECK(size >= 2, "run the unmarked scenario on at least 2 ranks");
    for (size_t t = 0; t < n; t++) {
        data[t] = malloc(desc[t].count * sizeof(float));
        CHECK(data[t] != NULL, "out of memory");
    }
    /* 512 B: buckets {0,1} {2} {3,4} {5}; tensors 1 and 4 are in fused
     * buckets and tensor 5 is alone, so both the staging and the in-place
     * path are hit. */
    st = tnt_fusion_create(comm, desc, n, 512, TNT_SUM, &fusion);
    CHECK(st == TNT_OK, "create: %s", tnt_last_error());
    CHECK(tnt_fusion_num_buckets(fusion) == 4, "buckets %zu", tnt_fusion_num_buckets(fusion));

    for (int s = 0; s < 4; s++) {
        /* step 1: rank 1 forgets tensor 4; step 2: rank 1 forgets 1 and 5 */
        for (size_t t = 0; t < n; t++) {
            fill(data[t], desc[t].dtype, desc[t].count, rank, s, t);
            if (rank == 1 && ((s == 1 && t == 4) || (s == 2 && (t == 1 || t == 5)))) {
                continue;
            }
            st = tnt_fusion_mark_ready(fusion, t, data[t], float_scale(rank, s));
            CHECK(st == TNT_OK, "step %d mark %zu: %s", s, t, tnt_last_error());
        }
        if (s == 3) {
            /* Local misuse is refused and changes nothing. */
            st = tnt_fusion_mark_ready(fusion, 0, data[0], 1.0);
            CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "already marked"),
                  "double mark: %d %s", (int)st, tnt_last_error());
            st = tnt_fusion_mark_ready(fusion, n, data[0], 1.0);
            CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "out of range"),
                  "bad index: %d %s", (int)st, tnt_last_error());
        }
        st = tnt_fusion_wait(fusion);
        if (s == 1 || s == 2) {
            const char *msg = tnt_last_error();
            if (rank == 1) {
                const char *want = s == 1 ? "tensor(s) 4 of 6" : "tensor(s) 1, 5 of 6";
                CHECK(st == TNT_ERR_INVALID_ARG && strstr(msg, want) != NULL,
                      "step %d: forgetting rank got %d '%s'", s, (int)st, msg);
            } else {
                CHECK(st == TNT_ERR_MISMATCH && strstr(msg, "rank(s) 1 did not mark") != NULL,
                      "step %d: rank got %d '%s'", s, (int)st, msg);
            }
            if (rank == 0 || rank == 1) {
                printf("rank %d step %d error: %s\n", rank, s, msg);
            }
        } else {
            CHECK(st == TNT_OK, "step %d wait: %s", s, tnt_last_error());
            void *ptrs[6];
            for (size_t t = 0; t < n; t++) {
                ptrs[t] = data[t];
            }
            check_results(ptrs, desc, n, size, s, TNT_SUM, "unmarked scenario");
        }
    }
    /* Rank 1 marks two tensors and then destroys the engine mid-step (an
     * exception in its training loop): destroy finishes the step, so the
     * others' wait fails at once naming rank 1 instead of hanging. */
    for (size_t t = 0; t < n; t++) {
        fill(data[t], desc[t].dtype, desc[t].count, rank, 4, t);
        if (rank == 1 && t >= 2) {
            break;
        }
        st = tnt_fusion_mark_ready(fusion, t, data[t], 1.0);
        CHECK(st == TNT_OK, "step 4 mark %zu: %s", t, tnt_last_error());
    }
    if (rank == 1) {
        tnt_fusion_destroy(fusion);
    } else {
        st = tnt_fusion_wait(fusion);
        CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), "rank(s) 1 did not mark"),
              "step 4 (rank 1 destroyed its engine): got %d '%s'", (int)st, tnt_last_error());
        tnt_fusion_destroy(fusion);
    }
    for (size_t t = 0; t < n; t++) {
        free(data[t]);
    }
}

/* Whether x is a value of the compression's 16-bit type (finite x). */
static int on_16bit_grid(tnt_compression_t comp, float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if (comp == TNT_COMPRESSION_BF16) {
        return (b & 0xffffu) == 0;
    }
    if (fabsf(x) >= 0x1p-14f) {
        return (b & 0x1fffu) == 0 && fabsf(x) <= 65504.0f; /* 10 mantissa bits */
    }
    return ldexpf(x, 24) == truncf(ldexpf(x, 24)); /* a multiple of 2^-24 */
}

/* Rank r's float32 element i of tensor t in step s: magnitudes up to about
 * 6e4 (near float16's maximum, so an unscaled sum would overflow). */
static float compressed_value(int r, int s, size_t t, size_t i)
{
    uint32_t h = (uint32_t)(r * 7919 + s * 104729 + (int)t * 1299709) ^ (uint32_t)i * 2654435761u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float mag = (float)(h % 60000u) + (float)(h % 1000u) / 1000.0f;
    return (h & 1u) ? -mag : mag;
}

static void scenario_compressed(tnt_comm_t *comm)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    const tnt_tensor_desc_t desc[] = {
        { 7, TNT_FLOAT32 }, { 100, TNT_FLOAT32 }, { 5, TNT_FLOAT64 }, { 3000, TNT_FLOAT32 }
    };
    const size_t n = sizeof(desc) / sizeof(desc[0]);
    tnt_fusion_t *fusion = NULL;
    tnt_status_t st;

    st = tnt_fusion_create_compressed(comm, desc, n, 1024, TNT_AVG, TNT_COMPRESSION_LAST,
                                      &fusion);
    CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "TNT_COMPRESSION_BF16") != NULL,
          "bad compression: %d '%s'", (int)st, tnt_last_error());
    st = tnt_fusion_create_compressed(comm, desc, n, 1024, TNT_MAX, TNT_COMPRESSION_BF16,
                                      &fusion);
    CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "TNT_SUM and TNT_AVG") != NULL,
          "MAX with compression: %d '%s'", (int)st, tnt_last_error());
    CHECK(fusion == NULL, "fusion_p was written on error");

    const tnt_compression_t comps[] = { TNT_COMPRESSION_BF16, TNT_COMPRESSION_FP16 };
    for (size_t c = 0; c < 2; c++) {
        /* Unit roundoff of the wire type; roundings on one node: the input
         * and the node's sum (a hop between nodes would add one each). */
        const double u = comps[c] == TNT_COMPRESSION_BF16 ? 0x1p-8 : 0x1p-11;
        st = tnt_fusion_create_compressed(comm, desc, n, 1024, TNT_AVG, comps[c], &fusion);
        CHECK(st == TNT_OK, "create compressed: %s", tnt_last_error());
        float *f[4] = { NULL };
        double *d64 = malloc(5 * sizeof(double));
        for (size_t t = 0; t < n; t++) {
            if (desc[t].dtype == TNT_FLOAT32) {
                f[t] = malloc(desc[t].count * sizeof(float));
            }
        }
        for (int step = 0; step < 3; step++) {
            for (size_t t = 0; t < n; t++) {
                for (size_t i = 0; i < desc[t].count; i++) {
                    if (f[t] != NULL) {
                        f[t][i] = compressed_value(rank, step, t, i);
                    } else {
                        d64[i] = (rank + 1) * (double)(i + 1) / 3.0;
                    }
                }
            }
            for (size_t k = 0; k < n; k++) {
                const size_t t = (k + (size_t)rank) % n; /* every rank in its own order */
                st = tnt_fusion_mark_ready(fusion, t, f[t] != NULL ? (void *)f[t] : d64, 1.0);
                CHECK(st == TNT_OK, "mark %zu: %s", t, tnt_last_error());
            }
            st = tnt_fusion_wait(fusion);
            CHECK(st == TNT_OK, "wait (step %d): %s", step, tnt_last_error());
            int differs_from_float32 = 0;
            for (size_t t = 0; t < n; t++) {
                if (f[t] == NULL) {
                    for (size_t i = 0; i < 5; i++) {
                        double want = 0;
                        for (int r = 0; r < size; r++) {
                            want += (r + 1) * (double)(i + 1) / 3.0;
                        }
                        want /= size;
                        CHECK(fabs(d64[i] - want) <= 1e-14 * want,
                              "float64 tensor %zu[%zu] = %.17g, want %.17g (uncompressed)", t, i,
                              d64[i], want);
                    }
                    continue;
                }
                for (size_t i = 0; i < desc[t].count; i++) {
                    double exact = 0, abs_sum = 0;
                    for (int r = 0; r < size; r++) {
                        double v = compressed_value(r, step, t, i) / (double)size;
                        exact += v;
                        abs_sum += fabs(v);
                    }
                    const double got = f[t][i];
                    const double bound = 2 * u * abs_sum + 0x1p-22 * abs_sum + 0x1p-24;
                    CHECK(isfinite(got) && fabs(got - exact) <= bound,
                          "%s step %d tensor %zu[%zu] = %.9g, exact %.9g (bound %.3g)",
                          c == 0 ? "bf16" : "fp16", step, t, i, got, exact, bound);
                    CHECK(on_16bit_grid(comps[c], f[t][i]), "%s result %.9g is not a 16-bit value",
                          c == 0 ? "bf16" : "fp16", f[t][i]);
                    differs_from_float32 |= (float)exact != f[t][i];
                }
            }
            CHECK(size == 1 || differs_from_float32,
                  "every result equals the float32 average: the data did not travel as 16-bit");
            /* Bitwise the same on every rank: gather rank 0's large tensor. */
            const size_t big = desc[3].count * sizeof(float);
            unsigned char *all = malloc(big * (size_t)size);
            CHECK(all != NULL, "out of memory");
            st = tnt_allgather(comm, f[3], all, big);
            CHECK(st == TNT_OK, "allgather: %s", tnt_last_error());
            for (int r = 1; r < size; r++) {
                CHECK(memcmp(all, all + big * (size_t)r, big) == 0,
                      "rank %d's result differs from rank 0's", r);
            }
            free(all);
        }
        tnt_fusion_destroy(fusion);
        fusion = NULL;
        for (size_t t = 0; t < n; t++) {
            free(f[t]);
        }
        free(d64);
    }
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = NULL;
    const char *scenario = argc > 1 ? argv[1] : "results";

    setvbuf(stdout, NULL, _IOLBF, 0);
    tnt_status_t st = tnt_init(&comm);
    CHECK(st == TNT_OK, "tnt_init: %s", tnt_last_error());
    g_rank = tnt_rank(comm);

    if (strcmp(scenario, "results") == 0) {
        scenario_results(comm);
    } else if (strcmp(scenario, "mismatch") == 0) {
        scenario_mismatch(comm);
    } else if (strcmp(scenario, "unmarked") == 0) {
        scenario_unmarked(comm);
    } else if (strcmp(scenario, "compressed") == 0) {
        scenario_compressed(comm);
    } else {
        CHECK(0, "unknown scenario '%s' (results, mismatch, unmarked, compressed)", scenario);
    }
    st = tnt_barrier(comm);
    CHECK(st == TNT_OK, "final barrier: %s", tnt_last_error());
    if (g_rank == 0) {
        printf("fusion_check %s: OK (%d ranks)\n", scenario, tnt_size(comm));
    }
    tnt_finalize(comm);
    return 0;
}
