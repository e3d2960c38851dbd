/*
 * TEST DOUBLE of NCCL (libnccl.so.2): the functions libtnt_cuda.so loads,
 * doing real collectives between the processes of a job. See cuda_double.h.
 *
 * The unique id names a shared-memory file (/dev/shm/tnt-nccl-double-<hex>)
 * that every rank maps at ncclCommInitRankConfig; the last rank to arrive
 * unlinks it, so a crashed job leaves nothing behind once initialised. A
 * collective runs on the caller's stream (through the cuda double's worker)
 * in chunks: each rank copies its chunk into its slot, a barrier, each rank
 * reduces the slots in rank order (so every rank gets the same bits), a
 * barrier. ncclSend / ncclRecv need no barrier: each ordered pair of ranks
 * has a one-way channel in the same file, one piece in flight, and a
 * group's sends and receives move together so that no pair waits for
 * another. Every wait polls the communicator's abort flag with a backoff,
 * so ncclCommAbort releases a collective stuck on a missing peer.
 */
#include "cuda_double.h"

#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES ((size_t)1 << 20)
/* ncclSend / ncclRecv: one one-way channel per ordered pair of ranks, a
 * piece of up to CHANNEL_BYTES at a time. */
#define CHANNEL_BYTES ((size_t)64 << 10)
#define MAGIC         0x6e63636c64626c31ull /* "ncclddbl1" */

struct shared {
    uint64_t magic;
    atomic_uint joined;
    atomic_uint arrived;
    atomic_uint sense;
    char pad[64];
    /* nranks slots of SLOT_BYTES follow, page-aligned */
};

struct ncclComm {
    int rank, nranks, blocking;
    int hang, inject_error;
    atomic_int aborted;
    atomic_int init_result; /* ncclResult_t; ncclInProgress while joining */
    atomic_int async_error;
    atomic_int pending; /* collectives queued and not yet run */
    int finalizing;
    unsigned local_sense;
    char name[64];
    struct shared *sh;
    size_t map_bytes;
    pthread_t init_thread;
    int init_thread_started;
};

static atomic_long g_live_comms;

TNT_CUDA_DOUBLE_API long tnt_nccl_double_live(void)
{
    return atomic_load(&g_live_comms);
}

static size_t header_bytes(void)
{
    return 4096;
}

static char *slot(struct ncclComm *c, int r)
{
    return (char *)c->sh + header_bytes() + (size_t)r * SLOT_BYTES;
}

/* The channel from rank src to rank dst: full is 1 while a piece waits
 * for the receiver (release by the writer, acquire by the reader), total
 * is the whole message's length, for the count check NCCL leaves
 * undefined. */
struct channel {
    atomic_uint full;
    uint64_t len;
    uint64_t total;
    char pad[64 - sizeof(atomic_uint) - 2 * sizeof(uint64_t)];
    char data[CHANNEL_BYTES];
};

static size_t map_bytes_for(int nranks)
{
    return header_bytes() + (size_t)nranks * SLOT_BYTES +
           (size_t)nranks * (size_t)nranks * sizeof(struct channel);
}

static struct channel *channel(struct ncclComm *c, int src, int dst)
{
    struct channel *first = (struct channel *)slot(c, c->nranks);
    return first + (size_t)src * (size_t)c->nranks + (size_t)dst;
}

/* Sleeps a little longer each time, up to 1 ms: ranks oversubscribe the
 * cores in the tests, so a waiter must not spin. */
static void backoff(unsigned *round)
{
    struct timespec ts = { 0, *round < 10 ? 20000 : 1000000 };
    (*round)++;
    nanosleep(&ts, NULL);
}

/* Sense-reversing barrier; -1 once the communicator is aborted. */
static int barrier(struct ncclComm *c)
{
    c->local_sense ^= 1u;
    if (atomic_fetch_add(&c->sh->arrived, 1) + 1 == (unsigned)c->nranks) {
        atomic_store(&c->sh->arrived, 0);
        atomic_store(&c->sh->sense, c->local_sense);
        return 0;
    }
    unsigned round = 0;
    while (atomic_load(&c->sh->sense) != c->local_sense) {
        if (atomic_load(&c->aborted)) {
            return -1;
        }
        backoff(&round);
    }
    return 0;
}

static int env_rank_is(const char *name, int rank)
{
    const char *v = getenv(name);
    return v != NULL && atoi(v) == rank;
}

/* ------------------------------------------------------------------------ */
/* Set-up                                                                   */
/* ------------------------------------------------------------------------ */

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (nccl double)";
    case ncclSystemError:
        return "unhandled system error (injected by the nccl double)";
    case ncclInternalError:
        return "internal error (nccl double)";
    case ncclInvalidArgument:
        return "invalid argument (nccl double)";
    case ncclInvalidUsage:
        return "invalid usage (nccl double)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code (nccl double)";
    }
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof(*id));
    unsigned char nonce[16];
    if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
        return ncclSystemError;
    }
    for (int i = 0; i < 16; i++) {
        snprintf(id->internal + 2 * i, 3, "%02x", nonce[i]);
    }
    return ncclSuccess;
}

static void *comm_join(void *arg)
{
    struct ncclComm *c = arg;
    unsigned round = 0;
    /* Rank 0 creates the file; the others wait for it to appear. */
    int fd = -1;
    for (;;) {
        fd = shm_open(c->name, O_RDWR | (c->rank == 0 ? O_CREAT : 0), 0600);
        if (fd >= 0 || errno != ENOENT) {
            break;
        }
        if (atomic_load(&c->aborted)) {
            atomic_store(&c->init_result, ncclInvalidUsage);
            return NULL;
        }
        backoff(&round);
    }
    if (fd < 0) {
        atomic_store(&c->init_result, ncclSystemError);
        return NULL;
    }
    c->map_bytes = map_bytes_for(c->nranks);
    if (c->rank == 0 && ftruncate(fd, (off_t)c->map_bytes) != 0) {
        close(fd);
        atomic_store(&c->init_result, ncclSystemError);
        return NULL;
    }
    struct stat st;
    round = 0;
    while (fstat(fd, &st) == 0 && (size_t)st.st_size < c->map_bytes) {
        if (atomic_load(&c->aborted)) {
            close(fd);
            atomic_store(&c->init_result, ncclInvalidUsage);
            return NULL;
        }
        backoff(&round);
    }
    void *map = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        atomic_store(&c->init_result, ncclSystemError);
        return NULL;
    }
    c->sh = map;
    if (atomic_fetch_add(&c->sh->joined, 1) + 1 == (unsigned)c->nranks) {
        shm_unlink(c->name); /* everyone has it mapped */
    }
    round = 0;
    while (atomic_load(&c->sh->joined) < (unsigned)c->nranks) {
        if (atomic_load(&c->aborted)) {
            atomic_store(&c->init_result, ncclInvalidUsage);
            return NULL;
        }
        backoff(&round);
    }
    atomic_store(&c->init_result, ncclSuccess);
    return NULL;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return ncclInvalidArgument;
    }
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return ncclSystemError;
    }
    c->rank = rank;
    c->nranks = nranks;
    c->blocking = config == NULL || config->blocking != 0;
    c->hang = env_rank_is("TNT_NCCL_DOUBLE_HANG_RANK", tnt_cuda_double_rank());
    c->inject_error = env_rank_is("TNT_NCCL_DOUBLE_ASYNC_ERROR_RANK", tnt_cuda_double_rank());
    atomic_init(&c->init_result, ncclInProgress);
    snprintf(c->name, sizeof(c->name), "/tnt-nccl-double-%.32s", id.internal);
    atomic_fetch_add(&g_live_comms, 1);
    *comm = c;
    if (c->blocking) {
        comm_join(c);
        return (ncclResult_t)atomic_load(&c->init_result);
    }
    /* Nonblocking: the rendezvous runs on; ncclCommGetAsyncError says when
     * it is done. */
    if (pthread_create(&c->init_thread, NULL, comm_join, c) != 0) {
        atomic_store(&c->init_result, ncclSystemError);
        return ncclSystemError;
    }
    c->init_thread_started = 1;
    return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *result)
{
    ncclResult_t r = (ncclResult_t)atomic_load(&c->init_result);
    if (r == ncclSuccess) {
        r = (ncclResult_t)atomic_load(&c->async_error);
    }
    if (r == ncclSuccess && c->finalizing && atomic_load(&c->pending) > 0) {
        r = ncclInProgress;
    }
    *result = r;
    return ncclSuccess;
}

static void comm_free(struct ncclComm *c)
{
    if (c->init_thread_started) {
        pthread_join(c->init_thread, NULL);
    }
    if (c->sh != NULL) {
        munmap(c->sh, c->map_bytes);
    }
    if (c->rank == 0 && atomic_load(&c->init_result) != ncclSuccess) {
        shm_unlink(c->name); /* the peers never all arrived */
    }
    atomic_fetch_sub(&g_live_comms, 1);
    free(c);
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    c->finalizing = 1;
    if (c->blocking) {
        unsigned round = 0;
        while (atomic_load(&c->pending) > 0) {
            backoff(&round);
        }
        return ncclSuccess;
    }
    return atomic_load(&c->pending) > 0 ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (c == NULL) {
        return ncclInvalidArgument;
    }
    if (atomic_load(&c->pending) > 0) {
        return ncclInvalidUsage; /* the real one would free under running kernels */
    }
    comm_free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (c == NULL) {
        return ncclSuccess;
    }
    /* Said, so that tests can check that libtnt aborts where it must. */
    fprintf(stderr, "nccl double: rank %d: ncclCommAbort\n", c->rank);
    atomic_store(&c->aborted, 1);
    /* Queued collectives see the flag and return; wait for them so that no
     * worker touches the freed communicator. */
    unsigned round = 0;
    while (atomic_load(&c->pending) > 0) {
        backoff(&round);
    }
    comm_free(c);
    return ncclSuccess;
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */

enum coll {
    COLL_ALLREDUCE,
    COLL_BROADCAST,
    COLL_ALLGATHER,
    COLL_REDUCE,
    COLL_REDUCE_SCATTER,
    COLL_P2P /* the ncclSend / ncclRecv of one group (or one alone) */
};

struct p2p_item {
    int is_recv, peer;
    const char *send;
    char *recv;
    size_t bytes, done;
};

struct coll_work {
    struct ncclComm *c;
    enum coll kind;
    const char *send;
    char *recv;
    size_t count, esize;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    cudaStream_t stream;
    struct coll_work *next; /* queued in a group until ncclGroupEnd */
    struct p2p_item *items; /* COLL_P2P: in issue order */
    int n_items, cap_items;
};

/* ncclGroupStart/End, per thread as NCCL's: collectives issued inside a
 * group are held back and launched, in issue order, by the outermost
 * ncclGroupEnd (a caller that forgets it never sees them run). */
static _Thread_local struct {
    int depth;
    struct coll_work *head, *tail;
    struct coll_work *p2p; /* the group's sends and receives, one work */
} g_group;

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    float a = fabsf(f);
    if (isnan(f)) {
        return (uint16_t)(sign | 0x7e00);
    }
    if (a >= 65520.0f) {
        return (uint16_t)(sign | 0x7c00);
    }
    if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24, rounded to even */
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * 16777216.0f));
    }
    int e;
    float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
    uint32_t man = (uint32_t)nearbyintf((m * 2.0f - 1.0f) * 1024.0f);
    uint32_t exp = (uint32_t)(e - 1 + 15);
    if (man == 1024) {
        man = 0;
        exp++;
    }
    return (uint16_t)(sign | (exp << 10) | man);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f)) {
        return (uint16_t)((x >> 16) | 0x40);
    }
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

static double load(ncclDataType_t t, const char *p, size_t i)
{
    switch (t) {
    case ncclInt8:
        return ((const int8_t *)p)[i];
    case ncclUint8:
        return ((const uint8_t *)p)[i];
    case ncclInt32:
        return ((const int32_t *)p)[i];
    case ncclUint32:
        return ((const uint32_t *)p)[i];
    case ncclFloat16:
        return half_to_float(((const uint16_t *)p)[i]);
    case ncclBfloat16:
        return bf16_to_float(((const uint16_t *)p)[i]);
    case ncclFloat32:
        return ((const float *)p)[i];
    case ncclFloat64:
        return ((const double *)p)[i];
    default:
        return 0;
    }
}

static void store(ncclDataType_t t, char *p, size_t i, double v)
{
    switch (t) {
    case ncclInt8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case ncclUint8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case ncclInt32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case ncclUint32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    case ncclFloat16:
        ((uint16_t *)p)[i] = float_to_half((float)v);
        break;
    case ncclBfloat16:
        ((uint16_t *)p)[i] = float_to_bf16((float)v);
        break;
    case ncclFloat32:
        ((float *)p)[i] = (float)v;
        break;
    case ncclFloat64:
        ((double *)p)[i] = v;
        break;
    default:
        break;
    }
}

/* 64-bit integers exactly (a double would round them). */
static void reduce_int64(struct coll_work *w, char *out, size_t n)
{
    int is_unsigned = w->type == ncclUint64;
    for (size_t i = 0; i < n; i++) {
        int64_t acc = ((const int64_t *)slot(w->c, 0))[i];
        for (int r = 1; r < w->c->nranks; r++) {
            int64_t v = ((const int64_t *)slot(w->c, r))[i];
            switch (w->op) {
            case ncclProd:
                acc = (int64_t)((uint64_t)acc * (uint64_t)v);
                break;
            case ncclMin:
                acc = is_unsigned ? ((uint64_t)v < (uint64_t)acc ? v : acc) : (v < acc ? v : acc);
                break;
            case ncclMax:
                acc = is_unsigned ? ((uint64_t)v > (uint64_t)acc ? v : acc) : (v > acc ? v : acc);
                break;
            default:
                acc = (int64_t)((uint64_t)acc + (uint64_t)v);
                break;
            }
        }
        if (w->op == ncclAvg) {
            acc = is_unsigned ? (int64_t)((uint64_t)acc / (uint64_t)w->c->nranks)
                              : acc / w->c->nranks;
        }
        ((int64_t *)out)[i] = acc;
    }
}

static void reduce_chunk(struct coll_work *w, char *out, size_t n)
{
    if (w->type == ncclInt64 || w->type == ncclUint64) {
        reduce_int64(w, out, n);
        return;
    }
    int is_float = w->type == ncclFloat16 || w->type == ncclBfloat16 || w->type == ncclFloat32 ||
                   w->type == ncclFloat64;
    for (size_t i = 0; i < n; i++) {
        double acc = load(w->type, slot(w->c, 0), i);
        for (int r = 1; r < w->c->nranks; r++) {
            double v = load(w->type, slot(w->c, r), i);
            switch (w->op) {
            case ncclProd:
                acc *= v;
                break;
            case ncclMin:
                acc = v < acc ? v : acc;
                break;
            case ncclMax:
                acc = v > acc ? v : acc;
                break;
            default:
                acc += v;
                break;
            }
        }
        if (w->op == ncclAvg) {
            acc = is_float ? acc / w->c->nranks : trunc(acc / w->c->nranks);
        }
        store(w->type, out, i, acc);
    }
}

/* Item i may move: no earlier unfinished item goes the same way with the
 * same peer (NCCL matches a pair's sends and receives in issue order). */
static int p2p_turn(const struct coll_work *w, int i)
{
    for (int k = 0; k < i; k++) {
        const struct p2p_item *a = &w->items[k];
        if (a->done < a->bytes && a->is_recv == w->items[i].is_recv &&
            a->peer == w->items[i].peer) {
            return 0;
        }
    }
    return 1;
}

/* All of a group's sends and receives move together, piece by piece,
 * as NCCL runs a group's point-to-point calls concurrently; a pair's
 * pieces go one at a time through its channel. */
static void p2p_run(struct coll_work *w)
{
    struct ncclComm *c = w->c;
    unsigned round = 0;
    for (;;) {
        int left = 0, moved = 0;
        for (int i = 0; i < w->n_items; i++) {
            struct p2p_item *it = &w->items[i];
            if (it->done >= it->bytes) {
                continue;
            }
            left = 1;
            if (!p2p_turn(w, i)) {
                continue;
            }
            if (!it->is_recv) {
                struct channel *ch = channel(c, c->rank, it->peer);
                if (atomic_load_explicit(&ch->full, memory_order_acquire) == 0) {
                    size_t n = it->bytes - it->done;
                    n = n < CHANNEL_BYTES ? n : CHANNEL_BYTES;
                    memcpy(ch->data, it->send + it->done, n);
                    ch->len = n;
                    ch->total = it->bytes;
                    atomic_store_explicit(&ch->full, 1, memory_order_release);
                    it->done += n;
                    moved = 1;
                }
            } else {
                struct channel *ch = channel(c, it->peer, c->rank);
                if (atomic_load_explicit(&ch->full, memory_order_acquire) != 0) {
                    if (ch->total != it->bytes) {
                        fprintf(stderr,
                                "nccl double: rank %d: ncclRecv of %zu bytes from rank %d met a "
                                "ncclSend of %llu (NCCL leaves this undefined)\n",
                                c->rank, it->bytes, it->peer, (unsigned long long)ch->total);
                        atomic_store(&c->async_error, ncclInvalidUsage);
                        it->done = it->bytes; /* give up on it */
                    } else {
                        memcpy(it->recv + it->done, ch->data, ch->len);
                        it->done += ch->len;
                    }
                    atomic_store_explicit(&ch->full, 0, memory_order_release);
                    moved = 1;
                }
            }
        }
        if (!left || atomic_load(&c->aborted)) {
            return;
        }
        if (moved) {
            round = 0;
        } else {
            backoff(&round);
        }
    }
}

static void coll_run(void *arg)
{
    struct coll_work *w = arg;
    struct ncclComm *c = w->c;
    if (c->hang) {
        unsigned round = 0;
        while (!atomic_load(&c->aborted)) {
            backoff(&round); /* never joins its peers */
        }
        goto out;
    }
    if (c->inject_error || atomic_load(&c->aborted)) {
        goto out;
    }
    if (w->kind == COLL_P2P) {
        p2p_run(w);
        goto out;
    }
    size_t per_chunk = SLOT_BYTES / w->esize;
    if (w->kind == COLL_REDUCE_SCATTER) {
        /* Block t of every rank's send buffer is reduced into rank t's
         * recv, one block (and chunk) at a time, every rank in step. */
        for (size_t off = 0; off < w->count; off += per_chunk) {
            size_t n = w->count - off < per_chunk ? w->count - off : per_chunk;
            for (int t = 0; t < c->nranks; t++) {
                memcpy(slot(c, c->rank), w->send + ((size_t)t * w->count + off) * w->esize,
                       n * w->esize);
                if (barrier(c) != 0) {
                    goto out;
                }
                if (t == c->rank) {
                    reduce_chunk(w, w->recv + off * w->esize, n);
                }
                if (barrier(c) != 0) {
                    goto out;
                }
            }
        }
        goto out;
    }
    for (size_t off = 0; off < w->count || off == 0; off += per_chunk) {
        size_t n = w->count - off < per_chunk ? w->count - off : per_chunk;
        size_t bytes = n * w->esize, at = off * w->esize;
        switch (w->kind) {
        case COLL_ALLREDUCE:
        case COLL_REDUCE:
        case COLL_REDUCE_SCATTER:
            memcpy(slot(c, c->rank), w->send + at, bytes);
            break;
        case COLL_BROADCAST:
            if (c->rank == w->root) {
                memcpy(slot(c, c->rank), w->send + at, bytes);
            }
            break;
        case COLL_ALLGATHER:
            memcpy(slot(c, c->rank), w->send + at, bytes);
            break;
        case COLL_P2P: /* ran above */
            break;
        }
        if (barrier(c) != 0) {
            goto out;
        }
        switch (w->kind) {
        case COLL_ALLREDUCE:
        case COLL_REDUCE_SCATTER:
            reduce_chunk(w, w->recv + at, n);
            break;
        case COLL_REDUCE:
            if (c->rank == w->root) { /* recv is NCCL's only on the root */
                reduce_chunk(w, w->recv + at, n);
            }
            break;
        case COLL_BROADCAST:
            memcpy(w->recv + at, slot(c, w->root), bytes);
            break;
        case COLL_ALLGATHER:
            for (int r = 0; r < c->nranks; r++) {
                memcpy(w->recv + (size_t)r * w->count * w->esize + at, slot(c, r), bytes);
            }
            break;
        case COLL_P2P:
            break;
        }
        if (barrier(c) != 0 || n == 0) {
            goto out;
        }
    }
out:
    atomic_fetch_sub(&c->pending, 1);
    free(w->items);
    free(w);
}

/* Puts w on its stream. */
static ncclResult_t coll_launch(struct coll_work *w)
{
    struct ncclComm *c = w->c;
    atomic_fetch_add(&c->pending, 1);
    if (tnt_cuda_double_enqueue(w->stream, coll_run, w) != 0) {
        atomic_fetch_sub(&c->pending, 1);
        free(w->items);
        free(w);
        return ncclUnhandledCudaError;
    }
    if (c->inject_error) {
        fprintf(stderr, "nccl double: rank %d: injected asynchronous error\n", c->rank);
        atomic_store(&c->async_error, ncclSystemError);
    }
    /* Nonblocking communicators may answer "in progress"; the caller then
     * polls ncclCommGetAsyncError. */
    return c->blocking ? ncclSuccess : ncclInProgress;
}

static ncclResult_t coll_enqueue(struct ncclComm *c, enum coll kind, const void *send, void *recv,
                                 size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                                 cudaStream_t stream)
{
    if (atomic_load(&c->init_result) != ncclSuccess || atomic_load(&c->aborted)) {
        return ncclInvalidUsage;
    }
    size_t esize = type_size(type);
    if (esize == 0 || op < ncclSum || op > ncclAvg || root < 0 || root >= c->nranks) {
        return ncclInvalidArgument;
    }
    size_t recv_count = kind == COLL_ALLGATHER ? count * (size_t)c->nranks : count;
    size_t send_count = kind == COLL_REDUCE_SCATTER ? count * (size_t)c->nranks : count;
    if (kind == COLL_REDUCE && c->rank != root) {
        recv_count = 0; /* not read: may be NULL */
    }
    if (count > 0 && (!tnt_cuda_double_is_device(send, send_count * esize) ||
                      (recv_count > 0 && !tnt_cuda_double_is_device(recv, recv_count * esize)))) {
        return ncclInvalidArgument; /* NCCL takes device memory only */
    }
    struct coll_work *w = malloc(sizeof(*w));
    if (w == NULL) {
        return ncclSystemError;
    }
    *w = (struct coll_work){ .c = c,
                             .kind = kind,
                             .send = send,
                             .recv = recv,
                             .count = count,
                             .esize = esize,
                             .type = type,
                             .op = op,
                             .root = root,
                             .stream = stream };
    if (g_group.depth > 0) {
        if (g_group.tail != NULL) {
            g_group.tail->next = w;
        } else {
            g_group.head = w;
        }
        g_group.tail = w;
        return ncclSuccess; /* inside a group even a nonblocking comm says so */
    }
    return coll_launch(w);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return coll_enqueue(comm, COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return coll_enqueue(comm, COLL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root,
                        stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return coll_enqueue(comm, COLL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0,
                        stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return coll_enqueue(comm, COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return coll_enqueue(comm, COLL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0,
                        stream);
}

/* ncclSend / ncclRecv: inside a group they join the group's one
 * point-to-point work (queued where the group's first one was issued);
 * alone, each is a work of its own. */
static ncclResult_t p2p_enqueue(struct ncclComm *c, int is_recv, const void *send, void *recv,
                                size_t count, ncclDataType_t type, int peer, cudaStream_t stream)
{
    if (atomic_load(&c->init_result) != ncclSuccess || atomic_load(&c->aborted)) {
        return ncclInvalidUsage;
    }
    size_t esize = type_size(type);
    if (esize == 0 || peer < 0 || peer >= c->nranks) {
        return ncclInvalidArgument;
    }
    size_t bytes = count * esize;
    if (bytes > 0 && !tnt_cuda_double_is_device(is_recv ? recv : send, bytes)) {
        return ncclInvalidArgument; /* NCCL takes device memory only */
    }
    struct coll_work *w = g_group.depth > 0 ? g_group.p2p : NULL;
    int fresh = w == NULL;
    if (fresh) {
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            return ncclSystemError;
        }
        *w = (struct coll_work){ .c = c, .kind = COLL_P2P, .esize = 1, .stream = stream };
    }
    if (w->c != c || w->stream != stream) {
        return ncclInvalidUsage; /* the double keeps a group to one comm and stream */
    }
    if (w->n_items == w->cap_items) {
        int cap = w->cap_items ? 2 * w->cap_items : 8;
        struct p2p_item *items = realloc(w->items, (size_t)cap * sizeof(*items));
        if (items == NULL) {
            if (fresh) {
                free(w);
            }
            return ncclSystemError;
        }
        w->items = items;
        w->cap_items = cap;
    }
    w->items[w->n_items++] = (struct p2p_item){
        .is_recv = is_recv, .peer = peer, .send = send, .recv = recv, .bytes = bytes
    };
    if (g_group.depth == 0) {
        return coll_launch(w);
    }
    if (fresh) {
        g_group.p2p = w;
        if (g_group.tail != NULL) {
            g_group.tail->next = w;
        } else {
            g_group.head = w;
        }
        g_group.tail = w;
    }
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return p2p_enqueue(comm, 0, sendbuff, NULL, count, datatype, peer, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return p2p_enqueue(comm, 1, NULL, recvbuff, count, datatype, peer, stream);
}

ncclResult_t ncclGroupStart(void)
{
    g_group.depth++;
    return ncclSuccess;
}

/* Launches the group's collectives in issue order. Each runs to its end
 * before the next starts on the stream's worker: every rank issues the
 * same collectives in the same order (NCCL requires that of groups too),
 * so they meet one by one. */
ncclResult_t ncclGroupEnd(void)
{
    if (g_group.depth == 0) {
        return ncclInvalidUsage;
    }
    if (--g_group.depth > 0) {
        return ncclSuccess;
    }
    ncclResult_t result = ncclSuccess;
    struct coll_work *w = g_group.head;
    g_group.head = g_group.tail = g_group.p2p = NULL;
    while (w != NULL) {
        struct coll_work *next = w->next;
        ncclResult_t r = coll_launch(w);
        if (r != ncclSuccess && (result == ncclSuccess || result == ncclInProgress)) {
            result = r;
        }
        w = next;
    }
    return result;
}
