/*
 * Reduce on arrival (coll/multinode/arrival.c): a chunk delivered as
 * fragments cut at any byte, in any order, from data at any alignment (as
 * UCX hands them over), or received whole into the staging slot, ends
 * bitwise equal to the staged combination, tnt_reduce_n_div of the whole
 * chunk, for every dtype and op, both operand orders and a divisor; and a
 * slot's state is clean for its next chunk.
 */
#include "coll/multinode/multinode_impl.h"
#include "reduce/reduce.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng_state = 777;

static uint64_t rng(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Values without NaN or overflow in any dtype: small integers, or halves
 * as 16-bit floats. */
static void fill(tnt_dtype_t d, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int v = (int)(rng() % 200) - 100;
        switch (d) {
        case TNT_FLOAT32:
            ((float *)buf)[i] = (float)v / 7.0f;
            break;
        case TNT_FLOAT64:
            ((double *)buf)[i] = (double)v / 7.0;
            break;
        case TNT_FLOAT16:
            ((uint16_t *)buf)[i] = (uint16_t)(0x3800 + (rng() % 0x800)); /* 0.5 .. 1 */
            break;
        case TNT_BFLOAT16:
            ((uint16_t *)buf)[i] = (uint16_t)(0x3f00 + (rng() % 0x80)); /* 0.5 .. 1 */
            break;
        case TNT_INT32:
            ((int32_t *)buf)[i] = v;
            break;
        default:
            ((int64_t *)buf)[i] = v;
        }
    }
}

/* Float MIN/MAX keep the first operand when a comparison is false: with
 * NaNs in both operands only the staged path's operand order gives its
 * result. */
static void put_nans(tnt_dtype_t d, void *a, void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d == TNT_FLOAT32) {
            ((float *)a)[i] = i % 5 == 0 ? NAN : ((float *)a)[i];
            ((float *)b)[i] = i % 3 == 0 ? NAN : ((float *)b)[i];
        } else if (d == TNT_FLOAT64) {
            ((double *)a)[i] = i % 5 == 0 ? NAN : ((double *)a)[i];
            ((double *)b)[i] = i % 3 == 0 ? NAN : ((double *)b)[i];
        }
    }
}

enum { CHUNK = 64 * 1024, MAX_FRAGS = 512 };

typedef struct {
    size_t off, len;
} frag_t;

/* Cuts [0, bytes) at random byte offsets (fragments of 1 byte up to
 * max_len) and shuffles them unless in_order. */
static size_t cut(size_t bytes, size_t max_len, int in_order, frag_t *frags)
{
    size_t n = 0;
    for (size_t off = 0; off < bytes && n < MAX_FRAGS - 1;) {
        size_t len = 1 + rng() % max_len;
        len = len < bytes - off ? len : bytes - off;
        frags[n].off = off;
        frags[n].len = len;
        n++;
        off += len;
    }
    if (n > 0 && frags[n - 1].off + frags[n - 1].len < bytes) { /* the rest in one */
        frags[n].off = frags[n - 1].off + frags[n - 1].len;
        frags[n].len = bytes - frags[n].off;
        n++;
    }
    for (size_t i = n - 1; !in_order && i > 0; i--) {
        size_t j = rng() % (i + 1);
        frag_t t = frags[i];
        frags[i] = frags[j];
        frags[j] = t;
    }
    return n;
}

static void test_fragments_any_cut_order_alignment(void **state)
{
    static const size_t max_lens[] = { 3, 61, 1000, 8190, CHUNK };
    unsigned char *in = malloc(CHUNK), *dst = malloc(CHUNK), *ref = malloc(CHUNK);
    unsigned char *spill = aligned_alloc(64, CHUNK), *wire = malloc(CHUNK + 16);
    uint64_t *split = calloc(tnt_mn_arrival_words(CHUNK), sizeof(uint64_t));
    frag_t *frags = malloc(MAX_FRAGS * sizeof(*frags));
    tnt_mn_arrival_t a;

    (void)state;
    assert_non_null(in);
    assert_non_null(dst);
    assert_non_null(ref);
    assert_non_null(spill);
    assert_non_null(wire);
    assert_non_null(split);
    assert_non_null(frags);
    memset(&a, 0, sizeof(a));
    a.split = split;
    for (int d = 0; d < TNT_DTYPE_LAST; d++) {
        size_t es = tnt_dtype_size((tnt_dtype_t)d);
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t m = 0; m < sizeof(max_lens) / sizeof(max_lens[0]); m++) {
                for (int variant = 0; variant < 4; variant++) {
                    int in_first = variant & 1, in_order = variant & 2;
                    int divisor = op == TNT_SUM || op == TNT_AVG ? 3 : 1;
                    size_t count = (CHUNK - rng() % 4096) / es;
                    size_t bytes = count * es;
                    const void *srcs[2] = { in_first ? (void *)in : ref,
                                            in_first ? (void *)ref : in };
                    size_t n;

                    fill((tnt_dtype_t)d, in, count);
                    fill((tnt_dtype_t)d, dst, count);
                    if (op == TNT_MIN || op == TNT_MAX) {
                        put_nans((tnt_dtype_t)d, in, dst, count);
                    }
                    memcpy(ref, dst, bytes);
                    tnt_reduce_n_div((tnt_dtype_t)d, (tnt_op_t)op, ref, srcs, 2, count, divisor);

                    tnt_mn_arrival_start(&a, dst, spill, bytes, (tnt_dtype_t)d, (tnt_op_t)op,
                                         divisor, in_first);
                    n = cut(bytes, max_lens[m], in_order, frags);
                    for (size_t f = 0; f < n; f++) {
                        /* UCX's data sits after headers of any length. */
                        unsigned char *at = wire + rng() % 16;
                        memcpy(at, in + frags[f].off, frags[f].len);
                        tnt_mn_arrival_consume(&a, frags[f].off, at, frags[f].len);
                        memset(at, 0xA5, frags[f].len); /* valid only during the call */
                    }
                    tnt_mn_arrival_finish(&a);
                    if (memcmp(dst, ref, bytes) != 0) {
                        fail_msg("dtype %d op %d fragments up to %zu B (%zu), in_first %d, "
                                 "in order %d",
                                 d, op, max_lens[m], n, in_first, in_order != 0);
                    }
                    for (size_t w = 0; w < tnt_mn_arrival_words(CHUNK); w++) {
                        assert_int_equal(split[w], 0); /* clean for the slot's next chunk */
                    }
                }
            }
        }
    }
    free(frags);
    free(split);
    free(wire);
    free(spill);
    free(ref);
    free(dst);
    free(in);
}

/* The staged path (TNT_MULTINODE_REDUCE_ON_ARRIVAL=off, or a region still
 * being sent): the chunk was received whole into the slot. */
static void test_staged_chunk(void **state)
{
    enum { COUNT = 5000 };
    float in[COUNT], dst[COUNT], ref[COUNT];
    _Alignas(64) float spill[COUNT];
    uint64_t split[COUNT / 64 + 1] = { 0 };
    const void *srcs[2] = { ref, in };
    tnt_mn_arrival_t a;

    (void)state;
    fill(TNT_FLOAT32, in, COUNT);
    fill(TNT_FLOAT32, dst, COUNT);
    memcpy(ref, dst, sizeof(ref));
    tnt_reduce_n_div(TNT_FLOAT32, TNT_SUM, ref, srcs, 2, COUNT, 4);
    memset(&a, 0, sizeof(a));
    a.split = split;
    tnt_mn_arrival_start(&a, dst, spill, sizeof(in), TNT_FLOAT32, TNT_SUM, 4, 0);
    a.staged = 1;
    memcpy(spill, in, sizeof(in));
    tnt_mn_arrival_finish(&a);
    assert_memory_equal(dst, ref, sizeof(ref));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fragments_any_cut_order_alignment),
        cmocka_unit_test(test_staged_chunk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
