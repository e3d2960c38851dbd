/*
 * The progress thread: one per communicator, started on the first post. It
 * executes requests strictly in posting order (that order is what keeps
 * collectives matched across ranks) and sleeps on progress_cond when the
 * queue is empty, so an idle libtnt costs no CPU.
 *
 * Waiters spin and yield briefly (most small collectives finish within
 * microseconds), then block on done_cond, which the thread signals after each
 * request. Every wait is bounded: it fails when the thread has finished
 * nothing for longer than the collectives' own timeout would allow.
 */
#include "comm/comm.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Brief spin/yield phase of a waiter before it blocks (see util/wait.c). */
#define WAIT_SPIN_ITERATIONS 64
/* A blocked waiter re-checks its deadline at least this often. */
#define WAIT_SLICE_NS 100000000ull

tnt_status_t tnt_progress_init(tnt_comm_t *comm)
{
    pthread_condattr_t attr;
    int rc;

    rc = pthread_mutex_init(&comm->progress_lock, NULL);
    if (rc != 0) {
        goto err;
    }
    rc = pthread_cond_init(&comm->progress_cond, NULL);
    if (rc != 0) {
        goto err_mutex;
    }
    /* done_cond's timed waits use the monotonic clock, like every deadline. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&comm->done_cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        goto err_progress_cond;
    }
    comm->queue_head = NULL;
    comm->queue_tail = NULL;
    comm->progress_running = 0;
    comm->progress_stop = 0;
    comm->waiters = 0;
    atomic_init(&comm->posted, 0);
    atomic_init(&comm->completed, 0);
    return TNT_OK;

err_progress_cond:
    pthread_cond_destroy(&comm->progress_cond);
err_mutex:
    pthread_mutex_destroy(&comm->progress_lock);
err:
    return tnt_error_raise(TNT_ERR_SYSTEM, "progress queue: pthread init failed: %s", strerror(rc));
}

static void *progress_main(void *arg)
{
    tnt_comm_t *comm = arg;

    pthread_mutex_lock(&comm->progress_lock);
    for (;;) {
        while (comm->queue_head == NULL && !comm->progress_stop) {
            pthread_cond_wait(&comm->progress_cond, &comm->progress_lock);
        }
        struct tnt_request *req = comm->queue_head;
        if (req == NULL) {
            break; /* stop requested and queue empty */
        }
        comm->queue_head = req->next;
        if (comm->queue_head == NULL) {
            comm->queue_tail = NULL;
        }
        pthread_mutex_unlock(&comm->progress_lock);

        tnt_error_clear();
        tnt_status_t status = req->execute(comm, req);
        if (status < 0) {
            snprintf(req->error, sizeof(req->error), "%s",
                     tnt_error_message()[0] != '\0' ? tnt_error_message()
                                                    : tnt_status_string(status));
        }

        pthread_mutex_lock(&comm->progress_lock);
        /* Release: everything execute() wrote (results, req->error, coll_seq,
         * transport state) happens-before a drainer's acquire load of completed and a
         * waiter's acquire load of status. The request may be freed by its
         * owner as soon as status is stored, so it is not touched after. */
        atomic_fetch_add_explicit(&comm->completed, 1, memory_order_release);
        atomic_store_explicit(&req->status, status, memory_order_release);
        if (comm->waiters > 0) {
            pthread_cond_broadcast(&comm->done_cond);
        }
    }
    pthread_mutex_unlock(&comm->progress_lock);
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
    return TNT_OK;
}

tnt_status_t tnt_progress_post(tnt_comm_t *comm, struct tnt_request *req)
{
    tnt_status_t status = TNT_OK;

    req->comm = comm;
    req->next = NULL;
    /* Relaxed is enough: the queue hand-over below goes through the mutex. */
    atomic_store_explicit(&req->status, TNT_IN_PROGRESS, memory_order_relaxed);

    pthread_mutex_lock(&comm->progress_lock);
    if (comm->progress_stop) {
        status = tnt_error_raise(TNT_ERR_NOT_INITIALIZED,
                                 "operation posted while the communicator is being finalized");
        goto out_unlock;
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
    atomic_fetch_add_explicit(&comm->posted, 1, memory_order_relaxed);
    pthread_cond_signal(&comm->progress_cond);
out_unlock:
    pthread_mutex_unlock(&comm->progress_lock);
    return status;
}

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

static tnt_status_t wait_for(tnt_comm_t *comm, const struct wait_target *t, const char *what)
{
    tnt_backoff_t backoff;
    tnt_status_t status = TNT_OK;

    tnt_backoff_init(&backoff, 0);
    for (int i = 0; i < WAIT_SPIN_ITERATIONS; i++) {
        if (target_reached(comm, t)) {
            return TNT_OK;
        }
        tnt_backoff_wait(&backoff);
    }

    uint64_t window = stall_window_ns(comm);
    uint64_t last_completed = atomic_load_explicit(&comm->completed, memory_order_relaxed);
    uint64_t stall_start = tnt_time_ns();

    pthread_mutex_lock(&comm->progress_lock);
    comm->waiters++;
    while (!target_reached(comm, t)) {
        uint64_t now = tnt_time_ns();
        uint64_t c = atomic_load_explicit(&comm->completed, memory_order_relaxed);
        if (c != last_completed) {
            last_completed = c;
            stall_start = now;
        }
        uint64_t wake = now + WAIT_SLICE_NS;
        if (window != UINT64_MAX) {
            if (now - stall_start >= window) {
                status = tnt_error_raise(TNT_ERR_TIMEOUT,
                                         "%s: the progress thread finished no operation for %.0f s "
                                         "(TNT_TIMEOUT is %.0f s); an operation on it is stuck",
                                         what, (double)window / 1e9, comm->timeout_s);
                break;
            }
            if (stall_start + window < wake) {
                wake = stall_start + window;
            }
        }
        struct timespec ts = { (time_t)(wake / 1000000000u), (long)(wake % 1000000000u) };
        pthread_cond_timedwait(&comm->done_cond, &comm->progress_lock, &ts);
    }
    comm->waiters--;
    pthread_mutex_unlock(&comm->progress_lock);
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
        tnt_error_restore(req->error);
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
    pthread_cond_signal(&comm->progress_cond);
    pthread_mutex_unlock(&comm->progress_lock);
    if (running) {
        pthread_join(comm->progress_thread, NULL);
        comm->progress_running = 0;
    }
    pthread_cond_destroy(&comm->done_cond);
    pthread_cond_destroy(&comm->progress_cond);
    pthread_mutex_destroy(&comm->progress_lock);
    return TNT_OK;
}
