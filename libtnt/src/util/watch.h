/*
 * A wait loop's link to the hang doctor (coll/doctor.c). The doctor sits
 * above the transports, so the transports see only this hook: their slow
 * wait paths call tnt_watch_poll with how long they have waited without
 * progress, and when a watch is present they leave the TNT_TIMEOUT decision
 * to it, because only the doctor knows what every rank is doing (and whether
 * the wait was declared long on purpose, tnt_stall_pause).
 */
#ifndef TNT_UTIL_WATCH_H
#define TNT_UTIL_WATCH_H

#include <tnt/tnt.h>
#include <stdint.h>

typedef struct tnt_watch tnt_watch_t;

struct tnt_watch {
    /* Called from the slow path of a collective's wait, on the thread that
     * runs collectives. Returns TNT_OK to keep waiting, or the status to fail
     * the wait with (the verdict is then this thread's tnt_last_error()).
     * Cheap when waited_ns is short: callers may call it every backoff round. */
    tnt_status_t (*poll)(tnt_watch_t *watch, uint64_t waited_ns);
};

static inline tnt_status_t tnt_watch_poll(tnt_watch_t *watch, uint64_t waited_ns)
{
    return watch != NULL ? watch->poll(watch, waited_ns) : TNT_OK;
}

/* The deadline a transport gives its own backoff: none when a watch decides. */
static inline double tnt_watch_own_timeout(const tnt_watch_t *watch, double timeout_s)
{
    return watch != NULL ? 0 : timeout_s;
}

#endif
