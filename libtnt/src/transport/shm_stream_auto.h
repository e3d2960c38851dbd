/*
 * TNT_SHM_STREAM=auto: which kind of copy a large staged collective uses,
 * streamed (non-temporal stores) or cached, learned from the rank's own
 * timings. Pure logic, no clock and no shared state: the caller times each
 * collective and reports it (shm_allreduce.c).
 *
 * What it has to cope with (the measured figures: docs/benchmarks.md,
 * "Figures behind the copy choices"): the faster kind changes when the
 * ranks' cores move closer together or further apart, which on a VM can
 * happen every few tens of seconds, single calls are slowed by page faults
 * or a descheduled peer, and per-byte speed differs by size (a few MiB stay
 * in cache, hundreds of MiB do not). So:
 *  - every size class (powers of 4 from the streaming threshold) learns on
 *    its own; a new one starts from the nearest learned class's choice and
 *    try period (the very first tries the other kind at its second call);
 *  - the current kind's estimate is the lower median of its last 3 calls,
 *    so one slow call neither flips the choice nor hides a real change
 *    (two slow calls in a row do);
 *  - the other kind is tried every `period` calls; the period doubles each
 *    time the try confirms the choice, up to the point where tries cost
 *    about 1% of the time (a try of a kind that is r times slower costs
 *    r - 1 calls' worth), and drops back to the minimum when the choice
 *    flips or when the current kind gets 1.5x slower than it was at the last
 *    try (the sign of a placement change), which also tries the other at
 *    once.
 * All local ranks use the kind local rank 0 picks (shm_allreduce.c): a
 * rank's time depends on its peers' kind too (mixed kinds are slower;
 * docs/benchmarks.md), and ranks that learned alone chased each other's
 * tries.
 */
#ifndef TNT_TRANSPORT_SHM_STREAM_AUTO_H
#define TNT_TRANSPORT_SHM_STREAM_AUTO_H

#include <stddef.h>
#include <stdint.h>

#define TNT_STREAM_AUTO_CLASSES    8 /* powers of 4 from min_bytes; larger share the last */
#define TNT_STREAM_AUTO_HISTORY    3 /* calls of the current kind in its estimate */
#define TNT_STREAM_AUTO_PERIOD_MIN 8u
#define TNT_STREAM_AUTO_PERIOD_MAX 256u
#define TNT_STREAM_AUTO_TRY_COST   0.01 /* share of the time tries may cost */
#define TNT_STREAM_AUTO_SLOWDOWN   1.5  /* current kind this much slower: try the other now */

enum { TNT_STREAM_KIND_CACHED = 0, TNT_STREAM_KIND_STREAMED = 1 };

struct tnt_stream_auto_class {
    int measured;                               /* a call of this class has been timed */
    double current_ns[TNT_STREAM_AUTO_HISTORY]; /* the current kind's last calls, a ring */
    unsigned current_samples;                   /* filled entries of current_ns */
    unsigned current_next;                      /* next ring position */
    double reference_ns; /* the current kind's estimate at the last try of the other */
    uint32_t period;     /* calls of the current kind between tries of the other */
    uint32_t countdown;  /* calls of the current kind left before the next try */
    int current;         /* TNT_STREAM_KIND_* */
};

struct tnt_stream_auto {
    size_t min_bytes;
    struct tnt_stream_auto_class classes[TNT_STREAM_AUTO_CLASSES];
};

/* Nothing measured yet. */
void tnt_stream_auto_init(struct tnt_stream_auto *a, size_t min_bytes);

/* The kind to use for a collective of this many bytes (>= min_bytes): the
 * current one, or the other when a try is due; for a size class never
 * timed, tnt_stream_auto_first. Call tnt_stream_auto_learn with its time afterwards; the pick for
 * the next call may come before that (the shared-memory transport decides
 * one call ahead, so that every local rank knows the kind in time). */
int tnt_stream_auto_pick(struct tnt_stream_auto *a, size_t bytes);

/* The time one collective of that kind took. */
void tnt_stream_auto_learn(struct tnt_stream_auto *a, size_t bytes, int kind, uint64_t ns);

/* The size class of a collective of this many bytes, 0 .. CLASSES - 1. */
int tnt_stream_auto_class_of(const struct tnt_stream_auto *a, size_t bytes);

/* The kind for the first call of a class never timed: the nearest timed
 * class's current choice, or streamed when there is none. */
int tnt_stream_auto_first(const struct tnt_stream_auto *a, int size_class);

/* The current choice for this size, without counting a call. */
int tnt_stream_auto_current(const struct tnt_stream_auto *a, size_t bytes);

#endif
