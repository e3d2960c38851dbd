/*
 * Shared-memory transport: the node segment's life cycle. Local rank 0
 * creates it exclusively (mode 0600, an unguessable name, never unlinking a
 * name it did not create); the other ranks attach to exactly the name the
 * bootstrap announced, after checking owner, mode and size, and check the
 * header against the announced layout; everyone unlinks it once all are
 * attached. The protocol over it is shm.c's; the layout, shm_impl.h's.
 */
#include "transport/shm_impl.h"
#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

size_t tnt_shm_align(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static tnt_status_t tnt_shm_map(int fd, size_t bytes, void **addr_p)
{
    void *addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        return TNT_ERR_NO_MEMORY;
    }
    *addr_p = addr;
    return TNT_OK;
}

/* The layout every rank derives from the same numbers: where the slots and
 * the extra bytes start, and the whole size. 0 when it would not fit a
 * size_t (slot_bytes from the bootstrap is bounded, but checked anyway). */
size_t tnt_shm_layout(int n, size_t slot_bytes, size_t extra_bytes, size_t *slots_off_p,
                      size_t *extra_off_p)
{
    size_t ctl_bytes = (size_t)n * sizeof(struct tnt_shm_ctl);
    size_t slots_off = tnt_shm_align(sizeof(struct tnt_shm_header) + ctl_bytes, 4096);
    const size_t ring_bytes = (size_t)TNT_SHM_RING * TNT_SHM_RING_BYTES;
    const size_t per_rank = (SIZE_MAX / 4 - slots_off - extra_bytes) / (size_t)n;
    if (per_rank < ring_bytes || slot_bytes > (per_rank - ring_bytes) / 2) {
        return 0;
    }
    /* The eager rings follow the slots (shm_impl.h, "Eager rooted calls"). */
    size_t extra_off = slots_off + (size_t)n * 2 * slot_bytes +
                       (size_t)n * TNT_SHM_RING * TNT_SHM_RING_BYTES;
    *slots_off_p = slots_off;
    *extra_off_p = extra_off;
    return tnt_shm_align(extra_off + extra_bytes, 4096);
}

/* What the segment needs, for the messages of both rank 0 and the others. */
tnt_status_t tnt_shm_no_space(const struct tnt_shm *shm, size_t bytes, int err)
{
    return tnt_error_raise(
        TNT_ERR_NO_MEMORY,
        "rank %d: the shared-memory segment for %d local ranks needs %zu KiB in /dev/shm "
        "(%zu KiB of staging per rank, TNT_SHM_STAGING_KB) and cannot get it: %s; enlarge "
        "/dev/shm (docker run --shm-size=%zum, or mount -o remount,size=... /dev/shm) or lower "
        "TNT_SHM_STAGING_KB (at least 64; large allreduces get slower)",
        shm->global_ranks[shm->me], shm->n, bytes / 1024, 2 * shm->slot_bytes / 1024, strerror(err),
        (bytes >> 20) + 64);
}

/* Every rank's liveness mutex, before anyone can look at it. */
static tnt_status_t tnt_shm_init_alive(struct tnt_shm *shm, struct tnt_shm_ctl *ctl)
{
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc == 0) {
        rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    }
    if (rc == 0) {
        rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    }
    for (int j = 0; j < shm->n && rc == 0; j++) {
        rc = pthread_mutex_init(&ctl[j].alive, &attr);
    }
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
        return tnt_error_raise(TNT_ERR_SYSTEM,
                               "rank %d: cannot create robust process-shared mutexes: %s",
                               shm->global_ranks[0], strerror(rc));
    }
    return TNT_OK;
}

/* A new object of our own: mode 0600, created exclusively under a name
 * nobody can have guessed. An existing name is never unlinked (it may be
 * another user's, or another job's); a collision of 128 random bits means
 * someone saw the name, so draw another and say so. */
#define TNT_SHM_CREATE_TRIES 8

static tnt_status_t tnt_shm_create_exclusive(struct tnt_shm *shm, const char *prefix, int *fd_p)
{
    char name[TNT_SHM_NAME_MAX];
    uint8_t nonce[TNT_SHM_NONCE_BYTES];

    for (int tries = 0; tries < TNT_SHM_CREATE_TRIES; tries++) {
        if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
            return tnt_error_raise(TNT_ERR_SYSTEM,
                                   "rank %d: cannot draw a random shared-memory segment name "
                                   "(getrandom: %s)",
                                   shm->global_ranks[0], strerror(errno));
        }
        if (tnt_shm_segment_name(prefix, nonce, name, sizeof name) != 0) {
            return tnt_error_raise(TNT_ERR_INVALID_ARG,
                                   "rank %d: shared-memory segment prefix %s is too long",
                                   shm->global_ranks[0], prefix);
        }
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            snprintf(shm->name, sizeof shm->name, "%s", name);
            *fd_p = fd;
            return TNT_OK;
        }
        if (errno != EEXIST) {
            return tnt_error_raise(TNT_ERR_TRANSPORT,
                                   "rank %d: cannot create shared-memory segment /dev/shm%s: %s; "
                                   "check that /dev/shm is mounted and writable",
                                   shm->global_ranks[0], name, strerror(errno));
        }
        tnt_log_warn("shared-memory segment name /dev/shm%s already exists although it was just "
                     "drawn at random; leaving it alone and drawing another (is another user "
                     "creating names in /dev/shm? see docs/admin-guide.md, Security)",
                     name);
    }
    return tnt_error_raise(TNT_ERR_TRANSPORT,
                           "rank %d: %d random shared-memory segment names in a row already "
                           "existed in /dev/shm; someone is creating them (see "
                           "docs/admin-guide.md, Security)",
                           shm->global_ranks[0], TNT_SHM_CREATE_TRIES);
}

/* Local rank 0: creates the object, sizes it, reserves its pages and
 * initialises it, all before anyone learns its name. addr: what the others
 * are told; on failure its status (and, for a full /dev/shm, the size). */
tnt_status_t tnt_shm_create_segment(struct tnt_shm *shm, const char *prefix, size_t extra_bytes,
                                    tnt_shm_addr_t *addr, int *fd_p)
{
    size_t slots_off, extra_off;
    size_t bytes = tnt_shm_layout(shm->n, shm->slot_bytes, extra_bytes, &slots_off, &extra_off);
    tnt_status_t status;
    int fd = -1;

    memset(addr, 0, sizeof *addr);
    addr->local_size = shm->n;
    addr->segment_bytes = bytes;
    addr->slot_bytes = shm->slot_bytes;
    addr->small_max = shm->small_max;
    status = tnt_shm_create_exclusive(shm, prefix, &fd);
    if (status != TNT_OK) {
        addr->status = status;
        return status;
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        status = tnt_shm_no_space(shm, bytes, errno);
        goto err_unlink;
    }
    /* ftruncate reserves nothing on tmpfs: without this, a full /dev/shm
     * (Docker's default is 64 MiB) would kill the job with SIGBUS at the
     * first large collective instead of failing here. */
    int err = posix_fallocate(fd, 0, (off_t)bytes);
    if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
        status = tnt_shm_no_space(shm, bytes, err);
        goto err_unlink;
    }
    void *mem;
    if (tnt_shm_map(fd, bytes, &mem) != TNT_OK) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "rank %d: cannot map %zu bytes of /dev/shm%s: %s",
                            shm->global_ranks[0], bytes, shm->name, strerror(errno));
        goto err_unlink;
    }
    struct tnt_shm_header *hdr = mem;
    /* ftruncate zero-filled everything: counters start at 0. */
    hdr->local_size = (uint32_t)shm->n;
    hdr->segment_bytes = bytes;
    hdr->slot_bytes = shm->slot_bytes;
    hdr->small_max = shm->small_max;
    hdr->extra_bytes = extra_bytes;
    status = tnt_shm_init_alive(
        shm, (struct tnt_shm_ctl *)((char *)mem + sizeof(struct tnt_shm_header)));
    if (status != TNT_OK) {
        munmap(mem, bytes);
        goto err_unlink;
    }
    atomic_store_explicit(&hdr->attached, 1, memory_order_relaxed);
    /* Release: the fields above happen-before an attacher's acquire of magic. */
    atomic_store_explicit(&hdr->magic, TNT_SHM_MAGIC, memory_order_release);
    shm->hdr = hdr;
    shm->segment_bytes = bytes;
    snprintf(addr->name, sizeof addr->name, "%s", shm->name);
    *fd_p = fd;
    return TNT_OK;

err_unlink:
    /* Our own name (created exclusively above), so ours to remove. */
    shm_unlink(shm->name);
    close(fd);
    addr->status = status;
    return status;
}

/* Refuses, naming the segment, anything the attacher did not expect. */
static tnt_status_t tnt_shm_refuse(const struct tnt_shm *shm, const char *name, const char *fmt,
                                   ...) __attribute__((format(printf, 3, 4)));

static tnt_status_t tnt_shm_refuse(const struct tnt_shm *shm, const char *name, const char *fmt,
                                   ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tnt_error_raise(TNT_ERR_TRANSPORT,
                           "rank %d: refusing shared-memory segment /dev/shm%s from local rank 0 "
                           "(rank %d): %s; another user may have replaced it (see "
                           "docs/admin-guide.md, Security); the job cannot continue on this node",
                           shm->global_ranks[shm->me], name, shm->global_ranks[0], why);
}

/* The other local ranks: open exactly the name local rank 0 announced and
 * check it before mapping a byte: a regular file of this process's user,
 * closed to group and others, exactly the announced size, whose header says
 * what the announcement says. Nothing read from the segment sizes anything. */
tnt_status_t tnt_shm_attach_segment(struct tnt_shm *shm, const tnt_shm_addr_t *addr,
                                    size_t extra_bytes, int *fd_p)
{
    char name[TNT_SHM_NAME_MAX];
    size_t slots_off, extra_off, bytes;
    struct stat st;
    tnt_status_t status;
    void *mem;

    snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, addr->name);
    snprintf(shm->name, sizeof shm->name, "%s", name);
    if (addr->local_size != shm->n) {
        return tnt_error_raise(TNT_ERR_MISMATCH,
                               "rank %d: shared-memory segment %s was made for %d local ranks, "
                               "this rank expects %d; the launcher gave ranks different views "
                               "of the node",
                               shm->global_ranks[shm->me], name, (int)addr->local_size, shm->n);
    }
    if (name[0] != '/' || strchr(name + 1, '/') != NULL || addr->slot_bytes < 4096 ||
        addr->slot_bytes % 4096 != 0 || addr->slot_bytes > ((size_t)1 << 30) ||
        (bytes = tnt_shm_layout(shm->n, addr->slot_bytes, extra_bytes, &slots_off, &extra_off)) !=
            addr->segment_bytes) {
        return tnt_error_raise(TNT_ERR_MISMATCH,
                               "rank %d: local rank 0 (rank %d) announced shared-memory segment "
                               "%s of %llu bytes with %llu-byte slots, which is not a segment "
                               "libtnt makes for %d local ranks; are all ranks running the same "
                               "libtnt?",
                               shm->global_ranks[shm->me], shm->global_ranks[0], name,
                               (unsigned long long)addr->segment_bytes,
                               (unsigned long long)addr->slot_bytes, shm->n);
    }

    int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        if (errno == ENOENT) {
            return tnt_shm_refuse(shm, name,
                                  "it does not exist (did local rank 0 die or give up?)");
        }
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "rank %d: cannot open shared-memory segment /dev/shm%s: %s",
                               shm->global_ranks[shm->me], name, strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        status = tnt_error_raise(TNT_ERR_SYSTEM, "rank %d: fstat of /dev/shm%s: %s",
                                 shm->global_ranks[shm->me], name, strerror(errno));
        goto err_close;
    }
    if (!S_ISREG(st.st_mode)) {
        status = tnt_shm_refuse(shm, name, "it is not a regular file");
        goto err_close;
    }
    if (st.st_uid != geteuid()) {
        status = tnt_shm_refuse(shm, name, "it belongs to uid %u, this job runs as uid %u",
                                (unsigned)st.st_uid, (unsigned)geteuid());
        goto err_close;
    }
    if ((st.st_mode & 077) != 0) {
        status = tnt_shm_refuse(shm, name, "its mode %04o lets other users in (expected 0600)",
                                (unsigned)(st.st_mode & 07777));
        goto err_close;
    }
    if ((uint64_t)st.st_size != addr->segment_bytes) {
        status = tnt_shm_refuse(shm, name, "it has %lld bytes, local rank 0 made %llu",
                                (long long)st.st_size, (unsigned long long)addr->segment_bytes);
        goto err_close;
    }
    if (tnt_shm_map(fd, bytes, &mem) != TNT_OK) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "rank %d: cannot map %zu bytes of /dev/shm%s: %s",
                            shm->global_ranks[shm->me], bytes, name, strerror(errno));
        goto err_close;
    }
    struct tnt_shm_header *hdr = mem;
    /* Acquire pairs with rank 0's release of magic (stored before it
     * announced the name, so it is there already). */
    if (atomic_load_explicit(&hdr->magic, memory_order_acquire) != TNT_SHM_MAGIC ||
        hdr->local_size != (uint32_t)shm->n || hdr->segment_bytes != addr->segment_bytes ||
        hdr->slot_bytes != addr->slot_bytes || hdr->small_max != addr->small_max ||
        hdr->extra_bytes != extra_bytes) {
        status = tnt_shm_refuse(shm, name,
                                "its header does not match what local rank 0 announced (%u local "
                                "ranks, %llu bytes, %llu-byte slots)",
                                hdr->local_size, (unsigned long long)hdr->segment_bytes,
                                (unsigned long long)hdr->slot_bytes);
        munmap(mem, bytes);
        goto err_close;
    }
    shm->slot_bytes = addr->slot_bytes;
    shm->small_max = addr->small_max;
    shm->hdr = hdr;
    shm->segment_bytes = bytes;
    *fd_p = fd;
    return TNT_OK;

err_close:
    close(fd);
    return status;
}

/* Rank 0 waits for every local rank to attach, then removes the name: from
 * then on the memory lives only as long as some rank maps it, so nothing
 * is left in /dev/shm however the ranks end. */
tnt_status_t tnt_shm_unlink_when_attached(struct tnt_shm *shm)
{
    tnt_backoff_t backoff;
    tnt_backoff_init(&backoff, shm->timeout_s);
    uint32_t attached;
    tnt_status_t status = TNT_OK;
    /* Acquire pairs with the attachers' acq_rel increments. */
    while ((attached = atomic_load_explicit(&shm->hdr->attached, memory_order_acquire)) <
           (uint32_t)shm->n) {
        if (tnt_backoff_wait(&backoff) != 0) {
            status = tnt_error_raise(
                TNT_ERR_TIMEOUT,
                "rank %d: only %u of %d local ranks attached to shared-memory segment %s within "
                "%g s; are all ranks of this node running? see TNT_TIMEOUT",
                shm->global_ranks[0], attached, shm->n, shm->name, shm->timeout_s);
            break;
        }
    }
    shm_unlink(shm->name);
    return status;
}
