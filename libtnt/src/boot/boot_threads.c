/*
 * The in-process bootstrap of boot_threads.h.
 *
 * Every collective is one round of the group: the ranks copy their blocks
 * into the group's buffer (filling), the last to arrive opens it for reading
 * (draining), and the last reader starts the next round. A rank that comes
 * early for the next round waits until the previous one has been read, so
 * one buffer serves all rounds. The group lock guards everything below it.
 */
#include "boot/boot_threads.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAILURE_MAX 512

struct tnt_boot_threads_group {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC: any change of the round's state */
    int size;
    double timeout_s;
    char job_id[TNT_BOOT_JOB_ID_MAX];
    char (*hostnames)[TNT_BOOT_HOSTNAME_MAX]; /* size entries */
    unsigned char *created;                   /* size entries: its boot exists */

    /* The round in progress. */
    uint64_t round;
    int filling;           /* 1: collecting blocks; 0: being read */
    int arrived;           /* blocks in so far */
    int left_to_read;      /* while draining */
    unsigned char *joined; /* size entries: rank's block is in */
    const char *kind;      /* the operation ("allgather"), of the first to arrive */
    size_t bytes;          /* per rank, of the first to arrive */
    unsigned char *data;   /* size * bytes */
    size_t capacity;

    /* Sticky: once set, every operation fails with it at once. */
    tnt_status_t failed;
    char failure[FAILURE_MAX];
    int abort_code; /* of the first rank that aborted */
    char abort_message[FAILURE_MAX];
};

struct tnt_boot_threads {
    struct tnt_boot super; /* first: a tnt_boot_t * is a struct tnt_boot_threads * */
    tnt_boot_threads_group_t *group;
    uint64_t allgather_seq;
};

static struct timespec deadline_after(double timeout_s)
{
    uint64_t t = tnt_time_ns() + (uint64_t)(timeout_s * 1e9);
    struct timespec ts = { (time_t)(t / 1000000000u), (long)(t % 1000000000u) };
    return ts;
}

/* Called with the lock held: breaks the group and wakes every waiter. */
static void group_fail(tnt_boot_threads_group_t *group, tnt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void group_fail(tnt_boot_threads_group_t *group, tnt_status_t status, const char *fmt, ...)
{
    if (group->failed != TNT_OK) {
        return; /* the first cause is the one worth reporting */
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(group->failure, sizeof(group->failure), fmt, ap);
    va_end(ap);
    group->failed = status;
    pthread_cond_broadcast(&group->cond);
}

/* Called with the lock held after a wait for the round ran out: names the
 * ranks whose block is missing. */
static void group_fail_timeout(tnt_boot_threads_group_t *group, const char *what)
{
    char missing[256];
    size_t off = 0;
    int num_missing = 0;

    missing[0] = '\0';
    for (int r = 0; r < group->size && off < sizeof(missing); r++) {
        if (!group->joined[r]) {
            off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%d",
                                    num_missing > 0 ? ", " : "", r);
            num_missing++;
        }
    }
    group_fail(group, TNT_ERR_TIMEOUT,
               "bootstrap %s: %s %s (%d of %d) did not arrive within %.1f s; see TNT_TIMEOUT", what,
               num_missing == 1 ? "rank" : "ranks", missing, num_missing, group->size,
               group->timeout_s);
}

/* One collective round: contributes bytes from in and, unless out is NULL,
 * copies every rank's block into out. */
static tnt_status_t group_round(struct tnt_boot_threads *boot, const char *kind, const char *what,
                                const void *in, void *out, size_t bytes)
{
    tnt_boot_threads_group_t *group = boot->group;
    const int rank = boot->super.info.rank;
    const struct timespec deadline = deadline_after(group->timeout_s);
    tnt_status_t status = TNT_OK;
    char failure[FAILURE_MAX];

    pthread_mutex_lock(&group->lock);
    /* The previous round may still be read by slower ranks. */
    while (group->failed == TNT_OK && !group->filling) {
        if (pthread_cond_timedwait(&group->cond, &group->lock, &deadline) == ETIMEDOUT) {
            group_fail(group, TNT_ERR_TIMEOUT,
                       "bootstrap %s: the previous round was not read by every rank within "
                       "%.1f s",
                       what, group->timeout_s);
        }
    }
    if (group->failed != TNT_OK) {
        goto out_failed;
    }
    if (group->arrived == 0) {
        size_t need = (size_t)group->size * bytes;
        if (need > group->capacity) {
            unsigned char *data = realloc(group->data, need);
            if (data == NULL) {
                group_fail(group, TNT_ERR_NO_MEMORY, "bootstrap %s: out of memory for %zu bytes",
                           what, need);
                goto out_failed;
            }
            group->data = data;
            group->capacity = need;
        }
        group->kind = kind;
        group->bytes = bytes;
    } else if (strcmp(group->kind, kind) != 0) {
        group_fail(group, TNT_ERR_MISMATCH,
                   "bootstrap %s: rank %d entered it while the ranks before it entered a %s; "
                   "the ranks are not running the same code path",
                   what, rank, group->kind);
        goto out_failed;
    } else if (group->bytes != bytes) {
        group_fail(group, TNT_ERR_MISMATCH,
                   "bootstrap %s: rank %d contributed %zu bytes, the ranks before it %zu; the "
                   "ranks are not running the same code path",
                   what, rank, bytes, group->bytes);
        goto out_failed;
    }
    if (bytes > 0) {
        memcpy(group->data + (size_t)rank * bytes, in, bytes);
    }
    group->joined[rank] = 1;
    group->arrived++;
    const uint64_t my_round = group->round;
    if (group->arrived == group->size) {
        group->filling = 0;
        group->left_to_read = group->size;
        pthread_cond_broadcast(&group->cond);
    }
    while (group->failed == TNT_OK && group->round == my_round && group->filling) {
        if (pthread_cond_timedwait(&group->cond, &group->lock, &deadline) == ETIMEDOUT) {
            group_fail_timeout(group, what);
        }
    }
    /* A round that completed is read even if the group broke since. */
    if (group->round != my_round || group->filling) {
        goto out_failed;
    }
    if (out != NULL && bytes > 0) {
        memcpy(out, group->data, (size_t)group->size * bytes);
    }
    if (--group->left_to_read == 0) {
        group->round++;
        group->filling = 1;
        group->arrived = 0;
        memset(group->joined, 0, (size_t)group->size);
        pthread_cond_broadcast(&group->cond);
    }
    pthread_mutex_unlock(&group->lock);
    return TNT_OK;

out_failed:
    status = group->failed;
    memcpy(failure, group->failure, sizeof(failure));
    pthread_mutex_unlock(&group->lock);
    return tnt_error_raise(status, "%s", failure);
}

static tnt_status_t threads_allgather(tnt_boot_t *super, const void *in, void *out, size_t bytes)
{
    struct tnt_boot_threads *boot = (struct tnt_boot_threads *)super;
    char what[64];
    snprintf(what, sizeof(what), "allgather #%llu", (unsigned long long)boot->allgather_seq++);
    return group_round(boot, "allgather", what, in, out, bytes);
}

/* The rank "dies": its peers' operations fail naming it, and its thread ends
 * like a process would. */
static void threads_abort(tnt_boot_t *super, int exit_code, const char *message)
{
    struct tnt_boot_threads *boot = (struct tnt_boot_threads *)super;
    tnt_boot_threads_group_t *group = boot->group;

    pthread_mutex_lock(&group->lock);
    if (group->abort_code == 0) {
        group->abort_code = exit_code;
        snprintf(group->abort_message, sizeof(group->abort_message), "%s", message);
    }
    group_fail(group, TNT_ERR_PEER_FAILED, "rank %d aborted the job (exit code %d): %s",
               super->info.rank, exit_code, message);
    pthread_mutex_unlock(&group->lock);
    pthread_exit(NULL);
}

static void threads_finalize(tnt_boot_t *super)
{
    free(super);
}

static const struct tnt_boot_ops threads_ops = {
    .name = "threads",
    .allgather = threads_allgather,
    .abort = threads_abort,
    .finalize = threads_finalize,
};

tnt_status_t tnt_boot_threads_group_create(int size, const char *const *hostnames, double timeout_s,
                                           tnt_boot_threads_group_t **group_p)
{
    static _Atomic unsigned job_counter;
    tnt_boot_threads_group_t *group;
    pthread_condattr_t attr;

    if (size < 1 || !(timeout_s > 0)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "bootstrap threads: size %d and timeout %.1f s must be positive",
                               size, timeout_s);
    }
    group = calloc(1, sizeof(*group));
    if (group == NULL) {
        goto err;
    }
    group->hostnames = calloc((size_t)size, sizeof(*group->hostnames));
    group->created = calloc((size_t)size, 1);
    group->joined = calloc((size_t)size, 1);
    if (group->hostnames == NULL || group->created == NULL || group->joined == NULL) {
        goto err_free;
    }
    for (int r = 0; r < size; r++) {
        snprintf(group->hostnames[r], sizeof(group->hostnames[r]), "%s",
                 hostnames != NULL ? hostnames[r] : "localhost");
    }
    if (pthread_mutex_init(&group->lock, NULL) != 0) {
        goto err_free;
    }
    /* Deadlines are monotonic, like every deadline in libtnt. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&group->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        goto err_mutex;
    }
    group->size = size;
    group->timeout_s = timeout_s;
    group->filling = 1;
    snprintf(group->job_id, sizeof(group->job_id), "threads-%ld-%u", (long)getpid(),
             atomic_fetch_add_explicit(&job_counter, 1, memory_order_relaxed));
    *group_p = group;
    return TNT_OK;

err_mutex:
    pthread_mutex_destroy(&group->lock);
err_free:
    free(group->hostnames);
    free(group->created);
    free(group->joined);
    free(group);
err:
    return tnt_error_raise(TNT_ERR_NO_MEMORY, "bootstrap threads: out of memory for %d ranks",
                           size);
}

void tnt_boot_threads_group_destroy(tnt_boot_threads_group_t *group)
{
    if (group == NULL) {
        return;
    }
    pthread_cond_destroy(&group->cond);
    pthread_mutex_destroy(&group->lock);
    free(group->hostnames);
    free(group->created);
    free(group->joined);
    free(group->data);
    free(group);
}

tnt_status_t tnt_boot_threads_create(tnt_boot_threads_group_t *group, int rank, tnt_boot_t **boot_p)
{
    if (rank < 0 || rank >= group->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "bootstrap threads: no rank %d of %d", rank,
                               group->size);
    }
    struct tnt_boot_threads *boot = calloc(1, sizeof(*boot));
    if (boot == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "bootstrap threads: out of memory");
    }
    pthread_mutex_lock(&group->lock);
    int again = group->created[rank];
    group->created[rank] = 1;
    pthread_mutex_unlock(&group->lock);
    if (again) {
        free(boot);
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "bootstrap threads: rank %d exists already",
                               rank);
    }

    struct tnt_boot_info *info = &boot->super.info;
    boot->super.ops = &threads_ops;
    boot->group = group;
    info->rank = rank;
    info->size = group->size;
    info->local_rank = 0;
    info->local_size = 0;
    /* The launcher's view of the node layout, from the hostnames (a real
     * launcher knows it from its own placement). */
    for (int r = 0; r < group->size; r++) {
        if (strcmp(group->hostnames[r], group->hostnames[rank]) == 0) {
            info->local_rank += r < rank;
            info->local_size++;
        }
    }
    snprintf(info->job_id, sizeof(info->job_id), "%s", group->job_id);
    snprintf(info->hostname, sizeof(info->hostname), "%s", group->hostnames[rank]);
    *boot_p = &boot->super;
    return TNT_OK;
}

int tnt_boot_threads_abort_code(tnt_boot_threads_group_t *group, char *message, size_t len)
{
    pthread_mutex_lock(&group->lock);
    int code = group->abort_code;
    if (message != NULL && len > 0) {
        snprintf(message, len, "%s", group->abort_message);
    }
    pthread_mutex_unlock(&group->lock);
    return code;
}
