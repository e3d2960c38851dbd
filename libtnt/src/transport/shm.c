/*
 * Shared-memory transport: creating and destroying the transport over the
 * node's segment (whose life cycle is shm_segment.c's), the phase protocol
 * with bounded, backing-off waits and dead-peer detection, and the
 * data-movement collectives (barrier, broadcast, allgather). The
 * reductions are in shm_allreduce.c. Protocol and layout: shm_impl.h.
 */
#include "transport/shm_impl.h"
#include "transport/shm_stream.h"
#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* Up to this size every rank copies its whole vector into its slot and
 * reduces all n slots itself: one phase instead of two, which saves more
 * than the redundant reductions cost (figures: docs/benchmarks.md, "Figures
 * behind the shared-memory thresholds"). TNT_SHM_SMALL_KB overrides it;
 * local rank 0 publishes its choice in the header. */
#define TNT_SHM_SMALL_DEFAULT_KB 64 /* x8 for 2 ranks, x2 up to 4, /4 above */
/* Polls of a peer's counter before the first clock read: a small allreduce
 * between two running ranks completes within this. */
#define TNT_SHM_FAST_POLLS 256
/* After the fast polls, waits poll with sched_yield for this long before
 * they start sleeping: every poll, or (spin_ns != 0, every local rank has
 * a core) every 64th, with pause loops in between. */
#define TNT_SHM_YIELD_NS 2000000ull
#define TNT_SHM_SPIN_NS  50000ull
/* How often a slow waiter checks whether the peers it waits for are alive. */
#define TNT_SHM_LIVENESS_NS 100000000ull
/* Per-peer block read with process_vm_readv before it is reduced: large
 * enough to amortise the system call, small enough to stay in L2
 * (docs/tuning.md, "CMA block size"). */
#define TNT_SHM_CMA_BLOCK_MAX (256 * 1024)
#define TNT_SHM_CMA_BLOCK_MIN (64 * 1024)

/* ---- liveness and errors ---------------------------------------------- */

/* Slow path only (see Liveness in shm_impl.h). A rank that has not taken its
 * mutex yet (still attaching) counts as alive; its death is then seen as a
 * missing arrival within TNT_TIMEOUT. */
static int tnt_shm_peer_alive(struct tnt_shm *shm, int peer)
{
    pthread_mutex_t *alive = &shm->ctl[peer].alive;
    int rc = pthread_mutex_trylock(alive);
    switch (rc) {
    case EBUSY:
        return 1;
    case 0:
        pthread_mutex_unlock(alive);
        return 1;
    case EOWNERDEAD:
        /* Unlocked without pthread_mutex_consistent, the mutex becomes
         * unrecoverable, so every later trylock (any rank) says dead too. */
        pthread_mutex_unlock(alive);
        return 0;
    case ENOTRECOVERABLE:
        return 0;
    default:
        return 1;
    }
}

int tnt_shm_local_alive(tnt_shm_t *shm, int local_rank)
{
    return local_rank < 0 || local_rank >= shm->n || local_rank == shm->me ||
           tnt_shm_peer_alive(shm, local_rank);
}

/* For messages: the bootstrap's pid, or (unit tests) the segment's. */
static pid_t tnt_shm_peer_pid(const struct tnt_shm *shm, int peer)
{
    if (shm->pids[peer] != 0) {
        return shm->pids[peer];
    }
    return (pid_t)atomic_load_explicit(&shm->ctl[peer].pid, memory_order_relaxed);
}

static tnt_status_t tnt_shm_peer_failed(struct tnt_shm *shm, int peer, const char *what)
{
    int32_t expected = 0;
    /* Relaxed is enough: the word only tells others to stop waiting. */
    atomic_compare_exchange_strong_explicit(&shm->hdr->failed, &expected, peer + 1,
                                            memory_order_relaxed, memory_order_relaxed);
    shm->broken = tnt_error_raise(
        TNT_ERR_PEER_FAILED,
        "rank %d: local rank %d (rank %d, pid %d) died during %s #%llu; the job cannot "
        "continue; see that rank's output for the cause",
        shm->global_ranks[shm->me], peer, shm->global_ranks[peer], (int)tnt_shm_peer_pid(shm, peer),
        what, (unsigned long long)shm->num_collectives);
    return shm->broken;
}

/* The liveness thread: takes this rank's mutex, says so, and sleeps until
 * destroy. It exits still holding the mutex, so the kernel marks it
 * owner-dead then too: a peer still waiting for this rank after it left
 * learns that it is gone. A thread of its own (rather than the caller of
 * tnt_init) because the mutex dies with the thread that holds it. */
static void *tnt_shm_alive_main(void *arg)
{
    struct tnt_shm *shm = arg;
    int rc = pthread_mutex_lock(&shm->ctl[shm->me].alive);
    if (rc == EOWNERDEAD) {
        /* A peer died inside its liveness check while holding it. */
        pthread_mutex_consistent(&shm->ctl[shm->me].alive);
        rc = 0;
    }
    pthread_mutex_lock(&shm->alive_lock);
    shm->alive_state = rc == 0 ? 1 : -1;
    pthread_cond_broadcast(&shm->alive_cond);
    while (shm->alive_state == 1) {
        pthread_cond_wait(&shm->alive_cond, &shm->alive_lock);
    }
    pthread_mutex_unlock(&shm->alive_lock);
    return NULL;
}

static tnt_status_t tnt_shm_alive_start(struct tnt_shm *shm)
{
    sigset_t all, old;
    int rc;

    shm->alive_state = 0;
    if ((rc = pthread_mutex_init(&shm->alive_lock, NULL)) != 0) {
        goto err;
    }
    if ((rc = pthread_cond_init(&shm->alive_cond, NULL)) != 0) {
        goto err_lock;
    }
    /* Signals stay with the application's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&shm->alive_thread, NULL, tnt_shm_alive_main, shm);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        goto err_cond;
    }
    shm->alive_started = 1;
    pthread_mutex_lock(&shm->alive_lock);
    while (shm->alive_state == 0) {
        pthread_cond_wait(&shm->alive_cond, &shm->alive_lock);
    }
    int state = shm->alive_state;
    pthread_mutex_unlock(&shm->alive_lock);
    if (state != 1) {
        return tnt_error_raise(TNT_ERR_SYSTEM,
                               "rank %d: cannot take the liveness mutex in shared-memory segment "
                               "%s; is another process using this job's segment?",
                               shm->global_ranks[shm->me], shm->name);
    }
    return TNT_OK;

err_cond:
    pthread_cond_destroy(&shm->alive_cond);
err_lock:
    pthread_mutex_destroy(&shm->alive_lock);
err:
    return tnt_error_raise(TNT_ERR_SYSTEM,
                           "rank %d: cannot start the shared-memory liveness thread: %s; check "
                           "the process/thread limits (ulimit -u)",
                           shm->global_ranks[shm->me], strerror(rc));
}

/* Before the segment is unmapped (the kernel writes the owner-dead mark into
 * it when the thread exits). */
static void tnt_shm_alive_stop(struct tnt_shm *shm)
{
    if (!shm->alive_started) {
        return;
    }
    pthread_mutex_lock(&shm->alive_lock);
    shm->alive_state = 2;
    pthread_cond_broadcast(&shm->alive_cond);
    pthread_mutex_unlock(&shm->alive_lock);
    pthread_join(shm->alive_thread, NULL);
    pthread_cond_destroy(&shm->alive_cond);
    pthread_mutex_destroy(&shm->alive_lock);
    shm->alive_started = 0;
}

/* ---- signatures --------------------------------------------------------- */

static const char *const tnt_shm_kind_names[] = {
    "?",         "barrier",        "allreduce",        "broadcast",
    "allgather", "reduce_scatter", "allgather_slices", "gather",
    "scatter",   "alltoall",       "call checks",      "reduce"
};

void tnt_shm_expect(struct tnt_shm *shm, enum tnt_shm_kind kind, uint64_t count, unsigned dtype,
                    unsigned op)
{
    struct tnt_shm_sig *sig = &shm->ctl[shm->me].sig[(shm->phase + 1) & 1];
    /* Relaxed: the release store of seq in the next phase publishes them. */
    atomic_store_explicit(&sig->what,
                          (shm->num_collectives << 24) | ((uint64_t)kind << 16) |
                              ((uint64_t)(dtype & 0xff) << 8) | (op & 0xff),
                          memory_order_relaxed);
    atomic_store_explicit(&sig->count, count, memory_order_relaxed);
    atomic_store_explicit(&sig->terms, shm->terms_next, memory_order_relaxed);
    shm->terms_next = 0;
    shm->terms_differed = 0;
    shm->sig_pending = 1;
}

void tnt_shm_terms_next(tnt_shm_t *shm, uint64_t terms)
{
    shm->terms_next = terms;
}

int tnt_shm_terms_differed(const tnt_shm_t *shm)
{
    return shm->terms_differed;
}

/* In tnt_dtype_t and tnt_op_t order. */
static const char *const tnt_shm_dtype_names[] = { "float32",  "float64", "float16",
                                                   "bfloat16", "int32",   "int64" };
static const char *const tnt_shm_op_names[] = { "sum", "prod", "min", "max", "avg" };

/* "allreduce #12 of 100 float32 elements, sum"; terms gives an eager
 * call's root. */
static void tnt_shm_sig_format(char *buf, size_t len, uint64_t what, uint64_t count, uint64_t terms)
{
    const int eager = (terms & TNT_SHM_TERMS_EAGER) != 0;
    const int sent = eager && (terms & TNT_SHM_TERMS_SENT) != 0;
    const unsigned root = (unsigned)(uint32_t)terms;
    unsigned kind = (unsigned)(what >> 16) & 0xff;
    unsigned dtype = (unsigned)(what >> 8) & 0xff, op = (unsigned)what & 0xff;
    const char *name = kind < sizeof tnt_shm_kind_names / sizeof *tnt_shm_kind_names
                           ? tnt_shm_kind_names[kind]
                           : "?";
    unsigned long long number = (unsigned long long)(what >> 24);
    switch (kind) {
    case TNT_SHM_KIND_BARRIER:
        snprintf(buf, len, "barrier #%llu", number);
        break;
    case TNT_SHM_KIND_BROADCAST:
        snprintf(buf, len, "broadcast #%llu of %llu bytes from local rank %u", number,
                 (unsigned long long)count, op);
        break;
    case TNT_SHM_KIND_ALLGATHER:
        snprintf(buf, len, "allgather #%llu of %llu bytes per rank", number,
                 (unsigned long long)count);
        break;
    case TNT_SHM_KIND_GATHER:
    case TNT_SHM_KIND_SCATTER:
        snprintf(buf, len, "%s #%llu of %llu bytes per rank, root local rank %u%s", name, number,
                 (unsigned long long)count, eager ? root : op, sent ? " (sent eagerly)" : "");
        break;
    case TNT_SHM_KIND_ALLTOALL:
        snprintf(buf, len, "alltoall #%llu of at most %llu bytes per pair", number,
                 (unsigned long long)count);
        break;
    case TNT_SHM_KIND_TERMS:
        snprintf(buf, len, "a collective-set call #%llu that moves nothing (count %llu%s)", number,
                 (unsigned long long)count, op ? ", a bad argument" : "");
        break;
    default: {
        char rooted[48] = "";
        if (eager) {
            snprintf(rooted, sizeof rooted, ", root local rank %u%s", root,
                     sent ? " (sent eagerly)" : "");
        }
        snprintf(
            buf, len, "%s #%llu of %llu %s elements, %s%s", name, number, (unsigned long long)count,
            dtype < sizeof tnt_shm_dtype_names / sizeof *tnt_shm_dtype_names
                ? tnt_shm_dtype_names[dtype]
                : "?",
            op < sizeof tnt_shm_op_names / sizeof *tnt_shm_op_names ? tnt_shm_op_names[op] : "?",
            rooted);
        break;
    }
    }
}

/* Rank j's signature for phase p: in its ring entry of p where its call
 * at p was eager, else in ctl.sig (slow path only: see Eager rooted calls). */
static void tnt_shm_sig_at(const struct tnt_shm *shm, int j, uint64_t p, uint64_t *what,
                           uint64_t *count, uint64_t *terms)
{
    const struct tnt_shm_ring_entry *e = tnt_shm_ring(shm, j, p);
    const struct tnt_shm_sig *sig = atomic_load_explicit(&e->tag, memory_order_relaxed) == p
                                        ? &e->sig
                                        : &shm->ctl[j].sig[p & 1];
    *what = atomic_load_explicit(&sig->what, memory_order_relaxed);
    *count = atomic_load_explicit(&sig->count, memory_order_relaxed);
    *terms = atomic_load_explicit(&sig->terms, memory_order_relaxed);
}

/* The slow path of the check: every rank's signature of phase p from where
 * it is; names the ranks that differ from local rank 0. */
static tnt_status_t tnt_shm_sigs_differ(struct tnt_shm *shm, uint64_t p, const char *late)
{
    uint64_t what, count, terms;
    int differ = 0, all_terms = 1, sent = 0;
    uint64_t what0 = 0, count0 = 0, terms0 = 0;
    tnt_shm_sig_at(shm, shm->me, p, &what0, &count0, &terms0);
    terms0 &= ~TNT_SHM_TERMS_SENT;
    for (int j = 0; j < shm->n; j++) {
        tnt_shm_sig_at(shm, j, p, &what, &count, &terms);
        differ |= what != what0 || count != count0 || (terms & ~TNT_SHM_TERMS_SENT) != terms0;
        all_terms &= terms != 0;
        sent |= (terms & TNT_SHM_TERMS_EAGER) != 0 && (terms & TNT_SHM_TERMS_SENT) != 0;
    }
    if (!differ) {
        return TNT_OK;
    }
    if (all_terms && !sent) {
        /* Every rank read the same words, so every rank is here: the caller
         * that passed the terms names the difference, in its own terms. */
        shm->terms_differed = 1;
        return tnt_error_set(TNT_ERR_MISMATCH,
                             "rank %d: the ranks of this node passed different arguments to "
                             "collective #%llu",
                             shm->global_ranks[shm->me], (unsigned long long)shm->num_collectives);
    }

    /* Describe local rank 0's call and each one that differs. */
    char text[768], one[160];
    size_t used = 0;
    tnt_shm_sig_at(shm, 0, p, &what0, &count0, &terms0);
    terms0 &= ~TNT_SHM_TERMS_SENT;
    text[0] = '\0';
    for (int j = 0; j < shm->n && used + 1 < sizeof text; j++) {
        tnt_shm_sig_at(shm, j, p, &what, &count, &terms);
        if (j != 0 && what == what0 && count == count0 &&
            (terms & ~TNT_SHM_TERMS_SENT) == terms0) {
            continue;
        }
        tnt_shm_sig_format(one, sizeof one, what, count, terms);
        int wrote = snprintf(text + used, sizeof text - used, "%srank %d called %s",
                             used ? ", " : "", shm->global_ranks[j], one);
        used += wrote > 0 ? (size_t)wrote : 0;
    }
    return tnt_error_raise(TNT_ERR_MISMATCH,
                           "rank %d: the ranks of this node called different collectives: %s; "
                           "every rank must call the same collectives in the same order with "
                           "the same count, dtype and op%s",
                           shm->global_ranks[shm->me], text, late != NULL ? late : "");
}

/* Every peer has reached the phase that carries the signatures: compare
 * them with this rank's. All ranks read the same words, so all of them fail
 * together, each naming the ranks that differ from local rank 0 (an eager
 * sender in a later call, or in tnt_shm_settle: late is then what it says
 * about itself). The fast path reads ctl.sig only; a rank whose call at
 * this phase was eager differs there and is found by the slow path. */
static tnt_status_t tnt_shm_check_sigs(struct tnt_shm *shm, const char *late)
{
    const int parity = (int)(shm->phase & 1);
    const struct tnt_shm_sig *mine = &shm->ctl[shm->me].sig[parity];
    const uint64_t what = atomic_load_explicit(&mine->what, memory_order_relaxed);
    const uint64_t count = atomic_load_explicit(&mine->count, memory_order_relaxed);
    const uint64_t terms = atomic_load_explicit(&mine->terms, memory_order_relaxed);
    int differ = 0;

    for (int j = 0; j < shm->n; j++) {
        const struct tnt_shm_sig *sig = &shm->ctl[j].sig[parity];
        differ |= atomic_load_explicit(&sig->what, memory_order_relaxed) != what ||
                  atomic_load_explicit(&sig->count, memory_order_relaxed) != count ||
                  atomic_load_explicit(&sig->terms, memory_order_relaxed) != terms;
    }
    return differ ? tnt_shm_sigs_differ(shm, shm->phase, late) : TNT_OK;
}

/* The same for an eager phase p, whose signatures are in the ring entries. */
static tnt_status_t tnt_shm_check_eager(struct tnt_shm *shm, uint64_t p, const char *late)
{
    const struct tnt_shm_sig *mine = &tnt_shm_ring(shm, shm->me, p)->sig;
    const uint64_t what = atomic_load_explicit(&mine->what, memory_order_relaxed);
    const uint64_t count = atomic_load_explicit(&mine->count, memory_order_relaxed);
    const uint64_t terms =
        atomic_load_explicit(&mine->terms, memory_order_relaxed) & ~TNT_SHM_TERMS_SENT;
    int differ = 0;

    for (int j = 0; j < shm->n; j++) {
        const struct tnt_shm_ring_entry *e = tnt_shm_ring(shm, j, p);
        differ |= atomic_load_explicit(&e->tag, memory_order_relaxed) != p ||
                  atomic_load_explicit(&e->sig.what, memory_order_relaxed) != what ||
                  atomic_load_explicit(&e->sig.count, memory_order_relaxed) != count ||
                  (atomic_load_explicit(&e->sig.terms, memory_order_relaxed) &
                   ~TNT_SHM_TERMS_SENT) != terms;
    }
    return differ ? tnt_shm_sigs_differ(shm, p, late) : TNT_OK;
}

/* A sender's check of its eager phase p, later (see Eager rooted calls):
 * every peer's digest of p against this rank's; the signatures themselves
 * only where one differs. */
static tnt_status_t tnt_shm_check_sums(struct tnt_shm *shm, uint64_t p, const char *late)
{
    const unsigned i = (unsigned)(p % TNT_SHM_RING);
    const uint64_t mine = atomic_load_explicit(&shm->ctl[shm->me].sums[i], memory_order_relaxed);
    int differ = 0;

    for (int j = 0; j < shm->n; j++) {
        differ |= atomic_load_explicit(&shm->ctl[j].sums[i], memory_order_relaxed) != mine;
    }
    return differ ? tnt_shm_sigs_differ(shm, p, late) : TNT_OK;
}

/* Whether peer has reached target and, where free_of is nonzero, checked
 * its eager sends up to free_of (see Eager rooted calls). */
static inline int tnt_shm_peer_at(const struct tnt_shm *shm, int peer, uint64_t target,
                                  uint64_t free_of)
{
    if (atomic_load_explicit(&shm->ctl[peer].seq, memory_order_acquire) < target) {
        return 0;
    }
    if (free_of == 0) {
        return 1;
    }
    /* Acquire: the peer's reads of the signatures of free_of happen-before
     * its release store of a later unchecked, or of 0. */
    uint64_t u = atomic_load_explicit(&shm->ctl[peer].unchecked, memory_order_acquire);
    return u == 0 || u > free_of;
}

static tnt_status_t tnt_shm_wait_peer_free(struct tnt_shm *shm, int peer, uint64_t target,
                                           uint64_t free_of, const char *what)
{
    /* Acquire (tnt_shm_peer_at): everything the peer wrote before its
     * release store of target (slot data, buffer addresses, its reads of my
     * slots) happens-before what this rank does after the load returns. */
    for (int i = 0; i < TNT_SHM_FAST_POLLS; i++) {
        if (tnt_shm_peer_at(shm, peer, target, free_of)) {
            return TNT_OK;
        }
        tnt_cpu_relax();
    }
    /* Medium wait: a peer still copying or reducing its part of a large
     * message is typically microseconds to a millisecond behind. Sleeping
     * now would cost the kernel's timer slack (~50 us) per phase, so keep
     * polling: spinning when every local rank has its own core, otherwise
     * sched_yield, which hands the core to the peer we are waiting for.
     * The spin yields every 64 polls too (it used to poll without yielding
     * for its first 50 us): "a core per local rank" counts
     * this node's ranks only, and other processes (the ranks of other
     * simulated nodes on the same host, a UCX waiter polling with
     * sched_yield) may need this core. A spinner that never yielded held
     * it for the whole spin_ns, which made small allreduces of simulated
     * nodes several times slower (figures: docs/multinode.md, "Waiting on
     * shared cores"). With nobody else runnable, sched_yield returns at
     * once. */
    uint64_t start = tnt_time_ns();
    uint64_t yield_until = start + TNT_SHM_YIELD_NS;
    for (uint32_t i = 1;; i++) {
        if (tnt_shm_peer_at(shm, peer, target, free_of)) {
            return TNT_OK;
        }
        if ((i & 63) != 0 && shm->spin_ns > 0) {
            tnt_cpu_relax();
            continue;
        }
        uint64_t now = tnt_time_ns();
        if (now >= yield_until) {
            break;
        }
        sched_yield();
    }

    tnt_backoff_t backoff;
    tnt_backoff_init(&backoff, tnt_watch_own_timeout(shm->watch, shm->timeout_s));
    uint64_t next_check = tnt_time_ns() + TNT_SHM_LIVENESS_NS;
    while (!tnt_shm_peer_at(shm, peer, target, free_of)) {
        if (tnt_backoff_wait(&backoff) != 0) {
            shm->broken = tnt_error_raise(
                TNT_ERR_TIMEOUT,
                "rank %d: local rank %d (rank %d, pid %d) did not join %s #%llu within %g s; "
                "is it still running? see TNT_TIMEOUT",
                shm->global_ranks[shm->me], peer, shm->global_ranks[peer],
                (int)tnt_shm_peer_pid(shm, peer), what, (unsigned long long)shm->num_collectives,
                shm->timeout_s);
            return shm->broken;
        }
        int32_t failed = atomic_load_explicit(&shm->hdr->failed, memory_order_relaxed);
        if (failed > 0) {
            return tnt_shm_peer_failed(shm, failed - 1, what);
        }
        uint64_t now = tnt_time_ns();
        tnt_status_t verdict = tnt_watch_poll(shm->watch, now - start);
        if (verdict != TNT_OK) {
            shm->broken = verdict;
            return verdict;
        }
        if (now >= next_check) {
            next_check = now + TNT_SHM_LIVENESS_NS;
            /* A peer that got here and then left (it died, or finished:
             * an eager sender's receivers may be done before it checks)
             * has given what this wait is for. */
            if (!tnt_shm_peer_alive(shm, peer) &&
                !tnt_shm_peer_at(shm, peer, target, free_of)) {
                return tnt_shm_peer_failed(shm, peer, what);
            }
        }
    }
    return TNT_OK;
}


static tnt_status_t tnt_shm_wait_peer(struct tnt_shm *shm, int peer, uint64_t target,
                                      const char *what)
{
    return tnt_shm_wait_peer_free(shm, peer, target, 0, what);
}

/* Only the release store of the next phase (tnt_shm_phase then waits). */
static void tnt_shm_signal(struct tnt_shm *shm)
{
    shm->phase++;
    /* Release: my slot writes and my reads of peers' slots for earlier
     * phases happen-before any peer's acquire load that sees this value. */
    atomic_store_explicit(&shm->ctl[shm->me].seq, shm->phase, memory_order_release);
}

/* Waits until every peer has reached phase target. */
static tnt_status_t tnt_shm_wait_peers_at(struct tnt_shm *shm, uint64_t target, const char *what)
{
    for (int j = 0; j < shm->n; j++) {
        if (j == shm->me) {
            continue;
        }
        tnt_status_t status = tnt_shm_wait_peer(shm, j, target, what);
        if (status != TNT_OK) {
            return status;
        }
    }
    return TNT_OK;
}

/* Waits until every peer has reached this rank's phase. */
static tnt_status_t tnt_shm_wait_peers(struct tnt_shm *shm, const char *what)
{
    return tnt_shm_wait_peers_at(shm, shm->phase, what);
}

static tnt_status_t tnt_shm_wait_all(struct tnt_shm *shm, const char *what)
{
    tnt_status_t status = tnt_shm_wait_peers(shm, what);
    if (status != TNT_OK) {
        return status;
    }
    if (shm->sig_pending) {
        shm->sig_pending = 0;
        return tnt_shm_check_sigs(shm, NULL);
    }
    return TNT_OK;
}

/* ---- eager rooted calls (shm_impl.h, "Eager rooted calls") ------------- */

/* Whether tnt_shm_prefetch may ask for lines for writing here (see Taking
 * lines early). */
static int tnt_shm_has_prefetch_write(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && (ecx & bit_PRFCHW) != 0;
#else
    return 1;
#endif
}

static const char tnt_shm_late[] =
    "; this rank had already returned from its eager call, which hands its data to the shared "
    "segment without waiting for the others, and learns of the difference now";

/* Publishes this rank's unchecked (release: its reads of the signatures it
 * checked happen-before a peer's acquire load that sees the new value). */
static void tnt_shm_set_unchecked(struct tnt_shm *shm, uint64_t unchecked)
{
    shm->unchecked = unchecked;
    atomic_store_explicit(&shm->ctl[shm->me].unchecked, unchecked, memory_order_release);
}

/* Whether every peer has reached phase p (no waiting). */
static int tnt_shm_all_at(const struct tnt_shm *shm, uint64_t p)
{
    for (int j = 0; j < shm->n; j++) {
        if (j != shm->me && atomic_load_explicit(&shm->ctl[j].seq, memory_order_acquire) < p) {
            return 0;
        }
    }
    return 1;
}

/* Checks this rank's eager sends from the oldest unchecked one up to and
 * including phase upto, waiting for every peer to reach each, then the
 * later ones up to its last send (last) that every peer has already
 * reached: a sender that is several calls ahead checks them together,
 * once every few calls. A difference breaks the segment. */
static tnt_status_t tnt_shm_check_sent(struct tnt_shm *shm, uint64_t upto, uint64_t last,
                                       const char *what)
{
    uint64_t p = shm->unchecked;
    if (p == 0) {
        return TNT_OK;
    }
    for (; p <= last; p++) {
        tnt_status_t status = TNT_OK;
        if (p <= upto) {
            status = tnt_shm_wait_peers_at(shm, p, what);
        } else if (!tnt_shm_all_at(shm, p)) {
            break;
        }
        if (status == TNT_OK) {
            status = tnt_shm_check_sums(shm, p, tnt_shm_late);
        }
        if (status != TNT_OK) {
            /* The receivers have failed and stay behind this phase. */
            shm->broken = status;
            return status;
        }
    }
    tnt_shm_set_unchecked(shm, p > last ? 0 : p);
    return TNT_OK;
}

/* Makes this rank's entry of phase q free: every rank has read the data of
 * q - TNT_SHM_RING and checked its signatures. The bound learnt from each
 * peer's seq and unchecked stays valid: seq only grows, and unchecked, once
 * seen, only grows or becomes 0 before a later send sets it above seq. */
static tnt_status_t tnt_shm_ring_free(struct tnt_shm *shm, uint64_t q, const char *what)
{
    const uint64_t e = q - TNT_SHM_RING;
    /* Own sends first: the peers may wait for them below (the invariant
     * unchecked > seq - TNT_SHM_RING + 1 after this send). */
    if (shm->unchecked != 0 && shm->unchecked + TNT_SHM_RING <= q + 1) {
        tnt_status_t status = tnt_shm_check_sent(shm, q + 1 - TNT_SHM_RING, shm->phase, what);
        if (status != TNT_OK) {
            return status;
        }
    }
    if (q <= TNT_SHM_RING || shm->ring_clear >= e) {
        return TNT_OK;
    }
    uint64_t clear = UINT64_MAX;
    for (int j = 0; j < shm->n; j++) {
        if (j == shm->me) {
            continue;
        }
        tnt_status_t status = tnt_shm_wait_peer_free(shm, j, e + 1, e, what);
        if (status != TNT_OK) {
            return status;
        }
        uint64_t seq = atomic_load_explicit(&shm->ctl[j].seq, memory_order_acquire);
        uint64_t u = atomic_load_explicit(&shm->ctl[j].unchecked, memory_order_acquire);
        uint64_t free_j = u != 0 && u - 1 < seq - 1 ? u - 1 : seq - 1;
        clear = free_j < clear ? free_j : clear;
    }
    shm->ring_clear = clear;
    return TNT_OK;
}

tnt_status_t tnt_shm_eager_claim(struct tnt_shm *shm, enum tnt_shm_kind kind, uint64_t count,
                                 unsigned dtype, unsigned op, int root, int sends, size_t bytes,
                                 const char *what, unsigned char **data_p)
{
    const uint64_t q = shm->phase + 1;
    /* A death another rank has seen stops a sender that would not wait.
     * Relaxed: the word only tells ranks to stop; it stays in every
     * cache until someone dies. */
    int32_t failed = atomic_load_explicit(&shm->hdr->failed, memory_order_relaxed);
    if (failed > 0) {
        return tnt_shm_peer_failed(shm, failed - 1, what);
    }
    tnt_status_t status = tnt_shm_ring_free(shm, q, what);
    if (status != TNT_OK) {
        return status;
    }
    if (sends && shm->take_lines && shm->ring_clear + TNT_SHM_RING >= q + TNT_SHM_RING_AHEAD) {
        tnt_shm_ring_prefetch(shm, q + TNT_SHM_RING_AHEAD, bytes);
    }
    struct tnt_shm_ring_entry *e = tnt_shm_ring(shm, shm->me, q);
    const uint64_t sig_what = (shm->num_collectives << 24) | ((uint64_t)kind << 16) |
                              ((uint64_t)(dtype & 0xff) << 8) | (op & 0xff);
    const uint64_t sig_terms =
        TNT_SHM_TERMS_EAGER | (sends ? TNT_SHM_TERMS_SENT : 0) | (uint32_t)root;
    /* Relaxed: the release store of the tag (and of seq) publishes them. */
    atomic_store_explicit(&e->sig.what, sig_what, memory_order_relaxed);
    atomic_store_explicit(&e->sig.count, count, memory_order_relaxed);
    atomic_store_explicit(&e->sig.terms, sig_terms, memory_order_relaxed);
    atomic_store_explicit(&shm->ctl[shm->me].sums[q % TNT_SHM_RING],
                          tnt_shm_sig_digest(q, sig_what, count, sig_terms), memory_order_relaxed);
    shm->terms_next = 0;
    shm->terms_differed = 0;
    *data_p = tnt_shm_ring_data(shm, shm->me, q, bytes);
    return TNT_OK;
}

tnt_status_t tnt_shm_eager_publish(struct tnt_shm *shm, int sends, const char *what)
{
    const uint64_t q = shm->phase + 1;
    /* Release: the data and signature written since the claim happen-before
     * a receiver's acquire load that sees the tag. */
    atomic_store_explicit(&tnt_shm_ring(shm, shm->me, q)->tag, q, memory_order_release);
    if (sends) {
        if (shm->unchecked == 0) {
            shm->unchecked = q;
            /* Relaxed: the release store of seq publishes it. */
            atomic_store_explicit(&shm->ctl[shm->me].unchecked, q, memory_order_relaxed);
        }
        shm->eager_what = what;
        tnt_shm_signal(shm);
        return TNT_OK;
    }
    tnt_shm_signal(shm);
    /* Receiving: the tags first, whose lines hold the data too; a peer whose
     * call at q was not eager never sets its tag, and the robust wait on
     * seq (timeouts, dead peers, the doctor) takes over. */
    for (int j = 0; j < shm->n; j++) {
        if (j == shm->me) {
            continue;
        }
        const _Atomic uint64_t *tag = &tnt_shm_ring(shm, j, q)->tag;
        int i = 0;
        /* Acquire: pairs with the sender's release store of the tag. */
        while (atomic_load_explicit(tag, memory_order_acquire) != q && ++i < TNT_SHM_FAST_POLLS) {
            tnt_cpu_relax();
        }
        if (i == TNT_SHM_FAST_POLLS) {
            tnt_status_t status = tnt_shm_wait_peer(shm, j, q, what);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    /* A sender publishes its tag before seq; the checks below need every
     * peer's entry and ctl.sig of q in place, which the tag (eager peers)
     * or seq (the others) gives, and the entries up to q - TNT_SHM_RING + 1
     * are free from now on (see Eager rooted calls). */
    if (q + 1 > TNT_SHM_RING && q + 1 - TNT_SHM_RING > shm->ring_clear) {
        shm->ring_clear = q + 1 - TNT_SHM_RING;
    }
    tnt_status_t status = TNT_OK;
    if (shm->unchecked != 0) {
        /* This rank's own older sends, oldest first: every peer is past them. */
        status = tnt_shm_check_sent(shm, q - 1, q - 1, what);
    }
    return status == TNT_OK ? tnt_shm_check_eager(shm, q, NULL) : status;
}

tnt_status_t tnt_shm_settle(tnt_shm_t *shm)
{
    if (shm->unchecked == 0) {
        return TNT_OK;
    }
    /* num_collectives still numbers the last eager call in the messages
     * (nothing else ran since). */
    return tnt_shm_check_sent(shm, shm->phase, shm->phase, shm->eager_what);
}

tnt_status_t tnt_shm_phase(struct tnt_shm *shm, const char *what)
{
    tnt_shm_signal(shm);
    return tnt_shm_wait_all(shm, what);
}

tnt_status_t tnt_shm_cma_error(struct tnt_shm *shm, int peer, int err, const char *what)
{
    if (err == ESRCH || !tnt_shm_peer_alive(shm, peer)) {
        return tnt_shm_peer_failed(shm, peer, what);
    }
    shm->broken = tnt_error_raise(
        TNT_ERR_TRANSPORT,
        "rank %d: reading local rank %d's buffer (rank %d) with process_vm_readv failed "
        "during %s #%llu: %s; set TNT_SHM_CMA=off to copy through shared memory instead",
        shm->global_ranks[shm->me], peer, shm->global_ranks[peer], what,
        (unsigned long long)shm->num_collectives, strerror(err));
    return shm->broken;
}

int tnt_shm_cma_usable(const tnt_shm_t *shm)
{
    return shm->use_cma;
}

int tnt_shm_read_local(tnt_shm_t *shm, int local_rank, void *local, uint64_t remote,
                       size_t bytes)
{
    /* The kernel copies at most about 2 GiB per call, and stops short at
     * an unmapped page: go on from where it stopped. */
    while (bytes > 0) {
        struct iovec liov = { local, bytes };
        struct iovec riov = { (void *)(uintptr_t)remote, bytes };
        ssize_t got = process_vm_readv(shm->pids[local_rank], &liov, 1, &riov, 1, 0);
        if (got <= 0) {
            return got < 0 ? errno : EIO;
        }
        local = (char *)local + got;
        remote += (uint64_t)got;
        bytes -= (size_t)got;
    }
    return 0;
}

tnt_status_t tnt_shm_cma_read(struct tnt_shm *shm, int peer, void *local, uint64_t remote,
                              size_t bytes, const char *what)
{
    int err = tnt_shm_read_local(shm, peer, local, remote, bytes);
    return err == 0 ? TNT_OK : tnt_shm_cma_error(shm, peer, err, what);
}

tnt_status_t tnt_shm_cma_write(struct tnt_shm *shm, int peer, const void *local, uint64_t remote,
                               size_t bytes, const char *what)
{
    struct iovec liov = { (void *)local, bytes };
    struct iovec riov = { (void *)(uintptr_t)remote, bytes };
    ssize_t got = process_vm_writev(shm->pids[peer], &liov, 1, &riov, 1, 0);
    if (got == (ssize_t)bytes) {
        return TNT_OK;
    }
    return tnt_shm_cma_error(shm, peer, got < 0 ? errno : EIO, what);
}

void tnt_shm_publish(struct tnt_shm *shm, const void *sendbuf, const void *recvbuf)
{
    /* Relaxed: ordered before the peers' reads by the next phase's
     * release store / acquire load of seq. */
    atomic_store_explicit(&shm->ctl[shm->me].sendbuf, (uint64_t)(uintptr_t)sendbuf,
                          memory_order_relaxed);
    atomic_store_explicit(&shm->ctl[shm->me].recvbuf, (uint64_t)(uintptr_t)recvbuf,
                          memory_order_relaxed);
}

uint64_t tnt_shm_peer_buf(const struct tnt_shm *shm, int peer, int recv)
{
    return atomic_load_explicit(recv ? &shm->ctl[peer].recvbuf : &shm->ctl[peer].sendbuf,
                                memory_order_relaxed);
}

/* Every rank reads a word of every peer with process_vm_readv; CMA is used
 * only when all of them could (ptrace rules, seccomp and Yama may forbid it). */
static int tnt_shm_probe_cma(struct tnt_shm *shm)
{
    if (!shm->cma_allowed) {
        return 0;
    }
    for (int j = 0; j < shm->n; j++) {
        if (j == shm->me) {
            continue;
        }
        uint64_t word = 0;
        struct iovec local = { &word, sizeof word };
        struct iovec remote = { (void *)(uintptr_t)atomic_load_explicit(&shm->ctl[j].probe,
                                                                        memory_order_relaxed),
                                sizeof word };
        if (process_vm_readv(shm->pids[j], &local, 1, &remote, 1, 0) != (ssize_t)sizeof word ||
            word != TNT_SHM_MAGIC) {
            return 0;
        }
    }
    return 1;
}

tnt_status_t tnt_shm_create(const tnt_shm_params_t *params, tnt_shm_t **shm_p)
{
    tnt_status_t status;
    int fd = -1;

    if (params == NULL || shm_p == NULL || params->name == NULL || params->name[0] != '/' ||
        params->local_size < 1 || params->local_rank < 0 ||
        params->local_rank >= params->local_size || params->settings == NULL ||
        params->exchange == NULL || params->extra_bytes > ((size_t)1 << 30)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_shm_create: bad parameters (name must start with '/', "
                               "0 <= local_rank < local_size, settings and exchange given)");
    }

    struct tnt_shm *shm = calloc(1, sizeof *shm);
    if (shm == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_shm_create: out of memory");
    }
    shm->me = params->local_rank;
    shm->n = params->local_size;
    shm->timeout_s = params->timeout_s;
    shm->watch = params->watch;
    shm->cma_allowed = params->settings->shm_cma != TNT_SETTINGS_CMA_OFF;
    shm->probe_word = TNT_SHM_MAGIC;
    shm->global_ranks = calloc((size_t)shm->n, sizeof *shm->global_ranks);
    shm->pids = calloc((size_t)shm->n, sizeof *shm->pids);
    shm->srcs = calloc((size_t)shm->n, sizeof *shm->srcs);
    /* 256 KiB blocks read fastest here (fewer system calls), as long as the
     * n - 1 of them stay within about half of a 1 MiB L2. */
    shm->cma_block_bytes = shm->n > 1 ? (512u * 1024 / (size_t)(shm->n - 1)) / 4096 * 4096 : 4096;
    if (shm->cma_block_bytes > TNT_SHM_CMA_BLOCK_MAX) {
        shm->cma_block_bytes = TNT_SHM_CMA_BLOCK_MAX;
    }
    if (shm->cma_block_bytes < TNT_SHM_CMA_BLOCK_MIN) {
        shm->cma_block_bytes = TNT_SHM_CMA_BLOCK_MIN;
    }
    shm->take_lines = tnt_shm_has_prefetch_write();
    /* Spinning only pays when no local rank has to share a core. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    shm->spin_ns = cpus >= shm->n ? TNT_SHM_SPIN_NS : 0;
    shm->stream_min = params->settings->shm_stream_bytes;
    shm->stream_mode = (int)params->settings->shm_stream;
    for (int op = 0; op < TNT_SHM_STREAM_OPS; op++) {
        tnt_stream_auto_init(&shm->stream_auto[op], shm->stream_min);
    }
    tnt_shm_stream_init();
    tnt_shm_addr_t addr;
    memset(&addr, 0, sizeof addr);
    if (shm->global_ranks == NULL || shm->pids == NULL || shm->srcs == NULL ||
        posix_memalign((void **)&shm->cma_tmp, 4096, (size_t)shm->n * shm->cma_block_bytes) != 0 ||
        posix_memalign((void **)&shm->bounce, 64, TNT_SHM_BOUNCE_BYTES) != 0) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_shm_create: out of memory");
        /* The others still wait for the exchange. */
        addr.status = status;
        (void)params->exchange(params->exchange_arg, &addr);
        goto err_free;
    }
    for (int j = 0; j < shm->n; j++) {
        shm->global_ranks[j] = params->global_ranks ? params->global_ranks[j] : j;
        shm->pids[j] = params->pids ? params->pids[j] : 0;
    }

    if (shm->me == 0) {
        /* Staging per rank, both slots together: 4 MiB by default, which
         * keeps the segment small (8 ranks: 32 MiB) while making each
         * pipeline step long enough that the phase synchronisation costs
         * little. The settings bound it (64 KiB to 1 GiB), so the segment
         * size cannot wrap and every slot holds at least a page. */
        shm->slot_bytes = tnt_shm_align(params->settings->shm_staging_bytes / 2, 4096);
        /* With more ranks the n-fold redundant reduction costs more, so
         * the one-phase limit shrinks as they grow; on 2 ranks the
         * one-phase path was faster than the staged one even at 1 MiB
         * (figures: docs/benchmarks.md, "Figures behind the shared-memory
         * thresholds"). */
        size_t small_kb = shm->n <= 2   ? TNT_SHM_SMALL_DEFAULT_KB * 8
                          : shm->n <= 4 ? TNT_SHM_SMALL_DEFAULT_KB * 2
                                        : TNT_SHM_SMALL_DEFAULT_KB / 4;
        shm->small_max = params->settings->shm_small_bytes != TNT_SETTINGS_BY_LAYOUT
                             ? params->settings->shm_small_bytes
                             : small_kb * 1024;
        status = tnt_shm_create_segment(shm, params->name, params->extra_bytes, &addr, &fd);
        /* Sent even when it failed: the others then fail with its reason
         * instead of waiting for a name. */
        tnt_status_t sent = params->exchange(params->exchange_arg, &addr);
        if (status != TNT_OK) {
            goto err_free;
        }
        if (sent != TNT_OK) {
            status = sent;
            shm_unlink(shm->name);
            close(fd);
            goto err_unmap;
        }
    } else {
        status = params->exchange(params->exchange_arg, &addr);
        if (status != TNT_OK) {
            goto err_free;
        }
        if (addr.status == TNT_ERR_NO_MEMORY && addr.segment_bytes > 0) {
            shm->slot_bytes = addr.slot_bytes;
            status = tnt_shm_no_space(shm, addr.segment_bytes, ENOSPC);
            goto err_free;
        }
        if (addr.status != TNT_OK) {
            status = tnt_error_raise(addr.status < 0 ? addr.status : TNT_ERR_TRANSPORT,
                                     "rank %d: local rank 0 (rank %d) could not create the node's "
                                     "shared-memory segment; see its error",
                                     shm->global_ranks[shm->me], shm->global_ranks[0]);
            goto err_free;
        }
        status = tnt_shm_attach_segment(shm, &addr, params->extra_bytes, &fd);
        if (status != TNT_OK) {
            goto err_free;
        }
    }
    close(fd); /* the mapping keeps the memory */

    size_t slots_off = 0, extra_off = 0;
    (void)tnt_shm_layout(shm->n, shm->slot_bytes, params->extra_bytes, &slots_off, &extra_off);
    shm->ctl = (struct tnt_shm_ctl *)((char *)shm->hdr + sizeof(struct tnt_shm_header));
    shm->slots = (char *)shm->hdr + slots_off;
    shm->ring = shm->slots + (size_t)shm->n * 2 * shm->slot_bytes;
    shm->extra = (char *)shm->hdr + extra_off;

    /* Hold the liveness mutex before anyone can wait for this rank. Alone
     * on the node, nobody ever waits for it: no thread (a one-rank
     * communicator costs next to nothing). */
    if (shm->n > 1 && (status = tnt_shm_alive_start(shm)) != TNT_OK) {
        goto err_unmap;
    }
    struct tnt_shm_ctl *mine = &shm->ctl[shm->me];
    atomic_store_explicit(&mine->pid, (int32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&mine->probe, (uint64_t)(uintptr_t)&shm->probe_word,
                          memory_order_relaxed);
    if (shm->me != 0) {
        /* acq_rel: the stores above happen-before rank 0's acquire of the
         * count, and the count itself is a read-modify-write chain. */
        atomic_fetch_add_explicit(&shm->hdr->attached, 1, memory_order_acq_rel);
    } else if ((status = tnt_shm_unlink_when_attached(shm)) != TNT_OK) {
        goto err_unmap;
    }

    /* Phase 1: everyone attached and published pid and probe address. */
    status = tnt_shm_phase(shm, "shared-memory setup");
    if (status != TNT_OK) {
        goto err_unmap;
    }
    if (params->pids == NULL) {
        for (int j = 0; j < shm->n; j++) {
            shm->pids[j] = (pid_t)atomic_load_explicit(&shm->ctl[j].pid, memory_order_relaxed);
        }
    }

    /* Phase 2: everyone tested CMA; use it only if all can. */
    atomic_store_explicit(&mine->cma_ok, tnt_shm_probe_cma(shm), memory_order_relaxed);
    status = tnt_shm_phase(shm, "shared-memory setup");
    if (status != TNT_OK) {
        goto err_unmap;
    }
    shm->use_cma = shm->n > 1;
    for (int j = 0; j < shm->n; j++) {
        shm->use_cma &= atomic_load_explicit(&shm->ctl[j].cma_ok, memory_order_relaxed) != 0;
    }
    shm->cma_all = shm->use_cma && params->settings->shm_cma == TNT_SETTINGS_CMA_ON;
    /* Phase 3: nobody reads probe words any more (they live in this struct). */
    status = tnt_shm_phase(shm, "shared-memory setup");
    if (status != TNT_OK) {
        goto err_unmap;
    }

    tnt_log_debug("shm %s: %d local ranks, %zu KiB staging per rank, CMA %s, streaming %s from "
                  "%zu KiB (%s)",
                  shm->name, shm->n, 2 * shm->slot_bytes / 1024,
                  shm->cma_all ? "on" : shm->use_cma ? "auto" : "off",
                  shm->stream_mode == TNT_SETTINGS_STREAM_AUTO ? "auto"
                  : shm->stream_mode == TNT_SETTINGS_STREAM_ON ? "on"
                                                               : "off",
                  shm->stream_min / 1024, tnt_shm_stream_isa());
    *shm_p = shm;
    return TNT_OK;

err_unmap:
    tnt_shm_alive_stop(shm);
    munmap(shm->hdr, shm->segment_bytes);
err_free:
    free(shm->bounce);
    free(shm->cma_tmp);
    free(shm->srcs);
    free(shm->pids);
    free(shm->global_ranks);
    free(shm);
    return status;
}

void *tnt_shm_extra(tnt_shm_t *shm)
{
    return shm->extra;
}

void tnt_shm_destroy(tnt_shm_t *shm)
{
    if (shm == NULL) {
        return;
    }
    tnt_shm_alive_stop(shm);
    munmap(shm->hdr, shm->segment_bytes);
    free(shm->bounce);
    free(shm->cma_tmp);
    free(shm->srcs);
    free(shm->pids);
    free(shm->global_ranks);
    free(shm);
}

/* ---- data-movement collectives ----------------------------------------- */

tnt_status_t tnt_shm_terms_only(tnt_shm_t *shm, const char *what, uint64_t count, int bad,
                                uint64_t terms)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK || shm->n == 1) {
        return status;
    }
    shm->terms_next = terms;
    tnt_shm_expect(shm, TNT_SHM_KIND_TERMS, count, 0, bad ? 1 : 0);
    return tnt_shm_phase(shm, what);
}

tnt_status_t tnt_shm_barrier(tnt_shm_t *shm)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK || shm->n == 1) {
        return status;
    }
    tnt_shm_expect(shm, TNT_SHM_KIND_BARRIER, 0, 0, 0);
    return tnt_shm_phase(shm, "barrier");
}

/* Single copy: every non-root reads the root's buffer with CMA. Two phases:
 * the address is published, then the root waits until all have read. */
static tnt_status_t tnt_shm_broadcast_cma(struct tnt_shm *shm, void *buf, size_t bytes, int root)
{
    if (shm->me == root) {
        tnt_shm_publish(shm, buf, NULL);
    }
    tnt_status_t status = tnt_shm_phase(shm, "broadcast");
    if (status == TNT_OK && shm->me != root) {
        status = tnt_shm_cma_read(shm, root, buf, tnt_shm_peer_buf(shm, root, 0), bytes,
                                  "broadcast");
    }
    if (status != TNT_OK) {
        return status;
    }
    return tnt_shm_phase(shm, "broadcast");
}

/* Above this the broadcast reads the root's buffer directly: below it the
 * two extra phases cost more than the saved copy (docs/benchmarks.md,
 * "Figures behind the shared-memory thresholds"). */
#define TNT_SHM_BCAST_CMA_MIN (256 * 1024)

tnt_status_t tnt_shm_broadcast(tnt_shm_t *shm, void *buf, size_t bytes, int root)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK) {
        return status;
    }
    if (root < 0 || root >= shm->n || (buf == NULL && bytes > 0)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "rank %d: broadcast: bad root local rank %d or NULL buffer",
                               shm->global_ranks[shm->me], root);
    }
    if (shm->n == 1 || bytes == 0) {
        return TNT_OK;
    }
    tnt_shm_expect(shm, TNT_SHM_KIND_BROADCAST, bytes, 0, (unsigned)root);
    if (shm->cma_all && bytes >= TNT_SHM_BCAST_CMA_MIN) {
        return tnt_shm_broadcast_cma(shm, buf, bytes, root);
    }

    /* Pipelined through the root's two slots, one phase per chunk. */
    for (size_t done = 0; done < bytes; done += shm->slot_bytes) {
        size_t len = bytes - done < shm->slot_bytes ? bytes - done : shm->slot_bytes;
        if (shm->me == root) {
            memcpy(tnt_shm_slot(shm, root, shm->phase + 1), (char *)buf + done, len);
        }
        status = tnt_shm_phase(shm, "broadcast");
        if (status != TNT_OK) {
            return status;
        }
        if (shm->me != root) {
            memcpy((char *)buf + done, tnt_shm_slot(shm, root, shm->phase), len);
        }
    }
    return TNT_OK;
}

tnt_status_t tnt_shm_allgather(tnt_shm_t *shm, const void *sendbuf, void *recvbuf,
                               size_t bytes_per_rank)
{
    tnt_status_t status = tnt_shm_begin(shm);
    if (status != TNT_OK) {
        return status;
    }
    if (bytes_per_rank > 0 && (sendbuf == NULL || recvbuf == NULL)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "rank %d: allgather: NULL buffer",
                               shm->global_ranks[shm->me]);
    }
    char *own = (char *)recvbuf + (size_t)shm->me * bytes_per_rank;
    if (bytes_per_rank > 0 && own != sendbuf) {
        memmove(own, sendbuf, bytes_per_rank);
    }
    if (shm->n == 1 || bytes_per_rank == 0) {
        return TNT_OK;
    }
    tnt_shm_expect(shm, TNT_SHM_KIND_ALLGATHER, bytes_per_rank, 0, 0);
    if (tnt_shm_block_cma(shm, bytes_per_rank, 1)) {
        /* Single copy: each rank reads every peer's block out of the peer's
         * sendbuf, which nobody writes during the call (in place, it is the
         * peer's own block of its recvbuf); the second phase keeps those
         * blocks until all have read. */
        tnt_shm_publish(shm, sendbuf, NULL);
        status = tnt_shm_phase(shm, "allgather");
        for (int j = 0; status == TNT_OK && j < shm->n; j++) {
            if (j != shm->me) {
                status = tnt_shm_cma_read(shm, j, (char *)recvbuf + (size_t)j * bytes_per_rank,
                                          tnt_shm_peer_buf(shm, j, 0), bytes_per_rank,
                                          "allgather");
            }
        }
        return status == TNT_OK ? tnt_shm_phase(shm, "allgather") : status;
    }

    /* Each rank publishes a chunk of its block per phase; everyone copies
     * all blocks' chunks out. (The own block is already in place, which
     * also makes sendbuf inside recvbuf work.) */
    for (size_t done = 0; done < bytes_per_rank; done += shm->slot_bytes) {
        size_t len =
            bytes_per_rank - done < shm->slot_bytes ? bytes_per_rank - done : shm->slot_bytes;
        memcpy(tnt_shm_slot(shm, shm->me, shm->phase + 1), own + done, len);
        status = tnt_shm_phase(shm, "allgather");
        if (status != TNT_OK) {
            return status;
        }
        for (int j = 0; j < shm->n; j++) {
            if (j != shm->me) {
                memcpy((char *)recvbuf + (size_t)j * bytes_per_rank + done,
                       tnt_shm_slot(shm, j, shm->phase), len);
            }
        }
    }
    return TNT_OK;
}
