/*
 * Bounded, backing-off waits. The schedule is tuned for oversubscribed
 * machines (8 ranks on 2 cores): a waiter spins only for a few hundred
 * nanoseconds, then gives its core away with sched_yield, then sleeps with
 * intervals that double up to about 1 ms, so a waiting rank costs almost no
 * CPU while the rank it waits for runs.
 */
#include "util/wait.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Iterations [0, SPIN_END) spin, [SPIN_END, YIELD_END) yield, then sleep. */
#define BACKOFF_SPIN_END     16u
#define BACKOFF_YIELD_END    64u
#define BACKOFF_SLEEP_MIN_NS 1000L    /* 1 us (the kernel's timer slack rounds it up) */
#define BACKOFF_SLEEP_MAX_NS 1000000L /* 1 ms */

uint64_t tnt_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tnt_backoff_init(tnt_backoff_t *backoff, double timeout_s)
{
    backoff->iteration = 0;
    if (timeout_s <= 0 || timeout_s > 1e9) {
        backoff->deadline_ns = UINT64_MAX;
    } else {
        backoff->deadline_ns = tnt_time_ns() + (uint64_t)(timeout_s * 1e9);
    }
}

int tnt_backoff_wait(tnt_backoff_t *backoff)
{
    uint32_t it = backoff->iteration;

    if (backoff->deadline_ns != UINT64_MAX && tnt_time_ns() >= backoff->deadline_ns) {
        return -1;
    }
    if (it < BACKOFF_SPIN_END) {
        for (int i = 0; i < 16; i++) {
            tnt_cpu_relax();
        }
    } else if (it < BACKOFF_YIELD_END) {
        sched_yield();
    } else {
        uint32_t shift = it - BACKOFF_YIELD_END;
        long ns = shift >= 10 ? BACKOFF_SLEEP_MAX_NS : BACKOFF_SLEEP_MIN_NS << shift;
        if (ns > BACKOFF_SLEEP_MAX_NS) {
            ns = BACKOFF_SLEEP_MAX_NS;
        }
        struct timespec ts = { 0, ns };
        nanosleep(&ts, NULL);
    }
    if (it != UINT32_MAX) {
        backoff->iteration = it + 1;
    }
    return 0;
}

/* The futex word is an _Atomic uint32_t, which has the size and
 * representation of uint32_t on every ABI libtnt targets. */
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "futex words are 32-bit");

void tnt_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
    struct timespec ts = { (time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u) };
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

void tnt_futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
