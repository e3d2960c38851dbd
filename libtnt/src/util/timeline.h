/*
 * The timeline recorder (TNT_TIMELINE, tnt_timeline_start; docs/timeline.md):
 * one per process, shared by every communicator and thread. Events are
 * fixed-size records in one array allocated when recording starts; a
 * recording thread claims a slot with one atomic fetch-add and fills it, so
 * the hot path allocates nothing, takes no lock and makes no system call
 * (clock_gettime is the vDSO). When the array is full, further events are
 * counted as dropped and the file says how many. When no timeline records,
 * each site costs one load of tnt_timeline_on and a predicted branch.
 *
 * This layer only records and formats one rank's events as Chrome trace
 * JSON; core/timeline.c aligns the ranks' clocks, gathers the ranks' parts
 * and writes the file.
 */
#ifndef TNT_UTIL_TIMELINE_H
#define TNT_UTIL_TIMELINE_H

#include <tnt/tnt.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What an event is; 0 marks a slot claimed but not yet filled. */
typedef enum {
    TNT_TL_EMPTY = 0,
    TNT_TL_COLLECTIVE, /* one collective, start to done */
    TNT_TL_PHASE,      /* a phase inside one (intra-node, inter-node, allgather) */
    TNT_TL_BUCKET,     /* a fusion bucket's run on whichever thread ran it */
    TNT_TL_STEP,       /* a training step (Python) */
    TNT_TL_SYNC,       /* the optimizer's wait for the gradients (Python) */
    TNT_TL_STALL,      /* a stall warning (instant) */
} tnt_tl_kind_t;

/* One record; every string is static (names of collectives, phases and
 * algorithms) or an index into the recorder's own tables. */
typedef struct tnt_tl_event {
    uint64_t start_ns;  /* CLOCK_MONOTONIC of this process */
    uint64_t end_ns;    /* == start_ns for instants */
    uint64_t posted_ns; /* when its request was posted; 0: run by a blocking call */
    uint64_t bytes;
    uint64_t number;       /* collective sequence, bucket index, step number, stall index */
    const char *name;      /* "allreduce", "intra-node reduce-scatter", ... */
    const char *algo;      /* "shm", "ring", ...; NULL when none */
    uint32_t first;        /* bucket: first tensor index */
    uint32_t count;        /* bucket: tensors */
    uint16_t comm;         /* tnt_tl_comm_id */
    uint16_t lane;         /* the recording thread's lane */
    _Atomic uint32_t kind; /* tnt_tl_kind_t, stored last (release) */
} tnt_tl_event_t;

/* Nonzero while recording. Relaxed loads: a site that misses the start or
 * the stop by an instant records one event more or less, which is harmless;
 * the slot itself is published by the release store of its kind. */
extern _Atomic int tnt_timeline_on;

static inline int tnt_tl_enabled(void)
{
    return __builtin_expect(atomic_load_explicit(&tnt_timeline_on, memory_order_relaxed), 0);
}

/* Allocates capacity slots (once; later recordings reuse them, and they
 * stay until the process exits) and starts recording. Not thread-safe
 * against another start or stop; core/timeline.c serializes them. */
tnt_status_t tnt_tl_begin(uint64_t capacity);
/* Stops recording; the events stay readable until the next begin. */
void tnt_tl_end(void);

/* Records one event (the caller's lane is filled in). */
void tnt_tl_add(const tnt_tl_event_t *ev);
/* An instant stall warning with its text (copied; the first 16 per
 * recording keep their text, later ones say "more warnings"). */
void tnt_tl_stall(uint16_t comm, const char *text);

/* A small id for a communicator's name, the same for the process's life
 * (the first 255 names; later ones share the last id, named "other"). */
uint16_t tnt_tl_comm_id(const char *name);
/* Names the calling thread's lane ("main", "progress world"); a thread
 * that records without a name appears as "thread N". */
void tnt_tl_name_thread(const char *name);

/* Events recorded since the start (kept and dropped). */
uint64_t tnt_tl_recorded(void);
uint64_t tnt_tl_dropped(void);
uint64_t tnt_tl_capacity(void);

/* This rank's part of the trace: comma-separated JSON objects (metadata,
 * then events), each time written as microseconds since origin_ns (the
 * job's time zero expressed in this process's clock, so that aligning the
 * ranks is one subtraction). *text_p is malloc'd; 0, or -1 when out of
 * memory. */
int tnt_tl_format(int rank, int64_t origin_ns, char **text_p, size_t *len_p);

#endif
