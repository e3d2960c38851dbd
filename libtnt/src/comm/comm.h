/*
 * The communicator and its progress queue: what collectives and fusion run
 * on. Layering (lower never includes higher; docs/architecture.md):
 *   util <- reduce, boot <- transport (shm, ucx) <- comm <- coll, p2p <- fusion <- core
 * The communicator is assembled by core/init.c (tnt_init), the only file that
 * knows every transport; transports never include this header.
 */
#ifndef TNT_COMM_COMM_H
#define TNT_COMM_COMM_H

#include <tnt/tnt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "boot/boot.h"
#include "util/log.h"
#include "util/watch.h"

struct tnt_shm;
struct tnt_net;
struct tnt_gpu;
struct tnt_request;
struct tnt_settings;
struct tnt_doctor;
struct tnt_p2p;
struct tnt_p2p_op;

/* The longest message a request keeps (as long as tnt_last_error()'s). */
#define TNT_REQUEST_ERROR_MAX 1024

/* One operation run by the progress thread, or by a thread waiting for it
 * (comm/progress.c, "caller runs"). Requests are executed strictly in
 * posting order and one at a time, which is what keeps collectives matched
 * across ranks. The
 * memory is owned by whoever posted it: tnt_allreduce_post() allocates one
 * per call, the fusion engine embeds one per bucket so that steady-state
 * steps allocate nothing. */
struct tnt_request {
    /* Runs on the progress thread or inline on a waiting thread, never two
     * at once on a rank; returns the operation's final status. */
    tnt_status_t (*execute)(tnt_comm_t *comm, struct tnt_request *req);
    /* Written by the thread that ran it with release order after execute()
     * finished and its results are in place; waiters read it with acquire
     * order, so the result buffers happen-before the waiter's next access. */
    _Atomic int status;
    /* tnt_last_error() of the running thread when execute() failed, so a
     * waiter reports this request's own cause and never another's. Written
     * before status (the release store above orders it); a fixed buffer
     * because posting must not allocate. */
    char error[TNT_REQUEST_ERROR_MAX];
    int error_printed;  /* error was printed where it was raised */
    int heap_allocated; /* freed by tnt_wait() when set */
    tnt_comm_t *comm;   /* set by tnt_progress_post() */
    /* A point-to-point request (core/api_p2p.c): never queued; tnt_test
     * and tnt_wait progress it themselves. NULL for every other kind. */
    struct tnt_p2p_op *p2p;
    struct tnt_request *next; /* queue link, owned by the progress queue */
    int queued;               /* still in the queue (under progress_lock) */
    /* When it was posted, for the timeline (0 when none records). */
    uint64_t posted_ns;
    union {
        struct {
            const void *sendbuf;
            void *recvbuf;
            size_t count;
            tnt_dtype_t dtype;
            tnt_op_t op;
        } allreduce;
        struct {
            void *buf;
            size_t bytes;
            int root;
        } broadcast;
        void *user; /* for execute() functions of other layers */
    } args;
};

/* The longest communicator name (tnt_comm_name), NUL included. */
#define TNT_COMM_NAME_MAX 64

struct tnt_comm {
    tnt_boot_t *boot;
    /* "world", "oob", "<parent>.<color>", "<parent>.dup<n>": named in
     * errors and verdicts next to the rank. */
    char name[TNT_COMM_NAME_MAX];
    unsigned num_dups; /* tnt_comm_dup calls on this communicator so far */
    int rank;
    int size;
    int local_rank;
    int local_size;
    int node_id;
    int num_nodes;
    double timeout_s; /* TNT_TIMEOUT */
    /* Every TNT_* variable, parsed and checked once by tnt_init
     * (util/settings.h); the layers read their values from here. */
    struct tnt_settings *settings;
    char hostname[TNT_BOOT_HOSTNAME_MAX];

    /* Layout of ranks over nodes (size entries each unless noted). Nodes are
     * numbered in order of their lowest rank; local ranks in rank order. */
    int *node_of_rank;
    int *local_rank_of_rank;
    int *node_sizes;      /* num_nodes entries */
    int *node_first_rank; /* num_nodes entries: lowest rank on node */
    int *local_to_global; /* local_size entries: ranks on my node */

    struct tnt_shm *shm; /* ranks on this node (also when local_size == 1) */
    struct tnt_net *net; /* ranks on other nodes; NULL when num_nodes == 1 */
    /* Point-to-point messages (p2p/p2p.h), a transport apart from the
     * collectives' (or an in-process queue for one rank); NULL when a rank
     * set TNT_P2P=off: p2p_off_rank is the lowest such rank, else -1. */
    struct tnt_p2p *p2p;
    int p2p_off_rank;
    /* Device collectives (gpu/device.c): created at the first one, NULL
     * until then and in builds where none was made. */
    struct tnt_gpu *gpu;

    /* The hang doctor (coll/doctor.h) and the hook the transports' waits
     * call (its first member; NULL in communicators built without one). */
    struct tnt_doctor *doctor;
    tnt_watch_t *watch;

    /* The timeline (util/timeline.h): this communicator's name id, and
     * what the running collective records at its end. Only the thread
     * running collectives (the in-flight word's holder) touches the last
     * four; start 0 means "not recording this one". */
    uint16_t tl_comm;
    uint64_t tl_start_ns;
    uint64_t tl_bytes;
    uint64_t tl_posted_ns;
    const char *tl_algo;

    /* Collectives issued so far, for error messages ("allreduce #812"). */
    uint64_t coll_seq;
    /* Errors raised inside this communicator's collectives name it
     * (tnt_error_context_swap): "communicator oob.1 (rank 0 of 3)", empty
     * for "world", whose ranks are the job's. coll_depth counts the
     * collectives running (composed ones nest); coll_context_outer is the
     * context to restore when the outermost ends. */
    char error_context_text[TNT_COMM_NAME_MAX + 48];
    tnt_error_context_t error_context;
    int coll_depth;
    tnt_error_context_t coll_context_outer;
    /* Set when a collective failed part-way (timeout, dead peer, transport):
     * the ranks are out of step, so later collectives fail at once with
     * TNT_ERR_PEER_FAILED instead of each waiting TNT_TIMEOUT. Only the
     * thread running collectives touches these. */
    tnt_status_t broken_status;
    uint64_t broken_seq;
    const char *broken_name; /* "allreduce", ... (static strings) */

    /* Progress thread: a FIFO of requests (under progress_lock), started
     * lazily on first post. Hand-offs go through futex words, not condition
     * variables: the thread sleeps on work_seq (bumped by every post) and
     * waiters sleep on done_seq (bumped by every completion); each side
     * makes the wake-up system call only when the other says it sleeps.
     * With a core to spare (spin_ok) both sides poll briefly first. */
    pthread_mutex_t progress_lock;
    pthread_t progress_thread;
    int progress_running;
    int progress_stop;
    int spin_ok; /* this rank's affinity has more than one CPU */
    int defer;   /* posts do not wake the thread (TNT_OVERLAP; set when it starts) */
    struct tnt_request *queue_head;
    struct tnt_request *queue_tail;
    _Atomic uint64_t posted;    /* requests enqueued */
    _Atomic uint64_t completed; /* requests finished (by the thread or inline) */
    _Atomic uint32_t work_seq;
    _Atomic uint32_t thread_sleeping;
    _Atomic uint32_t done_seq;
    _Atomic uint32_t done_sleepers;
    /* Set while a fused step has buckets in flight (tnt_progress_hint): the
     * thread polls longer for the next bucket before it sleeps. */
    _Atomic uint32_t step_hint;

    /* 1 while a collective runs on this rank, on the progress thread or
     * inline (a blocking call, or a waiter running queued requests): one at
     * a time, whichever thread calls, so a bucket posted from another
     * thread after a blocking call drained the queue waits instead of
     * running beside it. */
    _Atomic uint32_t in_flight;
    /* Until the first post (blocking_only), nothing but the calling thread
     * can run a collective, so a blocking call marks itself in
     * blocking_busy with plain stores instead of taking in_flight with a
     * compare-and-swap: no barrier on the path of a program that never
     * posts. The first post clears blocking_only and issues an asymmetric
     * barrier (membarrier) before any request can run; from then on every
     * taker of in_flight also checks blocking_busy (comm/progress.c). */
    _Atomic uint32_t blocking_only;
    _Atomic uint32_t blocking_busy;
};

/* Set up and tear down the queue (tnt_init / tnt_finalize). Finalize drains
 * what is queued, then stops and joins the thread; it fails (and the caller
 * must not free comm) only if the thread is stuck. */
tnt_status_t tnt_progress_init(tnt_comm_t *comm);
/* TNT_OVERLAP=auto's choice, pure (unit-tested): 1 to run posted
 * operations on the progress thread. Across nodes always (the network moves
 * data while the caller computes); on one node only when every local
 * rank's compute threads and its progress thread each have a core:
 * local_size * (threads_per_rank + 1) <= node_cpus. */
int tnt_overlap_auto(int num_nodes, int local_size, int threads_per_rank, int node_cpus);
tnt_status_t tnt_progress_finalize(tnt_comm_t *comm);
/* Enqueues a caller-owned request for the progress thread. */
tnt_status_t tnt_progress_post(tnt_comm_t *comm, struct tnt_request *req);
/* Waits (bounded, backing off) for one request to finish; does not free it.
 * If the progress thread has not taken it yet and no collective runs, runs
 * the queue up to and including it on the calling thread (in order).
 * When the request failed, its own message becomes this thread's
 * tnt_last_error(). */
tnt_status_t tnt_progress_wait(tnt_comm_t *comm, struct tnt_request *req);
/* Waits until every posted request has finished (blocking collectives call
 * this first so that they run after earlier nonblocking ones); runs what is
 * still queued on the calling thread when it can, as wait does. */
tnt_status_t tnt_progress_drain(tnt_comm_t *comm);

/* A blocking collective on the caller's thread: enter drains the queue and
 * takes the in-flight word (waiting, bounded, for a request the progress
 * thread runs); leave gives it back. Between them the caller may run
 * tnt_coll_* directly. Enter fails without taking it. */
tnt_status_t tnt_progress_enter(tnt_comm_t *comm);
void tnt_progress_leave(tnt_comm_t *comm);

/* Wakes the progress thread when posts do not (a tnt_test poll). */
void tnt_progress_poke(tnt_comm_t *comm);

/* on = 1 while a fused step has requests in flight, 0 after its wait. */
void tnt_progress_hint(tnt_comm_t *comm, int on);

#endif
