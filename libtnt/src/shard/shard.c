/*
 * Shard arithmetic: which samples each rank uses. Pure functions of their
 * arguments, no communication and no I/O, so every rank computes the same
 * answer independently and the Python layer (through the _tnt extension) gets
 * exactly the same numbers as C code.
 *
 * Micro-batch rule: a batch of B samples over p ranks gives rank r
 * floor(B/p) samples plus one when r < B % p, in rank order. Rank r starts at
 * r * floor(B/p) + min(r, B % p). Nothing overflows for any uint64 B because
 * every intermediate value is at most B. It is the one slice rule of libtnt
 * (util/slice.h), which the collectives use for their slices too.
 *
 * Shuffle (the exact algorithm; it is part of the contract, a change would
 * change every user's data order, and test_shard.c pins golden values):
 *
 *   1. State: xoshiro256** (Blackman & Vigna, 2018). Its four 64-bit words are
 *      the first four outputs of splitmix64 started at x = seed:
 *          x += 0x9e3779b97f4a7c15;
 *          z = x; z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
 *          z = (z ^ (z >> 27)) * 0x94d049bb133111eb; out = z ^ (z >> 31);
 *   2. next(): result = rotl(s1 * 5, 7) * 9; t = s1 << 17; s2 ^= s0;
 *      s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45).
 *   3. bounded(range), uniform in [0, range) without bias (Lemire 2019):
 *          m = next() * range  (128-bit product); low = m mod 2^64;
 *          if low < range: t = (2^64 - range) mod range;
 *                          while low < t: m = next() * range; low = m mod 2^64;
 *          return m >> 64.
 *   4. perm[i] = i for all i; then for i = n-1 down to 1:
 *          j = bounded(i + 1); swap(perm[i], perm[j])   (Fisher-Yates).
 *
 * The permutation depends only on (n, seed): never on the number of ranks,
 * so changing p changes which rank sees a sample but not the epoch's order.
 * All arithmetic is on fixed-width unsigned integers, so the result is the
 * same on every platform and compiler.
 */
#include <tnt/tnt.h>

#include "util/log.h"
#include "util/slice.h"

#include <stdint.h>

/* Batches are uint64_t in the API and the slice rule works in size_t; the
 * 128-bit products below already need a 64-bit target. */
_Static_assert(SIZE_MAX >= UINT64_MAX, "size_t must hold a uint64_t batch");

typedef struct {
    uint64_t s[4];
} shard_rng_t;

static uint64_t shard_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t shard_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static void shard_rng_seed(shard_rng_t *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        rng->s[i] = shard_splitmix64(&x);
    }
    /* splitmix64 is a bijection of its counter, so four consecutive outputs
     * are never all zero: the xoshiro state is always valid. */
}

static inline uint64_t shard_rng_next(shard_rng_t *rng)
{
    uint64_t *s = rng->s;
    const uint64_t result = shard_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = shard_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, range), range >= 1, by Lemire's multiply-and-reject: the
 * rejection threshold (2^64 - range) mod range makes every outcome equally
 * likely, and the division is only computed in the rare low-product case. */
static inline uint64_t shard_rng_bounded(shard_rng_t *rng, uint64_t range)
{
    unsigned __int128 m = (unsigned __int128)shard_rng_next(rng) * range;
    uint64_t low = (uint64_t)m;

    if (low < range) {
        const uint64_t threshold = (0 - range) % range;
        while (low < threshold) {
            m = (unsigned __int128)shard_rng_next(rng) * range;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

TNT_API tnt_range_t tnt_shard_range(uint64_t batch, int rank, int size)
{
    tnt_range_t range = { 0, 0 };

    if (size <= 0 || rank < 0 || rank >= size) {
        return range;
    }
    size_t offset, count;
    tnt_slice(batch, (size_t)rank, (size_t)size, &offset, &count);
    range.begin = offset;
    range.end = offset + count;
    return range;
}

TNT_API tnt_status_t tnt_shard_permutation(uint64_t n, uint64_t seed, uint64_t *perm)
{
    shard_rng_t rng;

    if (n > 0 && perm == NULL) {
        /* Recorded, not logged: shard code does no I/O; the caller reports. */
        return tnt_error_set(TNT_ERR_INVALID_ARG,
                             "tnt_shard_permutation: perm is NULL for n = %llu; pass an array "
                             "of n entries",
                             (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++) {
        perm[i] = i;
    }
    shard_rng_seed(&rng, seed);
    for (uint64_t i = n; i > 1; i--) {
        const uint64_t j = shard_rng_bounded(&rng, i);
        const uint64_t tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }
    return TNT_OK;
}

TNT_API uint64_t tnt_shard_num_steps(uint64_t n, uint64_t batch, int drop_remainder)
{
    if (batch == 0) {
        return 0;
    }
    /* n / batch + (remainder != 0) rather than (n + batch - 1) / batch, which
     * overflows for n near 2^64. */
    return n / batch + ((!drop_remainder && n % batch != 0) ? 1 : 0);
}

TNT_API tnt_range_t tnt_shard_step_range(uint64_t n, uint64_t batch, int drop_remainder,
                                         uint64_t step, int rank, int size)
{
    tnt_range_t range = { 0, 0 };

    if (size <= 0 || rank < 0 || rank >= size ||
        step >= tnt_shard_num_steps(n, batch, drop_remainder)) {
        return range;
    }
    /* step < num_steps implies step * batch < n: no overflow. */
    const uint64_t start = step * batch;
    const uint64_t left = n - start;
    const uint64_t this_batch = left < batch ? left : batch;
    const tnt_range_t micro = tnt_shard_range(this_batch, rank, size);

    range.begin = start + micro.begin;
    range.end = start + micro.end;
    return range;
}
