/*
 * The timeline recorder (util/timeline.h): a fixed array of events, one
 * atomic index, lane and communicator names in small fixed tables.
 *
 * Publication: a recording thread claims slot i with a relaxed fetch-add
 * on next (only uniqueness matters), fills it, then stores its kind with
 * release order; the formatter loads each kind with acquire order and skips
 * slots still 0 (claimed by a thread that was still writing when recording
 * stopped), so it never reads a half-written event.
 */
#include "util/timeline.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TL_MAX_LANES  64
#define TL_LANE_NAME  48
#define TL_MAX_COMMS  256
#define TL_MAX_STALLS 16
#define TL_STALL_TEXT 512

_Atomic int tnt_timeline_on;

static struct {
    tnt_tl_event_t *events;
    uint64_t capacity;
    uint64_t allocated;
    _Atomic uint64_t next; /* slots claimed, kept or not */

    /* Lanes: a thread takes the next id at its first event or when named;
     * only that thread writes its name. */
    char lanes[TL_MAX_LANES][TL_LANE_NAME];
    _Atomic int num_lanes;

    /* Communicator names, under comm_lock (taken when a communicator is
     * made, never while recording). */
    pthread_mutex_t comm_lock;
    char comms[TL_MAX_COMMS][64];
    int num_comms;

    char stalls[TL_MAX_STALLS][TL_STALL_TEXT];
    _Atomic int num_stalls;
} tl = { .comm_lock = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local int my_lane = -1;

static int lane_claim(void)
{
    int id = atomic_fetch_add_explicit(&tl.num_lanes, 1, memory_order_relaxed);
    if (id >= TL_MAX_LANES) {
        /* Threads past the table share its last lane. */
        id = TL_MAX_LANES - 1;
        snprintf(tl.lanes[id], TL_LANE_NAME, "other threads");
    } else if (tl.lanes[id][0] == '\0') {
        snprintf(tl.lanes[id], TL_LANE_NAME, "thread %d", id);
    }
    return id;
}

static int lane(void)
{
    if (my_lane < 0) {
        my_lane = lane_claim();
    }
    return my_lane;
}

void tnt_tl_name_thread(const char *name)
{
    int id = lane();
    if (id < TL_MAX_LANES - 1) {
        snprintf(tl.lanes[id], TL_LANE_NAME, "%s", name);
    }
}

uint16_t tnt_tl_comm_id(const char *name)
{
    uint16_t id;

    pthread_mutex_lock(&tl.comm_lock);
    for (int i = 0; i < tl.num_comms; i++) {
        if (strcmp(tl.comms[i], name) == 0) {
            pthread_mutex_unlock(&tl.comm_lock);
            return (uint16_t)i;
        }
    }
    if (tl.num_comms < TL_MAX_COMMS - 1) {
        snprintf(tl.comms[tl.num_comms], sizeof(tl.comms[0]), "%s", name);
        id = (uint16_t)tl.num_comms++;
    } else {
        snprintf(tl.comms[TL_MAX_COMMS - 1], sizeof(tl.comms[0]), "other");
        id = TL_MAX_COMMS - 1;
    }
    pthread_mutex_unlock(&tl.comm_lock);
    return id;
}

tnt_status_t tnt_tl_begin(uint64_t capacity)
{
    /* The array is reused by later recordings and never freed: a thread
     * that saw the flag just before a stop may still be filling its slot
     * (another communicator's progress thread), and must find memory
     * there. A larger capacity replaces it (the old one is left alone for
     * the same reason). */
    if (tl.events == NULL || capacity > tl.allocated) {
        tnt_tl_event_t *events = malloc(capacity * sizeof(*events));
        if (events == NULL) {
            return TNT_ERR_NO_MEMORY;
        }
        tl.events = events;
        tl.allocated = capacity;
    }
    /* Written here, not left to calloc: a large calloc maps pages that the
     * kernel provides on first touch, and each first touch would be a page
     * fault inside a collective (one per 56 events). */
    memset(tl.events, 0, capacity * sizeof(*tl.events));
    tl.capacity = capacity;
    atomic_store_explicit(&tl.next, 0, memory_order_relaxed);
    atomic_store_explicit(&tl.num_stalls, 0, memory_order_relaxed);
    /* Release: the zeroed array happens-before any recording thread that
     * sees the flag (it then claims slots of this array). */
    atomic_store_explicit(&tnt_timeline_on, 1, memory_order_release);
    return TNT_OK;
}

void tnt_tl_end(void)
{
    atomic_store_explicit(&tnt_timeline_on, 0, memory_order_seq_cst);
}

void tnt_tl_add(const tnt_tl_event_t *ev)
{
    uint64_t i = atomic_fetch_add_explicit(&tl.next, 1, memory_order_relaxed);
    if (i >= tl.capacity || tl.events == NULL) {
        return; /* counted as dropped: next - capacity */
    }
    tnt_tl_event_t *slot = &tl.events[i];
    slot->start_ns = ev->start_ns;
    slot->end_ns = ev->end_ns;
    slot->posted_ns = ev->posted_ns;
    slot->bytes = ev->bytes;
    slot->number = ev->number;
    slot->name = ev->name;
    slot->algo = ev->algo;
    slot->first = ev->first;
    slot->count = ev->count;
    slot->comm = ev->comm;
    slot->lane = (uint16_t)lane();
    atomic_store_explicit(&slot->kind, atomic_load_explicit(&ev->kind, memory_order_relaxed),
                          memory_order_release);
}

void tnt_tl_stall(uint16_t comm, const char *text)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    int index = atomic_fetch_add_explicit(&tl.num_stalls, 1, memory_order_relaxed);
    if (index < TL_MAX_STALLS) {
        snprintf(tl.stalls[index], TL_STALL_TEXT, "%s", text);
    }
    tnt_tl_event_t ev = { .start_ns = now,
                          .end_ns = now,
                          .number = (uint64_t)index,
                          .name = "stall warning",
                          .comm = comm };
    atomic_init(&ev.kind, TNT_TL_STALL);
    tnt_tl_add(&ev);
}

uint64_t tnt_tl_recorded(void)
{
    return atomic_load_explicit(&tl.next, memory_order_relaxed);
}

uint64_t tnt_tl_capacity(void)
{
    return tl.capacity;
}

uint64_t tnt_tl_dropped(void)
{
    uint64_t n = tnt_tl_recorded();
    return n > tl.capacity ? n - tl.capacity : 0;
}

/* ---- formatting ---------------------------------------------------------- */

/* A growing text buffer; formatting is off the hot path. */
struct text {
    char *buf;
    size_t len, cap;
    int failed;
};

static void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_printf(struct text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        if (t->failed) {
            return;
        }
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 > t->len + (size_t)n + 1 ? t->cap * 2 : t->len + (size_t)n + 1;
        char *grown = realloc(t->buf, cap);
        if (grown == NULL) {
            t->failed = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

/* A JSON string literal of s (quotes, backslashes and control characters
 * escaped; stall texts carry host names and the verdict). */
static void text_json_string(struct text *t, const char *s)
{
    text_printf(t, "\"");
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            text_printf(t, "\\%c", c);
        } else if (c < 0x20) {
            text_printf(t, "\\u%04x", c);
        } else {
            text_printf(t, "%c", c);
        }
    }
    text_printf(t, "\"");
}

static double us_since(uint64_t t_ns, int64_t origin_ns)
{
    return (double)((int64_t)t_ns - origin_ns) / 1e3;
}

static const char *category(tnt_tl_kind_t kind)
{
    switch (kind) {
    case TNT_TL_COLLECTIVE:
        return "collective";
    case TNT_TL_PHASE:
        return "phase";
    case TNT_TL_BUCKET:
        return "fusion";
    case TNT_TL_STEP:
    case TNT_TL_SYNC:
        return "python";
    case TNT_TL_STALL:
        return "stall";
    default:
        return "other";
    }
}

static void format_event(struct text *t, int rank, int64_t origin_ns, const tnt_tl_event_t *e,
                         tnt_tl_kind_t kind)
{
    const char *comm = e->comm < TL_MAX_COMMS ? tl.comms[e->comm] : "other";

    if (kind == TNT_TL_STALL) {
        int index = (int)e->number;
        text_printf(t,
                    ",\n{\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,"
                    "\"name\":\"stall warning\",\"cat\":\"stall\",\"args\":{\"comm\":",
                    rank, e->lane, us_since(e->start_ns, origin_ns));
        text_json_string(t, comm);
        text_printf(t, ",\"text\":");
        text_json_string(t,
                         index < TL_MAX_STALLS ? tl.stalls[index] : "(more warnings; see the log)");
        text_printf(t, "}}");
        return;
    }
    uint64_t end = e->end_ns >= e->start_ns ? e->end_ns : e->start_ns;
    text_printf(t,
                ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":", rank,
                e->lane, us_since(e->start_ns, origin_ns), (double)(end - e->start_ns) / 1e3);
    if (kind == TNT_TL_BUCKET) {
        text_printf(t, "\"bucket %llu\"", (unsigned long long)e->number);
    } else {
        text_json_string(t, e->name);
    }
    text_printf(t, ",\"cat\":\"%s\",\"args\":{", category(kind));
    switch (kind) {
    case TNT_TL_COLLECTIVE:
    case TNT_TL_PHASE:
        text_printf(t, "\"comm\":");
        text_json_string(t, comm);
        text_printf(t, ",\"seq\":%llu,\"bytes\":%llu", (unsigned long long)e->number,
                    (unsigned long long)e->bytes);
        if (e->algo != NULL) {
            text_printf(t, ",\"algorithm\":\"%s\"", e->algo);
        }
        break;
    case TNT_TL_BUCKET:
        text_printf(t, "\"comm\":");
        text_json_string(t, comm);
        text_printf(t, ",\"bucket\":%llu,\"bytes\":%llu,\"first_tensor\":%u,\"num_tensors\":%u",
                    (unsigned long long)e->number, (unsigned long long)e->bytes, e->first,
                    e->count);
        break;
    default:
        text_printf(t, "\"step\":%llu", (unsigned long long)e->number);
        break;
    }
    if (e->posted_ns != 0) {
        /* Posted, then queued until it started on this lane. */
        text_printf(t, ",\"posted_us\":%.3f,\"queued_us\":%.3f", us_since(e->posted_ns, origin_ns),
                    e->start_ns >= e->posted_ns ? (double)(e->start_ns - e->posted_ns) / 1e3 : 0.0);
    }
    text_printf(t, "}}");
}

int tnt_tl_format(int rank, int64_t origin_ns, char **text_p, size_t *len_p)
{
    struct text t = { malloc(4096), 0, 4096, 0 };
    if (t.buf == NULL) {
        return -1;
    }
    t.buf[0] = '\0';
    text_printf(&t,
                "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank "
                "%d\"}},\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\","
                "\"args\":{\"sort_index\":%d}}",
                rank, rank, rank, rank);
    uint64_t dropped = tnt_tl_dropped();
    if (dropped > 0) {
        text_printf(&t,
                    ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_labels\",\"args\":{"
                    "\"labels\":\"%llu events dropped (TNT_TIMELINE_EVENTS = %llu)\"}}",
                    rank, (unsigned long long)dropped, (unsigned long long)tl.capacity);
    }
    int lanes = atomic_load_explicit(&tl.num_lanes, memory_order_relaxed);
    for (int i = 0; i < lanes && i < TL_MAX_LANES; i++) {
        text_printf(&t,
                    ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{"
                    "\"name\":",
                    rank, i);
        text_json_string(&t, tl.lanes[i]);
        text_printf(&t,
                    "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                    "\"args\":{\"sort_index\":%d}}",
                    rank, i, i);
    }
    uint64_t n = tnt_tl_recorded();
    if (n > tl.capacity) {
        n = tl.capacity;
    }
    for (uint64_t i = 0; i < n; i++) {
        const tnt_tl_event_t *e = &tl.events[i];
        tnt_tl_kind_t kind = atomic_load_explicit(&e->kind, memory_order_acquire);
        if (kind != TNT_TL_EMPTY) {
            format_event(&t, rank, origin_ns, e, kind);
        }
    }
    if (t.failed) {
        free(t.buf);
        return -1;
    }
    *text_p = t.buf;
    *len_p = t.len;
    return 0;
}
