/*
 * PMIx implementation of the bootstrap interface (boot/boot.h).
 *
 * Every launcher we support (tarantella, OpenMPI's mpirun, srun --mpi=pmix)
 * hosts a PMIx server and exports PMIX_NAMESPACE/PMIX_RANK plus a server URI
 * to its children. Without those variables, or when PMIx_Init cannot reach
 * the server, tnt_boot_pmix_create says so and tnt_boot_init falls back to
 * the singleton.
 *
 * Fences are issued non-blocking and waited for with our own deadline
 * (TNT_TIMEOUT), so a missing rank produces an error instead of a hang even
 * with a PMIx server that ignores PMIX_TIMEOUT.
 */
#include "boot/boot.h"

#include "util/log.h"
#include "util/wait.h"

#include <pmix.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tnt_boot_pmix {
    struct tnt_boot super; /* first: a tnt_boot_t * is a struct tnt_boot_pmix * */
    pmix_proc_t myproc;
    double timeout_s;
    uint64_t allgather_seq; /* per-call key suffix, identical on all ranks */
};

/* State of one non-blocking fence. The PMIx callback may still fire after we
 * gave up waiting (timeout); in that case the state is deliberately kept
 * (on the abandoned list, so leak checkers see it is still referenced)
 * rather than freed under the callback's feet. */
struct fence_state {
    _Atomic int done; /* set with release order after status */
    pmix_status_t status;
    pmix_info_t info[2];
    size_t ninfo;
    struct fence_state *next_abandoned;
};

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fence_state *abandoned;

static void fence_abandon(struct fence_state *st)
{
    pthread_mutex_lock(&abandoned_lock);
    st->next_abandoned = abandoned;
    abandoned = st;
    pthread_mutex_unlock(&abandoned_lock);
}

int tnt_boot_pmix_check_size(long size, unsigned long rank)
{
    /* Compared as long before anything narrows it to int: a size that does
     * not fit (or a rank that would turn negative) must not become one. */
    if (size < 1 || size > TNT_BOOT_MAX_SIZE || rank >= (unsigned long)size) {
        return -1;
    }
    return 0;
}

static const char launch_hint[] =
    "launch with 'tarantella -n N -- ...', 'mpirun -np N ...' or 'srun --mpi=pmix ...'";

/* Converts the integer-valued PMIx types that servers use for sizes and
 * ranks (PMIx 4.2 says uint32/uint16, older servers vary). */
static int value_to_long(const pmix_value_t *val, long *out)
{
    switch (val->type) {
    case PMIX_INT:
        *out = val->data.integer;
        return 0;
    case PMIX_INT8:
        *out = val->data.int8;
        return 0;
    case PMIX_INT16:
        *out = val->data.int16;
        return 0;
    case PMIX_INT32:
        *out = val->data.int32;
        return 0;
    case PMIX_INT64:
        *out = (long)val->data.int64;
        return 0;
    case PMIX_UINT:
        *out = (long)val->data.uint;
        return 0;
    case PMIX_UINT8:
        *out = val->data.uint8;
        return 0;
    case PMIX_UINT16:
        *out = val->data.uint16;
        return 0;
    case PMIX_UINT32:
        *out = (long)val->data.uint32;
        return 0;
    case PMIX_UINT64:
        *out = (long)val->data.uint64;
        return 0;
    case PMIX_SIZE:
        *out = (long)val->data.size;
        return 0;
    case PMIX_PROC_RANK:
        *out = (long)val->data.rank;
        return 0;
    default:
        return -1;
    }
}

static int pmix_timeout_arg(double timeout_s)
{
    if (timeout_s <= 0) {
        return 0; /* PMIx: 0 = infinite */
    }
    if (timeout_s > 1e6) {
        return 1000000;
    }
    int t = (int)timeout_s; /* rounded up: PMIx takes whole seconds */
    return t < timeout_s ? t + 1 : t;
}

/* PMIx_Get of an integer; *out untouched unless it returns PMIX_SUCCESS. */
static pmix_status_t get_long(const pmix_proc_t *proc, const char *key, long *out)
{
    pmix_value_t *val = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    long v;
    if (value_to_long(val, &v) != 0) {
        rc = PMIX_ERR_TYPE_MISMATCH;
    } else {
        *out = v;
    }
    PMIX_VALUE_RELEASE(val);
    return rc;
}

/* The hostname a rank's PMIx server reports for it. Reserved keys such as
 * PMIX_HOSTNAME are job-level data held by the local server; PMIX_OPTIONAL
 * keeps PMIx from asking remote servers for it when absent. */
static pmix_status_t get_hostname(const struct tnt_boot_pmix *boot, int rank, char *buf, size_t len)
{
    pmix_proc_t proc;
    pmix_info_t info;
    pmix_value_t *val = NULL;
    bool optional = true;

    PMIX_LOAD_PROCID(&proc, boot->myproc.nspace, (pmix_rank_t)rank);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_status_t rc = PMIx_Get(&proc, PMIX_HOSTNAME, &info, 1, &val);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    if (val->type != PMIX_STRING || val->data.string == NULL) {
        rc = PMIX_ERR_TYPE_MISMATCH;
    } else {
        snprintf(buf, len, "%s", val->data.string);
    }
    PMIX_VALUE_RELEASE(val);
    return rc;
}

static void self_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0) {
        snprintf(buf, len, "localhost");
    }
    buf[len - 1] = '\0';
}

static const struct tnt_boot_ops pmix_ops;

tnt_status_t tnt_boot_pmix_create(double timeout_s, char *why, size_t why_len, tnt_boot_t **boot_p)
{
    struct tnt_boot_pmix *boot;
    pmix_status_t rc;

    if (getenv("PMIX_NAMESPACE") == NULL || getenv("PMIX_RANK") == NULL) {
        snprintf(why, why_len,
                 "no PMIx server in the environment (PMIX_NAMESPACE/PMIX_RANK are "
                 "not set)");
        return TNT_BOOT_PMIX_ABSENT;
    }
    boot = calloc(1, sizeof(*boot));
    if (boot == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "bootstrap: out of memory");
    }
    boot->super.ops = &pmix_ops;
    boot->timeout_s = timeout_s;

    rc = PMIx_Init(&boot->myproc, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        snprintf(why, why_len, "PMIx_Init failed: %s", PMIx_Error_string(rc));
        free(boot);
        return TNT_BOOT_PMIX_ABSENT;
    }

    struct tnt_boot_info *info = &boot->super.info;
    pmix_proc_t wildcard;
    long v;
    info->rank = (int)boot->myproc.rank;
    if (get_hostname(boot, info->rank, info->hostname, sizeof(info->hostname)) != PMIX_SUCCESS ||
        info->hostname[0] == '\0') {
        self_hostname(info->hostname, sizeof(info->hostname));
        tnt_log_debug("PMIX_HOSTNAME not provided by the server; using gethostname() = %s",
                      info->hostname);
    }
    /* From here on, messages (and tnt_last_error) carry rank and host. */
    tnt_log_set_identity(info->rank, info->hostname);
    /* Namespaces may be longer than job_id; the prefix is enough for logs
     * and the shm name hash (which also carries a pid). */
    snprintf(info->job_id, sizeof(info->job_id), "%.*s", (int)sizeof(info->job_id) - 1,
             boot->myproc.nspace);
    PMIX_LOAD_PROCID(&wildcard, boot->myproc.nspace, PMIX_RANK_WILDCARD);

    rc = get_long(&wildcard, PMIX_JOB_SIZE, &v);
    if (rc != PMIX_SUCCESS || tnt_boot_pmix_check_size(v, boot->myproc.rank) != 0) {
        tnt_error_raise(TNT_ERR_BOOTSTRAP,
                        "bootstrap: the PMIx server did not give a valid job size "
                        "(PMIX_JOB_SIZE: %s); %s",
                        rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "out of range", launch_hint);
        goto err_finalize;
    }
    info->size = (int)v;

    /* Local rank and size are cross-checked by the caller against the
     * hostname layout; -1 when the server does not provide them. */
    info->local_rank = -1;
    if (get_long(&boot->myproc, PMIX_LOCAL_RANK, &v) == PMIX_SUCCESS && v >= 0 && v < info->size) {
        info->local_rank = (int)v;
    }
    info->local_size = -1;
    if (get_long(&wildcard, PMIX_LOCAL_SIZE, &v) == PMIX_SUCCESS && v >= 1 && v <= info->size) {
        info->local_size = (int)v;
    }
    *boot_p = &boot->super;
    return TNT_OK;

err_finalize:
    PMIx_Finalize(NULL, 0);
    free(boot);
    return TNT_ERR_BOOTSTRAP;
}

static void pmix_finalize(tnt_boot_t *super)
{
    PMIx_Finalize(NULL, 0);
    free(super);
}

static void fence_done(pmix_status_t status, void *cbdata)
{
    struct fence_state *st = cbdata;
    st->status = status;
    /* Release: status happens-before the waiter's acquire load of done. */
    atomic_store_explicit(&st->done, 1, memory_order_release);
}

/* State of the probe that finds the missing ranks after a fence timed out:
 * one Get_nb per peer for the key every rank Put just before the fence.
 * Ranks that committed it answer at once; the others cannot. Like the
 * fence's, the state is leaked if callbacks are still outstanding. */
struct probe_slot {
    struct probe_state *st;
    int rank;
};

struct probe_state {
    _Atomic int pending;      /* callbacks still to come */
    pmix_info_t info;         /* PMIX_TIMEOUT of each Get */
    unsigned char *arrived;   /* size entries: 1 = its key was found */
    struct probe_slot *slots; /* size entries */
};

static void probe_done(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    struct probe_slot *slot = cbdata;
    (void)kv; /* owned and released by PMIx */
    slot->st->arrived[slot->rank] = status == PMIX_SUCCESS;
    /* Release: the arrived entry happens-before the waiter's acquire load
     * that sees the count reach 0. */
    atomic_fetch_sub_explicit(&slot->st->pending, 1, memory_order_release);
}

#define PROBE_TIMEOUT_S 1
#define PROBE_LIST_MAX  16

/* Writes "ranks 1, 5 (2 of 8)" for the ranks whose key nobody can Get and
 * returns their number, or returns 0 with missing empty when that cannot be
 * told (no peer answered, so the server may not support fetching data before
 * a fence). */
static int probe_missing(struct tnt_boot_pmix *boot, const char *key, char *missing, size_t len)
{
    const int size = boot->super.info.size;
    const int my_rank = boot->super.info.rank;
    struct probe_state *st = calloc(1, sizeof(*st));
    int timeout = PROBE_TIMEOUT_S;
    tnt_backoff_t backoff;

    int num_missing = 0;

    missing[0] = '\0';
    if (st == NULL) {
        return 0;
    }
    st->arrived = calloc((size_t)size, 1);
    st->slots = calloc((size_t)size, sizeof(*st->slots));
    if (st->arrived == NULL || st->slots == NULL) {
        goto out_free;
    }
    PMIX_INFO_LOAD(&st->info, PMIX_TIMEOUT, &timeout, PMIX_INT);
    st->arrived[my_rank] = 1;
    atomic_store_explicit(&st->pending, 0, memory_order_relaxed);
    for (int r = 0; r < size; r++) {
        if (r == my_rank) {
            continue;
        }
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, boot->myproc.nspace, (pmix_rank_t)r);
        st->slots[r].st = st;
        st->slots[r].rank = r;
        atomic_fetch_add_explicit(&st->pending, 1, memory_order_relaxed);
        if (PMIx_Get_nb(&proc, key, &st->info, 1, probe_done, &st->slots[r]) != PMIX_SUCCESS) {
            atomic_fetch_sub_explicit(&st->pending, 1, memory_order_relaxed);
        }
    }
    tnt_backoff_init(&backoff, PROBE_TIMEOUT_S + 1);
    while (atomic_load_explicit(&st->pending, memory_order_acquire) > 0) {
        if (tnt_backoff_wait(&backoff) != 0) {
            return 0; /* st leaked: callbacks may still come */
        }
    }

    int answered = 0;
    for (int r = 0; r < size; r++) {
        if (r != my_rank) {
            answered += st->arrived[r];
            num_missing += !st->arrived[r];
        }
    }
    if (answered > 0 && num_missing > 0) {
        size_t off = (size_t)snprintf(missing, len, "%s", num_missing == 1 ? "rank " : "ranks ");
        int listed = 0;
        for (int r = 0; r < size && off < len; r++) {
            if (st->arrived[r]) {
                continue;
            }
            if (listed == PROBE_LIST_MAX) {
                off += (size_t)snprintf(missing + off, len - off, ", ...");
                break;
            }
            off += (size_t)snprintf(missing + off, len - off, "%s%d", listed > 0 ? ", " : "", r);
            listed++;
        }
        if (off < len) {
            snprintf(missing + off, len - off, " (%d of %d)", num_missing, size);
        }
    } else {
        num_missing = 0;
    }
    PMIX_INFO_DESTRUCT(&st->info);
out_free:
    free(st->arrived);
    free(st->slots);
    free(st);
    return num_missing;
}

/* A fence over every rank of the job, collecting the committed data when
 * collect is set, bounded by TNT_TIMEOUT. what names the operation in
 * errors ("allgather #3"); key is what every rank Put and Committed just
 * before, used to find the missing ranks on a timeout. */
static tnt_status_t fence(struct tnt_boot_pmix *boot, int collect, const char *what,
                          const char *key)
{
    struct fence_state *st = calloc(1, sizeof(*st));
    bool collect_b = collect != 0;
    int timeout = pmix_timeout_arg(boot->timeout_s);
    tnt_backoff_t backoff;

    if (st == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "bootstrap %s: out of memory", what);
    }
    PMIX_INFO_LOAD(&st->info[st->ninfo], PMIX_COLLECT_DATA, &collect_b, PMIX_BOOL);
    st->ninfo++;
    if (timeout > 0) {
        /* The server may enforce it too; our own deadline below is what
         * counts, so give the server a second more. */
        int server_timeout = timeout + 1;
        PMIX_INFO_LOAD(&st->info[st->ninfo], PMIX_TIMEOUT, &server_timeout, PMIX_INT);
        st->ninfo++;
    }
    pmix_status_t rc = PMIx_Fence_nb(NULL, 0, st->info, st->ninfo, fence_done, st);
    if (rc != PMIX_SUCCESS) {
        free(st);
        return tnt_error_raise(TNT_ERR_BOOTSTRAP,
                               "bootstrap %s: PMIx_Fence failed to start: %s; "
                               "is the launcher's PMIx server still running?",
                               what, PMIx_Error_string(rc));
    }
    tnt_backoff_init(&backoff, boot->timeout_s);
    while (!atomic_load_explicit(&st->done, memory_order_acquire)) {
        if (tnt_backoff_wait(&backoff) != 0) {
            /* st is kept: PMIx may still call fence_done. */
            fence_abandon(st);
            char missing[256];
            int n = probe_missing(boot, key, missing, sizeof(missing));
            if (n > 0) {
                return tnt_error_raise(TNT_ERR_TIMEOUT,
                                       "bootstrap %s: %s did not arrive within %.0f s; %s still "
                                       "running, and did %s call tnt_init? see TNT_TIMEOUT",
                                       what, missing, boot->timeout_s,
                                       n == 1 ? "is it" : "are they", n == 1 ? "it" : "they");
            }
            return tnt_error_raise(TNT_ERR_TIMEOUT,
                                   "bootstrap %s: not every one of the %d ranks arrived within "
                                   "%.0f s; are they all still running, and did they call "
                                   "tnt_init? see TNT_TIMEOUT",
                                   what, boot->super.info.size, boot->timeout_s);
        }
    }
    rc = st->status;
    for (size_t i = 0; i < st->ninfo; i++) {
        PMIX_INFO_DESTRUCT(&st->info[i]);
    }
    free(st);
    if (rc == PMIX_ERR_TIMEOUT) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "bootstrap %s: the PMIx server timed out waiting for the other "
                               "ranks (%.0f s); are they all still running? see TNT_TIMEOUT",
                               what, boot->timeout_s);
    }
    if (rc != PMIX_SUCCESS) {
        return tnt_error_raise(rc == PMIX_ERR_PROC_ABORTED || rc == PMIX_ERR_PROC_ABORTING ||
                                       rc == PMIX_ERR_LOST_CONNECTION
                                   ? TNT_ERR_PEER_FAILED
                                   : TNT_ERR_BOOTSTRAP,
                               "bootstrap %s: PMIx_Fence failed: %s; did a rank exit or abort?",
                               what, PMIx_Error_string(rc));
    }
    return TNT_OK;
}

static tnt_status_t pmix_allgather(tnt_boot_t *super, const void *in, void *out, size_t bytes)
{
    struct tnt_boot_pmix *boot = (struct tnt_boot_pmix *)super;
    const struct tnt_boot_info *info = &super->info;
    uint64_t seq = boot->allgather_seq++;
    char key[64];
    char what[64];
    pmix_value_t value;
    pmix_status_t rc;
    tnt_status_t status;

    snprintf(key, sizeof(key), "tnt.ag.%llu", (unsigned long long)seq);
    snprintf(what, sizeof(what), "allgather #%llu", (unsigned long long)seq);

    /* PMIx copies the value on Put, so in may be reused right away. */
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = (char *)(uintptr_t)in;
    value.data.bo.size = bytes;
    rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_Commit();
    }
    if (rc != PMIX_SUCCESS) {
        return tnt_error_raise(TNT_ERR_BOOTSTRAP,
                               "bootstrap %s: PMIx_Put/Commit of %zu bytes "
                               "failed: %s",
                               what, bytes, PMIx_Error_string(rc));
    }
    status = fence(boot, 1, what, key);
    if (status != TNT_OK) {
        return status;
    }

    int timeout = pmix_timeout_arg(boot->timeout_s);
    pmix_info_t get_info;
    PMIX_INFO_LOAD(&get_info, PMIX_TIMEOUT, &timeout, PMIX_INT);
    for (int r = 0; r < info->size; r++) {
        pmix_proc_t proc;
        pmix_value_t *val = NULL;
        PMIX_LOAD_PROCID(&proc, boot->myproc.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&proc, key, timeout > 0 ? &get_info : NULL, timeout > 0 ? 1 : 0, &val);
        if (rc != PMIX_SUCCESS) {
            status = tnt_error_raise(TNT_ERR_BOOTSTRAP,
                                     "bootstrap %s: could not get rank %d's "
                                     "data from PMIx: %s; did rank %d call the same collective?",
                                     what, r, PMIx_Error_string(rc), r);
            break;
        }
        if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != bytes) {
            status = tnt_error_raise(TNT_ERR_MISMATCH,
                                     "bootstrap %s: rank %d contributed %zu "
                                     "bytes, this rank %zu; the ranks are not running the same "
                                     "code path",
                                     what, r, val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0,
                                     bytes);
            PMIX_VALUE_RELEASE(val);
            break;
        }
        if (bytes > 0) {
            memcpy((char *)out + (size_t)r * bytes, val->data.bo.bytes, bytes);
        }
        PMIX_VALUE_RELEASE(val);
    }
    PMIX_INFO_DESTRUCT(&get_info);
    return status;
}

/* PMIx_Abort waits for the server's answer; if the server is gone or stuck,
 * this thread ends the process anyway. */
#define ABORT_WATCHDOG_S 10

static void *abort_watchdog(void *arg)
{
    sleep(ABORT_WATCHDOG_S);
    _exit((int)(intptr_t)arg);
}

/* Returns only if the server did not end this process; tnt_boot_abort then
 * exits. */
static void pmix_abort(tnt_boot_t *super, int exit_code, const char *message)
{
    pthread_t watchdog;
    (void)super;
    if (pthread_create(&watchdog, NULL, abort_watchdog, (void *)(intptr_t)exit_code) == 0) {
        pthread_detach(watchdog);
    }
    /* The server (launcher, mpirun, slurmstepd) kills every rank of the job,
     * normally including this one. */
    PMIx_Abort(exit_code, message, NULL, 0);
}

static const struct tnt_boot_ops pmix_ops = {
    .name = "pmix",
    .allgather = pmix_allgather,
    .abort = pmix_abort,
    .finalize = pmix_finalize,
};
