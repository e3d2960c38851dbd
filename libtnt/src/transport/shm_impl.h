/*
 * Internals shared by the shared-memory transport's files: the segment layout,
 * the per-process handle and the phase protocol. Only transport/shm*.c
 * include this.
 *
 * Segment layout (one per node, local rank 0 creates it):
 *   header       magic, sizes, attach counter, failure word (own lines)
 *   ctl[n]       per local rank: phase counter, published buffer addresses
 *                and the collective's signature (one cache line, written
 *                only by its owner), identity line, liveness mutex
 *   slots[n][2]  per local rank two staging slots of slot_bytes each
 *   ring[n][TNT_SHM_RING]  per local rank its eager ring (Eager rooted calls)
 *   extra        extra_bytes for the layer above (the doctor's board)
 *
 * Trust. Only processes of the job's user can open the segment (mode 0600,
 * checked by every attacher together with the owner and the exact size
 * before it maps anything), and every size an attacher uses comes from the
 * bootstrap, compared with the header. The pids that CMA reads and writes
 * come from the bootstrap too; the buffer addresses in ctl do not need
 * to: whoever can write them runs as the job's user and could ptrace the
 * ranks anyway.
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
 *
 * Signature. The first phase of every collective also publishes what the
 * rank is doing (kind, count, dtype, op or root, and the collective's
 * number) in ctl.sig[p & 1], stored before the release store of seq; after
 * the wait every rank compares every peer's signature with its own. The
 * owner rewrites sig[p & 1] at the earliest in phase p + 2, by the same
 * argument as the slots. Since every earlier collective matched, the first
 * one that differs starts at the same phase on every rank, so all ranks see
 * the mismatch at once, before any data is read. The words share the line
 * of seq, which the wait has just read, so the check costs no extra miss.
 * A third word, terms, is a digest of the arguments the caller above passed
 * (tnt_shm_terms_next; 0 for the collectives that carry none): the
 * collective set (core/api_composed.c) agrees on its arguments this way
 * instead of in a round of its own.
 *
 * Liveness. Each rank holds its own robust, process-shared mutex
 * (ctl.alive) for as long as it is attached, from a small thread that does
 * nothing else. When the process dies the kernel marks the mutex
 * owner-dead, so a waiter's trylock tells death (EOWNERDEAD) from life
 * (EBUSY) without pids: it works across PID namespaces and cannot be fooled
 * by a reused pid or a zombie.
 */
#ifndef TNT_TRANSPORT_SHM_IMPL_H
#define TNT_TRANSPORT_SHM_IMPL_H

#include "transport/shm.h"
#include "transport/shm_stream_auto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TNT_SHM_CACHE_LINE 64
#define TNT_SHM_MAGIC      0x314d48535f544e54ull /* "TNT_SHM1" */

/* Ranks of one node synchronise through atomics in shared memory; a
 * lock-based (not lock-free) atomic would keep its lock in each process's
 * private memory and synchronise nothing. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");

/* What a rank publishes about the collective it starts (see Signature):
 * kind, dtype and op (or a broadcast's root) share one word with the
 * collective's number, the count has its own. */
enum tnt_shm_kind {
    TNT_SHM_KIND_BARRIER = 1,
    TNT_SHM_KIND_ALLREDUCE,
    TNT_SHM_KIND_BROADCAST,
    TNT_SHM_KIND_ALLGATHER,
    TNT_SHM_KIND_REDUCE_SCATTER,
    TNT_SHM_KIND_ALLGATHER_SLICES,
    TNT_SHM_KIND_GATHER,
    TNT_SHM_KIND_SCATTER,
    TNT_SHM_KIND_ALLTOALL,
    TNT_SHM_KIND_TERMS, /* tnt_shm_terms_only: nothing moves; op is 1 for bad arguments */
    TNT_SHM_KIND_REDUCE /* only as an eager send (see Eager rooted calls) */
};

/* Eager rooted calls. A small gather or reduce (the non-roots) and a small
 * scatter (the root) hand their bytes off: the sender writes them into the
 * entry of its eager ring for phase p, stores seq = p and returns without
 * waiting for the others (tnt_shm_eager_claim, tnt_shm_eager_publish). Each
 * rank has TNT_SHM_RING entries of TNT_SHM_RING_BYTES, used for phase p in
 * entry p % TNT_SHM_RING: a header line holds the phase that wrote it
 * (tag) and the call's signature, and also the data where it has at most
 * 32 bytes, so that such a message moves in the same line as its header;
 * a rank's header lines are adjacent, its larger data in blocks after
 * them. Every rank of an eager call, receivers too, stores its signature
 * in its own entry (ctl.sig is for the other collectives); the receivers
 * wait for every peer's phase p (polling the tag, then seq), check all the
 * signatures of p and read the data.
 *
 * Every rank of an eager call also stores a digest of its signature and
 * the phase (tnt_shm_sig_digest) in its lines of digests (ctl.sums), eight
 * phases to a line. A sender checks its sends against the peers' digests,
 * reading one line per peer for every eight phases; only where a
 * digest differs does it read the signatures themselves (the slow path,
 * which names the ranks). So nobody reads a receiver's entry while the
 * calls match, and the receiver (the root of a gather or reduce, the
 * other ranks of a scatter) rewrites its entries without taking their
 * lines back from a peer: a sender that was checking them cost each
 * receiver's call one cache-line transfer. Digests of different
 * signatures are equal only on a 64-bit collision, which would leave a
 * mismatch to the receivers, which compare the signatures themselves;
 * where every rank of a phase sent, nobody would see it.
 *
 * A sender thus runs up to TNT_SHM_RING - 1 calls ahead of its slowest
 * peer. It checks the signatures of the phases it sent later: where it
 * has to (its next other collective, tnt_shm_settle from tnt_shm_begin or
 * finalize, which checks every phase it sent, oldest first), and before it
 * sends phase q, every one of its sends up to q - TNT_SHM_RING + 1, with
 * the later ones that every peer has reached already: in steady state a
 * sender checks several phases together once every few calls.
 * ctl.unchecked is the oldest of its phases it has not checked yet (0:
 * none), so that always unchecked == 0 or unchecked > seq - TNT_SHM_RING + 1.
 *
 * Entries stay safe: a rank rewrites its entry of phase e = q - TNT_SHM_RING
 * (for phase q) only after every peer j has seq >= e + 1 (it has read e's
 * data, which a receiver does before it signals e + 1) and unchecked == 0
 * or > e (it has checked e's signatures, if it sent then): acquire loads of
 * both, which see release stores made after those reads (ring_clear caches
 * what a rank has seen). A rank that saw every peer reach p also knows, by
 * the invariant above, that the entries up to p - TNT_SHM_RING + 1 are
 * free, so a rank that has just received rewrites its next entry without
 * looking at the peers again. Slots and ctl.sig are untouched by
 * eager calls; a rank settles all its sends before any other collective,
 * which then finds every peer past them, as the phase protocol expects.
 *
 * Mismatches. An eager call's signature (all ranks') has TNT_SHM_TERMS_EAGER
 * | root for its third word instead of a digest, so that it describes the
 * call completely, and a sender's also TNT_SHM_TERMS_SENT, which the
 * comparison leaves out. Since every earlier call matched, the first call
 * that differs starts at the same phase p on every rank; a rank whose call
 * at p was eager has its signature in its entry of p (tag == p), the others
 * in ctl.sig[p & 1], and the slow path of the check reads each rank's from
 * where it is. A difference at a phase where some rank sent is named from
 * the signatures alone (no agreement round can follow: a sender has left)
 * and leaves the segment out of step on every rank; a sender learns it at
 * the latest in its next call that waits (another collective, a send that
 * finds the ring full, finalize). Where nobody sent, every rank waits at
 * that phase and the difference is handled as any other (the caller's
 * round names it, and the segment stays in step). The calls' digests
 * (tnt_shm_terms_next) never have either bit set.
 *
 * Taking lines early. A receiver's reads leave a copy of every line of a
 * sender's entry in the receiver's cache; the sender's next store to the
 * entry, TNT_SHM_RING calls later, must first take the line back from
 * that core, and since a core's stores retire in order, that one transfer
 * held up every later store of the sender. Back to back, those transfers
 * set its pace (0.09 us a call for 8 bytes, 2 ranks). So a sender asks
 * for the lines of its entry TNT_SHM_RING_AHEAD calls on, header and the
 * call's bytes of data, with a prefetch for writing
 * (tnt_shm_ring_prefetch), and only where ring_clear shows that every
 * peer is done with that entry: taking a line from a receiver still to
 * read it would cost the receiver the transfer instead. A receiver, for
 * its part, asks for the lines it will read of the peers' entries of the
 * next phase as soon as it has the current ones (a prefetch for reading,
 * tnt_shm_ring_prefetch_read): in a run of calls it reads them next, and
 * a sender is usually past them by then (the root of a gather or reduce
 * reads n - 1 entries against each sender's one; a scatter's receiver
 * asks for the header line only, as it would catch its root writing the
 * data). Both are hints and change no value, so the rules above hold
 * without them (docs/benchmarks.md, "Taking ring lines early"). */
#define TNT_SHM_TERMS_EAGER (UINT64_C(1) << 63)
#define TNT_SHM_TERMS_SENT  (UINT64_C(1) << 62)
/* Bytes up to which gather and scatter send eagerly (per rank) and reduce
 * does (the vector): the sizes where waiting for the receiver costs as
 * much as the copy. A scatter does so only while all its blocks fit one
 * ring entry. */
#define TNT_SHM_EAGER_MAX 4096
/* Entries of each rank's eager ring, and the bytes each takes: a header
 * line (tag, signature and up to TNT_SHM_RING_INLINE bytes of data) and a
 * block for larger data (TNT_SHM_RING_DATA). The header lines of a rank's
 * entries lie side by side, so that a receiver reading small messages in
 * order reads consecutive lines, which the hardware prefetches. 64
 * entries: back-to-back 8-32 B gathers, reduces and scatters ran
 * 1.13-1.20x the bus bandwidth of 8 entries, 128 little more
 * (docs/benchmarks.md, "A deeper eager ring"); the data blocks' pages are
 * touched only by calls of more than TNT_SHM_RING_INLINE bytes. */
#define TNT_SHM_RING        64
#define TNT_SHM_RING_BYTES  (2 * TNT_SHM_EAGER_MAX)
#define TNT_SHM_RING_INLINE 32
#define TNT_SHM_RING_DATA   (TNT_SHM_RING_BYTES - TNT_SHM_CACHE_LINE)
/* How many calls ahead a sender takes the lines of its entry (see Taking
 * lines early; 4 to 32 were measured, 8 was the fastest). */
#define TNT_SHM_RING_AHEAD 8
/* Bytes of a peer's next entry a receiver asks for beyond the header line
 * (see Taking lines early; 256, 512, 1024 and 4096 were measured: 256 too
 * few for a reduce of 512 bytes, more no faster). */
#define TNT_SHM_RING_READ_AHEAD 512
/* Vectors up to which the small allreduce takes the lines of the slot it
 * writes next as it finishes (see Taking lines early): it gained 1.3-1.4x
 * at 512 B-2 KiB, nothing at 8 KiB, and from 32 KiB to 512 KiB (the rest
 * of the one-phase path with 2 ranks) taking the whole slot made calls
 * 1.06-1.19x slower (docs/benchmarks.md, "Taking ring lines early"). */
#define TNT_SHM_TAKE_SLOT_MAX 2048
/* Blocks (per rank and peer) from which allgather, gather, scatter and
 * alltoall(v) copy once, from the sender's buffer into the receiver's with
 * CMA, instead of twice through the slots: two phases and one system call
 * per peer, which the saved copy repays from here ... */
#define TNT_SHM_BLOCK_CMA_MIN (16 * 1024)
/* ... and up to which gather and scatter do so by default
 * (TNT_SHM_CMA=auto): above it their staged copies, which the root and the
 * other ranks make at the same time, measured 7-17% faster than one copy
 * that the root (or each receiver) makes alone. allgather and alltoall(v),
 * where every rank copies its own share either way, take the single copy
 * at every size: staged, they measured 1.2-1.4x slower from 2 to 16 MiB
 * (docs/benchmarks.md, "Single copies for large exchanges"). */
#define TNT_SHM_BLOCK_CMA_AUTO_MAX (1024 * 1024)

struct tnt_shm_sig {
    _Atomic uint64_t what;  /* number << 24 | kind << 16 | dtype << 8 | op */
    _Atomic uint64_t count; /* elements, or bytes for broadcast/allgather */
    _Atomic uint64_t terms; /* the caller's digest of its arguments, or 0 */
};

/* The header line of an entry of an eager ring (see Eager rooted calls):
 * written only by its owner, tag last with release order. */
struct tnt_shm_ring_entry {
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t tag; /* the phase that wrote it */
    struct tnt_shm_sig sig;
    unsigned char data[TNT_SHM_RING_INLINE];
};
_Static_assert(sizeof(struct tnt_shm_ring_entry) == TNT_SHM_CACHE_LINE,
               "a ring entry's header, and small data, take one cache line");

struct tnt_shm_header {
    /* Written by local rank 0 before it publishes magic with release order;
     * attachers read magic with acquire order before reading the rest. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t magic;
    uint32_t local_size;
    uint32_t reserved;
    uint64_t segment_bytes;
    uint64_t slot_bytes;
    uint64_t small_max;   /* rank 0's choice, so all ranks agree */
    uint64_t extra_bytes; /* tnt_shm_params_t.extra_bytes */
    /* Each attaching rank increments it (acq_rel) after storing its pid;
     * rank 0 unlinks the name once it reads local_size. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint32_t attached;
    /* 0, or 1 + the local rank whose death was first detected: lets every
     * waiter stop at once instead of each waiting for its own liveness check. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic int32_t failed;
};

/* The staged collectives that may stream, each learning for itself. */
enum tnt_shm_stream_op {
    TNT_SHM_STREAM_ALLREDUCE,
    TNT_SHM_STREAM_REDUCE_SCATTER,
    TNT_SHM_STREAM_ALLGATHER_SLICES,
    TNT_SHM_STREAM_OPS
};

struct tnt_shm_ctl {
    /* Hot line, written only by the owner: seq is the last phase it
     * finished, next to the signatures that the first phase of a
     * collective checks. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t seq;
    struct tnt_shm_sig sig[2]; /* by phase parity, stored relaxed before seq */
    /* The oldest eager send whose signatures the owner has not checked
     * (0: none; see Eager rooted calls): stored relaxed before seq when it
     * is set, with release order when checks advance it. */
    _Atomic uint64_t unchecked;
    /* Identity line, written once while attaching. pid is in the rank's own
     * PID namespace: for messages and CMA only, never for liveness. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic int32_t pid;
    _Atomic int32_t cma_ok; /* this rank can read every peer with CMA */
    _Atomic uint64_t probe; /* address of a word peers test-read with CMA */
    /* The addresses of the owner's user buffers, for single-copy reads
     * through process_vm_readv (messages of 256 KiB and more only, so they
     * left the hot line to the signature's third word): stored relaxed
     * before a release store of seq, read after the acquire load that sees
     * it. */
    _Atomic uint64_t sendbuf;
    _Atomic uint64_t recvbuf;
    /* Digests of the owner's signatures of its eager phases, phase p's at
     * sums[p % TNT_SHM_RING] (see Eager rooted calls): written only by
     * the owner, relaxed, before the release stores of its tag and seq of
     * p, and rewritten under the rule of its ring entries. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint64_t sums[TNT_SHM_RING];
    /* Robust and process-shared, initialised by local rank 0 before it
     * publishes the magic word, held by the owner's liveness thread. */
    _Alignas(TNT_SHM_CACHE_LINE) pthread_mutex_t alive;
    /* Plan line, used in local rank 0's entry only, which it alone writes
     * (tnt_shm_stream_kind): under TNT_SHM_STREAM=auto, 1 where the staged
     * collective of that op and size class uses cached copies rather than
     * streamed ones, by the parity of the call's number. */
    _Alignas(TNT_SHM_CACHE_LINE) _Atomic uint8_t
        stream_cached[TNT_SHM_STREAM_OPS][TNT_STREAM_AUTO_CLASSES][2];
};

struct tnt_shm {
    struct tnt_shm_header *hdr;
    struct tnt_shm_ctl *ctl;
    char *slots;
    char *ring; /* n * TNT_SHM_RING entries, after the slots */
    char *extra;
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
    uint64_t spin_ns;         /* nonzero: a core per local rank, pause between yields */
    size_t small_max;         /* bytes: up to here every rank reduces all */
    /* TNT_SHM_CMA: single-copy process_vm_readv/writev, used when every
     * local rank can reach every other (tested at create). By default
     * (auto) only the blocks of allgather and alltoall(v) from
     * TNT_SHM_BLOCK_CMA_MIN bytes, and those of gather and scatter up to
     * TNT_SHM_BLOCK_CMA_AUTO_MAX, take it: there it measured faster; for
     * allreduce and broadcast the staged copies did (docs/tuning.md,
     * "CMA"), so those, and larger gather and scatter blocks, take it only
     * with TNT_SHM_CMA=on (cma_all). */
    int cma_allowed;
    int use_cma; /* cma_allowed and the probe succeeded on every local rank */
    int cma_all; /* use_cma and TNT_SHM_CMA=on */
    size_t cma_block_bytes; /* per peer, in cma_tmp */
    char *cma_tmp;          /* (n) * cma_block_bytes, private */
    const void **srcs;      /* n entries, scratch for tnt_reduce_n */
    uint64_t probe_word;
    /* Staged collectives of at least stream_min bytes (TNT_SHM_STREAM_KB)
     * may stream: non-temporal stores for the copies into shared memory and
     * out of it. TNT_SHM_STREAM: on, off, or auto, where each rank picks the
     * copy kind that has been faster lately (shm_allreduce.c). */
    size_t stream_min;
    int stream_mode; /* tnt_settings_stream_t */
    /* auto, local rank 0: the choice per op and size (shm_stream_auto.h);
     * every rank: calls per op and size class, which index the plan. */
    struct tnt_stream_auto stream_auto[TNT_SHM_STREAM_OPS];
    uint32_t stream_calls[TNT_SHM_STREAM_OPS][TNT_STREAM_AUTO_CLASSES];
    unsigned char *bounce; /* TNT_SHM_BOUNCE_BYTES, private: scaled or reduced blocks */
    /* A signature was stored for the next phase; tnt_shm_wait_all checks
     * the peers' once it has seen them arrive. */
    int sig_pending;
    /* The terms the next signature carries (tnt_shm_terms_next), and
     * whether the last check failed on a difference between signatures
     * that all carried terms (tnt_shm_terms_differed). */
    uint64_t terms_next;
    int terms_differed;
    /* This rank's ctl.unchecked (see Eager rooted calls), what its last
     * eager send was, for messages, and the phase up to which every rank's
     * ring entries are known to be free for rewriting. */
    uint64_t unchecked;
    const char *eager_what;
    uint64_t ring_clear;
    int take_lines; /* the processor has a prefetch for writing (Taking lines early) */
    /* The liveness thread (see Liveness): holds ctl[me].alive until
     * tnt_shm_destroy tells it to exit. */
    pthread_t alive_thread;
    int alive_started;
    pthread_mutex_t alive_lock; /* private: guards alive_state */
    pthread_cond_t alive_cond;
    int alive_state; /* 0 starting, 1 holding, 2 told to exit, -1 failed */
    char name[TNT_SHM_NAME_MAX];
};

/* The signature's three words stay on seq's line: checking them costs no
 * miss beyond the one that saw the peer arrive. */
_Static_assert(offsetof(struct tnt_shm_ctl, pid) == TNT_SHM_CACHE_LINE,
               "seq and the signatures must share one cache line");

/* Private per-rank block for scaled copies and reduced pieces on their way
 * into shared memory with streaming stores: small enough to stay in L1. */
#define TNT_SHM_BOUNCE_BYTES (16 * 1024)

static inline char *tnt_shm_slot(const struct tnt_shm *shm, int rank, uint64_t phase)
{
    return shm->slots + ((size_t)rank * 2 + (phase & 1)) * shm->slot_bytes;
}

/* Stores this rank's signature for the collective whose first phase comes
 * next (count: elements, or bytes; op: the op, or a broadcast's root). */
void tnt_shm_expect(struct tnt_shm *shm, enum tnt_shm_kind kind, uint64_t count, unsigned dtype,
                    unsigned op);

/* What ctl.sums holds for phase p of a signature (see Eager rooted calls):
 * the words as the check compares them (terms without
 * TNT_SHM_TERMS_SENT), with the phase, folded a word at a time, each step
 * a bijection of the hash for a given word and of the word for a given
 * hash. */
static inline uint64_t tnt_shm_sig_digest(uint64_t phase, uint64_t what, uint64_t count,
                                          uint64_t terms)
{
    const uint64_t words[4] = { phase, what, count, terms & ~TNT_SHM_TERMS_SENT };
    uint64_t hash = 0xcbf29ce484222325ull;
    for (int i = 0; i < 4; i++) {
        hash = (hash ^ words[i]) * 0x9e3779b97f4a7c15ull;
        hash ^= hash >> 32;
    }
    return hash;
}

/* A rank's ring: its TNT_SHM_RING header lines, then the entries' data
 * blocks. */
static inline struct tnt_shm_ring_entry *tnt_shm_ring(const struct tnt_shm *shm, int rank,
                                                      uint64_t phase)
{
    return (struct tnt_shm_ring_entry *)(shm->ring +
                                         (size_t)rank * TNT_SHM_RING * TNT_SHM_RING_BYTES) +
           phase % TNT_SHM_RING;
}

/* Where the data of an entry of bytes bytes lies: in the header's line up
 * to TNT_SHM_RING_INLINE bytes, else in the entry's block. Every rank of a
 * call derives it from the same (agreed) size. */
static inline unsigned char *tnt_shm_ring_data(const struct tnt_shm *shm, int rank,
                                               uint64_t phase, size_t bytes)
{
    if (bytes <= TNT_SHM_RING_INLINE) {
        return tnt_shm_ring(shm, rank, phase)->data;
    }
    return (unsigned char *)shm->ring + (size_t)rank * TNT_SHM_RING * TNT_SHM_RING_BYTES +
           TNT_SHM_RING * TNT_SHM_CACHE_LINE + (phase % TNT_SHM_RING) * TNT_SHM_RING_DATA;
}

/* Asks for a line ahead of its use: for writing (the core takes it from
 * whichever core holds it now, before the store that needs it) or for
 * reading. Only a hint; for writing, call it only where shm->take_lines.
 * Inline assembly, because GCC's dead-code elimination drops
 * __builtin_prefetch under a branch (it did in every call site here). */
static inline void tnt_shm_prefetch(const void *p, int write)
{
#if defined(__x86_64__) || defined(__i386__)
    /* PREFETCHW (CPUID PRFCHW, checked at create), which compilers emit
     * only when built for a target that has it; PREFETCHT0 is SSE. */
    if (write) {
        __asm__ volatile("prefetchw %0" ::"m"(*(const char *)p));
    } else {
        __asm__ volatile("prefetcht0 %0" ::"m"(*(const char *)p));
    }
#elif defined(__aarch64__)
    if (write) {
        __asm__ volatile("prfm pstl1keep, %0" ::"Q"(*(const char *)p));
    } else {
        __asm__ volatile("prfm pldl1keep, %0" ::"Q"(*(const char *)p));
    }
#else
    (void)p;
    (void)write;
#endif
}

/* tnt_shm_prefetch for every line of [p, p + bytes). */
static inline void tnt_shm_prefetch_lines(const void *p, size_t bytes, int write)
{
    const uintptr_t first = (uintptr_t)p & ~(uintptr_t)(TNT_SHM_CACHE_LINE - 1);
    for (uintptr_t at = first; at < (uintptr_t)p + bytes; at += TNT_SHM_CACHE_LINE) {
        tnt_shm_prefetch((const void *)at, write);
    }
}

/* A sender's lines of its entry of phase p for a call of bytes bytes (see
 * Taking lines early): the header line, and the lines of the data where
 * it does not fit there. */
static inline void tnt_shm_ring_prefetch(const struct tnt_shm *shm, uint64_t p, size_t bytes)
{
    tnt_shm_prefetch(tnt_shm_ring(shm, shm->me, p), 1);
    if (bytes > TNT_SHM_RING_INLINE) {
        tnt_shm_prefetch_lines(tnt_shm_ring_data(shm, shm->me, p, bytes), bytes, 1);
    }
}

/* A receiver's lines of peer's entry of phase p, an entry of entry_bytes
 * bytes of which it reads bytes from offset off (see Taking lines early):
 * the header line, and the data up to TNT_SHM_RING_READ_AHEAD bytes. */
static inline void tnt_shm_ring_prefetch_read(const struct tnt_shm *shm, int peer, uint64_t p,
                                              size_t entry_bytes, size_t off, size_t bytes)
{
    tnt_shm_prefetch(tnt_shm_ring(shm, peer, p), 0);
    if (entry_bytes > TNT_SHM_RING_INLINE) {
        tnt_shm_prefetch_lines(tnt_shm_ring_data(shm, peer, p, entry_bytes) + off,
                               bytes < TNT_SHM_RING_READ_AHEAD ? bytes : TNT_SHM_RING_READ_AHEAD,
                               0);
    }
}

/* Counts a collective; its status is the segment's (broken or not), or,
 * with settle, the verdict on this rank's eager sends (tnt_shm_settle).
 * Inline: every collective starts here, and the settle is the rare case.
 * The rooted calls pass settle 0 and settle only where they do not send
 * eagerly again. */
static inline tnt_status_t tnt_shm_begin_settle(struct tnt_shm *shm, int settle)
{
    tnt_status_t settled = settle && shm->unchecked != 0 && shm->broken == TNT_OK
                               ? tnt_shm_settle(shm)
                               : TNT_OK;
    shm->num_collectives++;
    shm->terms_differed = 0;
    return settled != TNT_OK ? settled : shm->broken;
}

static inline tnt_status_t tnt_shm_begin(struct tnt_shm *shm)
{
    return tnt_shm_begin_settle(shm, 1);
}

/* The first half of an eager call's phase (see Eager rooted calls): makes
 * sure this rank's ring entry for the next phase is free (waiting, and
 * checking its own older sends, where it must) and stores its signature
 * there (kind, count and dtype/op as tnt_shm_expect, root in full, and
 * whether this rank sends). *data_p: where the entry's data of bytes bytes
 * (at most TNT_SHM_RING_DATA) goes, for the caller to fill. */
tnt_status_t tnt_shm_eager_claim(struct tnt_shm *shm, enum tnt_shm_kind kind, uint64_t count,
                                 unsigned dtype, unsigned op, int root, int sends, size_t bytes,
                                 const char *what, unsigned char **data_p);
/* The second half: publishes the entry and the phase. A sender returns at
 * once; a receiver waits for every peer, checks every signature of the
 * phase (and of its own sends not checked yet), and may then read the
 * peers' entries of shm->phase. */
tnt_status_t tnt_shm_eager_publish(struct tnt_shm *shm, int sends, const char *what);

/* Finishes a phase: publishes this rank's seq (release) and waits for every
 * peer to reach it (acquire). what names the collective in error messages. */
tnt_status_t tnt_shm_phase(struct tnt_shm *shm, const char *what);
/* Turns a failed process_vm_readv into the right error. */
tnt_status_t tnt_shm_cma_error(struct tnt_shm *shm, int peer, int err, const char *what);
/* Single copies between this rank and a peer's buffer (CMA, when use_cma):
 * bytes to or from the address remote in peer's memory, errors named by
 * tnt_shm_cma_error. */
tnt_status_t tnt_shm_cma_read(struct tnt_shm *shm, int peer, void *local, uint64_t remote,
                              size_t bytes, const char *what);
tnt_status_t tnt_shm_cma_write(struct tnt_shm *shm, int peer, const void *local, uint64_t remote,
                               size_t bytes, const char *what);
/* Whether gather and scatter (rooted: 0) or allgather and alltoall(v)
 * (exchange: 1) move blocks of this many bytes with CMA (same on every
 * rank: the sizes are agreed). */
static inline int tnt_shm_block_cma(const struct tnt_shm *shm, size_t block_bytes, int exchange)
{
    return shm->use_cma && block_bytes >= TNT_SHM_BLOCK_CMA_MIN &&
           (exchange || shm->cma_all || block_bytes <= TNT_SHM_BLOCK_CMA_AUTO_MAX);
}
/* Publishes this rank's buffers for the peers' CMA calls; they may use them
 * after the next phase, and this rank must keep them until every peer has
 * signalled the phase after that. */
void tnt_shm_publish(struct tnt_shm *shm, const void *sendbuf, const void *recvbuf);
/* A peer's published sendbuf (recv 0) or recvbuf (recv 1). */
uint64_t tnt_shm_peer_buf(const struct tnt_shm *shm, int peer, int recv);

/* The segment's life cycle (shm_segment.c), for tnt_shm_create/destroy. */
size_t tnt_shm_layout(int n, size_t slot_bytes, size_t extra_bytes, size_t *slots_off_p,
                      size_t *extra_off_p);
tnt_status_t tnt_shm_no_space(const struct tnt_shm *shm, size_t bytes, int err);
tnt_status_t tnt_shm_unlink_when_attached(struct tnt_shm *shm);
size_t tnt_shm_align(size_t x, size_t a);
tnt_status_t tnt_shm_attach_segment(struct tnt_shm *shm, const tnt_shm_addr_t *addr,
                                    size_t extra_bytes, int *fd_p);
tnt_status_t tnt_shm_create_segment(struct tnt_shm *shm, const char *prefix, size_t extra_bytes,
                                    tnt_shm_addr_t *addr, int *fd_p);

#endif
