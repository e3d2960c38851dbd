/*
 * The progress thread: one per communicator, started on the first post. It
 * executes requests strictly in posting order (that order is what keeps
 * collectives matched across ranks) and sleeps when the queue is empty, so
 * an idle libtnt costs no CPU.
 *
 * Hand-off. A condition variable costs a mutex round trip and a wake-up on
 * each side on every hand-off (the figure: docs/tuning.md, "Hand-off to the
 * progress thread"). Instead both directions use a futex word and a
 * "sleeping" count:
 *   post:     enqueue, bump work_seq, wake the thread only if it sleeps;
 *   thread:   after a request, poll the queue briefly (only when the rank's
 *             affinity leaves a core for it; longer while a fused step is in
 *             flight), then say it sleeps and futex-wait on work_seq;
 *   complete: store the request's status, bump done_seq, wake only if a
 *             waiter sleeps;
 *   wait:     poll briefly (again only with a core to spare), then futex-wait
 *             on done_seq in bounded slices.
 *
 * Caller runs. A wait (or a drain) whose request the thread has not taken
 * yet does not hand it off at all: if no collective runs on this rank (the
 * in-flight word is free), the waiting thread takes the queued requests
 * itself, oldest first, up to and including its own, and runs them inline.
 * A post followed by its wait then costs about what the blocking call costs.
 * Order and exclusion: a request leaves the queue only under progress_lock
 * and only by a thread that took the in-flight word in the same critical
 * section, and keeps the word until the request finished; so requests run
 * one at a time and in posting order, whichever thread runs them. A thread
 * that finds the word taken leaves the queue alone: the progress thread
 * sleeps until the holder releases the word (release kicks it when requests
 * are left), a waiter goes back to waiting.
 *
 * Deferred posts (comm->defer, TNT_OVERLAP=off, or auto with one CPU and
 * one node): a post does not wake the thread at all. The request waits in
 * the queue until its waiter (or a drain) runs it, or tnt_test pokes the
 * thread, or a blocking call of another thread leaves requests behind.
 * Why no wake-up is lost: the sleeper reads the word's value before its last
 * check and passes it to FUTEX_WAIT, which returns at once if it changed;
 * the waker bumps the word (seq_cst) before it reads the sleeping count
 * (seq_cst), and the sleeper raises the count (seq_cst) before its last
 * check, so either the waker sees the sleeper or the sleeper sees the bump.
 *
 * Blocking only. The in-flight word costs a blocking call two full barriers
 * (its compare-and-swap, its seq_cst release), each waiting for the stores
 * before it, such as the shared-memory lines the peer has just pulled away:
 * without them a 2-rank barrier took 0.19 us instead of 0.22, and a gather's
 * sender handed off in 0.05 us instead of 0.12 (docs/benchmarks.md,
 * "Blocking calls without barriers"). Until a communicator's first post
 * nothing but the calling thread can run a collective on it, so a blocking
 * call marks itself in blocking_busy with plain stores. The first post
 * (blocking_only_end) clears blocking_only and then issues
 * membarrier(PRIVATE_EXPEDITED), a full barrier on every thread of the
 * process, before any request can be taken: a blocking call whose mark
 * preceded that barrier is seen by every taker, which then waits for it
 * (in_flight_try checks the mark); one that marks itself later sees
 * blocking_only clear and takes the word. This is the asymmetric fence of
 * userspace RCU: the rare side (one post per communicator) pays a system
 * call so that the common side pays nothing. Without membarrier (an old
 * kernel, a seccomp filter) blocking_only starts clear.
 *
 * Every wait is bounded: it fails when the thread has finished nothing for
 * longer than the collectives' own timeout would allow.
 */
#include "comm/comm.h"

#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Polling before sleeping, only when spin_ok. A small collective completes
 * within a few microseconds; during a fused step the next bucket usually
 * comes within a layer's backward time. */
#define WAIT_SPIN_NS        50000ull  /* waiter */
#define THREAD_SPIN_NS      20000ull  /* progress thread, idle */
#define THREAD_STEP_SPIN_NS 200000ull /* progress thread, fused step in flight */
/* Without a spare core: a few yields hand the core to the other side. */
#define WAIT_YIELDS 4
/* A sleeping waiter re-checks its deadline at least this often. */
#define WAIT_SLICE_NS 100000000ull

static int affinity_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return 1;
    }
    return CPU_COUNT(&set);
}

int tnt_overlap_auto(int num_nodes, int local_size, int threads_per_rank, int node_cpus)
{
    if (num_nodes > 1) {
        return 1;
    }
    return (long)local_size * ((long)threads_per_rank + 1) <= (long)node_cpus;
}

/* A rank's compute threads: OMP_NUM_THREADS (the launcher and the plugin
 * set it from the rank's CPUs), else every CPU it may run on (torch's own
 * default). */
static int threads_per_rank(void)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp != NULL) {
        char *end;
        long n = strtol(omp, &end, 10); /* "4,2" (nested levels): the outer one */
        if (end != omp && n >= 1 && n <= 1 << 20) {
            return (int)n;
        }
    }
    return affinity_cpus();
}

/* The CPUs the node's ranks share: this rank's affinity times the local
 * ranks (disjoint pinned slices), at most the CPUs online. Unpinned ranks
 * each see every CPU, which the bound turns into the machine's count. */
static int node_cpus(int local_size)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    long cpus = (long)affinity_cpus() * (local_size > 0 ? local_size : 1);
    return (int)(online > 0 && online < cpus ? online : cpus);
}

/* ---- membarrier ----------------------------------------------------------- */

static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static int membarrier_ready; /* registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED */

static long membarrier_call(int cmd)
{
#ifdef __NR_membarrier
    return syscall(__NR_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    errno = ENOSYS;
    return -1;
#endif
}

static void membarrier_register(void)
{
    long cmds = membarrier_call(MEMBARRIER_CMD_QUERY);
    membarrier_ready = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                       membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    tnt_log_debug("membarrier: %s", membarrier_ready
                                        ? "registered; blocking calls skip the in-flight word "
                                          "until a communicator's first post"
                                        : "not available; blocking calls take the in-flight word");
}

tnt_status_t tnt_progress_init(tnt_comm_t *comm)
{
    int rc = pthread_mutex_init(&comm->progress_lock, NULL);
    if (rc != 0) {
        return tnt_error_raise(TNT_ERR_SYSTEM, "progress queue: pthread init failed: %s",
                               strerror(rc));
    }
    comm->queue_head = NULL;
    comm->queue_tail = NULL;
    comm->progress_running = 0;
    comm->progress_stop = 0;
    /* The training thread and the progress thread each need a core to
     * spin on; with one, a spinning side only delays the side it waits for. */
    comm->spin_ok = affinity_cpus() >= 2;
    atomic_init(&comm->posted, 0);
    atomic_init(&comm->completed, 0);
    atomic_init(&comm->work_seq, 0);
    atomic_init(&comm->thread_sleeping, 0);
    atomic_init(&comm->done_seq, 0);
    atomic_init(&comm->done_sleepers, 0);
    atomic_init(&comm->step_hint, 0);
    atomic_init(&comm->in_flight, 0);
    pthread_once(&membarrier_once, membarrier_register);
    atomic_init(&comm->blocking_only, membarrier_ready ? 1u : 0u);
    atomic_init(&comm->blocking_busy, 0);
    return TNT_OK;
}

/* ---- in-flight word ---------------------------------------------------- */

static int in_flight_try(tnt_comm_t *comm)
{
    uint32_t expected = 0;
    /* Acquire: the previous holder's collective (its transport state)
     * happens-before this one. Seq_cst (also on failure) for the progress
     * thread's sleep check, see kick_if_left. */
    if (!atomic_compare_exchange_strong_explicit(&comm->in_flight, &expected, 1,
                                                 memory_order_seq_cst, memory_order_seq_cst)) {
        return 0;
    }
    /* A blocking call that marked itself before the first post's barrier
     * may still run (acquire: pairs with its release of the mark). */
    if (atomic_load_explicit(&comm->blocking_busy, memory_order_seq_cst) == 0) {
        return 1;
    }
    atomic_store_explicit(&comm->in_flight, 0, memory_order_seq_cst);
    return 0;
}

/* Called with progress_lock held by the first post, before its request can
 * be taken (see "Blocking only" at the top). Restores the bias if the
 * barrier fails, so that the post fails rather than two collectives run. */
static tnt_status_t blocking_only_end(tnt_comm_t *comm)
{
    if (!atomic_load_explicit(&comm->blocking_only, memory_order_relaxed)) {
        return TNT_OK;
    }
    atomic_store_explicit(&comm->blocking_only, 0, memory_order_seq_cst);
    if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        int err = errno;
        atomic_store_explicit(&comm->blocking_only, 1, memory_order_seq_cst);
        return tnt_error_raise(TNT_ERR_SYSTEM,
                               "membarrier(PRIVATE_EXPEDITED) failed: %s; the first posted "
                               "operation of %s cannot start",
                               strerror(err), comm->name);
    }
    return TNT_OK;
}

static void progress_kick(tnt_comm_t *comm);

/* Gives the word back (seq_cst: see kick_if_left). */
static void in_flight_release(tnt_comm_t *comm)
{
    atomic_store_explicit(&comm->in_flight, 0, memory_order_seq_cst);
}

/* Called after giving the word back: if requests are left, the progress
 * thread may have found the word taken and gone to sleep, so wake it. Why it
 * cannot miss this: its failed try (seq_cst) precedes the release store, the
 * post it saw precedes its try, so the load of posted below sees that post;
 * the kick bumps work_seq after the store, which the thread's sleep check
 * reads. */
static void kick_if_left(tnt_comm_t *comm)
{
    uint64_t posted = atomic_load_explicit(&comm->posted, memory_order_seq_cst);
    uint64_t completed = atomic_load_explicit(&comm->completed, memory_order_seq_cst);
    if (posted > completed) {
        progress_kick(comm);
    }
}

/* The thread may legitimately take a while per request (each collective is
 * itself bounded by TNT_TIMEOUT and reports which peer is missing). A waiter
 * reports a stuck thread only if nothing at all finished for this long, so the
 * collective's own, more precise error always comes first. */
static uint64_t stall_window_ns(const tnt_comm_t *comm)
{
    double t = comm->timeout_s;
    if (t <= 0) {
        return UINT64_MAX;
    }
    double w = t * 2 > t + 10 ? t * 2 : t + 10;
    return (uint64_t)(w * 1e9);
}

/* Contended only when a request was posted from another thread while a
 * blocking collective runs (or the other way round): the holder's
 * collective is bounded by TNT_TIMEOUT, so this wait is too. */
static tnt_status_t in_flight_acquire(tnt_comm_t *comm, const char *who)
{
    if (in_flight_try(comm)) {
        return TNT_OK;
    }
    uint64_t window = stall_window_ns(comm);
    tnt_backoff_t backoff;
    tnt_backoff_init(&backoff, window == UINT64_MAX ? 0 : (double)window / 1e9);
    while (!in_flight_try(comm)) {
        if (tnt_backoff_wait(&backoff) != 0) {
            return tnt_error_raise(TNT_ERR_TIMEOUT,
                                   "%s: another collective of this rank has been running for "
                                   "%.0f s (TNT_TIMEOUT is %.0f s); it is stuck",
                                   who, (double)window / 1e9, comm->timeout_s);
        }
    }
    return TNT_OK;
}

/* ---- running a request -------------------------------------------------- */

/* Called with progress_lock held. Takes the oldest request together with the
 * in-flight word, or takes nothing (empty queue, or a collective runs). */
static struct tnt_request *queue_take(tnt_comm_t *comm)
{
    struct tnt_request *req = comm->queue_head;
    if (req == NULL || !in_flight_try(comm)) {
        return NULL;
    }
    comm->queue_head = req->next;
    if (comm->queue_head == NULL) {
        comm->queue_tail = NULL;
    }
    req->queued = 0;
    return req;
}

/* Runs a request taken by queue_take (on the progress thread, or inline on a
 * waiting thread), gives the in-flight word back and completes the request.
 * Its failure message goes into req->error, whichever thread ran it. */
static void request_run(tnt_comm_t *comm, struct tnt_request *req)
{
    tnt_error_clear();
    comm->tl_posted_ns = req->posted_ns;
    tnt_status_t status = req->execute(comm, req);
    comm->tl_posted_ns = 0;
    if (status < 0) {
        snprintf(req->error, sizeof(req->error), "%s",
                 tnt_error_message()[0] != '\0' ? tnt_error_message() : tnt_status_string(status));
        req->error_printed = tnt_error_printed();
    }
    in_flight_release(comm);
    /* Release: everything execute() wrote (results, req->error, coll_seq,
     * transport state) happens-before a drainer's acquire load of completed
     * and a waiter's acquire load of status. The request may be freed by
     * its owner as soon as status is stored, so it is not touched after. */
    atomic_fetch_add_explicit(&comm->completed, 1, memory_order_release);
    atomic_store_explicit(&req->status, status, memory_order_release);
    atomic_fetch_add_explicit(&comm->done_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&comm->done_sleepers, memory_order_seq_cst) > 0) {
        tnt_futex_wake_all(&comm->done_seq);
    }
}

/* Caller runs: runs queued requests on the calling thread, oldest first,
 * while no other collective runs, until target has left the queue (target
 * NULL: until the queue is empty). Returns as soon as the in-flight word is
 * taken by someone else; the caller then waits as before. The caller's own
 * last error survives the requests it runs for others. */
static void caller_run(tnt_comm_t *comm, struct tnt_request *target)
{
    char saved[TNT_REQUEST_ERROR_MAX];
    int have_saved = 0, saved_printed = 0;

    for (;;) {
        pthread_mutex_lock(&comm->progress_lock);
        struct tnt_request *req = NULL;
        if (target == NULL || target->queued) {
            req = queue_take(comm);
        }
        pthread_mutex_unlock(&comm->progress_lock);
        if (req == NULL) {
            break;
        }
        if (!have_saved) {
            snprintf(saved, sizeof(saved), "%s", tnt_error_message());
            saved_printed = tnt_error_printed();
            have_saved = 1;
        }
        request_run(comm, req);
        if (req == target) { /* compared, never dereferenced: may be freed */
            break;
        }
    }
    if (have_saved) {
        tnt_error_restore(saved, saved_printed);
        /* Requests posted after target, or ones this thread could not take:
         * the thread runs them, unless posts leave them to their waiters. */
        if (!comm->defer) {
            kick_if_left(comm);
        }
    }
}

/* ---- the thread ---------------------------------------------------------- */

/* Takes the next request (with the in-flight word), or returns NULL when
 * stopping with an empty queue. Polls, then sleeps, while there is nothing
 * it may run: an empty queue, or a collective running on another thread
 * (whose release kicks it). */
static struct tnt_request *progress_next(tnt_comm_t *comm)
{
    uint64_t spin_until = 0;
    for (;;) {
        uint32_t seq = atomic_load_explicit(&comm->work_seq, memory_order_seq_cst);
        pthread_mutex_lock(&comm->progress_lock);
        struct tnt_request *req = queue_take(comm);
        int blocked = req == NULL && comm->queue_head != NULL;
        int stop = comm->progress_stop && comm->queue_head == NULL;
        pthread_mutex_unlock(&comm->progress_lock);
        if (req != NULL || stop) {
            return req;
        }
        if (comm->spin_ok) {
            uint64_t now = tnt_time_ns();
            if (spin_until == 0) {
                spin_until = now + (atomic_load_explicit(&comm->step_hint, memory_order_relaxed)
                                        ? THREAD_STEP_SPIN_NS
                                        : THREAD_SPIN_NS);
            }
            if (now < spin_until) {
                for (int i = 0; i < 64; i++) {
                    if (atomic_load_explicit(&comm->work_seq, memory_order_relaxed) != seq ||
                        (blocked &&
                         atomic_load_explicit(&comm->in_flight, memory_order_relaxed) == 0 &&
                         atomic_load_explicit(&comm->blocking_busy, memory_order_relaxed) == 0)) {
                        break;
                    }
                    tnt_cpu_relax();
                }
                continue;
            }
        }
        atomic_store_explicit(&comm->thread_sleeping, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&comm->work_seq, memory_order_seq_cst) == seq) {
            /* No timeout needed for correctness (posts, releases of the
             * in-flight word with requests left, and stop wake it); one
             * second bounds the damage of any missed wake-up. */
            tnt_futex_wait(&comm->work_seq, seq, 1000000000ull);
        }
        atomic_store_explicit(&comm->thread_sleeping, 0, memory_order_relaxed);
        spin_until = 0;
    }
}

static void *progress_main(void *arg)
{
    tnt_comm_t *comm = arg;
    struct tnt_request *req;
    char lane[TNT_COMM_NAME_MAX + 16];

    snprintf(lane, sizeof(lane), "progress %s", comm->name);
    tnt_tl_name_thread(lane);

    while ((req = progress_next(comm)) != NULL) {
        request_run(comm, req);
    }
    return NULL;
}

/* Called with progress_lock held. The thread starts with every signal
 * blocked so that signals (Ctrl-C, SIGTERM) go to the application's threads. */
static tnt_status_t progress_start(tnt_comm_t *comm)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&comm->progress_thread, NULL, progress_main, comm);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        return tnt_error_raise(TNT_ERR_SYSTEM,
                               "could not start the progress thread: %s; "
                               "check the process/thread limits (ulimit -u)",
                               strerror(rc));
    }
    comm->progress_running = 1;
    /* TNT_OVERLAP=auto: on one node without a core per thread, the
     * progress thread could only take turns with the callers' threads, and
     * the ranks' threads would meet in a collective only by chance (measured:
     * docs/tuning.md, "Overlap decided from the node"): posts are left to
     * their waiters. Across nodes the network moves data while the caller
     * computes, so the thread runs. */
    tnt_settings_overlap_t overlap =
        comm->settings != NULL ? comm->settings->overlap : TNT_SETTINGS_OVERLAP_AUTO;
    if (overlap == TNT_SETTINGS_OVERLAP_AUTO) {
        int threads = threads_per_rank();
        int cpus = node_cpus(comm->local_size);
        comm->defer = !tnt_overlap_auto(comm->num_nodes, comm->local_size, threads, cpus);
        tnt_log_info("TNT_OVERLAP=auto: %s (%d node(s); on this one %d rank(s) x (%d compute + "
                     "1 progress) threads, %d CPUs)",
                     comm->defer ? "off" : "on", comm->num_nodes, comm->local_size, threads, cpus);
    } else {
        comm->defer = overlap == TNT_SETTINGS_OVERLAP_OFF;
    }
    return TNT_OK;
}

static void progress_kick(tnt_comm_t *comm)
{
    atomic_fetch_add_explicit(&comm->work_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&comm->thread_sleeping, memory_order_seq_cst)) {
        tnt_futex_wake_all(&comm->work_seq);
    }
}

tnt_status_t tnt_progress_post(tnt_comm_t *comm, struct tnt_request *req)
{
    tnt_status_t status = TNT_OK;

    req->comm = comm;
    req->next = NULL;
    req->posted_ns = tnt_tl_enabled() ? tnt_time_ns() : 0;
    /* Relaxed is enough: the queue hand-over below goes through the mutex. */
    atomic_store_explicit(&req->status, TNT_IN_PROGRESS, memory_order_relaxed);

    pthread_mutex_lock(&comm->progress_lock);
    if (comm->progress_stop) {
        status = tnt_error_raise(TNT_ERR_NOT_INITIALIZED,
                                 "operation posted while the communicator is being finalized");
        goto out_unlock;
    }
    status = blocking_only_end(comm);
    if (status != TNT_OK) {
        goto out_unlock;
    }
    if (comm->size == 1 && comm->queue_head == NULL && in_flight_try(comm)) {
        /* Alone, an operation is a local copy that waits for nobody: run it
         * now, in order (nothing is queued or running), and a one-rank
         * communicator never needs a progress thread. */
        atomic_fetch_add_explicit(&comm->posted, 1, memory_order_seq_cst);
        pthread_mutex_unlock(&comm->progress_lock);
        request_run(comm, req);
        return TNT_OK;
    }
    if (!comm->progress_running) {
        status = progress_start(comm);
        if (status != TNT_OK) {
            goto out_unlock;
        }
    }
    if (comm->queue_tail != NULL) {
        comm->queue_tail->next = req;
    } else {
        comm->queue_head = req;
    }
    comm->queue_tail = req;
    req->queued = 1;
    /* Seq_cst for kick_if_left's look at it. */
    atomic_fetch_add_explicit(&comm->posted, 1, memory_order_seq_cst);
out_unlock:
    pthread_mutex_unlock(&comm->progress_lock);
    if (status == TNT_OK && !comm->defer) {
        progress_kick(comm);
    }
    return status;
}

void tnt_progress_poke(tnt_comm_t *comm)
{
    if (comm->defer) {
        progress_kick(comm);
    }
}

void tnt_progress_hint(tnt_comm_t *comm, int on)
{
    atomic_store_explicit(&comm->step_hint, on ? 1u : 0u, memory_order_relaxed);
}

/* ---- waiting --------------------------------------------------------- */

/* What a wait is waiting for: one request, or a completion count. */
struct wait_target {
    struct tnt_request *req;
    uint64_t completed;
};

static int target_reached(tnt_comm_t *comm, const struct wait_target *t)
{
    if (t->req != NULL) {
        return atomic_load_explicit(&t->req->status, memory_order_acquire) != TNT_IN_PROGRESS;
    }
    return atomic_load_explicit(&comm->completed, memory_order_acquire) >= t->completed;
}

static tnt_status_t wait_for(tnt_comm_t *comm, const struct wait_target *t, const char *what)
{
    if (target_reached(comm, t)) {
        return TNT_OK;
    }
    caller_run(comm, t->req);
    if (target_reached(comm, t)) {
        return TNT_OK;
    }
    if (comm->spin_ok) {
        uint64_t until = tnt_time_ns() + WAIT_SPIN_NS;
        do {
            for (int i = 0; i < 64; i++) {
                if (target_reached(comm, t)) {
                    return TNT_OK;
                }
                tnt_cpu_relax();
            }
        } while (tnt_time_ns() < until);
    } else {
        for (int i = 0; i < WAIT_YIELDS; i++) {
            sched_yield();
            if (target_reached(comm, t)) {
                return TNT_OK;
            }
        }
    }

    uint64_t window = stall_window_ns(comm);
    uint64_t last_completed = atomic_load_explicit(&comm->completed, memory_order_relaxed);
    uint64_t stall_start = tnt_time_ns();
    tnt_status_t status = TNT_OK;

    atomic_fetch_add_explicit(&comm->done_sleepers, 1, memory_order_seq_cst);
    for (;;) {
        /* What the thread has not taken yet, this thread may run once the
         * collective that kept it from doing so has finished. */
        caller_run(comm, t->req);
        /* Read before the check, so a completion after it changes the word
         * and FUTEX_WAIT returns at once (see the top of the file). */
        uint32_t seq = atomic_load_explicit(&comm->done_seq, memory_order_seq_cst);
        if (target_reached(comm, t)) {
            break;
        }
        uint64_t now = tnt_time_ns();
        uint64_t c = atomic_load_explicit(&comm->completed, memory_order_relaxed);
        if (c != last_completed) {
            last_completed = c;
            stall_start = now;
        }
        uint64_t slice = WAIT_SLICE_NS;
        if (window != UINT64_MAX) {
            if (now - stall_start >= window) {
                status = tnt_error_raise(TNT_ERR_TIMEOUT,
                                         "%s: no queued operation finished for %.0f s "
                                         "(TNT_TIMEOUT is %.0f s); an operation is stuck",
                                         what, (double)window / 1e9, comm->timeout_s);
                break;
            }
            if (stall_start + window - now < slice) {
                slice = stall_start + window - now;
            }
        }
        tnt_futex_wait(&comm->done_seq, seq, slice);
    }
    atomic_fetch_sub_explicit(&comm->done_sleepers, 1, memory_order_relaxed);
    return status;
}

tnt_status_t tnt_progress_wait(tnt_comm_t *comm, struct tnt_request *req)
{
    struct wait_target t = { req, 0 };
    tnt_status_t status = wait_for(comm, &t, "waiting for a posted operation");
    if (status != TNT_OK) {
        return status;
    }
    /* Acquire: pairs with the progress thread's release store of status,
     * so req->error is complete when status says the request failed. */
    status = atomic_load_explicit(&req->status, memory_order_acquire);
    if (status < 0) {
        tnt_error_restore(req->error, req->error_printed);
    }
    return status;
}

tnt_status_t tnt_progress_drain(tnt_comm_t *comm)
{
    struct wait_target t = { NULL, atomic_load_explicit(&comm->posted, memory_order_relaxed) };
    if (target_reached(comm, &t)) {
        return TNT_OK; /* the common case: nothing posted */
    }
    return wait_for(comm, &t, "waiting for earlier nonblocking operations");
}

tnt_status_t tnt_progress_enter(tnt_comm_t *comm)
{
    tnt_status_t status = tnt_progress_drain(comm);
    if (status != TNT_OK) {
        return status;
    }
    if (atomic_load_explicit(&comm->blocking_only, memory_order_relaxed)) {
        atomic_store_explicit(&comm->blocking_busy, 1, memory_order_relaxed);
        /* Only the compiler is fenced here: the first post's membarrier
         * orders the mark before the load on the hardware. */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&comm->blocking_only, memory_order_relaxed)) {
            return TNT_OK;
        }
        atomic_store_explicit(&comm->blocking_busy, 0, memory_order_release);
    }
    return in_flight_acquire(comm, "blocking collective");
}

void tnt_progress_leave(tnt_comm_t *comm)
{
    /* Only the calling thread writes the mark: 1 here means enter set it. */
    if (atomic_load_explicit(&comm->blocking_busy, memory_order_relaxed)) {
        atomic_store_explicit(&comm->blocking_busy, 0, memory_order_release);
        /* Still set: no post has passed its barrier, so no request exists
         * to wait for this call. (Read as set after the post's barrier
         * began, the clear above was before that barrier, and the post's
         * takers see it.) */
        if (atomic_load_explicit(&comm->blocking_only, memory_order_relaxed)) {
            return;
        }
        /* The first post came while this call ran, and its request may
         * have found the mark: wake the thread as a release of the word
         * would. */
        atomic_thread_fence(memory_order_seq_cst);
        kick_if_left(comm);
        return;
    }
    in_flight_release(comm);
    /* Also with deferred posts: a request posted by another thread while
     * this blocking call ran may have a waiter that found the word taken. */
    kick_if_left(comm);
}

tnt_status_t tnt_progress_finalize(tnt_comm_t *comm)
{
    tnt_status_t status = tnt_progress_drain(comm);
    if (status != TNT_OK) {
        /* The thread is stuck inside an operation: joining would hang, and
         * the communicator must outlive it. The caller leaks it. */
        return status;
    }
    pthread_mutex_lock(&comm->progress_lock);
    comm->progress_stop = 1;
    int running = comm->progress_running;
    pthread_mutex_unlock(&comm->progress_lock);
    progress_kick(comm);
    if (running) {
        pthread_join(comm->progress_thread, NULL);
        comm->progress_running = 0;
    }
    pthread_mutex_destroy(&comm->progress_lock);
    return TNT_OK;
}
