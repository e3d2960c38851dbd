/*
 * Bounded, backing-off waits. Every blocking loop in libtnt uses these so that
 * 8 ranks on a 2-core machine still make progress (spin briefly, then
 * sched_yield, then sleep with growing intervals up to ~1 ms) and so that no
 * wait outlives TNT_TIMEOUT (tnt_settings_t.timeout_s).
 */
#ifndef TNT_UTIL_WAIT_H
#define TNT_UTIL_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

/* One pause in a spin loop: tells the core that this is a busy-wait (it
 * frees pipeline resources for a hyper-thread sibling and saves power). */
static inline void tnt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

typedef struct {
    uint64_t deadline_ns; /* CLOCK_MONOTONIC; UINT64_MAX = no deadline */
    uint32_t iteration;
} tnt_backoff_t;

uint64_t tnt_time_ns(void);
/* Process-private futex: sleeps while *word == expected, at most timeout_ns
 * (woken early by tnt_futex_wake or a signal; callers re-check). */
void tnt_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns);
void tnt_futex_wake_all(_Atomic uint32_t *word);
void tnt_backoff_init(tnt_backoff_t *backoff, double timeout_s);
/* Waits one backoff step. Returns 0, or -1 once the deadline has passed. */
int tnt_backoff_wait(tnt_backoff_t *backoff);

#endif
