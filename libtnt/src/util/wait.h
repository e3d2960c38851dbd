/*
 * Bounded, backing-off waits. Every blocking loop in libtnt uses these so that
 * 8 ranks on a 2-core machine still make progress (spin briefly, then
 * sched_yield, then sleep with growing intervals up to ~1 ms) and so that no
 * wait outlives TNT_TIMEOUT.
 */
#ifndef TNT_UTIL_WAIT_H
#define TNT_UTIL_WAIT_H

#include <stdint.h>

typedef struct {
    uint64_t deadline_ns; /* CLOCK_MONOTONIC; UINT64_MAX = no deadline */
    uint32_t iteration;
} tnt_backoff_t;

uint64_t tnt_time_ns(void);
/* TNT_TIMEOUT in seconds (default 300; 0 disables the timeout). */
double tnt_env_timeout_s(void);
void tnt_backoff_init(tnt_backoff_t *backoff, double timeout_s);
/* Waits one backoff step. Returns 0, or -1 once the deadline has passed. */
int tnt_backoff_wait(tnt_backoff_t *backoff);

#endif
