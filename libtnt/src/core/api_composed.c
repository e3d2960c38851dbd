/*
 * The public reduce, reduce_scatter(v), gather, scatter, allgatherv and
 * alltoall(v), blocking and posted: argument checks, then an agreement
 * round, then the collective (coll/composed.c). Each call becomes one
 * record (struct composed_call) that runs inline for a blocking call and
 * on the progress thread (or its waiter) for a posted one.
 *
 * The agreement round is one small allgather of what each rank passed. It
 * turns the two ways these calls go wrong across ranks into an error on
 * every rank instead of a hang or wrong data: a bad argument on one rank
 * (a root out of range there alone would otherwise leave the others
 * waiting for it until TNT_TIMEOUT), and ranks that pass different counts,
 * roots, dtypes or ops (MPI leaves both undefined).
 *
 * On one node (host buffers) the round would cost as much as a small
 * collective, so it rides on the collective instead: a digest of the
 * agreement (terms) travels in the signature of its first shared-memory
 * phase, which every rank checks before it reads anything
 * (transport/shm_impl.h). alltoallv's sizes, which differ from rank to
 * rank, travel in that phase's data, and every rank checks every pair
 * there alike (coll/coll.h, tnt_coll_alltoallv_sized). A rank
 * whose own checks failed, or a call with nothing to move, runs one phase
 * that carries only the terms, so every rank still takes exactly one phase.
 * Only when the terms differ do the ranks, still in step, run the full
 * round, which names the ranks and values as it does everywhere else.
 */
#include "coll/coll.h"
#include "comm/comm.h"
#include "core/api.h"
#include "gpu/gpu.h"
#include "util/dtype.h"
#include "util/hash.h"
#include "util/log.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum composed_kind {
    KIND_REDUCE = 1,
    KIND_REDUCE_SCATTER,
    KIND_GATHER,
    KIND_SCATTER,
    KIND_ALLGATHERV,
    KIND_ALLTOALL, /* and alltoallv (count 0 in the agreement) */
};

static const char *const kind_fn[] = {
    [KIND_REDUCE] = "tnt_reduce",         [KIND_REDUCE_SCATTER] = "tnt_reduce_scatter(v)",
    [KIND_GATHER] = "tnt_gather",         [KIND_SCATTER] = "tnt_scatter",
    [KIND_ALLGATHERV] = "tnt_allgatherv", [KIND_ALLTOALL] = "tnt_alltoall(v)",
};

/* What every rank passed; compared field by field with rank 0's. */
struct agreement {
    uint32_t kind;
    int32_t bad; /* this rank's arguments failed its own checks */
    int32_t dtype;
    int32_t op;
    int32_t root;
    int32_t device;  /* the _device form (tnt_cuda.h) */
    uint64_t count;  /* elements, or bytes per rank */
    uint64_t digest; /* of the per-rank counts every rank must pass alike */
};

/* Folds word into hash: each step is a bijection of hash for a given
 * word and of word for a given hash, so two inputs that differ in one word
 * always hash apart. A word at a time: this runs on every call, where
 * byte-wise FNV-1a's chain of 8 multiplies per word was measurable. */
static uint64_t mix(uint64_t hash, uint64_t word)
{
    hash = (hash ^ word) * UINT64_C(0x9e3779b97f4a7c15);
    return hash ^ (hash >> 32);
}

static uint64_t digest_counts(const size_t *counts, int size)
{
    uint64_t hash = TNT_FNV1A_INIT;
    for (int r = 0; r < size; r++) {
        hash = mix(hash, (uint64_t)counts[r]);
    }
    return hash;
}

/* Raised on rank 0 and the ranks that differ, recorded quietly elsewhere,
 * so the job prints the difference once per rank that caused it. */
static tnt_status_t disagree(const tnt_comm_t *comm, int r, const char *fn, const char *field,
                             long long theirs, long long rank0s)
{
    const char *fmt = "%s: ranks disagree: rank %d passes %s %lld, rank 0 passes %lld; every rank "
                      "of communicator %s must pass the same";
    if (comm->rank == 0 || comm->rank == r) {
        return tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, field, theirs, rank0s, comm->name);
    }
    return tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, field, theirs, rank0s, comm->name);
}

static uint64_t agreement_terms(const struct agreement *a);

/* What one rank contributes to the agreement round: its agreement, then
 * `words` more (alltoallv's sizes), in one record. */
static size_t record_bytes(size_t words)
{
    return sizeof(struct agreement) + words * sizeof(uint64_t);
}

static const struct agreement *record_at(const unsigned char *all, size_t words, int r)
{
    return (const struct agreement *)(all + (size_t)r * record_bytes(words));
}

/* The agreement round, inside the caller's progress enter/leave. local is
 * this rank's own check (its error already raised when not TNT_OK). With
 * carry, on one node, the round's allgather carries the terms too: a rank
 * here (a _device call, an alltoallv too large to carry its sizes) and one
 * whose call carries them in its collective (call_run_folded) then meet at
 * the same phase and find their difference quietly, and the round runs
 * once more, plain, as the other rank's fallback does, to name it.
 * words, extra: words more of this rank's that the same allgather carries;
 * every rank's land in extra_all (size x words), when every rank agrees. */
static tnt_status_t agree_carrying(tnt_comm_t *comm, const char *fn, tnt_status_t local,
                                   const struct agreement *mine, int carry, const uint64_t *extra,
                                   size_t words, uint64_t *extra_all)
{
    const size_t rec = record_bytes(words);
    unsigned char *buf = malloc(rec * ((size_t)comm->size + 1));
    if (buf == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", fn, comm->size);
    }
    unsigned char *my_record = buf, *all = buf + rec;
    memcpy(my_record, mine, sizeof(*mine));
    if (words > 0) {
        memcpy(my_record + sizeof(*mine), extra, words * sizeof(uint64_t));
    }
    tnt_status_t status;
    if (carry && tnt_coll_terms_fold(comm)) {
        tnt_coll_terms_next(comm, agreement_terms(mine));
        status = tnt_coll_allgather(comm, my_record, all, rec);
        tnt_coll_terms_next(comm, 0);
        if (status == TNT_ERR_MISMATCH && tnt_coll_terms_differed(comm)) {
            status = tnt_coll_allgather(comm, my_record, all, rec);
        }
    } else {
        status = tnt_coll_allgather(comm, my_record, all, rec);
    }
    for (int r = 0; r < comm->size && status == TNT_OK; r++) {
        if (record_at(all, words, r)->bad) {
            status = local != TNT_OK ? local
                                     : tnt_error_set(TNT_ERR_INVALID_ARG,
                                                     "%s: rank %d of communicator %s passed a "
                                                     "bad argument (its error says which); "
                                                     "nothing was sent",
                                                     fn, r, comm->name);
        }
    }
    const struct agreement *a0 = record_at(all, words, 0);
    for (int r = 1; r < comm->size && status == TNT_OK; r++) {
        const struct agreement *a = record_at(all, words, r);
        if (a->kind != a0->kind) {
            const char *k =
                a->kind < sizeof(kind_fn) / sizeof(kind_fn[0]) ? kind_fn[a->kind] : NULL;
            const char *fmt = "%s: ranks disagree: rank %d called %s, rank 0 %s";
            status =
                comm->rank == 0 || comm->rank == r
                    ? tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, k ? k : "?", kind_fn[a0->kind])
                    : tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, k ? k : "?", kind_fn[a0->kind]);
        } else if (a->device != a0->device) {
            /* Each would go on to a different transport and wait there. */
            const char *fmt = "%s: ranks disagree: rank %d called the %s form, rank 0 the %s form "
                              "(device buffers go through tnt_cuda.h's _device calls on every "
                              "rank)";
            const char *theirs = a->device ? "device (_device)" : "host";
            const char *rank0s = a0->device ? "device (_device)" : "host";
            status = comm->rank == 0 || comm->rank == r
                         ? tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, theirs, rank0s)
                         : tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, theirs, rank0s);
        } else if (a->count != a0->count) {
            status = disagree(comm, r, fn, "count", (long long)a->count, (long long)a0->count);
        } else if (a->dtype != a0->dtype) {
            status = disagree(comm, r, fn, "dtype", a->dtype, a0->dtype);
        } else if (a->op != a0->op) {
            status = disagree(comm, r, fn, "op", a->op, a0->op);
        } else if (a->root != a0->root) {
            status = disagree(comm, r, fn, "root", a->root, a0->root);
        } else if (a->digest != a0->digest) {
            status = disagree(comm, r, fn, "per-rank counts with digest", (long long)a->digest,
                              (long long)a0->digest);
        }
    }
    for (int r = 0; r < comm->size && status == TNT_OK && words > 0; r++) {
        memcpy(extra_all + (size_t)r * words, record_at(all, words, r) + 1,
               words * sizeof(uint64_t));
    }
    free(buf);
    return status;
}

static tnt_status_t agree(tnt_comm_t *comm, const char *fn, tnt_status_t local,
                          const struct agreement *mine, int carry)
{
    return agree_carrying(comm, fn, local, mine, carry, NULL, 0, NULL);
}

static tnt_status_t check_root(const tnt_comm_t *comm, int root, const char *fn)
{
    if (root < 0 || root >= comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: root %d is not a rank of communicator %s (ranks 0 .. %d)", fn,
                               root, comm->name, comm->size - 1);
    }
    return TNT_OK;
}

static tnt_status_t check_times_size(const tnt_comm_t *comm, size_t bytes, size_t *total_p,
                                     const char *fn)
{
    if (bytes > SIZE_MAX / (size_t)comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: %d ranks x %zu bytes overflows the address space", fn,
                               comm->size, bytes);
    }
    *total_p = bytes * (size_t)comm->size;
    return TNT_OK;
}

/* sendbuf and recvbuf are distinct and apart, or in place as own says. */
static tnt_status_t check_apart(const void *a, size_t a_bytes, const void *b, size_t b_bytes,
                                const void *in_place, const char *fn, const char *how)
{
    if (a != in_place && b != in_place && a_bytes > 0 && b_bytes > 0 &&
        tnt_api_overlap(a, a_bytes, b, b_bytes)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap; %s", fn, how);
    }
    return TNT_OK;
}

static tnt_status_t sum_counts(const size_t *counts, int size, size_t esize, size_t *total_p,
                               const char *fn, const char *name)
{
    size_t total = 0;
    if (counts == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    }
    for (int r = 0; r < size; r++) {
        if (counts[r] > (SIZE_MAX / esize - total)) {
            return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s overflows the address space", fn,
                                   name);
        }
        total += counts[r];
    }
    *total_p = total;
    return TNT_OK;
}

#define CALL_INLINE_RANKS 8

/* One call, checked: what runs it needs, with copies of the count arrays
 * (a posted call's caller may reuse its own) and this rank's check. */
struct composed_call {
    struct tnt_request request; /* first: a posted call is its request */
    enum composed_kind kind;
    const char *fn; /* for messages: kind_fn, or the _device name */
    /* The _device form: the data moves on the device path (gpu/), on
     * stream, after the same checks and agreement; device_bufs are checked
     * to be device memory before the agreement (NULL: none). */
    int device;
    void *stream;
    struct {
        const void *ptr;
        const char *name;
    } device_bufs[2];
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* reduce: elements; gather/scatter: bytes per rank */
    tnt_dtype_t dtype;
    tnt_op_t op;
    int root;
    size_t *sendcounts; /* size entries, or NULL */
    size_t *recvcounts; /* size entries, or NULL */
    size_t moved;       /* 0: nothing to move after the agreement */
    int on_stack;       /* a blocking call's record, in its caller's frame */
    struct agreement agreement;
    tnt_status_t local; /* this rank's own check */
    int local_printed;
    /* The count arrays of communicators of up to CALL_INLINE_RANKS ranks:
     * no allocation for them on the way to a small collective. */
    size_t counts_inline[2][CALL_INLINE_RANKS];
    /* Last, and not zeroed by call_new beyond its first byte. */
    char local_error[TNT_REQUEST_ERROR_MAX];
};

/* Count array which (0: send, 1: receive) of c, size entries, zeroed:
 * inline when it fits, else allocated (NULL when that fails). */
static size_t *call_counts(struct composed_call *c, int which, int size)
{
    if (size <= CALL_INLINE_RANKS) {
        memset(c->counts_inline[which], 0, sizeof(c->counts_inline[which]));
        return c->counts_inline[which];
    }
    return calloc((size_t)size, sizeof(size_t));
}

static void call_free_counts(struct composed_call *c)
{
    if (c->sendcounts != c->counts_inline[0]) {
        free(c->sendcounts);
    }
    if (c->recvcounts != c->counts_inline[1]) {
        free(c->recvcounts);
    }
    c->sendcounts = c->recvcounts = NULL;
}

static void call_free(struct composed_call *c)
{
    if (c != NULL) {
        call_free_counts(c);
        if (!c->on_stack) {
            free(c);
        }
    }
}

/* tnt_alltoallv (tnt_alltoall's count is its block size, never 0). */
static int call_is_alltoallv(const struct composed_call *c)
{
    return c->kind == KIND_ALLTOALL && c->agreement.count == 0;
}

/* The agreement round, which carries alltoallv's sizes too; alltoall(v)'s
 * send sizes land in *all_send_p (NULL otherwise). */
static tnt_status_t call_agree(tnt_comm_t *comm, struct composed_call *c, size_t **all_send_p)
{
    const char *fn = c->fn;
    if (c->local != TNT_OK) {
        /* This rank's own error is the one to report, on whichever thread
         * runs the call. */
        tnt_error_restore(c->local_error, c->local_printed);
    }
    const int size = comm->size;
    const int pairs = call_is_alltoallv(c);
    const size_t words = pairs ? 2 * (size_t)size : 0;
    uint64_t *sizes = NULL;
    if (pairs) {
        /* alltoallv: every rank's sendbytes and recvbytes ride on the
         * agreement's allgather, so that every rank checks every pair. */
        sizes = malloc((words + words * (size_t)size) * sizeof(uint64_t));
        if (sizes == NULL) {
            return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes", fn,
                                   size, size);
        }
        for (int j = 0; j < size; j++) {
            sizes[j] = c->sendcounts[j];
            sizes[size + j] = c->recvcounts[j];
        }
    }
    tnt_status_t status = agree_carrying(comm, fn, c->local, &c->agreement, 1, sizes, words,
                                         sizes != NULL ? sizes + words : NULL);
    if (c->local != TNT_OK && status == c->local) {
        /* Its own error, not the quiet one of a first round that found
         * the terms differ. */
        tnt_error_restore(c->local_error, c->local_printed);
    }
    size_t *all_send = NULL;
    if (status == TNT_OK && c->kind == KIND_ALLTOALL && c->agreement.count > 0) {
        /* tnt_alltoall on every rank with the same block size (the
         * agreement checked it): every pair agrees, no second round. */
        size_t n = (size_t)comm->size * (size_t)comm->size;
        all_send = malloc(n * sizeof(size_t));
        if (all_send == NULL) {
            return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes", fn,
                                   comm->size, comm->size);
        }
        for (size_t i = 0; i < n; i++) {
            all_send[i] = (size_t)c->agreement.count;
        }
    } else if (status == TNT_OK && pairs) {
        all_send = malloc((size_t)size * (size_t)size * sizeof(size_t));
        status = all_send == NULL
                     ? tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes", fn,
                                       size, size)
                     : tnt_coll_check_pairs(comm, fn, sizes + words, all_send);
    }
    free(sizes);
    if (status != TNT_OK) {
        free(all_send);
        return status;
    }
    *all_send_p = all_send;
    return TNT_OK;
}

/* The agreement in a signature's third word (tnt_coll_terms_next): every
 * field of it, bad included, two 32-bit fields to a word, hashed (never 0,
 * which means no terms). Arguments that differ in one field differ here
 * (see mix; but for hashes that differ only in the top two bits, which are
 * cleared, or are 0 and 1, which both become 1); several fields at once go
 * unnoticed only on a 62-bit collision, the risk the digest of per-rank
 * counts already takes. */
static uint64_t agreement_terms(const struct agreement *a)
{
    uint64_t hash = TNT_FNV1A_INIT;
    hash = mix(hash, (uint64_t)a->kind | (uint64_t)(uint32_t)a->bad << 32);
    hash = mix(hash, (uint64_t)(uint32_t)a->dtype | (uint64_t)(uint32_t)a->op << 32);
    hash = mix(hash, (uint64_t)(uint32_t)a->root | (uint64_t)(uint32_t)a->device << 32);
    hash = mix(hash, a->count);
    hash = mix(hash, a->digest);
    /* The top two bits mark an eager call's signature (transport/shm_impl.h). */
    hash &= ~(UINT64_C(3) << 62);
    return hash != 0 ? hash : 1;
}

/* What the hang doctor and the timeline call a call with nothing to move. */
static const struct {
    const char *name;
    tnt_doctor_kind_t kind;
} kind_coll[] = {
    [KIND_REDUCE] = { "allreduce", TNT_DOCTOR_ALLREDUCE },
    [KIND_REDUCE_SCATTER] = { "allreduce", TNT_DOCTOR_ALLREDUCE },
    [KIND_GATHER] = { "gather", TNT_DOCTOR_GATHER },
    [KIND_SCATTER] = { "scatter", TNT_DOCTOR_SCATTER },
    [KIND_ALLGATHERV] = { "allgather", TNT_DOCTOR_ALLGATHER },
    [KIND_ALLTOALL] = { "alltoall", TNT_DOCTOR_ALLTOALL },
};

/* Whether c agrees through the signature (see the top of the file). */
static int call_folds(const tnt_comm_t *comm, const struct composed_call *c)
{
    return !c->device && tnt_coll_terms_fold(comm) &&
           (!call_is_alltoallv(c) || tnt_coll_alltoallv_sized_fits(comm));
}

static tnt_status_t call_move(tnt_comm_t *comm, struct composed_call *c, const size_t *all_send);

/* A folded call failed on a difference between the terms alone: every
 * rank is here, in step, with nothing exchanged, and the full round says
 * who passed what. */
static tnt_status_t name_difference(tnt_comm_t *comm, const char *fn, tnt_status_t local,
                                    const struct agreement *mine)
{
    tnt_status_t status = agree(comm, fn, local, mine, 0);
    if (status == TNT_OK) {
        /* The digests differed but the arguments agree: only a call that
         * came out of step can do this. */
        status = tnt_error_raise(TNT_ERR_MISMATCH,
                                 "%s: the ranks of communicator %s disagree on the call "
                                 "(their signatures differ, their arguments do not)",
                                 fn, comm->name);
    }
    return status;
}

/* One node: the call's own collective carries the terms; a rank that
 * cannot run it, or a call with nothing to move, runs a phase with the
 * terms alone. Equal terms everywhere: a good rank has moved its data, a
 * bad one returns its own error (every rank was bad alike). */
static tnt_status_t call_run_folded(tnt_comm_t *comm, struct composed_call *c)
{
    const uint64_t terms = agreement_terms(&c->agreement);
    const int sized = call_is_alltoallv(c);
    size_t all_send_inline[CALL_INLINE_RANKS * CALL_INLINE_RANKS];
    uint64_t sizes_inline[CALL_INLINE_RANKS * 2 * CALL_INLINE_RANKS];
    size_t *all_send = NULL;
    uint64_t *sizes = NULL;
    tnt_status_t status;
    if (c->local == TNT_OK && c->moved > 0 && c->kind == KIND_ALLTOALL) {
        /* tnt_alltoall: every pair moves the one block size the terms
         * carry, so the sizes need no round of their own. tnt_alltoallv:
         * the call carries them (scratch for them here). */
        size_t n = (size_t)comm->size * (size_t)comm->size;
        int inline_ok = comm->size <= CALL_INLINE_RANKS;
        all_send = inline_ok ? all_send_inline : malloc(n * sizeof(size_t));
        sizes = !sized ? NULL : inline_ok ? sizes_inline : malloc(2 * n * sizeof(uint64_t));
        if (all_send == NULL || (sized && sizes == NULL)) {
            c->local = tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes",
                                       c->fn, comm->size, comm->size);
            snprintf(c->local_error, sizeof(c->local_error), "%s", tnt_error_message());
            c->local_printed = tnt_error_printed();
            c->agreement.bad = 1;
        }
        for (size_t i = 0; !sized && all_send != NULL && i < n; i++) {
            all_send[i] = (size_t)c->agreement.count;
        }
    }
    if (c->local == TNT_OK && c->moved > 0) {
        tnt_coll_terms_next(comm, terms);
        status = sized ? tnt_coll_alltoallv_sized(comm, c->fn, c->sendbuf, c->sendcounts,
                                                  c->recvbuf, c->recvcounts, sizes, all_send)
                       : call_move(comm, c, all_send);
        tnt_coll_terms_next(comm, 0);
    } else {
        status = tnt_coll_terms_only(comm, kind_coll[c->kind].name, kind_coll[c->kind].kind,
                                     c->agreement.count, c->local != TNT_OK,
                                     agreement_terms(&c->agreement));
    }
    if (all_send != all_send_inline) {
        free(all_send);
    }
    if (sizes != sizes_inline) {
        free(sizes);
    }
    if (status == TNT_OK && c->local != TNT_OK) {
        tnt_error_restore(c->local_error, c->local_printed);
        return c->local;
    }
    if (status == TNT_ERR_MISMATCH && tnt_coll_terms_differed(comm)) {
        if (c->local != TNT_OK) {
            tnt_error_restore(c->local_error, c->local_printed);
        }
        status = name_difference(comm, c->fn, c->local, &c->agreement);
    }
    return status;
}

static tnt_status_t call_run(tnt_comm_t *comm, struct composed_call *c)
{
    if (call_folds(comm, c)) {
        return call_run_folded(comm, c);
    }
    size_t *all_send = NULL;
    tnt_status_t status = call_agree(comm, c, &all_send);
    if (status == TNT_OK && c->moved > 0) {
        status = call_move(comm, c, all_send);
    }
    free(all_send);
    return status;
}

/* The collective itself, once the arguments are agreed (or while the
 * signature checks them). */
static tnt_status_t call_move(tnt_comm_t *comm, struct composed_call *c, const size_t *all_send)
{
    tnt_status_t status = TNT_OK;
    switch (c->kind) {
    case KIND_REDUCE:
        status = tnt_coll_reduce(comm, c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root);
        break;
    case KIND_REDUCE_SCATTER:
        status =
            tnt_coll_reduce_scatterv(comm, c->sendbuf, c->recvbuf, c->recvcounts, c->dtype, c->op);
        break;
    case KIND_GATHER:
        status = tnt_coll_gather(comm, c->sendbuf, c->recvbuf, c->count, c->root);
        break;
    case KIND_SCATTER:
        status = tnt_coll_scatter(comm, c->sendbuf, c->recvbuf, c->count, c->root);
        break;
    case KIND_ALLGATHERV:
        status = tnt_coll_allgatherv(comm, c->sendbuf, c->recvbuf, c->recvcounts);
        break;
    case KIND_ALLTOALL:
        status = tnt_coll_alltoallv(comm, c->sendbuf, c->sendcounts, c->recvbuf, all_send);
        break;
    }
    return status;
}

static tnt_status_t execute_call(tnt_comm_t *comm, struct tnt_request *req)
{
    struct composed_call *c = (struct composed_call *)req;
    tnt_status_t status = call_run(comm, c);
    /* tnt_wait frees the record as a request, without these. */
    call_free_counts(c);
    return status;
}

/* gather, scatter, allgatherv and alltoall(v) on device buffers: the
 * agreed arguments as pairs of ranks and bytes (gpu.h, struct
 * tnt_gpu_exchange). all_send: alltoall(v)'s matrix from the agreement. */
static tnt_status_t device_exchange(tnt_comm_t *comm, struct tnt_gpu *gpu,
                                    const struct composed_call *c, const size_t *all_send)
{
    const int size = comm->size, me = comm->rank;
    const size_t n = (size_t)size;
    size_t *mem = calloc(4 * n + n * n, sizeof(size_t));
    if (mem == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", c->fn, size);
    }
    size_t *sb = mem, *sd = mem + n, *rb = mem + 2 * n, *rd = mem + 3 * n, *all = mem + 4 * n;
    const size_t b = c->count;
    size_t at = 0;
    switch (c->kind) {
    case KIND_GATHER:
        for (int r = 0; r < size; r++) {
            all[(size_t)r * n + (size_t)c->root] = b;
            if (me == c->root) {
                rb[r] = b;
                rd[r] = (size_t)r * b;
            }
        }
        sb[c->root] = b;
        break;
    case KIND_SCATTER:
        for (int j = 0; j < size; j++) {
            all[(size_t)c->root * n + (size_t)j] = b;
            if (me == c->root) {
                sb[j] = b;
                sd[j] = (size_t)j * b;
            }
        }
        rb[c->root] = b;
        break;
    case KIND_ALLGATHERV:
        for (int r = 0; r < size; r++) {
            for (int j = 0; j < size; j++) {
                all[(size_t)r * n + (size_t)j] = c->recvcounts[r];
            }
            sb[r] = c->recvcounts[me];
            rb[r] = c->recvcounts[r];
            rd[r] = at;
            at += c->recvcounts[r];
        }
        break;
    default: /* KIND_ALLTOALL */
        memcpy(all, all_send, n * n * sizeof(size_t));
        for (int j = 0; j < size; j++) {
            sb[j] = c->sendcounts[j];
            sd[j] = at;
            at += sb[j];
        }
        at = 0;
        for (int r = 0; r < size; r++) {
            rb[r] = c->recvcounts[r];
            rd[r] = at;
            at += rb[r];
        }
        break;
    }
    const struct tnt_gpu_exchange x = { .fn = c->fn,
                                        .send = c->sendbuf,
                                        .recv = c->recvbuf,
                                        .send_bytes = sb,
                                        .send_displs = sd,
                                        .recv_bytes = rb,
                                        .recv_displs = rd,
                                        .all_send = all };
    tnt_status_t status = tnt_gpu_exchange(gpu, &x, c->stream);
    free(mem);
    return status;
}

/* A _device call: set up (or lock) the device path, check that the
 * buffers are device memory, agree as the host calls do, then move the
 * data on the device path, outside the progress section (the host-staged
 * path enters it for each chunk). Takes c. */
static tnt_status_t call_submit_device(tnt_comm_t *comm, struct composed_call *c)
{
    struct tnt_gpu *gpu;
    tnt_status_t status = tnt_gpu_enter(comm, c->fn, &gpu);
    if (status != TNT_OK) {
        /* Set-up fails on every rank alike (gpu/device.c). */
        call_free(c);
        return status;
    }
    for (int i = 0; i < 2 && c->local == TNT_OK; i++) {
        if (c->device_bufs[i].ptr != NULL) {
            c->local =
                tnt_gpu_check_device(gpu, c->device_bufs[i].ptr, c->fn, c->device_bufs[i].name);
        }
    }
    if (c->local != TNT_OK) {
        snprintf(c->local_error, sizeof(c->local_error), "%s", tnt_error_message());
        c->local_printed = tnt_error_printed();
    }
    c->agreement.bad = c->local != TNT_OK;
    c->agreement.device = 1;
    size_t *all_send = NULL;
    status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = call_agree(comm, c, &all_send);
        tnt_progress_leave(comm);
    }
    if (status == TNT_OK && c->moved > 0) {
        switch (c->kind) {
        case KIND_REDUCE:
            status = tnt_gpu_reduce(gpu, c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root,
                                    c->stream);
            break;
        case KIND_REDUCE_SCATTER:
            status = tnt_gpu_reduce_scatterv(gpu, c->sendbuf, c->recvbuf, c->recvcounts, c->dtype,
                                             c->op, c->stream);
            break;
        default:
            status = device_exchange(comm, gpu, c, all_send);
            break;
        }
    }
    free(all_send);
    tnt_gpu_leave(gpu);
    call_free(c);
    return status;
}

/* Runs c now (req_p NULL) or posts it. Takes c. A bad argument still
 * joins the agreement round, so that every rank fails alike. */
static tnt_status_t call_submit(tnt_comm_t *comm, struct composed_call *c, tnt_request_t **req_p)
{
    tnt_status_t status;
    if (c->device) {
        return call_submit_device(comm, c);
    }
    if (c->local != TNT_OK) {
        snprintf(c->local_error, sizeof(c->local_error), "%s", tnt_error_message());
        c->local_printed = tnt_error_printed();
    }
    c->agreement.bad = c->local != TNT_OK;
    if (req_p == NULL) {
        status = tnt_progress_enter(comm);
        if (status == TNT_OK) {
            status = call_run(comm, c);
            tnt_progress_leave(comm);
        }
        call_free(c);
        return status;
    }
    /* Posted: the record is the request; tnt_wait frees only the request
     * part, so the count arrays go when the call has run. */
    c->request.comm = comm;
    c->request.execute = execute_call;
    status = tnt_progress_post(comm, &c->request);
    if (status != TNT_OK) {
        call_free(c);
        return status;
    }
    *req_p = &c->request;
    return TNT_OK;
}

/* What a _device call adds (tnt_cuda.h); NULL for the host calls. */
struct device_target {
    const char *fn;
    void *stream;
};

/* A new record, or NULL with the error raised. Count arrays are copied.
 * A blocking call (stack: its caller's record) allocates nothing and leaves
 * the request part, with its kilobyte of error text, as it is: only a
 * posted call is a request. dev: a _device call's name and stream. */
static struct composed_call *call_new(tnt_comm_t *comm, enum composed_kind kind,
                                      const size_t *sendcounts, const size_t *recvcounts,
                                      const struct device_target *dev,
                                      struct composed_call *stack)
{
    /* Zeroed up to the error text, which only needs its first byte. */
    struct composed_call *c = stack != NULL ? stack : malloc(sizeof(*c));
    size_t bytes = (size_t)comm->size * sizeof(size_t);
    if (c != NULL && stack != NULL) {
        memset(&c->kind, 0,
               offsetof(struct composed_call, local_error) - offsetof(struct composed_call, kind));
        c->local_error[0] = '\0';
        c->on_stack = 1;
    } else if (c != NULL) {
        memset(c, 0, offsetof(struct composed_call, local_error));
        c->local_error[0] = '\0';
    }
    if (c != NULL && sendcounts != NULL) {
        c->sendcounts = call_counts(c, 0, comm->size);
        if (c->sendcounts != NULL) {
            memcpy(c->sendcounts, sendcounts, bytes);
        }
    }
    if (c != NULL && recvcounts != NULL) {
        c->recvcounts = call_counts(c, 1, comm->size);
        if (c->recvcounts != NULL) {
            memcpy(c->recvcounts, recvcounts, bytes);
        }
    }
    if (c == NULL || (sendcounts != NULL && c->sendcounts == NULL) ||
        (recvcounts != NULL && c->recvcounts == NULL)) {
        call_free(c);
        tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for a call on %d ranks",
                        kind_fn[kind], comm->size);
        return NULL;
    }
    c->kind = kind;
    c->fn = kind_fn[kind];
    c->request.heap_allocated = !c->on_stack;
    c->agreement.kind = kind;
    if (dev != NULL) {
        c->device = 1;
        c->fn = dev->fn;
        c->stream = dev->stream;
    }
    return c;
}

/* Buffer i of c must be device memory when bytes > 0 (a _device call). */
static void call_device_buf(struct composed_call *c, int i, const void *ptr, size_t bytes,
                            const char *name)
{
    if (c->device && bytes > 0) {
        c->device_bufs[i].ptr = ptr;
        c->device_bufs[i].name = name;
    }
}

/* A blocking host call that passed its own checks, on one node
 * (tnt_coll_terms_fold), with something to move: what call_submit and
 * call_run_folded do for it, without the record, which serves what this
 * path leaves out (a bad argument on this rank, whose error must reach
 * whichever thread runs the call; count arrays; the _device forms; posted
 * calls). A small call moves its bytes through the eager ring, whose
 * signature then describes it completely, and the per-call work here is
 * most of its latency. */
static tnt_status_t run_direct(tnt_comm_t *comm, const char *fn, const struct agreement *a,
                               const void *sendbuf, void *recvbuf, size_t count, tnt_dtype_t dtype,
                               tnt_op_t op)
{
    tnt_status_t status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    /* An eager call's signature describes it completely and drops the
     * terms: no digest for it (the terms are 0 outside the calls that set
     * them). */
    const int eager = a->kind == KIND_REDUCE
                          ? tnt_coll_reduce_eager(comm, count * tnt_dtype_bytes(dtype))
                      : a->kind == KIND_GATHER ? tnt_coll_gather_eager(comm, count)
                                               : tnt_coll_scatter_eager(comm, count);
    if (!eager) {
        tnt_coll_terms_next(comm, agreement_terms(a));
    }
    switch (a->kind) {
    case KIND_REDUCE:
        status = tnt_coll_reduce(comm, sendbuf, recvbuf, count, dtype, op, a->root);
        break;
    case KIND_GATHER:
        status = tnt_coll_gather(comm, sendbuf, recvbuf, count, a->root);
        break;
    default: /* KIND_SCATTER */
        status = tnt_coll_scatter(comm, sendbuf, recvbuf, count, a->root);
        break;
    }
    if (!eager) {
        tnt_coll_terms_next(comm, 0);
    }
    if (status == TNT_ERR_MISMATCH && tnt_coll_terms_differed(comm)) {
        status = name_difference(comm, fn, TNT_OK, a);
    }
    tnt_progress_leave(comm);
    return status;
}

static tnt_status_t reduce_call(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root,
                                const struct device_target *dev, tnt_request_t **req_p)
{
    const char *fn = dev != NULL ? dev->fn : kind_fn[KIND_REDUCE];
    size_t bytes = 0;
    tnt_status_t local = tnt_api_check_reduction(dtype, op, count, &bytes, fn);
    if (local == TNT_OK) {
        local = check_root(comm, root, fn);
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, bytes, fn, "sendbuf");
    }
    if (local == TNT_OK && comm->rank == root) {
        local = tnt_api_check_buffer(recvbuf, bytes, fn, "recvbuf");
        if (local == TNT_OK) {
            local = check_apart(sendbuf, bytes, recvbuf, bytes, recvbuf == sendbuf ? sendbuf : NULL,
                                fn, "pass the same pointer twice for an in-place reduce");
        }
    }
    const struct agreement agreement = {
        .kind = KIND_REDUCE, .dtype = dtype, .op = op, .root = root, .count = count
    };
    if (local == TNT_OK && bytes > 0 && dev == NULL && req_p == NULL &&
        tnt_coll_terms_fold(comm)) {
        return run_direct(comm, fn, &agreement, sendbuf, recvbuf, count, dtype, op);
    }
    struct composed_call stack; /* a blocking call's record */
    struct composed_call *c =
        call_new(comm, KIND_REDUCE, NULL, NULL, dev, req_p == NULL ? &stack : NULL);
    if (c == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->count = count;
    c->dtype = dtype;
    c->op = op;
    c->root = root;
    c->moved = bytes;
    c->local = local;
    c->agreement = agreement;
    if (local == TNT_OK) {
        call_device_buf(c, 0, sendbuf, bytes, "sendbuf");
        call_device_buf(c, 1, recvbuf, comm->rank == root ? bytes : 0, "recvbuf");
    }
    return call_submit(comm, c, req_p);
}

/* equal: blocks of equal_count each (tnt_reduce_scatter), else
 * recvcounts. */
static tnt_status_t reduce_scatter_call(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        int equal, const size_t *recvcounts, size_t equal_count,
                                        tnt_dtype_t dtype, tnt_op_t op, const char *fn,
                                        const struct device_target *dev, tnt_request_t **req_p)
{
    size_t bytes = 0, total = 0, offset = 0;
    struct composed_call stack; /* a blocking call's record */
    struct composed_call *c =
        call_new(comm, KIND_REDUCE_SCATTER, NULL, NULL, dev, req_p == NULL ? &stack : NULL);
    if (c == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    tnt_status_t local = tnt_api_check_reduction(dtype, op, 0, &bytes, fn);
    size_t esize = local == TNT_OK ? tnt_dtype_bytes(dtype) : 1;
    if (local == TNT_OK && !equal) {
        local = sum_counts(recvcounts, comm->size, esize, &total, fn, "recvcounts");
    }
    if (local == TNT_OK && equal && (equal_count > SIZE_MAX / esize / (size_t)comm->size)) {
        local = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                "%s: %d ranks x %zu elements overflows the address space", fn,
                                comm->size, equal_count);
    }
    if (local == TNT_OK) {
        c->recvcounts = call_counts(c, 1, comm->size);
        if (c->recvcounts == NULL) {
            call_free(c);
            return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory", fn);
        }
        total = 0;
        for (int r = 0; r < comm->size; r++) {
            c->recvcounts[r] = equal ? equal_count : recvcounts[r];
            offset += r < comm->rank ? c->recvcounts[r] : 0;
            total += c->recvcounts[r];
        }
        local = tnt_api_check_buffer(sendbuf, total * esize, fn, "sendbuf");
    }
    size_t mine = local == TNT_OK ? c->recvcounts[comm->rank] * esize : 0;
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, mine, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        const void *own = (const char *)sendbuf + offset * esize;
        local = check_apart(sendbuf, total * esize, recvbuf, mine, recvbuf == own ? recvbuf : NULL,
                            fn, "for in place, recvbuf is this rank's block of sendbuf");
    }
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->dtype = dtype;
    c->op = op;
    c->moved = total * esize;
    c->local = local;
    c->agreement =
        (struct agreement){ .kind = KIND_REDUCE_SCATTER,
                            .dtype = dtype,
                            .op = op,
                            .count = equal_count,
                            .digest =
                                local == TNT_OK ? digest_counts(c->recvcounts, comm->size) : 0 };
    if (local == TNT_OK) {
        call_device_buf(c, 0, sendbuf, total * esize, "sendbuf");
        call_device_buf(c, 1, recvbuf, mine, "recvbuf");
    }
    return call_submit(comm, c, req_p);
}

/* gather and scatter: the root's buffer holds every rank's block. */
static tnt_status_t rooted_call(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, int root, enum composed_kind kind,
                                const struct device_target *dev, tnt_request_t **req_p)
{
    const char *fn = dev != NULL ? dev->fn : kind_fn[kind];
    size_t total = 0;
    tnt_status_t local = check_root(comm, root, fn);
    if (local == TNT_OK) {
        local = check_times_size(comm, bytes_per_rank, &total, fn);
    }
    int gather = kind == KIND_GATHER;
    const void *mine = gather ? sendbuf : recvbuf;
    const void *whole = gather ? recvbuf : sendbuf;
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(mine, bytes_per_rank, fn, gather ? "sendbuf" : "recvbuf");
    }
    if (local == TNT_OK && comm->rank == root) {
        local = tnt_api_check_buffer(whole, total, fn, gather ? "recvbuf" : "sendbuf");
        if (local == TNT_OK) {
            const void *own = (const char *)whole + (size_t)root * bytes_per_rank;
            local = check_apart(mine, bytes_per_rank, whole, total, mine == own ? mine : NULL, fn,
                                "for in place, the root passes its own block of the whole buffer");
        }
    }
    const struct agreement agreement = { .kind = kind, .root = root, .count = bytes_per_rank };
    if (local == TNT_OK && bytes_per_rank > 0 && dev == NULL && req_p == NULL &&
        tnt_coll_terms_fold(comm)) {
        return run_direct(comm, fn, &agreement, sendbuf, recvbuf, bytes_per_rank, 0, 0);
    }
    struct composed_call stack; /* a blocking call's record */
    struct composed_call *c =
        call_new(comm, kind, NULL, NULL, dev, req_p == NULL ? &stack : NULL);
    if (c == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->count = bytes_per_rank;
    c->root = root;
    c->moved = bytes_per_rank;
    c->local = local;
    c->agreement = agreement;
    if (local == TNT_OK) {
        call_device_buf(c, 0, mine, bytes_per_rank, gather ? "sendbuf" : "recvbuf");
        call_device_buf(c, 1, whole, comm->rank == root ? total : 0,
                        gather ? "recvbuf" : "sendbuf");
    }
    return call_submit(comm, c, req_p);
}

static tnt_status_t allgatherv_call(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *recvbytes, const struct device_target *dev,
                                    tnt_request_t **req_p)
{
    const char *fn = dev != NULL ? dev->fn : kind_fn[KIND_ALLGATHERV];
    size_t total = 0;
    tnt_status_t local = sum_counts(recvbytes, comm->size, 1, &total, fn, "recvbytes");
    struct composed_call stack; /* a blocking call's record */
    struct composed_call *c =
        call_new(comm, KIND_ALLGATHERV, NULL, local == TNT_OK ? recvbytes : NULL, dev,
                 req_p == NULL ? &stack : NULL);
    if (c == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, recvbytes[comm->rank], fn, "sendbuf");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, total, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        local = check_apart(sendbuf, recvbytes[comm->rank], recvbuf, total, NULL, fn,
                            "use separate buffers");
    }
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    c->moved = total;
    c->local = local;
    c->agreement =
        (struct agreement){ .kind = KIND_ALLGATHERV,
                            .digest = local == TNT_OK ? digest_counts(recvbytes, comm->size) : 0 };
    if (local == TNT_OK) {
        call_device_buf(c, 0, sendbuf, recvbytes[comm->rank], "sendbuf");
        call_device_buf(c, 1, recvbuf, total, "recvbuf");
    }
    return call_submit(comm, c, req_p);
}

/* equal: blocks of equal_bytes each (tnt_alltoall), else the arrays. */
static tnt_status_t alltoall_call(tnt_comm_t *comm, const void *sendbuf, int equal,
                                  const size_t *sendbytes, void *recvbuf, const size_t *recvbytes,
                                  size_t equal_bytes, const char *fn,
                                  const struct device_target *dev, tnt_request_t **req_p)
{
    size_t send_total = 0, recv_total = 0;
    tnt_status_t local = TNT_OK;
    if (equal) {
        local = check_times_size(comm, equal_bytes, &send_total, fn);
        recv_total = send_total;
    } else {
        local = sum_counts(sendbytes, comm->size, 1, &send_total, fn, "sendbytes");
        if (local == TNT_OK) {
            local = sum_counts(recvbytes, comm->size, 1, &recv_total, fn, "recvbytes");
        }
    }
    /* The pair check needs both arrays on every rank, bad or not. */
    struct composed_call stack; /* a blocking call's record */
    struct composed_call *c =
        call_new(comm, KIND_ALLTOALL, NULL, NULL, dev, req_p == NULL ? &stack : NULL);
    if (c == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    c->sendcounts = call_counts(c, 0, comm->size);
    c->recvcounts = call_counts(c, 1, comm->size);
    if (c->sendcounts == NULL || c->recvcounts == NULL) {
        call_free(c);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    for (int r = 0; local == TNT_OK && r < comm->size; r++) {
        c->sendcounts[r] = equal ? equal_bytes : sendbytes[r];
        c->recvcounts[r] = equal ? equal_bytes : recvbytes[r];
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, send_total, fn, "sendbuf");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, recv_total, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        local =
            check_apart(sendbuf, send_total, recvbuf, recv_total, NULL, fn, "use separate buffers");
    }
    c->sendbuf = sendbuf;
    c->recvbuf = recvbuf;
    /* alltoallv: whether anything moves is known after the pair round. */
    c->moved = equal ? send_total : 1;
    c->local = local;
    /* One kind for both, told apart by count (alltoallv's is 0): a rank in
     * alltoall and one in alltoallv disagree on it. */
    c->agreement = (struct agreement){ .kind = KIND_ALLTOALL, .count = equal ? equal_bytes : 0 };
    if (local == TNT_OK) {
        call_device_buf(c, 0, sendbuf, send_total, "sendbuf");
        call_device_buf(c, 1, recvbuf, recv_total, "recvbuf");
    }
    return call_submit(comm, c, req_p);
}

/* ---- the public calls --------------------------------------------------- */

/* The posted calls' own two checks, before anything is made. */
static tnt_status_t check_post(const tnt_comm_t *comm, tnt_request_t **req_p, const char *fn)
{
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status == TNT_OK && req_p == NULL) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: req_p is NULL", fn);
    }
    return status;
}

TNT_API tnt_status_t tnt_reduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_reduce");
    return status != TNT_OK
               ? status
               : reduce_call(comm, sendbuf, recvbuf, count, dtype, op, root, NULL, NULL);
}

TNT_API tnt_status_t tnt_reduce_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op, int root,
                                     tnt_request_t **req_p)
{
    tnt_status_t status = check_post(comm, req_p, "tnt_reduce_post");
    return status != TNT_OK
               ? status
               : reduce_call(comm, sendbuf, recvbuf, count, dtype, op, root, NULL, req_p);
}

TNT_API tnt_status_t tnt_reduce_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, tnt_dtype_t dtype, tnt_op_t op)
{
    const char *fn = "tnt_reduce_scatter";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 1, NULL, recvcount, dtype,
                                                  op, fn, NULL, NULL);
}

TNT_API tnt_status_t tnt_reduce_scatter_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                             size_t recvcount, tnt_dtype_t dtype, tnt_op_t op,
                                             tnt_request_t **req_p)
{
    const char *fn = "tnt_reduce_scatter_post";
    tnt_status_t status = check_post(comm, req_p, fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 1, NULL, recvcount, dtype,
                                                  op, fn, NULL, req_p);
}

TNT_API tnt_status_t tnt_reduce_scatterv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op)
{
    const char *fn = "tnt_reduce_scatterv";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 0, recvcounts, 0, dtype,
                                                  op, fn, NULL, NULL);
}

TNT_API tnt_status_t tnt_reduce_scatterv_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                              const size_t *recvcounts, tnt_dtype_t dtype,
                                              tnt_op_t op, tnt_request_t **req_p)
{
    const char *fn = "tnt_reduce_scatterv_post";
    tnt_status_t status = check_post(comm, req_p, fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 0, recvcounts, 0, dtype,
                                                  op, fn, NULL, req_p);
}

TNT_API tnt_status_t tnt_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, int root)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_gather");
    return status != TNT_OK
               ? status
               : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root, KIND_GATHER, NULL, NULL);
}

TNT_API tnt_status_t tnt_gather_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes_per_rank, int root, tnt_request_t **req_p)
{
    tnt_status_t status = check_post(comm, req_p, "tnt_gather_post");
    return status != TNT_OK ? status
                            : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root, KIND_GATHER,
                                          NULL, req_p);
}

TNT_API tnt_status_t tnt_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t bytes_per_rank, int root)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_scatter");
    return status != TNT_OK ? status
                            : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root,
                                          KIND_SCATTER, NULL, NULL);
}

TNT_API tnt_status_t tnt_scatter_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t bytes_per_rank, int root, tnt_request_t **req_p)
{
    tnt_status_t status = check_post(comm, req_p, "tnt_scatter_post");
    return status != TNT_OK ? status
                            : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root,
                                          KIND_SCATTER, NULL, req_p);
}

TNT_API tnt_status_t tnt_allgatherv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *recvbytes)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_allgatherv");
    return status != TNT_OK ? status
                            : allgatherv_call(comm, sendbuf, recvbuf, recvbytes, NULL, NULL);
}

TNT_API tnt_status_t tnt_allgatherv_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvbytes, tnt_request_t **req_p)
{
    tnt_status_t status = check_post(comm, req_p, "tnt_allgatherv_post");
    return status != TNT_OK ? status
                            : allgatherv_call(comm, sendbuf, recvbuf, recvbytes, NULL, req_p);
}

TNT_API tnt_status_t tnt_alltoall(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank)
{
    const char *fn = "tnt_alltoall";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    return status != TNT_OK ? status
                            : alltoall_call(comm, sendbuf, 1, NULL, recvbuf, NULL, bytes_per_rank,
                                            fn, NULL, NULL);
}

TNT_API tnt_status_t tnt_alltoall_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t bytes_per_rank, tnt_request_t **req_p)
{
    const char *fn = "tnt_alltoall_post";
    tnt_status_t status = check_post(comm, req_p, fn);
    return status != TNT_OK ? status
                            : alltoall_call(comm, sendbuf, 1, NULL, recvbuf, NULL, bytes_per_rank,
                                            fn, NULL, req_p);
}

TNT_API tnt_status_t tnt_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                   void *recvbuf, const size_t *recvbytes)
{
    const char *fn = "tnt_alltoallv";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    return status != TNT_OK
               ? status
               : alltoall_call(comm, sendbuf, 0, sendbytes, recvbuf, recvbytes, 0, fn, NULL, NULL);
}

TNT_API tnt_status_t tnt_alltoallv_post(tnt_comm_t *comm, const void *sendbuf,
                                        const size_t *sendbytes, void *recvbuf,
                                        const size_t *recvbytes, tnt_request_t **req_p)
{
    const char *fn = "tnt_alltoallv_post";
    tnt_status_t status = check_post(comm, req_p, fn);
    return status != TNT_OK
               ? status
               : alltoall_call(comm, sendbuf, 0, sendbytes, recvbuf, recvbytes, 0, fn, NULL, req_p);
}

/* ---- the _device forms (tnt_cuda.h) -------------------------------------- */

TNT_API tnt_status_t tnt_reduce_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, tnt_dtype_t dtype, tnt_op_t op, int root,
                                       void *stream)
{
    const struct device_target dev = { .fn = "tnt_reduce_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK
               ? status
               : reduce_call(comm, sendbuf, recvbuf, count, dtype, op, root, &dev, NULL);
}

TNT_API tnt_status_t tnt_reduce_scatter_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                               size_t recvcount, tnt_dtype_t dtype, tnt_op_t op,
                                               void *stream)
{
    const struct device_target dev = { .fn = "tnt_reduce_scatter_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 1, NULL, recvcount, dtype,
                                                  op, dev.fn, &dev, NULL);
}

TNT_API tnt_status_t tnt_reduce_scatterv_device(tnt_comm_t *comm, const void *sendbuf,
                                                void *recvbuf, const size_t *recvcounts,
                                                tnt_dtype_t dtype, tnt_op_t op, void *stream)
{
    const struct device_target dev = { .fn = "tnt_reduce_scatterv_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : reduce_scatter_call(comm, sendbuf, recvbuf, 0, recvcounts, 0, dtype,
                                                  op, dev.fn, &dev, NULL);
}

TNT_API tnt_status_t tnt_gather_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t bytes_per_rank, int root, void *stream)
{
    const struct device_target dev = { .fn = "tnt_gather_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK
               ? status
               : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root, KIND_GATHER, &dev, NULL);
}

TNT_API tnt_status_t tnt_scatter_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t bytes_per_rank, int root, void *stream)
{
    const struct device_target dev = { .fn = "tnt_scatter_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : rooted_call(comm, sendbuf, recvbuf, bytes_per_rank, root,
                                          KIND_SCATTER, &dev, NULL);
}

TNT_API tnt_status_t tnt_allgatherv_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           const size_t *recvbytes, void *stream)
{
    const struct device_target dev = { .fn = "tnt_allgatherv_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : allgatherv_call(comm, sendbuf, recvbuf, recvbytes, &dev, NULL);
}

TNT_API tnt_status_t tnt_alltoall_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t bytes_per_rank, void *stream)
{
    const struct device_target dev = { .fn = "tnt_alltoall_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : alltoall_call(comm, sendbuf, 1, NULL, recvbuf, NULL, bytes_per_rank,
                                            dev.fn, &dev, NULL);
}

TNT_API tnt_status_t tnt_alltoallv_device(tnt_comm_t *comm, const void *sendbuf,
                                          const size_t *sendbytes, void *recvbuf,
                                          const size_t *recvbytes, void *stream)
{
    const struct device_target dev = { .fn = "tnt_alltoallv_device", .stream = stream };
    tnt_status_t status = tnt_api_check_comm(comm, dev.fn);
    return status != TNT_OK ? status
                            : alltoall_call(comm, sendbuf, 0, sendbytes, recvbuf, recvbytes, 0,
                                            dev.fn, &dev, NULL);
}
