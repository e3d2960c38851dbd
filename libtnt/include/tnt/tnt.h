/**
 * @file tnt.h
 * @brief libtnt: collectives, fused gradient allreduce and dataset sharding
 *        for data-parallel training, bootstrapped through PMIx.
 *
 * This is the only installed header. Every symbol it declares is exported;
 * everything else in libtnt has hidden visibility.
 *
 * Conventions:
 *  - Functions that can fail return ::tnt_status_t. ::TNT_OK is 0, errors are
 *    negative, ::TNT_IN_PROGRESS (positive) means "not finished yet".
 *  - Output parameters come last and are set only on success.
 *  - Collectives are called by every rank of the communicator in the same
 *    order (blocking and nonblocking ones share one order). Every blocking
 *    wait is bounded by TNT_TIMEOUT seconds.
 *  - After an error, tnt_last_error() returns a message that says what
 *    happened and what to do (which collective, which ranks, which setting).
 */
#ifndef TNT_TNT_H
#define TNT_TNT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TNT_API __attribute__((visibility("default")))
#else
#define TNT_API
#endif

#define TNT_VERSION_MAJOR 0
#define TNT_VERSION_MINOR 1
#define TNT_VERSION_PATCH 0

/** Opaque communicator: all ranks of the job. */
typedef struct tnt_comm tnt_comm_t;

/** Status codes. Errors are negative; see tnt_status_string(). */
typedef enum {
    TNT_IN_PROGRESS = 1, /**< nonblocking operation not finished yet */
    TNT_OK = 0,
    TNT_ERR_INVALID_ARG = -1,     /**< bad argument (dtype, op, pointer, count) */
    TNT_ERR_NO_MEMORY = -2,       /**< allocation or mapping failed */
    TNT_ERR_TIMEOUT = -3,         /**< a peer did not arrive within TNT_TIMEOUT */
    TNT_ERR_PEER_FAILED = -4,     /**< a peer process died or its connection broke */
    TNT_ERR_BOOTSTRAP = -5,       /**< PMIx bootstrap failed */
    TNT_ERR_TRANSPORT = -6,       /**< shared memory or network transport failed */
    TNT_ERR_UNSUPPORTED = -7,     /**< feature not built in or not available here */
    TNT_ERR_MISMATCH = -8,        /**< ranks disagree (fusion plan, sizes, order) */
    TNT_ERR_NOT_INITIALIZED = -9, /**< libtnt used before tnt_init() or after finalize */
    TNT_ERR_SYSTEM = -10,         /**< a system call failed; the message has errno */
} tnt_status_t;

/** Element types. TNT_FLOAT16 / TNT_BFLOAT16 reduce with float32 accumulation. */
typedef enum {
    TNT_FLOAT32,
    TNT_FLOAT64,
    TNT_FLOAT16,
    TNT_BFLOAT16,
    TNT_INT32,
    TNT_INT64,
    TNT_DTYPE_LAST
} tnt_dtype_t;

/** Reduction operations. TNT_AVG is the sum divided by the number of ranks
 *  (integer division for integer types). */
typedef enum { TNT_SUM, TNT_PROD, TNT_MIN, TNT_MAX, TNT_AVG, TNT_OP_LAST } tnt_op_t;

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

/** Short, static description of a status code. Never NULL. */
TNT_API const char *tnt_status_string(tnt_status_t status);

/** The detailed message of the last error raised on the calling thread
 *  (e.g. "rank 3: peer rank 5 did not join allreduce #812 within 300 s; is it
 *  still running? see TNT_TIMEOUT"). Empty string when there was none. */
TNT_API const char *tnt_last_error(void);

/** Nonzero when libtnt already printed tnt_last_error() on stderr. Most
 *  errors are printed where they happen; a few are only recorded (a hang
 *  verdict is printed by the one rank that reports it). A program that
 *  reports errors itself can skip the ones already printed. */
TNT_API int tnt_last_error_printed(void);

/** Size in bytes of one element of @p dtype, 0 for an invalid dtype. */
TNT_API size_t tnt_dtype_size(tnt_dtype_t dtype);

/** Library version string, "MAJOR.MINOR.PATCH". */
TNT_API const char *tnt_version(void);

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

/**
 * Bootstraps the job through PMIx and connects all ranks (shared memory within
 * a node, UCX between nodes). Without a reachable PMIx server the process runs
 * as a singleton (size 1); if SLURM variables say the step has more than one
 * task, one warning names the fix (srun --tarantella or --mpi=pmix).
 * Every TNT_* environment variable (docs/environment.md) is checked first: a
 * malformed or out-of-range value fails with ::TNT_ERR_INVALID_ARG and a
 * message naming the variable, the value and the valid values.
 */
TNT_API tnt_status_t tnt_init(tnt_comm_t **comm_p);

/** Waits for outstanding operations, disconnects and frees @p comm: the one
 *  tnt_init made, or one from tnt_comm_create_oob, tnt_comm_split or
 *  tnt_comm_dup (in any order; each is independent once made). Not
 *  collective, but peers of a multi-node communicator wait up to 30 s for
 *  each other's goodbye. NULL is a no-op. */
TNT_API void tnt_finalize(tnt_comm_t *comm);

/**
 * A caller-provided out-of-band exchange (docs/c-api.md, "Bring your own
 * bootstrap"), in the spirit of UCC's ucc_oob_coll_t: what libtnt needs to
 * connect @p size processes when there is no PMIx (a key-value store such
 * as torch's c10d Store, MPI, a file system). Used only inside
 * tnt_comm_create_oob and by tnt_abort: libtnt copies what it needs and
 * never calls it after creation returns, except @p abort.
 */
typedef struct tnt_oob {
    /** Collective over all @p size processes, called in the same order on
     *  each: @p recvbuf receives size * bytes, process r's @p sendbuf at
     *  r * bytes. Every call of one creation passes the same @p bytes on
     *  every process. Returns 0 on success, non-zero on failure. With
     *  @p test NULL it returns when the exchange is done (*req ignored);
     *  otherwise it may return at once, leaving a request in *req. */
    int (*allgather)(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes, void **req);
    /** Optional: 1 when the exchange of @p req is done, 0 while it is not,
     *  negative on failure. libtnt polls it with back-off, bounded by
     *  TNT_TIMEOUT, and then calls @p req_free (if set). */
    int (*test)(void *ctx, void *req);
    void (*req_free)(void *ctx, void *req);
    /** Optional: ends every process of the job (tnt_abort). NULL: tnt_abort
     *  exits this process only, and the peers' next operation fails. */
    void (*abort)(void *ctx, int exit_code, const char *message);
    void *ctx;            /**< passed to every function above */
    int rank;             /**< this process, 0 .. size-1, unique */
    int size;             /**< processes that call tnt_comm_create_oob together */
    const char *job_id;   /**< names the job in logs; NULL: "oob" */
    const char *name;     /**< the communicator's name (tnt_comm_name) in
                           *   errors and verdicts; NULL: "oob" */
    const char *hostname; /**< NULL: gethostname(); processes share a node
                           *   only if hostname, kernel boot id and /dev/shm
                           *   are all the same (containers may share a
                           *   hostname, never all three) */
} tnt_oob_t;

/**
 * Builds a communicator of oob->size processes from the caller's exchange
 * instead of PMIx. Collective over those processes. TNT_* settings are
 * read and checked as in tnt_init. Fails with ::TNT_ERR_INVALID_ARG for a
 * bad @p oob (no allgather, rank out of range), ::TNT_ERR_BOOTSTRAP when
 * the exchange fails and ::TNT_ERR_TIMEOUT when a non-blocking one does
 * not finish within TNT_TIMEOUT.
 */
TNT_API tnt_status_t tnt_comm_create_oob(const tnt_oob_t *oob, tnt_comm_t **comm_p);

/** The color of a rank that wants no communicator from tnt_comm_split
 *  (MPI_UNDEFINED): *newcomm_p is set to NULL. */
#define TNT_COLOR_NONE (-1)

/**
 * Collective over @p comm, with MPI_Comm_split's meaning: the ranks that pass
 * the same @p color >= 0 form a new communicator, ranked by @p key and then
 * by their rank in @p comm. Ranks passing ::TNT_COLOR_NONE get NULL. The new
 * communicator has its own shared memory, network endpoints, progress
 * thread, sequence numbers and stall doctor, and takes a snapshot of
 * @p comm's settings. Any other negative color fails on every rank with
 * ::TNT_ERR_INVALID_ARG naming the rank and its color; a failure on any
 * rank fails the call on every rank (no communicator is left half made).
 * Communicators may be used from different threads, one thread per
 * communicator at a time.
 */
TNT_API tnt_status_t tnt_comm_split(tnt_comm_t *comm, int color, int key, tnt_comm_t **newcomm_p);

/** tnt_comm_split with one color and key = rank: same ranks, new everything else. */
TNT_API tnt_status_t tnt_comm_dup(tnt_comm_t *comm, tnt_comm_t **newcomm_p);

/** A name for logs and verdicts: "world" for tnt_init's, tnt_oob_t.name
 *  (or "oob") for tnt_comm_create_oob's, "<parent>.<color>" for a split's and
 *  "<parent>.dup<n>" for a dup's. */
TNT_API const char *tnt_comm_name(const tnt_comm_t *comm);

TNT_API int tnt_rank(const tnt_comm_t *comm);
TNT_API int tnt_size(const tnt_comm_t *comm);
TNT_API int tnt_local_rank(const tnt_comm_t *comm);
TNT_API int tnt_local_size(const tnt_comm_t *comm);
/** Index of this rank's node, 0 .. tnt_num_nodes()-1, numbered in order of
 *  the lowest rank on each node. Derived from each rank's PMIX_HOSTNAME. */
TNT_API int tnt_node_id(const tnt_comm_t *comm);
TNT_API int tnt_num_nodes(const tnt_comm_t *comm);
/** Hostname this rank reported through PMIx. */
TNT_API const char *tnt_hostname(const tnt_comm_t *comm);

/**
 * Aborts the whole job (PMIx_Abort where a PMIx server is present, so the
 * launcher or slurmstepd kills every rank), after printing @p message with
 * this rank and host. Does not return.
 */
TNT_API void tnt_abort(tnt_comm_t *comm, int exit_code, const char *message);

/* ------------------------------------------------------------------------ */
/* Stalls (docs/failures.md)                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Declares a long wait on purpose on this rank (rank 0 writing a checkpoint
 * while the others wait for it). Until the matching tnt_stall_resume, this
 * rank neither warns (TNT_STALL_WARN) nor times out (TNT_TIMEOUT) in a
 * collective, and peers do not blame it; a peer that dies still ends the
 * wait. Calls nest; any thread. Every rank of a collective save calls it.
 */
TNT_API void tnt_stall_pause(tnt_comm_t *comm);
TNT_API void tnt_stall_resume(tnt_comm_t *comm);

/**
 * Installs a handler for @p signo (SIGUSR2 is the convention) that prints
 * one line to stderr saying where this rank is: its current or last
 * collective with sequence number (and fusion step and bucket), and whether
 * it is waiting for peers. A handler installed before is called after it.
 * The job goes on. Fails with ::TNT_ERR_INVALID_ARG for SIGKILL/SIGSTOP.
 */
TNT_API tnt_status_t tnt_report_on_signal(tnt_comm_t *comm, int signo);

/* ------------------------------------------------------------------------ */
/* Timeline (docs/timeline.md)                                               */
/* ------------------------------------------------------------------------ */

/**
 * Starts recording a Chrome-trace timeline of this process's collectives,
 * fusion buckets and stall warnings (and of the events given to
 * tnt_timeline_record) into @p path, which rank 0 writes at
 * tnt_timeline_stop (or tnt_finalize) with every rank's events merged.
 * Collective over @p comm. Rank 0 creates the file's temporary sibling
 * now, so an unwritable path fails here on every rank
 * (::TNT_ERR_INVALID_ARG). ::TNT_ERR_INVALID_ARG too when a timeline is
 * already recording (one per process; TNT_TIMELINE starts one in tnt_init).
 */
TNT_API tnt_status_t tnt_timeline_start(tnt_comm_t *comm, const char *path);

/**
 * Stops recording, gathers every rank's events to rank 0 over @p comm (the
 * communicator that started it) and writes the file atomically (a temporary
 * file renamed into place). Collective. When the gather fails, each rank
 * writes its own part to PATH.rankN on its node instead. Does nothing when
 * no timeline records.
 */
TNT_API tnt_status_t tnt_timeline_stop(tnt_comm_t *comm);

/** 1 while a timeline records in this process. */
TNT_API int tnt_timeline_active(void);

/** Kinds of events that callers above libtnt record. */
typedef enum {
    TNT_TIMELINE_STEP = 0,       /**< one training step */
    TNT_TIMELINE_SYNCHRONIZE = 1 /**< the optimizer's wait for the reduced gradients */
} tnt_timeline_kind_t;

/**
 * Records one event from @p start_ns to @p end_ns (CLOCK_MONOTONIC, as
 * tnt_timeline_now_ns) on the calling thread's lane; @p number is the step.
 * Does nothing when no timeline records. Any thread; no allocation, no lock.
 */
TNT_API void tnt_timeline_record(tnt_timeline_kind_t kind, uint64_t start_ns, uint64_t end_ns,
                                 uint64_t number);

/** CLOCK_MONOTONIC in nanoseconds: the timeline's clock. */
TNT_API uint64_t tnt_timeline_now_ns(void);

/* ------------------------------------------------------------------------ */
/* Blocking collectives                                                      */
/* ------------------------------------------------------------------------ */

TNT_API tnt_status_t tnt_barrier(tnt_comm_t *comm);

/** sendbuf == recvbuf: in place. count == 0 is valid and still synchronises
 *  nothing but argument checks. Results are bitwise identical on all ranks. */
TNT_API tnt_status_t tnt_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, tnt_dtype_t dtype, tnt_op_t op);

TNT_API tnt_status_t tnt_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root);

/** recvbuf holds size * bytes_per_rank bytes, rank r's data at offset r * bytes_per_rank. */
TNT_API tnt_status_t tnt_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank);

/* ------------------------------------------------------------------------ */
/* More collectives (docs/c-api.md, "The collective set")                    */
/* ------------------------------------------------------------------------ */
/*
 * Every rank passes the same counts, dtype, op and root: each call first
 * checks that across ranks, and a difference fails on every rank with
 * ::TNT_ERR_MISMATCH naming the ranks and values; a bad argument on any
 * rank (a root out of range, a NULL buffer, overlapping buffers) fails on
 * every rank with ::TNT_ERR_INVALID_ARG, the rank that passed it naming it.
 * Nothing is sent then, and the communicator stays usable. Reductions are
 * bitwise identical on every rank, as tnt_allreduce's are.
 */

/** The reduction of every rank's @p count elements lands in @p recvbuf on
 *  @p root (may be NULL elsewhere). sendbuf == recvbuf on the root: in place. */
TNT_API tnt_status_t tnt_reduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root);

/** @p sendbuf holds size * @p recvcount elements; rank r receives block r of
 *  their reduction. In place: recvbuf == sendbuf + rank * recvcount elements. */
TNT_API tnt_status_t tnt_reduce_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, tnt_dtype_t dtype, tnt_op_t op);

/** The same with per-rank block sizes: rank r receives @p recvcounts[r]
 *  elements starting at the sum of the counts before it. */
TNT_API tnt_status_t tnt_reduce_scatterv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op);

/** @p root receives size * @p bytes_per_rank bytes, rank r's at r * bytes_per_rank
 *  (@p recvbuf may be NULL elsewhere). In place on the root: sendbuf is its block. */
TNT_API tnt_status_t tnt_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, int root);

/** Rank r receives block r of @p root's size * @p bytes_per_rank bytes
 *  (@p sendbuf may be NULL elsewhere). In place on the root: recvbuf is its block. */
TNT_API tnt_status_t tnt_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t bytes_per_rank, int root);

/** Rank r contributes @p recvbytes[r] bytes; @p recvbuf receives them all,
 *  packed in rank order. */
TNT_API tnt_status_t tnt_allgatherv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *recvbytes);

/** Block j of @p sendbuf (bytes_per_rank each) goes to rank j, which keeps it
 *  as block r of its @p recvbuf, r being the sender. */
TNT_API tnt_status_t tnt_alltoall(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank);

/** The same with sizes per pair, packed in rank order: this rank sends
 *  @p sendbytes[j] bytes to rank j and receives @p recvbytes[r] from rank r;
 *  every pair must agree (rank r's sendbytes[me] == my recvbytes[r]). */
TNT_API tnt_status_t tnt_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                   void *recvbuf, const size_t *recvbytes);

/* ------------------------------------------------------------------------ */
/* Nonblocking collectives: post, then test or wait                          */
/* ------------------------------------------------------------------------ */

/** A posted operation. Posted operations run one at a time, in posting order,
 *  on libtnt's progress thread or, when that has not started one yet, on the
 *  thread that waits for it (tnt_wait, or a blocking collective called
 *  after the post). With TNT_OVERLAP=off (and by default with one CPU per
 *  rank on one node) a post does not wake the progress thread: the
 *  operation runs when it is waited for or tested (docs/tuning.md). */
typedef struct tnt_request tnt_request_t;

TNT_API tnt_status_t tnt_allreduce_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                        tnt_request_t **req_p);

TNT_API tnt_status_t tnt_broadcast_post(tnt_comm_t *comm, void *buf, size_t bytes, int root,
                                        tnt_request_t **req_p);

/** The posted forms of the collective set: the same arguments, checks and
 *  agreement (run when the operation runs; a bad argument on this rank is
 *  reported by tnt_wait), in posting order with every other posted
 *  operation. Buffers must stay untouched until the request completes; the
 *  count arrays are copied at the post. */
TNT_API tnt_status_t tnt_reduce_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op, int root,
                                     tnt_request_t **req_p);
TNT_API tnt_status_t tnt_reduce_scatter_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                             size_t recvcount, tnt_dtype_t dtype, tnt_op_t op,
                                             tnt_request_t **req_p);
TNT_API tnt_status_t tnt_reduce_scatterv_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                              const size_t *recvcounts, tnt_dtype_t dtype,
                                              tnt_op_t op, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_gather_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes_per_rank, int root, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_scatter_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t bytes_per_rank, int root, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_allgatherv_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvbytes, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_alltoall_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t bytes_per_rank, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_alltoallv_post(tnt_comm_t *comm, const void *sendbuf,
                                        const size_t *sendbytes, void *recvbuf,
                                        const size_t *recvbytes, tnt_request_t **req_p);

/** TNT_IN_PROGRESS while running; otherwise the operation's final status.
 *  Does not free the request. Never runs a collective itself; wakes the
 *  progress thread when posts do not (TNT_OVERLAP). A point-to-point
 *  request is moved along by the call (one round of progress, no waiting),
 *  and fails with ::TNT_ERR_TIMEOUT once nothing moved for TNT_TIMEOUT. */
TNT_API tnt_status_t tnt_test(tnt_request_t *req);

/** Blocks until the operation finishes, frees the request and returns its status. */
TNT_API tnt_status_t tnt_wait(tnt_request_t *req);

/* ------------------------------------------------------------------------ */
/* Point-to-point messages (docs/c-api.md, "Point-to-point")                 */
/* ------------------------------------------------------------------------ */
/*
 * Tagged messages between two ranks of a communicator, on host buffers,
 * with MPI's meaning: a receive matches a message from its peer (or from
 * any rank, ::TNT_ANY_SOURCE) with its tag; messages between one pair with
 * one tag arrive in the order they were sent (non-overtaking). They travel
 * on a transport of the communicator's own, apart from the collectives, so
 * they need no matching call elsewhere, never wait for a collective and
 * cannot match one, nor a message of another communicator. A rank may send
 * to itself (post the receive, or the send, first).
 *
 * A send finishes when the receiver has matched it (MPI_Ssend), so a send
 * that no receive matches within TNT_TIMEOUT fails with ::TNT_ERR_TIMEOUT
 * naming both ranks, as does a receive that nothing matches; a peer that
 * dies fails them with ::TNT_ERR_PEER_FAILED. Either failure breaks the
 * communicator's point-to-point transport (later calls fail at once, and
 * peers on other nodes that use it learn within milliseconds); its
 * collectives go on.
 * Bad arguments fail with ::TNT_ERR_INVALID_ARG naming the value, and
 * nothing is sent. One thread at a time may make point-to-point calls on a
 * communicator (another may run its collectives meanwhile).
 */

/** Receive from whichever rank sends a matching message first. */
#define TNT_ANY_SOURCE (-1)
/** Tags are 0 .. TNT_TAG_MAX (INT_MAX). */
#define TNT_TAG_MAX 0x7fffffff

/** What a receive got: the rank that sent the message (useful with
 *  ::TNT_ANY_SOURCE), its tag and its length, which may be less than the
 *  buffer's. */
typedef struct {
    int source;
    int tag;
    size_t bytes;
} tnt_recv_info_t;

/** Sends @p bytes from @p buf to rank @p peer with @p tag; returns when the
 *  receiver has matched it and the buffer may be reused. */
TNT_API tnt_status_t tnt_send(tnt_comm_t *comm, const void *buf, size_t bytes, int peer, int tag);

/** Receives one message from @p peer (or ::TNT_ANY_SOURCE) with @p tag into
 *  @p buf, which holds up to @p bytes; a longer message fails with
 *  ::TNT_ERR_MISMATCH (and is lost). @p info (may be NULL) gets the source
 *  and the length. */
TNT_API tnt_status_t tnt_recv(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                              tnt_recv_info_t *info);

/** The posted forms: they return at once with a request for tnt_test /
 *  tnt_wait, which move the message along (there is no background thread
 *  for these: a program that posts and then computes for a long time
 *  should test now and then). They do not run in the collectives' posting
 *  order. The buffer must stay untouched until the request completes; the
 *  receive's @p info (may be NULL) is filled when it completes without
 *  error and must stay valid until then. At most 256 point-to-point
 *  requests may be in flight on a communicator: the next post fails with
 *  ::TNT_ERR_NO_MEMORY. */
TNT_API tnt_status_t tnt_send_post(tnt_comm_t *comm, const void *buf, size_t bytes, int peer,
                                   int tag, tnt_request_t **req_p);
TNT_API tnt_status_t tnt_recv_post(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                                   tnt_recv_info_t *info, tnt_request_t **req_p);

/* ------------------------------------------------------------------------ */
/* Fusion engine: bucketed, overlapped gradient allreduce                    */
/* ------------------------------------------------------------------------ */

/** Pass as threshold to use TNT_FUSION_THRESHOLD_KB (KiB, a whole number from 0
 *  to 4194304) when it is set, or else the built-in default (also when it is
 *  "auto": see tnt_fusion_tune_requested). A bad value fails
 *  with ::TNT_ERR_INVALID_ARG (tnt_init already rejects it). */
#define TNT_FUSION_THRESHOLD_AUTO ((size_t)-1)

/** Built-in default fusion threshold in bytes: 1 MiB. Measured with
 *  tests/bench/fusion_bench.c (docs/tuning.md): up to about 2 MiB step times
 *  equal one allreduce per tensor on one node, while tiny tensors (biases,
 *  norms) are still fused, which saves latency between nodes; 8 MiB and more
 *  were 10-20% slower (later start, more staging copies). */
#define TNT_FUSION_THRESHOLD_DEFAULT_BYTES ((size_t)1 << 20)

/** 1 when the user asked for the fusion threshold to be tuned
 *  (TNT_FUSION_THRESHOLD=auto or TNT_FUSION_THRESHOLD_KB=auto), else 0.
 *  libtnt does not time steps: an engine created with
 *  ::TNT_FUSION_THRESHOLD_AUTO then uses ::TNT_FUSION_THRESHOLD_DEFAULT_BYTES;
 *  the tuning is done by a caller that sees the training steps (the Python
 *  package's GradientReducer, docs/tuning.md). */
TNT_API int tnt_fusion_tune_requested(const tnt_comm_t *comm);

/** 1 when tnt_allreduce on @p comm adds every element's contributions in an
 *  order that depends neither on the message's size nor on the element's
 *  offset in it, so that regrouping tensors into other buckets gives the
 *  same bits: one or two nodes, or three and more with TNT_ALLREDUCE_ALGO
 *  set to recursive_doubling, rabenseifner or tree. With three or more nodes
 *  and TNT_ALLREDUCE_ALGO=auto (or ring) it is 0: the algorithm, and the
 *  ring's order, follow the size. */
TNT_API int tnt_allreduce_order_fixed(const tnt_comm_t *comm);

/** One tensor of a fusion plan, in the order its gradient becomes ready. */
typedef struct {
    size_t count; /**< number of elements */
    tnt_dtype_t dtype;
} tnt_tensor_desc_t;

/**
 * Pure planning function: groups consecutive tensors into buckets of at least
 * @p threshold_bytes (the last bucket may be smaller). A change of dtype closes
 * the current bucket. Threshold 0 gives one bucket per tensor.
 * Greedy: a tensor joins the open bucket, which closes as soon as it holds at
 * least @p threshold_bytes (so zero-count tensors after that start a new one).
 * ::TNT_FUSION_THRESHOLD_AUTO is accepted. Buckets are numbered from 0 in
 * tensor order. @p bucket_of_tensor (num_tensors entries) receives each
 * tensor's bucket. Deterministic: the same input gives the same plan on every
 * rank. Gradients laid out back to back in plan order (one flat buffer) let
 * the engine reduce every bucket in place, without its staging copy.
 */
TNT_API tnt_status_t tnt_fusion_plan(const tnt_tensor_desc_t *tensors, size_t num_tensors,
                                     size_t threshold_bytes, size_t *bucket_of_tensor,
                                     size_t *num_buckets_p);

typedef struct tnt_fusion tnt_fusion_t;

/**
 * Collective: plans the buckets and checks that every rank has the same plan.
 * A plan that differs between ranks fails with TNT_ERR_MISMATCH and a message
 * naming the ranks. @p op is applied to every bucket (TNT_SUM with scale
 * factors gives weighted averages).
 * The comparison covers the tensors (order, counts, dtypes), the threshold
 * and @p op. Either every rank gets an engine or none does: a rank whose own
 * arguments are bad (or that runs out of memory) returns that error, and the
 * others return TNT_ERR_MISMATCH naming it, at once rather than after
 * TNT_TIMEOUT. Every buffer the engine needs
 * (a staging buffer per bucket of several tensors) is allocated here; steps
 * allocate nothing.
 */
TNT_API tnt_status_t tnt_fusion_create(tnt_comm_t *comm, const tnt_tensor_desc_t *tensors,
                                       size_t num_tensors, size_t threshold_bytes, tnt_op_t op,
                                       tnt_fusion_t **fusion_p);

/** Gradient compression of a fusion engine: the 16-bit type float32 buckets
 *  travel in (see tnt_fusion_create_compressed). */
typedef enum {
    TNT_COMPRESSION_NONE = 0, /**< buckets travel in their own dtype */
    TNT_COMPRESSION_FP16 = 1, /**< float32 buckets travel as IEEE float16 */
    TNT_COMPRESSION_BF16 = 2, /**< float32 buckets travel as bfloat16 */
    TNT_COMPRESSION_LAST
} tnt_compression_t;

/**
 * tnt_fusion_create with gradient compression: every float32 bucket is sent
 * and held in shared memory as @p compression's 16-bit type, which halves
 * the bytes each allreduce moves. For such a bucket the thread that runs it
 * multiplies each tensor by its scale (and, for ::TNT_AVG, by 1/size, so the
 * bucket is reduced as a sum of pre-scaled values whose partial sums stay
 * within the magnitude of one gradient and cannot overflow float16 where the
 * gradients themselves fit), rounds the product once to 16 bits into the
 * bucket's 16-bit staging buffer (allocated here), allreduces that, and
 * widens the result back into the tensors. Every reduction step accumulates
 * in float32 and rounds its result once: within a node all local ranks'
 * values are summed in float32 and rounded once; each hop between nodes
 * (16 bits on the wire) adds one more rounding. The result is therefore equal
 * to the float32 reduction within 16-bit rounding, not bitwise, and remains
 * bitwise identical on every rank. A value beyond float16's range (or an
 * Inf/NaN gradient) becomes Inf/NaN in the result on every rank.
 * Buckets of any other dtype (float64, 16-bit, integers) are reduced as by
 * tnt_fusion_create. Only ::TNT_SUM and ::TNT_AVG may be compressed; other
 * ops, or a @p compression out of range, fail with ::TNT_ERR_INVALID_ARG.
 * Plan agreement covers @p compression: ranks that differ get
 * ::TNT_ERR_MISMATCH naming them. ::TNT_COMPRESSION_NONE is tnt_fusion_create.
 */
TNT_API tnt_status_t tnt_fusion_create_compressed(tnt_comm_t *comm,
                                                  const tnt_tensor_desc_t *tensors,
                                                  size_t num_tensors, size_t threshold_bytes,
                                                  tnt_op_t op, tnt_compression_t compression,
                                                  tnt_fusion_t **fusion_p);

/** Frees the engine. Called in the middle of a step (some tensors marked,
 *  no wait yet), it first finishes the step as tnt_fusion_wait would, so peers
 *  are not left waiting. NULL is a no-op. */
TNT_API void tnt_fusion_destroy(tnt_fusion_t *fusion);

/** Number of buckets the plan produced. */
TNT_API size_t tnt_fusion_num_buckets(const tnt_fusion_t *fusion);

/**
 * Marks tensor @p index ready: its @p data (count elements of its dtype, which
 * stays valid and untouched until tnt_fusion_wait returns) is multiplied by
 * @p scale (1.0 for none) and contributed. When all tensors of a bucket are
 * ready, the bucket's allreduce starts on the progress thread (with
 * TNT_OVERLAP=off, and by default with one CPU per rank on one node, it is
 * queued and runs in tnt_fusion_wait, on the waiting thread).
 * The call only records the pointer: scaling, copying and reducing happen on
 * the thread that runs the bucket (a lone tensor, or a bucket whose tensors lie back to
 * back in memory, is scaled and reduced in place). Buckets start strictly in
 * bucket order, whatever order tensors are marked in. May be called from any
 * thread. Fails with TNT_ERR_INVALID_ARG, changing nothing, for an index out
 * of range, a tensor already marked in this step, NULL data with count > 0,
 * or a scale that is not finite.
 */
TNT_API tnt_status_t tnt_fusion_mark_ready(tnt_fusion_t *fusion, size_t index, void *data,
                                           double scale);

/**
 * Returns when every bucket is reduced and every tensor's data holds the
 * result, then resets the engine for the next step. Fails with
 * TNT_ERR_INVALID_ARG if some tensor was never marked ready.
 * A step ends with a one-byte allgather so that every rank knows whether
 * every rank marked every tensor: a rank that did not contributes zeros for
 * the missing tensors (so nobody hangs) and gets TNT_ERR_INVALID_ARG naming
 * the tensor indices; the other ranks get TNT_ERR_MISMATCH naming that rank.
 * Either way the engine is reset and usable for the next step. A failed
 * collective returns its own error (TNT_ERR_TIMEOUT, TNT_ERR_PEER_FAILED).
 */
TNT_API tnt_status_t tnt_fusion_wait(tnt_fusion_t *fusion);

/* ------------------------------------------------------------------------ */
/* Shard arithmetic (pure functions, no communication)                       */
/* ------------------------------------------------------------------------ */

/** Half-open range [begin, end). */
typedef struct {
    uint64_t begin;
    uint64_t end;
} tnt_range_t;

/** Micro-batch of rank @p rank out of @p size for a batch of @p batch samples:
 *  batch/size samples, plus one when rank < batch % size; ranges are
 *  contiguous and in rank order. An invalid rank or size gives {0, 0}. */
TNT_API tnt_range_t tnt_shard_range(uint64_t batch, int rank, int size);

/** Writes a permutation of 0..n-1 determined only by @p seed (not by the
 *  number of ranks) into @p perm (n entries). The algorithm is fixed and the
 *  same on every platform (Fisher-Yates driven by xoshiro256** seeded through
 *  splitmix64, Lemire's unbiased bounded sampling; docs/tuning.md spells it
 *  out). TNT_ERR_INVALID_ARG when perm is NULL and n > 0. */
TNT_API tnt_status_t tnt_shard_permutation(uint64_t n, uint64_t seed, uint64_t *perm);

/** Steps in an epoch of @p n samples with global batch @p batch: ceil(n/batch),
 *  or floor(n/batch) with @p drop_remainder. 0 when batch is 0. */
TNT_API uint64_t tnt_shard_num_steps(uint64_t n, uint64_t batch, int drop_remainder);

/** Positions (into the epoch's permutation) that rank @p rank uses at step
 *  @p step. The last partial batch (drop_remainder == 0) is split by the same
 *  rule as tnt_shard_range, so a rank may get an empty range. A step out of
 *  range or an invalid rank/size gives {0, 0}. */
TNT_API tnt_range_t tnt_shard_step_range(uint64_t n, uint64_t batch, int drop_remainder,
                                         uint64_t step, int rank, int size);

#ifdef __cplusplus
}
#endif

#endif /* TNT_TNT_H */
