/*
 * Bounded, backing-off waits. The schedule is tuned for oversubscribed
 * machines (8 ranks on 2 cores): a waiter spins only for a few hundred
 * nanoseconds, then gives its core away with sched_yield, then sleeps with
 * intervals that double up to about 1 ms, so a waiting rank costs almost no
 * CPU while the rank it waits for runs.
 */
#include "util/wait.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define TNT_TIMEOUT_DEFAULT_S 300.0

/* Iterations [0, SPIN_END) spin, [SPIN_END, YIELD_END) yield, then sleep. */
#define BACKOFF_SPIN_END     16u
#define BACKOFF_YIELD_END    64u
#define BACKOFF_SLEEP_MIN_NS 1000L    /* 1 us (the kernel's timer slack rounds it up) */
#define BACKOFF_SLEEP_MAX_NS 1000000L /* 1 ms */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

uint64_t tnt_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double tnt_env_timeout_s(void)
{
    /* Warn about a bad value once per process, however often it is read. */
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    const char *value = getenv("TNT_TIMEOUT");
    char *end = NULL;
    double timeout;

    if (value == NULL || *value == '\0') {
        return TNT_TIMEOUT_DEFAULT_S;
    }
    errno = 0;
    timeout = strtod(value, &end);
    while (end != NULL && (*end == ' ' || *end == '\t')) {
        end++;
    }
    /* Accept a trailing "s" ("30s") since that is how the docs write it. */
    if (end != NULL && end != value && *end == 's' && end[1] == '\0') {
        end++;
    }
    if (errno != 0 || end == value || *end != '\0' || !isfinite(timeout) || timeout < 0) {
        if (!atomic_flag_test_and_set_explicit(&warned, memory_order_relaxed)) {
            tnt_log_env_warning("TNT_TIMEOUT='%.64s' is not a number of seconds (>= 0, 0 = no "
                                "timeout); using the default %.0f s",
                                value, TNT_TIMEOUT_DEFAULT_S);
        }
        return TNT_TIMEOUT_DEFAULT_S;
    }
    return timeout;
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
            cpu_relax();
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
