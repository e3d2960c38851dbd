/*
 * UCX transport: waiting. Polling and reaping requests with backoff, a
 * failed or departed peer, timeouts (with the hang doctor), and the side
 * channel the doctor uses.
 */
#include "transport/ucx/ucx_impl.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Updates op->pending/status from UCX. Returns nonzero when finished. */
static int tnt_ucx_poll_op(struct tnt_ucx_op *op)
{
    ucs_status_t us;

    if (!op->pending) {
        return 1;
    }
    if (op->is_recv) {
        us = ucp_tag_recv_request_test(op, &op->info);
    } else {
        us = ucp_request_check_status(op);
    }
    if (us == UCS_INPROGRESS) {
        return 0;
    }
    op->pending = 0;
    op->status = us;
    return 1;
}

/* Blocks for the next event, or briefly sleeps when there is no wake-up fd.
 * Only reached after the spin/yield phase of the backoff. */
static void tnt_ucx_block(tnt_ucx_t *ucx, tnt_backoff_t *backoff)
{
    struct pollfd pfd;

    if (ucx->efd < 0) {
        (void)tnt_backoff_wait(backoff);
        return;
    }
    /* Arming fails with BUSY when events are already pending: progress them. */
    if (ucp_worker_arm(ucx->worker) != UCS_OK) {
        return;
    }
    pfd.fd = ucx->efd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    /* At most 1 ms, like the sleeping backoff: the fd reliably signals
     * arrivals, but a send waiting for socket space may only move on during
     * the next progress call. EINTR is harmless here. */
    (void)poll(&pfd, 1, 1);
}

/* A point-to-point receive that succeeded: who sent it (the tag's rank
 * field, unkeyed) and how long it was. An any-source sender gets an
 * endpoint back now, as a receive from a named rank makes one at its post,
 * so that the goodbye handshake finds the pair symmetric. */
static tnt_status_t tnt_ucx_reap_result(tnt_ucx_t *ucx, struct tnt_ucx_op *op,
                                        const tnt_ucx_what_t *what)
{
    int source = op->peer;

    if (source < 0) {
        source = (int)(((op->info.sender_tag ^ ucx->low_key) >> TNT_UCX_TAG_STEP_BITS) &
                       (TNT_UCX_MAX_RANKS - 1));
        if (source >= ucx->size) {
            ucx->failed = TNT_ERR_TRANSPORT;
            return tnt_error_raise(TNT_ERR_TRANSPORT,
                                   "%s: a message claims to come from rank %d, which is not a "
                                   "rank of this communicator",
                                   tnt_ucx_what_text(what), source);
        }
        if (ucx->peers[source].ep == NULL) {
            tnt_status_t status = tnt_ucx_check_peer(ucx, source);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    op->result->source = source;
    op->result->bytes = op->info.length;
    ucx->bytes_received += op->info.length;
    return TNT_OK;
}

/* Finishes one op: converts its UCX status, accounts bytes, frees the slot. */
static tnt_status_t tnt_ucx_reap(tnt_ucx_t *ucx, struct tnt_ucx_op *op, const tnt_ucx_what_t *what)
{
    tnt_status_t status = TNT_OK;
    int peer = op->peer;

    if (op->result != NULL && op->status == UCS_ERR_MESSAGE_TRUNCATED) {
        /* The receiver's buffer was too small for one message: that
         * receive fails, and nothing else is out of step. */
        status = tnt_error_raise(TNT_ERR_MISMATCH,
                                 "%s: the matching message is longer than the %zu B buffer; "
                                 "pass a buffer as large as the largest message",
                                 tnt_ucx_what_text(what), op->bytes);
    } else if (op->status != UCS_OK) {
        status = tnt_ucx_status_of(op->status);
        if (ucx->failed == TNT_OK && op->status != UCS_ERR_CANCELED) {
            ucx->failed = status;
            status =
                tnt_error_raise(status,
                                "%s: %s rank %d failed: %s; did rank %d exit or crash? "
                                "its own output names the cause",
                                tnt_ucx_what_text(what), op->is_recv ? "receive from" : "send to",
                                peer, ucs_status_string(op->status), peer);
        }
    } else if (op->result != NULL) {
        status = tnt_ucx_reap_result(ucx, op, what);
    } else if (op->is_recv) {
        if (op->info.length != op->bytes) {
            status =
                tnt_error_raise(TNT_ERR_MISMATCH,
                                "%s: expected %zu B from rank %d but got %zu B; do all "
                                "ranks call the same collectives with the same sizes?",
                                tnt_ucx_what_text(what), op->bytes, peer, (size_t)op->info.length);
            if (ucx->failed == TNT_OK) {
                ucx->failed = status;
            }
        } else {
            ucx->bytes_received += op->bytes;
            ucx->bytes_consumed += op->consume != NULL ? op->bytes : 0;
        }
    }
    tnt_ucx_pool_put(ucx, op);
    return status;
}

/* Reaps every op in ops[0..n) that has finished (NULLing its entry) and
 * keeps the first error in *status. Returns how many finished. */
static int tnt_ucx_reap_finished(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                 const tnt_ucx_what_t *what, tnt_status_t *status)
{
    int finished = 0;

    if (ucx->flagged_head != NULL) {
        tnt_ucx_serve_flagged(ucx); /* before any of them is reaped */
    }
    for (int i = 0; i < n; i++) {
        if (ops[i] != NULL && tnt_ucx_poll_op(ops[i])) {
            tnt_status_t s = tnt_ucx_reap(ucx, ops[i], what);
            if (*status == TNT_OK) {
                *status = s;
            }
            ops[i] = NULL;
            finished++;
        }
    }
    return finished;
}

/* A dead peer: its pending receives would never complete. Fails the
 * transport when an unfinished op goes to or comes from a peer whose
 * endpoint broke. */
static tnt_status_t tnt_ucx_check_peers(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                        const tnt_ucx_what_t *what)
{
    for (int i = 0; i < n; i++) {
        int peer = ops[i] != NULL ? ops[i]->peer : -1;
        if (ops[i] != NULL && peer < 0) {
            /* Any source: any peer this rank talks to that broke. */
            for (int r = 0; r < ucx->size && peer < 0; r++) {
                peer = ucx->peers[r].ep != NULL && ucx->peers[r].failed ? r : -1;
            }
        }
        if (peer >= 0 && ucx->peers[peer].failed) {
            ucx->failed = TNT_ERR_PEER_FAILED;
            return tnt_error_raise(TNT_ERR_PEER_FAILED,
                                   "%s: connection to rank %d broke (%s); did it exit or crash? "
                                   "its own output names the cause",
                                   tnt_ucx_what_text(what), peer,
                                   ucs_status_string(ucx->peers[peer].error));
        }
    }
    return TNT_OK;
}

/* A dead peer on this host (its endpoint has no failure detection: params
 * .local): the op's peer, or for an any-source receive any local peer. */
static tnt_status_t tnt_ucx_check_alive(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                        const tnt_ucx_what_t *what)
{
    if (ucx->peer_alive == NULL) {
        return TNT_OK;
    }
    for (int i = 0; i < n; i++) {
        int first = ops[i] == NULL ? 0 : ops[i]->peer < 0 ? 0 : ops[i]->peer;
        int last = ops[i] == NULL ? -1 : ops[i]->peer < 0 ? ucx->size - 1 : ops[i]->peer;
        for (int r = first; r <= last; r++) {
            if (tnt_ucx_local_peer_died(ucx, r)) {
                ucx->failed = TNT_ERR_PEER_FAILED;
                return tnt_error_raise(TNT_ERR_PEER_FAILED,
                                       "%s: rank %d on this host died; its own output (or the "
                                       "launcher's) names the cause",
                                       tnt_ucx_what_text(what), r);
            }
        }
    }
    return TNT_OK;
}

/* A peer that left: a rank in tnt_finalize sends its goodbye to every
 * connected peer before it waits for theirs, so a goodbye from a rank that
 * an unfinished op still waits for means that rank's program ended while
 * this collective needs it; nothing would ever complete the op. Without
 * this check the op waits for TNT_TIMEOUT, and the leaving rank waits up
 * to 30 s for goodbyes that never come. The goodbye is received to check
 * its cookie (a forged one is dropped, and the wait goes on); a real one
 * fails the transport, so this rank's own goodbye handshake, which would
 * have wanted it, never runs. */
static tnt_status_t tnt_ucx_check_left(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                       const tnt_ucx_what_t *what)
{
    if (ucx->saying_goodbye) {
        return TNT_OK;
    }
    for (int i = 0; i < n; i++) {
        struct tnt_ucx_ctl_header goodbye;
        size_t bytes;
        int peer, sender;

        /* An any-source receive cannot tell which departed rank it needed,
         * and taking a goodbye that the handshake wants later would stall
         * it: TNT_TIMEOUT bounds that wait instead. */
        if (ops[i] == NULL || ops[i]->peer < 0) {
            continue;
        }
        peer = ops[i]->peer;
        while (tnt_ucx_ctl_take(ucx, TNT_UCX_SEQ_GOODBYE, peer, &goodbye, sizeof(goodbye), &bytes,
                                &sender)) {
            if (!tnt_ucx_ctl_valid(ucx, TNT_UCX_SEQ_GOODBYE, &goodbye, bytes, sizeof(goodbye),
                                   sender, "goodbye")) {
                continue;
            }
            ucx->failed = TNT_ERR_PEER_FAILED;
            return tnt_error_raise(TNT_ERR_PEER_FAILED,
                                   "%s: rank %d left the job (it called tnt_finalize: its program "
                                   "is ending) while this rank still waits for it; its own "
                                   "output shows why it ended early",
                                   tnt_ucx_what_text(what), peer);
        }
    }
    return TNT_OK;
}

/* After a failure: cancels every op still pending, poisons the endpoints so
 * the rest of the job notices, and reaps the cancelled requests, which
 * complete during progress, so no buffer is touched after the wait
 * returns. */
static void tnt_ucx_abandon(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, int remaining)
{
    tnt_backoff_t reap;

    for (int i = 0; i < n; i++) {
        if (ops[i] != NULL && ops[i]->pending) {
            ucp_request_cancel(ucx->worker, ops[i]);
        }
    }
    tnt_ucx_poison(ucx);
    tnt_backoff_init(&reap, 5.0);
    while (remaining > 0) {
        ucp_worker_progress(ucx->worker);
        for (int i = 0; i < n; i++) {
            if (ops[i] != NULL && tnt_ucx_poll_op(ops[i])) {
                tnt_ucx_pool_put(ucx, ops[i]);
                ops[i] = NULL;
                remaining--;
            }
        }
        if (remaining > 0 && tnt_backoff_wait(&reap) != 0) {
            /* UCX kept them: leak the slots rather than reuse memory UCX
             * may still write (the transport is dead anyway). */
            for (int i = 0; i < n; i++) {
                ops[i] = NULL;
            }
            remaining = 0;
        }
    }
}

void tnt_ucx_fail(tnt_ucx_t *ucx, tnt_status_t status)
{
    if (ucx->failed == TNT_OK) {
        ucx->failed = status;
    }
    tnt_ucx_poison(ucx);
}

/* No progress for timeout_s: fails the transport, naming the peer of the
 * first unfinished op. */
static tnt_status_t tnt_ucx_timed_out(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                      const tnt_ucx_what_t *what)
{
    const struct tnt_ucx_op *op = NULL;

    for (int i = 0; i < n && op == NULL; i++) {
        op = ops[i];
    }
    ucx->failed = TNT_ERR_TIMEOUT;
    if (op != NULL && op->result != NULL && op->peer < 0) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "%s: no rank sent a matching message within %g s; see TNT_TIMEOUT",
                               tnt_ucx_what_text(what), ucx->timeout_s);
    }
    if (op != NULL && op->result != NULL) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "%s: rank %d sent no matching message within %g s; is it still "
                               "running, and does it send with this tag? see TNT_TIMEOUT",
                               tnt_ucx_what_text(what), op->peer, ucx->timeout_s);
    }
    if (op != NULL && op->sync) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "%s: rank %d posted no matching receive within %g s; is it still "
                               "running, and does it receive with this tag? see TNT_TIMEOUT",
                               tnt_ucx_what_text(what), op->peer, ucx->timeout_s);
    }
    int peer = op != NULL ? op->peer : -1;
    return tnt_error_raise(TNT_ERR_TIMEOUT,
                           "%s: rank %d did not answer within %g s; is it still running? see "
                           "TNT_TIMEOUT",
                           tnt_ucx_what_text(what), peer, ucx->timeout_s);
}

/* One idle round of a wait, waited_ns after the wait began or last saw an
 * op finish: busy-polling for spin_ns (TNT_UCX_SPIN_US, off by default),
 * then polling with sched_yield between polls for yield_ns
 * (TNT_UCX_YIELD_US), then sleeping on the worker's event fd, 1 ms at a
 * time.
 *
 * Why yield: on a host with more ranks than cores every message step waits
 * for its receiver to get a core. Sleeping costs a wake-up per step (arm,
 * poll, the sender's softirq waking the receiver, two context switches) and
 * a sleeping rank runs only when the scheduler gets to it; a yielding rank
 * stays runnable, notices its message at its next turn, and hands its core
 * straight to a rank that has work (sched_yield returns at once when no
 * other task wants the core, so with a core per rank this is a busy-poll).
 * Yielding for a while beats sleeping at once, no pause-spin comes before
 * it (its CPU time on an oversubscribed host is taken from the rank being
 * waited for), and pure busy-polling (TNT_UCX_SPIN_US) holds the core the
 * peer needs: the measurements are in docs/multinode.md. */
static void tnt_ucx_idle(tnt_ucx_t *ucx, tnt_backoff_t *backoff, uint64_t waited_ns)
{
    if (waited_ns < ucx->spin_ns) {
        tnt_cpu_relax();
    } else if (waited_ns - ucx->spin_ns < ucx->yield_ns) {
        sched_yield();
    } else {
        tnt_ucx_block(ucx, backoff);
    }
}

static tnt_status_t tnt_ucx_waitall_what(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n,
                                         const tnt_ucx_what_t *what)
{
    tnt_status_t status = TNT_OK;
    tnt_backoff_t backoff;
    uint64_t spin_start, waited_ns, left_checked_ns = 0, last_progress_ns;
    int remaining = 0;

    for (int i = 0; i < n; i++) {
        remaining += ops[i] != NULL;
    }
    tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
    spin_start = tnt_time_ns();
    last_progress_ns = spin_start;
    while (remaining > 0) {
        int progressed = 0;
        int finished;

        while (ucp_worker_progress(ucx->worker) != 0) {
            progressed = 1;
        }
        if (progressed) {
            ucx->last_progress_ns = tnt_time_ns();
        }
        finished = tnt_ucx_reap_finished(ucx, ops, n, what, &status);
        remaining -= finished;
        if (remaining == 0) {
            break;
        }
        if (status == TNT_OK) {
            status = tnt_ucx_check_peers(ucx, ops, n, what);
        }
        if (status != TNT_OK || ucx->failed != TNT_OK) {
            if (status == TNT_OK) {
                status = tnt_error_set(ucx->failed, "%s: the job already failed",
                                       tnt_ucx_what_text(what));
            }
            tnt_ucx_abandon(ucx, ops, n, remaining);
            return status;
        }
        if (progressed || finished) {
            last_progress_ns = tnt_time_ns();
            /* The timeout bounds time without progress, not the transfer:
             * a 1 GiB allreduce over TCP may legitimately take long. */
            if (finished) {
                tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
                spin_start = tnt_time_ns();
            }
            continue;
        }
        if (backoff.deadline_ns != UINT64_MAX && tnt_time_ns() >= backoff.deadline_ns) {
            status = tnt_ucx_timed_out(ucx, ops, n, what);
            continue; /* the failure branch above cancels and reaps */
        }
        waited_ns = tnt_time_ns() - spin_start;
        status = tnt_watch_poll(ucx->watch, waited_ns); /* cheap while short */
        if (status != TNT_OK) {
            ucx->failed = status;
            continue; /* the failure branch above cancels and reaps */
        }
        /* Every 10 ms of a wait, once nothing at all has moved for 10 ms: a
         * probe of UCX's queue of unexpected messages per op, off the fast
         * path. A peer's goodbye follows its data on the same connection,
         * but with several lanes its last fragments could still be on the
         * way; those would count as progress. */
        if (waited_ns >= left_checked_ns + 10000000 &&
            tnt_time_ns() - last_progress_ns >= 10000000) {
            left_checked_ns = waited_ns;
            status = tnt_ucx_check_left(ucx, ops, n, what);
            if (status == TNT_OK) {
                status = tnt_ucx_check_alive(ucx, ops, n, what);
            }
            if (status != TNT_OK) {
                continue; /* the failure branch above cancels and reaps */
            }
        }
        tnt_ucx_idle(ucx, &backoff, waited_ns);
    }
    return status;
}

tnt_status_t tnt_ucx_test(tnt_ucx_t *ucx, tnt_ucx_op_t **op_p, uint64_t started_ns,
                          const tnt_ucx_what_t *what)
{
    tnt_status_t status = TNT_OK;
    uint64_t now, idle_since;
    int progressed = 0;

    while (ucp_worker_progress(ucx->worker) != 0) {
        progressed = 1;
    }
    now = tnt_time_ns();
    if (progressed) {
        ucx->last_progress_ns = now;
    }
    if (tnt_ucx_reap_finished(ucx, op_p, 1, what, &status) > 0) {
        return status;
    }
    status = tnt_ucx_check_peers(ucx, op_p, 1, what);
    if (status == TNT_OK && now - ucx->alive_checked_ns >= 10000000) {
        /* As a wait does, every 10 ms at most. */
        ucx->alive_checked_ns = now;
        status = tnt_ucx_check_left(ucx, op_p, 1, what);
        if (status == TNT_OK) {
            status = tnt_ucx_check_alive(ucx, op_p, 1, what);
        }
    }
    if (status == TNT_OK && ucx->failed != TNT_OK) {
        status = tnt_error_set(ucx->failed, "%s: the job already failed", tnt_ucx_what_text(what));
    }
    idle_since = started_ns > ucx->last_progress_ns ? started_ns : ucx->last_progress_ns;
    if (status == TNT_OK && ucx->timeout_s > 0 &&
        (double)(now - idle_since) * 1e-9 >= ucx->timeout_s) {
        status = tnt_ucx_timed_out(ucx, op_p, 1, what);
    }
    if (status != TNT_OK) {
        tnt_ucx_abandon(ucx, op_p, 1, 1);
        return status;
    }
    return TNT_IN_PROGRESS;
}

/* Side messages go to ranks no collective may have talked to yet (endpoints
 * are made on first use), so they connect too: the sender to the receiver,
 * and the receiver back to the sender, which keeps every pair that talked
 * symmetric for the goodbye handshake. Only the stalled-job path sends them.
 * A failure here is not the job's failure: returns -1 and the doctor tries
 * again later. */
static int tnt_ucx_side_connect(tnt_ucx_t *ucx, int peer)
{
    if (ucx->peers[peer].ep != NULL) {
        return 0;
    }
    if (tnt_ucx_ep_create(ucx, peer) != TNT_OK) {
        return -1;
    }
    ucx->num_side_connected++;
    tnt_ucx_describe_ep(&ucx->peers[peer]);
    return 0;
}

int tnt_ucx_side_send(tnt_ucx_t *ucx, int peer, const void *buf, size_t bytes)
{
    struct tnt_ucx_ctl_header header = { .cookie = { ucx->cookie[0], ucx->cookie[1] },
                                         .rank = ucx->rank,
                                         .seq = TNT_UCX_SEQ_SIDE };
    ucp_request_param_t param;
    ucs_status_ptr_t ret;

    if (ucx->failed != TNT_OK || peer < 0 || peer >= ucx->size || peer == ucx->rank ||
        bytes > TNT_UCX_SIDE_MAX || ucx->poisoned || tnt_ucx_side_connect(ucx, peer) != 0 ||
        ucx->peers[peer].failed) {
        return -1;
    }
    memcpy(ucx->side_out, &header, sizeof(header));
    memcpy(ucx->side_out + sizeof(header), buf, bytes);
    /* Sent at once or not at all: side_out is free on return and no
     * request outlives the call; a message that cannot go now is skipped
     * (the doctor sends again a second later). */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    ret = ucp_tag_send_nbx(ucx->peers[peer].ep, ucx->side_out, sizeof(header) + bytes,
                           TNT_UCX_CTL_TAG(TNT_UCX_SEQ_SIDE, ucx->rank), &param);
    if (ret == NULL) {
        return 0;
    }
    if (!UCS_PTR_IS_ERR(ret)) {
        /* Not expected with FORCE_IMM_CMPL; never leave a request behind. */
        ucp_request_cancel(ucx->worker, ret);
        ucp_request_free(ret);
    }
    return -1;
}

static void tnt_ucx_ctl_recv_done(void *request, ucs_status_t status,
                                  const ucp_tag_recv_info_t *info, void *user_data)
{
    (void)request;
    (void)status;
    (void)info;
    (void)user_data;
}

int tnt_ucx_ctl_take(tnt_ucx_t *ucx, uint32_t seq, int from, void *buf, size_t cap, size_t *bytes_p,
                     int *sender_p)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;
    ucp_request_param_t param;
    ucs_status_ptr_t ret;
    ucs_status_t st = UCS_OK;

    msg = ucp_tag_probe_nb(ucx->worker, TNT_UCX_CTL_TAG(seq, from < 0 ? 0 : from),
                           from < 0 ? TNT_UCX_CTL_ANY_MASK : UINT64_MAX, 1, &info);
    if (msg == NULL) {
        return 0;
    }
    /* Received even when longer than cap (UCX then reports it truncated):
     * a probed message must be taken off the queue, and whoever sent it
     * must not be able to fill the queue with messages we never look at. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.recv = tnt_ucx_ctl_recv_done;
    ret = ucp_tag_msg_recv_nbx(ucx->worker, buf, cap, msg, &param);
    if (UCS_PTR_IS_ERR(ret)) {
        st = UCS_PTR_STATUS(ret);
    } else if (ret != NULL) {
        /* Eager messages are already here: this finishes in a few progress
         * calls; bounded anyway (a stranger's rendezvous may never end). */
        tnt_backoff_t backoff;
        tnt_backoff_init(&backoff, 1.0);
        while ((st = ucp_request_check_status(ret)) == UCS_INPROGRESS) {
            ucp_worker_progress(ucx->worker);
            if (tnt_backoff_wait(&backoff) != 0) {
                ucp_request_cancel(ucx->worker, ret);
                break;
            }
        }
        while (ucp_request_check_status(ret) == UCS_INPROGRESS) {
            ucp_worker_progress(ucx->worker);
        }
        ucp_request_free(ret);
    }
    *bytes_p = st == UCS_OK && info.length <= cap ? info.length : SIZE_MAX;
    *sender_p = TNT_UCX_CTL_RANK(info.sender_tag);
    return 1;
}

/* Counts a dropped control message of kind seq and logs it, on whichever
 * rank got it: the first of each kind at once, then one line per kind per
 * 10 s with the count, so a flood of forgeries cannot flood the job's
 * output. */
static void tnt_ucx_note_dropped(tnt_ucx_t *ucx, uint32_t seq, const char *what, int sender,
                                 const char *why)
{
    uint64_t now = tnt_time_ns();
    unsigned kind = seq - TNT_UCX_DATA_SEQS; /* 0 .. 2 */

    ucx->dropped++;
    ucx->dropped_of_kind[kind]++;
    if (ucx->dropped_of_kind[kind] > 1 && now < ucx->drop_log_after_ns[kind]) {
        return;
    }
    tnt_log_every_rank(TNT_LOG_WARN,
                       "ucx: dropped a %s that claims to come from rank %d: %s (%llu dropped so "
                       "far, logged at most every 10 s); a process outside this communicator "
                       "(another job, or anyone who can reach this node's UCX ports) sent it; "
                       "see Security in docs/admin-guide.md (UCX_NET_DEVICES, "
                       "UCX_TCP_PORT_RANGE)",
                       what, sender, why, (unsigned long long)ucx->dropped_of_kind[kind]);
    ucx->drop_log_after_ns[kind] = now + 10000000000ull;
}

int tnt_ucx_ctl_valid(tnt_ucx_t *ucx, uint32_t seq, const void *buf, size_t bytes, size_t expected,
                      int sender, const char *what)
{
    char why[128];

    if (tnt_ucx_ctl_check(ucx->cookie, ucx->rank, ucx->size, seq, buf, bytes, expected, sender,
                          what, why, sizeof(why))) {
        return 1;
    }
    tnt_ucx_note_dropped(ucx, seq, what, sender, why);
    return 0;
}

uint64_t tnt_ucx_num_dropped(const tnt_ucx_t *ucx)
{
    return ucx->dropped;
}

size_t tnt_ucx_side_recv(tnt_ucx_t *ucx, void *buf, size_t bytes, int *sender_p)
{
    ucp_worker_progress(ucx->worker);
    /* Bounded: a flood of forgeries must not hold up the caller, whose next
     * call goes on with the queue. */
    for (int i = 0; i < 64; i++) {
        size_t got, length;
        int sender;

        if (!tnt_ucx_ctl_take(ucx, TNT_UCX_SEQ_SIDE, -1, ucx->side_in, sizeof(ucx->side_in), &got,
                              &sender)) {
            return 0;
        }
        if (!tnt_ucx_ctl_valid(ucx, TNT_UCX_SEQ_SIDE, ucx->side_in, got, 0, sender,
                               "hang-doctor side message")) {
            continue;
        }
        length = got - sizeof(struct tnt_ucx_ctl_header);
        length = length < bytes ? length : bytes;
        memcpy(buf, ucx->side_in + sizeof(struct tnt_ucx_ctl_header), length);
        if (!ucx->poisoned) {
            (void)tnt_ucx_side_connect(ucx, sender);
        }
        *sender_p = sender;
        return length;
    }
    return 0;
}

tnt_status_t tnt_ucx_ctl_collect(tnt_ucx_t *ucx, uint32_t seq, unsigned char *pending, int count,
                                 const char *what, const char *kind)
{
    tnt_status_t status = TNT_OK;
    tnt_backoff_t backoff;
    uint64_t spin_start;

    tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
    spin_start = tnt_time_ns();
    while (count > 0 && status == TNT_OK) {
        struct tnt_ucx_ctl_header header;
        size_t bytes;
        int sender, arrived = 0;

        while (ucp_worker_progress(ucx->worker) != 0) {
        }
        while (count > 0 &&
               tnt_ucx_ctl_take(ucx, seq, -1, &header, sizeof(header), &bytes, &sender)) {
            /* Only a valid message is progress: forgeries must not keep
             * the wait from ever timing out. */
            if (tnt_ucx_ctl_valid(ucx, seq, &header, bytes, sizeof(header), sender, kind) &&
                pending[sender]) {
                pending[sender] = 0;
                count--;
                arrived = 1;
            }
        }
        if (count == 0) {
            break;
        }
        for (int r = 0; r < ucx->size; r++) {
            if (pending[r] && ucx->peers[r].failed) {
                status = tnt_error_raise(TNT_ERR_PEER_FAILED,
                                         "%s: connection to rank %d broke (%s); did it exit or "
                                         "crash? its own output names the cause",
                                         what, r, ucs_status_string(ucx->peers[r].error));
                break;
            }
        }
        if (status != TNT_OK) {
            break;
        }
        if (arrived) {
            tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
            spin_start = tnt_time_ns();
            continue;
        }
        if (backoff.deadline_ns != UINT64_MAX && tnt_time_ns() >= backoff.deadline_ns) {
            int missing = 0;
            while (!pending[missing]) {
                missing++;
            }
            status = tnt_error_raise(TNT_ERR_TIMEOUT,
                                     "%s: rank %d did not answer within %g s; is it still "
                                     "running? see TNT_TIMEOUT",
                                     what, missing, ucx->timeout_s);
            break;
        }
        uint64_t waited_ns = tnt_time_ns() - spin_start;
        status = tnt_watch_poll(ucx->watch, waited_ns);
        if (status == TNT_OK) {
            tnt_ucx_idle(ucx, &backoff, waited_ns);
        }
    }
    if (status != TNT_OK && ucx->failed == TNT_OK) {
        ucx->failed = status;
    }
    return status;
}

tnt_status_t tnt_ucx_waitall(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what)
{
    const tnt_ucx_what_t named = { .text = what };
    return tnt_ucx_waitall_what(ucx, ops, n, &named);
}

tnt_status_t tnt_ucx_wait(tnt_ucx_t *ucx, tnt_ucx_op_t **op, const char *what)
{
    return tnt_ucx_waitall(ucx, op, 1, what);
}

tnt_status_t tnt_ucx_wait_what(tnt_ucx_t *ucx, tnt_ucx_op_t **op, const tnt_ucx_what_t *what)
{
    return tnt_ucx_waitall_what(ucx, op, 1, what);
}

tnt_status_t tnt_ucx_sendrecv(tnt_ucx_t *ucx, int dst, uint64_t send_tag, const void *sendbuf,
                              size_t send_bytes, int src, uint64_t recv_tag, void *recvbuf,
                              size_t recv_bytes, const char *what)
{
    tnt_ucx_op_t *ops[2] = { NULL, NULL };
    tnt_status_t status = TNT_OK;

    if (src >= 0) {
        status = tnt_ucx_irecv(ucx, src, recv_tag, recvbuf, recv_bytes, &ops[0]);
    }
    if (status == TNT_OK && dst >= 0) {
        status = tnt_ucx_isend(ucx, dst, send_tag, sendbuf, send_bytes, &ops[1]);
    }
    if (status != TNT_OK) {
        tnt_ucx_waitall(ucx, ops, 2, what);
        return status;
    }
    return tnt_ucx_waitall(ucx, ops, 2, what);
}
