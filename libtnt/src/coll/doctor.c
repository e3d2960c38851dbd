/*
 * The hang doctor (see doctor.h for what it promises). Verdict rule, applied
 * by every waiting rank to the same table:
 *   - "waiting": inside a collective with a heartbeat younger than
 *     DOCTOR_FRESH_NS (the wait loops beat every DOCTOR_TICK_NS);
 *   - every other rank with a known slot is a suspect: it is between
 *     collectives (has not entered the next one), or it stopped inside one;
 *     the suspect with the lowest sequence number, then the lowest rank, is
 *     named;
 *   - with no known suspect, the lowest rank nobody ever reported on is
 *     named (its whole node is silent); a node's last report stays valid
 *     after it goes quiet;
 *   - a suspect that declared a long wait (tnt_stall_pause) is not blamed.
 * The text carries only the table's values and the configured thresholds,
 * so every rank prints the same line.
 */
#include "coll/doctor.h"

#include "coll/multinode.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/wait.h"
#include "util/watch.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DOCTOR_MSG_MAGIC   0x54444f43u
#define DOCTOR_QUIET_NS    500000000ull  /* waits shorter than this cost nothing */
#define DOCTOR_TICK_NS     100000000ull  /* heartbeat and table refresh */
#define DOCTOR_SEND_NS     1000000000ull /* board sent to other nodes */
#define DOCTOR_FRESH_NS    1500000000ull /* a heartbeat this young: waiting */
#define DOCTOR_MSG_MAX     128           /* local ranks per message */
#define DOCTOR_RECV_ROUNDS 64            /* messages taken per refresh */

/* info word: bit 0 inside a collective, bit 1 paused,
 * bits 2-4 kind, bit 5 gave up (timed out), bits 6-25 bucket + 1 (0: none), bits 26-63 fusion step + 1 (0: none). */
#define INFO_IN          1ull
#define INFO_PAUSED      2ull
#define INFO_GAVE_UP     32ull /* timed out: counts as waiting from then on */
#define INFO_KIND(i)     ((unsigned)(((i) >> 2) & 0x7))
#define INFO_BUCKET(i)   ((i) >> 6 & 0xfffffull)
#define INFO_STEP(i)     ((i) >> 26)
#define INFO_FUSION_MASK (~0ull << 6)

struct doctor_slot {
    /* Written only by the owner, relaxed: the slot is diagnostics, and in a
     * real stall its values stop changing, which is when they are read. */
    _Alignas(64) _Atomic uint64_t seq; /* last collective entered (1, 2, ...) */
    _Atomic uint64_t info;
    _Atomic uint64_t beat_ns; /* CLOCK_MONOTONIC of the last wait-loop beat */
};

/* The node's board: the last bytes of the shm segment (zeroed by its
 * creator), or private memory while alone. */
struct doctor_board {
    _Alignas(64) uint64_t reserved; /* C wants a member before the slots */
    struct doctor_slot slots[];     /* local_size of them */
};

struct doctor_entry {
    int32_t rank;
    uint32_t beat_age_ms; /* UINT32_MAX: never beat */
    uint64_t seq;
    uint64_t info;
};

struct doctor_msg {
    uint32_t magic;
    uint32_t count;
    struct doctor_entry entries[DOCTOR_MSG_MAX];
};

struct doctor_view {
    uint64_t seq;
    uint64_t info;
    uint64_t beat_age_ns; /* as of received_ns */
    uint64_t received_ns; /* 0: nothing known */
};

struct tnt_doctor {
    tnt_watch_t watch; /* first: comm->watch points here */
    tnt_comm_t *comm;
    double warn_s, timeout_s;
    struct doctor_board *board; /* mapped segment, or private when alone */
    size_t board_bytes;
    int board_mapped;
    struct doctor_slot *mine;
    uint64_t pending_fusion; /* next collective's step/bucket bits */
    _Atomic int paused;      /* nesting depth */
    int64_t *pids;           /* size entries */
    char **hosts;            /* size entries (pointers into host_buf) */
    char *host_buf;
    struct doctor_view *view; /* size entries */
    struct doctor_msg msg;
    uint64_t next_tick_ns, next_send_ns;
    uint64_t warned_seq; /* collective already warned about (+1) */
    char verdict[768];
};

static _Atomic(struct tnt_doctor *) report_doctor;

static struct doctor_slot *slot_of_local(const tnt_doctor_t *d, int local)
{
    return &d->board->slots[local];
}

/* snprintf whose truncation is intended (long lists end in "..."). */
static void format_into(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void format_into(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= len && len > 4) {
        memcpy(buf + len - 4, "...", 4);
    }
}

static const char *kind_name(unsigned kind)
{
    switch (kind) {
    case TNT_DOCTOR_ALLREDUCE:
        return "allreduce";
    case TNT_DOCTOR_BROADCAST:
        return "broadcast";
    case TNT_DOCTOR_ALLGATHER:
        return "allgather";
    case TNT_DOCTOR_BARRIER:
        return "barrier";
    default:
        return "collective";
    }
}

/* ---- bookkeeping ------------------------------------------------------- */

void tnt_doctor_enter(tnt_doctor_t *d, uint64_t seq, tnt_doctor_kind_t kind)
{
    if (d == NULL) {
        return;
    }
    uint64_t info = INFO_IN | ((uint64_t)kind & 0x7) << 2 | d->pending_fusion;
    if (atomic_load_explicit(&d->paused, memory_order_relaxed) > 0) {
        info |= INFO_PAUSED;
    }
    atomic_store_explicit(&d->mine->seq, seq, memory_order_relaxed);
    atomic_store_explicit(&d->mine->info, info, memory_order_relaxed);
}

void tnt_doctor_leave(tnt_doctor_t *d)
{
    if (d == NULL) {
        return;
    }
    uint64_t info = atomic_load_explicit(&d->mine->info, memory_order_relaxed);
    atomic_store_explicit(&d->mine->info, info & ~INFO_IN, memory_order_relaxed);
    d->pending_fusion = 0;
}

void tnt_doctor_note_fusion(tnt_doctor_t *d, uint64_t step, uint32_t bucket)
{
    if (d == NULL) {
        return;
    }
    d->pending_fusion = ((uint64_t)(bucket + 1) & 0xfffff) << 6 | (step + 1) << 26;
}

void tnt_doctor_pause(tnt_doctor_t *d)
{
    if (d == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&d->paused, 1, memory_order_relaxed);
    atomic_fetch_or_explicit(&d->mine->info, INFO_PAUSED, memory_order_relaxed);
}

void tnt_doctor_resume(tnt_doctor_t *d)
{
    if (d == NULL) {
        return;
    }
    if (atomic_fetch_sub_explicit(&d->paused, 1, memory_order_relaxed) == 1) {
        atomic_fetch_and_explicit(&d->mine->info, ~INFO_PAUSED, memory_order_relaxed);
    }
}

/* ---- the table --------------------------------------------------------- */

/* My node's slots straight from the board; the rest from side messages. */
static void doctor_refresh(tnt_doctor_t *d, uint64_t now)
{
    tnt_comm_t *comm = d->comm;

    for (int l = 0; l < comm->local_size; l++) {
        struct doctor_slot *s = slot_of_local(d, l);
        struct doctor_view *v = &d->view[comm->local_to_global[l]];
        uint64_t beat = atomic_load_explicit(&s->beat_ns, memory_order_relaxed);
        v->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
        v->info = atomic_load_explicit(&s->info, memory_order_relaxed);
        v->beat_age_ns = beat == 0 || beat > now ? (beat == 0 ? UINT64_MAX : 0) : now - beat;
        v->received_ns = now;
    }
    if (comm->net == NULL) {
        return;
    }
    for (int i = 0; i < DOCTOR_RECV_ROUNDS; i++) {
        size_t got = tnt_multinode_side_recv(comm, &d->msg, sizeof(d->msg));
        if (got == 0) {
            break;
        }
        if (got < offsetof(struct doctor_msg, entries) || d->msg.magic != DOCTOR_MSG_MAGIC ||
            d->msg.count > DOCTOR_MSG_MAX ||
            got <
                offsetof(struct doctor_msg, entries) + d->msg.count * sizeof(struct doctor_entry)) {
            continue;
        }
        for (uint32_t k = 0; k < d->msg.count; k++) {
            const struct doctor_entry *e = &d->msg.entries[k];
            if (e->rank < 0 || e->rank >= comm->size ||
                comm->node_of_rank[e->rank] == comm->node_id) {
                continue;
            }
            struct doctor_view *v = &d->view[e->rank];
            v->seq = e->seq;
            v->info = e->info;
            v->beat_age_ns =
                e->beat_age_ms == UINT32_MAX ? UINT64_MAX : (uint64_t)e->beat_age_ms * 1000000u;
            v->received_ns = now;
        }
    }
}

/* A report, once received, stays known however old: the node that hosts a
 * stopped rank often goes quiet first (its reporter reaches TNT_TIMEOUT a
 * moment earlier and leaves), and its last report still says where each of
 * its ranks was. Ageing it into "unknown" made a later deadline blame the
 * departed reporter instead of the stopped rank. Only a node never heard
 * from is silent. */
static int view_known(const tnt_doctor_t *d, int r, uint64_t now)
{
    (void)now;
    return d->view[r].received_ns != 0;
}

static int view_waiting(const tnt_doctor_t *d, int r, uint64_t now)
{
    const struct doctor_view *v = &d->view[r];
    if (v->info & INFO_GAVE_UP) {
        return 1; /* it waited until TNT_TIMEOUT; keeps the verdict the same */
    }
    if (!(v->info & INFO_IN) || v->beat_age_ns == UINT64_MAX) {
        return 0;
    }
    return v->beat_age_ns + (now - v->received_ns) < DOCTOR_FRESH_NS;
}

/* The lowest local rank that is waiting sends the node's board. */
static void doctor_send(tnt_doctor_t *d, uint64_t now)
{
    tnt_comm_t *comm = d->comm;

    for (int l = 0; l < comm->local_size; l++) {
        int r = comm->local_to_global[l];
        if (view_waiting(d, r, now)) {
            if (r != comm->rank) {
                return;
            }
            break;
        }
    }
    uint32_t n = 0;
    for (int l = 0; l < comm->local_size && n < DOCTOR_MSG_MAX; l++) {
        const struct doctor_view *v = &d->view[comm->local_to_global[l]];
        struct doctor_entry *e = &d->msg.entries[n++];
        e->rank = comm->local_to_global[l];
        e->seq = v->seq;
        e->info = v->info;
        e->beat_age_ms = v->beat_age_ns == UINT64_MAX ? UINT32_MAX
                         : v->beat_age_ns / 1000000u >= UINT32_MAX
                             ? UINT32_MAX - 1
                             : (uint32_t)(v->beat_age_ns / 1000000u);
    }
    d->msg.magic = DOCTOR_MSG_MAGIC;
    d->msg.count = n;
    size_t bytes = offsetof(struct doctor_msg, entries) + n * sizeof(struct doctor_entry);
    for (int r = 0; r < comm->size; r++) {
        if (comm->node_of_rank[r] != comm->node_id) {
            (void)tnt_multinode_side_send(comm, r, &d->msg, bytes);
        }
    }
}

/* Appends "0,2-5,7" for the ranks with flag set (at most len bytes). */
static void format_ranks(const unsigned char *flag, int size, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < size; r++) {
        if (!flag[r]) {
            continue;
        }
        int end = r;
        while (end + 1 < size && flag[end + 1]) {
            end++;
        }
        int n = end == r ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", r)
                         : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", r, end);
        if (n < 0 || (size_t)n >= len - used) {
            if (len > 4) {
                snprintf(buf + len - 4, 4, "...");
            }
            return;
        }
        used += (size_t)n;
        r = end;
    }
}

static void describe_collective(const tnt_doctor_t *d, uint64_t seq, uint64_t info, char *buf,
                                size_t len)
{
    (void)d;
    if (INFO_STEP(info) != 0) {
        snprintf(buf, len, "%s #%llu (step %llu, bucket %llu)", kind_name(INFO_KIND(info)),
                 (unsigned long long)seq, (unsigned long long)(INFO_STEP(info) - 1),
                 (unsigned long long)(INFO_BUCKET(info) - 1));
    } else {
        snprintf(buf, len, "%s #%llu", kind_name(INFO_KIND(info)), (unsigned long long)seq);
    }
}

/* Fills d->verdict; returns 0 when nobody is to blame (all waiting, or the
 * suspect paused), 1 otherwise. threshold_s and what go into the text. */
static int doctor_verdict(tnt_doctor_t *d, uint64_t now, double threshold_s, const char *what,
                          int *reporter_p)
{
    tnt_comm_t *comm = d->comm;
    unsigned char *waiting = calloc((size_t)comm->size, 1);
    int suspect = -1, silent = -1, reporter = -1;

    if (waiting == NULL) {
        return 0;
    }
    for (int r = 0; r < comm->size; r++) {
        if (!view_known(d, r, now)) {
            if (silent < 0) {
                silent = r;
            }
            continue;
        }
        if (view_waiting(d, r, now)) {
            waiting[r] = 1;
            if (reporter < 0) {
                reporter = r;
            }
            continue;
        }
        if (suspect < 0 || d->view[r].seq < d->view[suspect].seq) {
            suspect = r;
        }
    }
    int blamed = suspect >= 0 ? suspect : silent;
    if (suspect >= 0 && (d->view[suspect].info & INFO_PAUSED)) {
        free(waiting);
        return 0;
    }
    if (blamed < 0) {
        /* Every rank waits: they are in different collectives, or a
         * transport lost a message. Name where each group waits. */
        char groups[600];
        size_t used = 0;
        groups[0] = '\0';
        for (int r = 0; r < comm->size && used < sizeof groups; r++) {
            int first = 1;
            for (int q = 0; q < r; q++) {
                first = first && d->view[q].seq != d->view[r].seq;
            }
            if (!first) {
                continue;
            }
            char coll[160], ranks[160];
            unsigned char *same = calloc((size_t)comm->size, 1);
            if (same == NULL) {
                break;
            }
            for (int q = 0; q < comm->size; q++) {
                same[q] = d->view[q].seq == d->view[r].seq;
            }
            format_ranks(same, comm->size, ranks, sizeof ranks);
            free(same);
            describe_collective(d, d->view[r].seq, d->view[r].info, coll, sizeof coll);
            int n = snprintf(groups + used, sizeof groups - used, "%sranks %s in %s",
                             used ? "; " : "", ranks, coll);
            used = n < 0 ? sizeof groups : used + (size_t)n;
        }
        format_into(d->verdict, sizeof d->verdict,
                    "no rank is behind, yet nothing moved %s %g s: %s; did the ranks call "
                    "different collectives?",
                    what, threshold_s, groups);
        *reporter_p = reporter;
        free(waiting);
        return 1;
    }
    /* The collective the blamed rank holds up: the one the waiting ranks
     * with the lowest sequence number are in. */
    int wait_ref = -1;
    for (int r = 0; r < comm->size; r++) {
        if (waiting[r] && (wait_ref < 0 || d->view[r].seq < d->view[wait_ref].seq)) {
            wait_ref = r;
        }
    }
    char coll[160] = "a collective", ranks[256];
    uint64_t wseq = 0;
    if (wait_ref >= 0) {
        wseq = d->view[wait_ref].seq;
        describe_collective(d, wseq, d->view[wait_ref].info, coll, sizeof coll);
        for (int r = 0; r < comm->size; r++) {
            waiting[r] = waiting[r] && d->view[r].seq == wseq;
        }
    }
    format_ranks(waiting, comm->size, ranks, sizeof ranks);
    char who[TNT_BOOT_HOSTNAME_MAX + 64];
    format_into(who, sizeof who, "rank %d (%s, pid %lld)", blamed, d->hosts[blamed],
                (long long)d->pids[blamed]);
    const struct doctor_view *b = &d->view[blamed];
    if (suspect < 0) {
        format_into(d->verdict, sizeof d->verdict,
                    "%s does not answer, nor does any rank on its node, %s %g s; waiting in %s: "
                    "ranks %s; is it stopped or its node down?",
                    who, what, threshold_s, coll, ranks);
    } else if ((b->info & INFO_IN) && b->seq == wseq) {
        format_into(d->verdict, sizeof d->verdict,
                    "%s stopped making progress inside %s %s %g s; waiting in it: ranks %s; "
                    "is it stopped (SIGSTOP, a debugger) or starved of CPU?",
                    who, coll, what, threshold_s, ranks);
    } else {
        char last[160];
        describe_collective(d, b->seq, b->info, last, sizeof last);
        format_into(d->verdict, sizeof d->verdict,
                    "%s has not entered %s %s %g s (its last was %s); waiting in it: ranks %s; "
                    "is it stuck in its own code or I/O? (kill -USR2 prints every rank's stack)",
                    who, coll, what, threshold_s, last, ranks);
    }
    free(waiting);
    *reporter_p = reporter;
    return 1;
}

static void write_line(const char *text)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "tarantella: %s\n", text);
    if (n > 0) {
        ssize_t w =
            write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

static tnt_status_t doctor_poll(tnt_watch_t *watch, uint64_t waited_ns)
{
    tnt_doctor_t *d = (tnt_doctor_t *)watch;
    tnt_comm_t *comm = d->comm;

    if (waited_ns < DOCTOR_QUIET_NS) {
        return TNT_OK;
    }
    uint64_t now = tnt_time_ns();
    if (now < d->next_tick_ns) {
        return TNT_OK;
    }
    d->next_tick_ns = now + DOCTOR_TICK_NS;
    atomic_store_explicit(&d->mine->beat_ns, now, memory_order_relaxed);
    if (atomic_load_explicit(&d->paused, memory_order_relaxed) > 0) {
        return TNT_OK;
    }
    doctor_refresh(d, now);
    if (comm->net != NULL && now >= d->next_send_ns) {
        d->next_send_ns = now + DOCTOR_SEND_NS;
        doctor_send(d, now);
    }
    double waited_s = (double)waited_ns / 1e9;
    int timed_out = d->timeout_s > 0 && waited_s >= d->timeout_s;
    int warn = d->warn_s > 0 && waited_s >= d->warn_s &&
               d->warned_seq != atomic_load_explicit(&d->mine->seq, memory_order_relaxed) + 1;
    if (!timed_out && !warn) {
        return TNT_OK;
    }
    int reporter = -1;
    int blamed = doctor_verdict(d, now, timed_out ? d->timeout_s : d->warn_s,
                                timed_out ? "within TNT_TIMEOUT =" : "for more than", &reporter);
    if (timed_out) {
        if (!blamed) {
            /* Everyone waits on everyone, or the one holding it up asked for
             * a long wait: keep waiting (a dead peer still ends the wait). */
            return TNT_OK;
        }
        atomic_fetch_or_explicit(&d->mine->info, INFO_GAVE_UP, memory_order_relaxed);
        if (comm->net != NULL) {
            doctor_refresh(d, now);
            doctor_send(d, now); /* peers learn that this rank gave up */
        }
        if (reporter == comm->rank) {
            return tnt_error_raise(TNT_ERR_TIMEOUT, "%s", d->verdict);
        }
        return tnt_error_set(TNT_ERR_TIMEOUT, "%s", d->verdict);
    }
    if (blamed) {
        d->warned_seq = atomic_load_explicit(&d->mine->seq, memory_order_relaxed) + 1;
        if (reporter == comm->rank) {
            char text[900];
            format_into(text, sizeof text, "warning: %s (the job ends at TNT_TIMEOUT = %g s)",
                        d->verdict, d->timeout_s);
            write_line(text);
        }
    }
    return TNT_OK;
}

/* ---- where am I (SIGUSR2) ---------------------------------------------- */

void tnt_doctor_where(tnt_doctor_t *d, char *buf, size_t len)
{
    uint64_t seq = atomic_load_explicit(&d->mine->seq, memory_order_relaxed);
    uint64_t info = atomic_load_explicit(&d->mine->info, memory_order_relaxed);
    uint64_t beat = atomic_load_explicit(&d->mine->beat_ns, memory_order_relaxed);
    uint64_t now = tnt_time_ns();
    char coll[160];

    describe_collective(d, seq, info, coll, sizeof coll);
    if (seq == 0) {
        snprintf(buf, len, "rank %d (%s, pid %lld): no collective yet%s", d->comm->rank,
                 d->comm->hostname, (long long)getpid(), (info & INFO_PAUSED) ? ", paused" : "");
    } else if (info & INFO_IN) {
        int waiting = beat != 0 && now - beat < DOCTOR_FRESH_NS;
        snprintf(buf, len, "rank %d (%s, pid %lld): in %s%s%s", d->comm->rank, d->comm->hostname,
                 (long long)getpid(), coll, waiting ? ", waiting for peers" : "",
                 (info & INFO_PAUSED) ? ", paused" : "");
    } else {
        snprintf(buf, len, "rank %d (%s, pid %lld): between collectives; last was %s%s",
                 d->comm->rank, d->comm->hostname, (long long)getpid(), coll,
                 (info & INFO_PAUSED) ? ", paused" : "");
    }
}

static struct sigaction report_previous[NSIG];

static void report_handler(int signo, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    tnt_doctor_t *d = atomic_load_explicit(&report_doctor, memory_order_acquire);
    if (d != NULL) {
        /* snprintf without floating point or locale work does not allocate
         * or lock in glibc; the line is one write(2). */
        char text[400];
        tnt_doctor_where(d, text, sizeof text);
        write_line(text);
    }
    const struct sigaction *prev = &report_previous[signo];
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction != NULL) {
            prev->sa_sigaction(signo, info, context);
        }
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN &&
               prev->sa_handler != NULL) {
        prev->sa_handler(signo);
    }
    errno = saved_errno;
}

tnt_status_t tnt_doctor_report_on_signal(tnt_doctor_t *d, int signo)
{
    struct sigaction sa, old;

    if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_report_on_signal: %d is not a signal a handler can catch",
                               signo);
    }
    atomic_store_explicit(&report_doctor, d, memory_order_release);
    if (sigaction(signo, NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO) &&
        old.sa_sigaction == report_handler) {
        return TNT_OK; /* already ours */
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = report_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, &report_previous[signo]) != 0) {
        return tnt_error_raise(TNT_ERR_SYSTEM, "tnt_report_on_signal: sigaction(%d): %s", signo,
                               strerror(errno));
    }
    return TNT_OK;
}

/* ---- life cycle -------------------------------------------------------- */

tnt_status_t tnt_doctor_create(tnt_comm_t *comm, const int64_t *pids, const char *const *hosts)
{
    tnt_doctor_t *d = calloc(1, sizeof(*d));
    size_t host_bytes = 0;

    if (d == NULL) {
        goto err_nomem;
    }
    d->watch.poll = doctor_poll;
    d->comm = comm;
    d->timeout_s = comm->timeout_s;
    d->warn_s = comm->settings->stall_warn_s;
    for (int r = 0; r < comm->size; r++) {
        host_bytes += strlen(hosts[r]) + 1;
    }
    d->pids = malloc((size_t)comm->size * sizeof(*d->pids));
    d->hosts = malloc((size_t)comm->size * sizeof(*d->hosts));
    d->host_buf = malloc(host_bytes);
    d->view = calloc((size_t)comm->size, sizeof(*d->view));
    /* Private until the node's board is attached (and for good when this
     * rank is alone on its node). */
    d->board_bytes = tnt_doctor_board_bytes(comm->local_size);
    d->board = aligned_alloc(64, (d->board_bytes + 63) / 64 * 64);
    if (d->pids == NULL || d->hosts == NULL || d->host_buf == NULL || d->view == NULL ||
        d->board == NULL) {
        goto err_free;
    }
    memset(d->board, 0, d->board_bytes);
    char *p = d->host_buf;
    for (int r = 0; r < comm->size; r++) {
        d->pids[r] = pids[r];
        size_t n = strlen(hosts[r]) + 1;
        memcpy(p, hosts[r], n);
        d->hosts[r] = p;
        p += n;
    }
    d->mine = slot_of_local(d, comm->local_rank);
    comm->doctor = d;
    comm->watch = &d->watch;
    return TNT_OK;

err_free:
    free(d->board);
    free(d->view);
    free(d->host_buf);
    free(d->hosts);
    free(d->pids);
    free(d);
err_nomem:
    return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for the hang doctor");
}

size_t tnt_doctor_board_bytes(int local_size)
{
    return sizeof(struct doctor_board) + (size_t)local_size * sizeof(struct doctor_slot);
}

void tnt_doctor_attach_board(tnt_doctor_t *d, void *shared)
{
    tnt_comm_t *comm = d->comm;
    struct doctor_board *board = shared;

    if (comm->local_size == 1 || board == NULL) {
        return;
    }
    /* Keep what was recorded before (nothing runs collectives yet, but the
     * slot is copied for symmetry). The segment was zeroed by its creator
     * and every local rank has attached to it, so the other slots read as
     * "no collective yet" until their owners write them. */
    board->slots[comm->local_rank] = d->board->slots[comm->local_rank];
    free(d->board);
    d->board = board;
    d->board_mapped = 1;
    d->mine = slot_of_local(d, comm->local_rank);
}

void tnt_doctor_quiesce(tnt_doctor_t *d)
{
    if (d == NULL || d->comm->net == NULL) {
        return;
    }
    while (tnt_multinode_side_recv(d->comm, &d->msg, sizeof(d->msg)) != 0) {
    }
}

void tnt_doctor_destroy(tnt_doctor_t *d)
{
    if (d == NULL) {
        return;
    }
    tnt_doctor_t *expected = d;
    atomic_compare_exchange_strong(&report_doctor, &expected, NULL);
    /* A mapped board lives in the shm segment, which comm->shm owns. */
    if (!d->board_mapped) {
        free(d->board);
    }
    free(d->view);
    free(d->host_buf);
    free(d->hosts);
    free(d->pids);
    free(d);
}
