/*
 * Internals shared by the shared-memory transport's files: the segment layout,
 * the per-process handle and the phase protocol. Only transport/shm*.c
 * include this.
 *
 * Segment layout (one per node, local rank 0 creates it):
 *   header       magic, sizes, attach counter, failure word (own lines)
 *   ctl[n]       per local rank: phase counter + published buffer addresses
 *                (one cache line, written only by its owner), identity line
 *   slots[n][2]  per local rank two staging slots of slot_bytes each
 *
 * Phase protocol. Every collective is a sequence of phases, and every local
 * rank runs the same sequence (the sizes and algorithm choices depend only
 * on arguments that are equal on all ranks). Finishing phase p means:
 *   1. write the data to publish into my slot (p & 1), then
 *   2. store ctl[me].seq = p with release order, then
 *   3. wait until ctl[j].seq >= p for every j, with acquire loads.
 * Data published with phase p may be read from the moment 3 completes until
 * the reader signals phase p + 1. The owner rewrites slot (p & 1) at the
 * earliest in phase p + 2, after it has seen every peer's seq >= p + 1, so
 * a slot is never overwritten while a peer still reads it: the readers'
 * loads happen-before their release store of p + 1, which happens-before the
 * owner's acquire load that sees p + 1, which precedes the owner's writes.
 */
#ifndef TNT_TRANSPORT_SHM_IMPL_H
#define TNT_TRANSPORT_SHM_IMPL_H

#include "transport/shm.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define TNT_SHM_CACHE_LINE 64
#define TNT_SHM_MAGIC      0x314d48535f544e54ull /* "TNT_SHM1" */

struct tnt_shm_header {
    /* Written by local rank 0 before it publishes magic with release order;
     * attachers read magic with acquire order before reading the rest. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t magic;
    uint32_t local_size;
    uint32_t reserved;
    uint64_t segment_bytes;
    uint64_t slot_bytes;
    uint64_t small_max; /* rank 0's choice, so all ranks agree */
    /* Each attaching rank increments it (acq_rel) after storing its pid;
     * rank 0 unlinks the name once it reads local_size. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint32_t attached;
    /* 0, or 1 + the local rank whose death was first detected: lets every
     * waiter stop at once instead of each waiting for its own liveness check. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic int32_t failed;
};

struct tnt_shm_ctl {
    /* Hot line, written only by the owner: seq is the last phase it finished;
     * the addresses of its user buffers (for single-copy reads through
     * process_vm_readv) are stored relaxed before seq's release store and
     * read after the acquire load that sees it. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t seq;
    _Atomic uint64_t sendbuf;
    _Atomic uint64_t recvbuf;
    /* Identity line, written once while attaching. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic int32_t pid;
    _Atomic int32_t cma_ok; /* this rank can read every peer with CMA */
    _Atomic uint64_t probe; /* address of a word peers test-read with CMA */
};

struct tnt_shm {
    struct tnt_shm_header *hdr;
    struct tnt_shm_ctl *ctl;
    char *slots;
    size_t segment_bytes;
    size_t slot_bytes;
    int me;
    int n;
    int *global_ranks; /* n entries, own copy */
    pid_t *pids;       /* n entries, copied after everyone attached */
    double timeout_s;
    tnt_watch_t *watch;       /* the hang doctor, or NULL (util/watch.h) */
    uint64_t phase;           /* last phase this rank finished */
    uint64_t num_collectives; /* for messages: "allreduce #12" */
    tnt_status_t broken;      /* sticky error after a peer failed */
    uint64_t spin_ns;         /* busy-poll this long before yielding */
    size_t small_max;         /* bytes: up to here every rank reduces all */
    /* TNT_SHM_CMA: single-copy process_vm_readv/writev for large messages,
     * used when every local rank can reach every other (tested at create).
     * Off by default: the staged copies measured faster on this project's
     * VMs at every size (docs/benchmarks.md), probably because pinning the
     * peers' pages costs more under virtualisation than a copy through L3. */
    int cma_allowed;
    int use_cma;            /* cma_allowed and the probe succeeded on every local rank */
    size_t cma_block_bytes; /* per peer, in cma_tmp */
    char *cma_tmp;          /* (n) * cma_block_bytes, private */
    const void **srcs;      /* n entries, scratch for tnt_reduce_n */
    uint64_t probe_word;
    char name[256];
};

static inline char *tnt_shm_slot(const struct tnt_shm *shm, int rank, uint64_t phase)
{
    return shm->slots + ((size_t)rank * 2 + (phase & 1)) * shm->slot_bytes;
}

/* Finishes a phase: publishes this rank's seq (release) and waits for every
 * peer to reach it (acquire). what names the collective in error messages. */
tnt_status_t tnt_shm_phase(struct tnt_shm *shm, const char *what);
/* Only the release store of the next phase (callers that wait separately). */
void tnt_shm_signal(struct tnt_shm *shm);
tnt_status_t tnt_shm_wait_all(struct tnt_shm *shm, const char *what);
/* Turns a failed process_vm_readv into the right error. */
tnt_status_t tnt_shm_cma_error(struct tnt_shm *shm, int peer, int err, const char *what);

#endif
