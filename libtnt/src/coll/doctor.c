/*
 * The hang doctor (see doctor.h for what it promises): the heartbeat board
 * of the node, the side messages between nodes, the table every rank keeps
 * of what every rank was last seen doing, and the warnings and verdicts,
 * whose rule is verdict.c's (verdict.h states it).
 */
#include "coll/doctor.h"

#include "coll/multinode.h"
#include "coll/verdict.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
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

#define DOCTOR_QUIET_NS    500000000ull  /* waits shorter than this cost nothing */
#define DOCTOR_TICK_NS     100000000ull  /* heartbeat and table refresh */
#define DOCTOR_SEND_NS     1000000000ull /* board sent to other nodes */
#define DOCTOR_FRESH_NS    1500000000ull /* a heartbeat this young: waiting */
#define DOCTOR_RECV_ROUNDS 64            /* messages taken per refresh */

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
    struct tnt_doctor_msg msg;
    uint64_t next_tick_ns, next_send_ns;
    uint64_t warned_seq; /* collective already warned about (+1) */
    /* Reports on ranks off the sender's node, ignored; when the next one
     * may be logged (one line per 10 s at most). */
    uint64_t overreach;
    uint64_t overreach_log_after_ns;
    char verdict[768];
};

static _Atomic(struct tnt_doctor *) report_doctor;

static struct doctor_slot *slot_of_local(const tnt_doctor_t *d, int local)
{
    return &d->board->slots[local];
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

void tnt_doctor_reenter(tnt_doctor_t *d)
{
    if (d == NULL) {
        return;
    }
    /* The slot still holds the last call's sequence number and kind. */
    uint64_t info = atomic_load_explicit(&d->mine->info, memory_order_relaxed) | INFO_IN;
    if (atomic_load_explicit(&d->paused, memory_order_relaxed) > 0) {
        info |= INFO_PAUSED;
    }
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

/* Counts an ignored entry and logs it, on whichever rank got it: the first
 * at once, then one line per 10 s with the count. */
static void doctor_note_overreach(tnt_doctor_t *d, int sender, int rank, uint64_t now)
{
    tnt_comm_t *comm = d->comm;

    d->overreach++;
    if (d->overreach > 1 && now < d->overreach_log_after_ns) {
        return;
    }
    tnt_log_every_rank(TNT_LOG_WARN,
                       "hang doctor: rank %d (node %d) sent a report on rank %d, which is on node "
                       "%d; a rank reports only on its own node, so this is ignored (%llu such "
                       "entries so far, logged at most every 10 s)",
                       sender, comm->node_of_rank[sender], rank, comm->node_of_rank[rank],
                       (unsigned long long)d->overreach);
    d->overreach_log_after_ns = now + 10000000000ull;
}

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
        tnt_doctor_entry_use_t use[TNT_DOCTOR_MSG_MAX];
        int sender = -1;
        size_t got = tnt_multinode_side_recv(comm, &d->msg, sizeof(d->msg), &sender);
        if (got == 0) {
            break;
        }
        int count = tnt_doctor_decode(&d->msg, got, sender, comm->size, comm->node_of_rank,
                                      comm->node_id, use);
        for (int k = 0; k < count; k++) {
            const struct tnt_doctor_entry *e = &d->msg.entries[k];
            if (use[k] == TNT_DOCTOR_ENTRY_OVERREACH) {
                doctor_note_overreach(d, sender, e->rank, now);
                continue;
            }
            if (use[k] != TNT_DOCTOR_ENTRY_TAKE) {
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
    for (int l = 0; l < comm->local_size && n < TNT_DOCTOR_MSG_MAX; l++) {
        const struct doctor_view *v = &d->view[comm->local_to_global[l]];
        struct tnt_doctor_entry *e = &d->msg.entries[n++];
        e->rank = comm->local_to_global[l];
        e->seq = v->seq;
        e->info = v->info;
        e->beat_age_ms = v->beat_age_ns == UINT64_MAX ? UINT32_MAX
                         : v->beat_age_ns / 1000000u >= UINT32_MAX
                             ? UINT32_MAX - 1
                             : (uint32_t)(v->beat_age_ns / 1000000u);
    }
    d->msg.magic = TNT_DOCTOR_MSG_MAGIC;
    d->msg.count = n;
    size_t bytes = offsetof(struct tnt_doctor_msg, entries) + n * sizeof(struct tnt_doctor_entry);
    for (int r = 0; r < comm->size; r++) {
        if (comm->node_of_rank[r] != comm->node_id) {
            (void)tnt_multinode_side_send(comm, r, &d->msg, bytes);
        }
    }
}

/* Fills d->verdict from this rank's table (verdict.c's rule); returns 0
 * when nobody is to blame, 1 otherwise. */
static int doctor_verdict(tnt_doctor_t *d, uint64_t now, uint64_t waited_ns, double threshold_s,
                          const char *what, int *reporter_p)
{
    /* Reports older than this wait describe an earlier collective: they
     * keep a rank known, but do not show that its node can still be
     * reached now. */
    uint64_t wait_began = now - waited_ns;
    tnt_comm_t *comm = d->comm;
    struct tnt_verdict_rank *rows = calloc((size_t)comm->size, sizeof(*rows));
    if (rows == NULL) {
        return 0;
    }
    for (int r = 0; r < comm->size; r++) {
        rows[r] = (struct tnt_verdict_rank){ .known = view_known(d, r, now),
                                             .waiting = view_waiting(d, r, now),
                                             .seq = d->view[r].seq,
                                             .info = d->view[r].info,
                                             .host = d->hosts[r],
                                             .pid = d->pids[r],
                                             .node = comm->node_of_rank[r],
                                             .local = comm->node_of_rank[r] == comm->node_id,
                                             .heard = d->view[r].received_ns >= wait_began };
    }
    int blamed = tnt_verdict_rule(rows, comm->size, threshold_s, what, d->verdict,
                                  sizeof d->verdict, reporter_p);
    free(rows);
    if (blamed && strcmp(comm->name, "world") != 0) {
        /* Ranks of a split are not the job's: say whose they are. */
        char plain[sizeof d->verdict];
        memcpy(plain, d->verdict, sizeof plain);
        tnt_verdict_format(d->verdict, sizeof d->verdict, "communicator %s (its own ranks): %s",
                           comm->name, plain);
    }
    return blamed;
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
    int blamed = doctor_verdict(d, now, waited_ns, timed_out ? d->timeout_s : d->warn_s,
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
        /* Every waiting rank marks its own timeline; one prints. */
        if (tnt_tl_enabled()) {
            tnt_tl_stall(comm->tl_comm, d->verdict);
        }
        if (reporter == comm->rank) {
            char text[900];
            tnt_verdict_format(text, sizeof text,
                               "warning: %s (the job ends at TNT_TIMEOUT = %g s)", d->verdict,
                               d->timeout_s);
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

    tnt_verdict_describe(seq, info, coll, sizeof coll);
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
    int sender;
    while (tnt_multinode_side_recv(d->comm, &d->msg, sizeof(d->msg), &sender) != 0) {
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
