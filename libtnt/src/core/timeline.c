/*
 * The job's timeline file (docs/timeline.md): tnt_timeline_start checks the
 * path on rank 0 and aligns the ranks' clocks; tnt_timeline_stop gathers
 * every rank's events to rank 0 with libtnt's own collectives (no shared
 * file system is assumed) and writes one Chrome-trace file atomically. The
 * recording itself is util/timeline.c.
 *
 * Clock alignment: CLOCK_MONOTONIC differs between hosts. ALIGN_ROUNDS
 * times, every rank leaves a barrier, reads its clock and allgathers it;
 * rank r's offset is the median over the rounds of (rank 0's reading -
 * rank r's). The error is how unevenly the ranks leave a barrier (on one
 * host, where the true offset is 0, the file's clock_offsets_ns show it).
 */
#include "comm/comm.h"
#include "core/init.h"

#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN_ROUNDS 5
/* The gather moves each rank's part in pieces of this size, so rank 0
 * holds at most size x this much at once. */
#define GATHER_CHUNK (1u << 20)

static struct {
    tnt_comm_t *owner; /* the communicator that started it; NULL: none */
    int rank, size;
    char path[TNT_SETTINGS_PATH_MAX];
    char tmp[TNT_SETTINGS_PATH_MAX + 16]; /* rank 0: the temporary sibling */
    FILE *file;                           /* rank 0: open on tmp */
    int64_t origin_ns;                    /* the job's time zero in this clock */
    int64_t *offsets;                     /* size entries: rank r's clock + offset = rank 0's */
} job;

struct start_msg {
    int32_t ok; /* rank 0: the file could be created */
    int32_t err;
    uint64_t now_ns;
};

struct part_info {
    uint64_t bytes; /* this rank's formatted part */
    uint64_t recorded;
    uint64_t dropped;
};

/* mkstemp makes files 0600; a trace is made like any other output file,
 * 0666 less the umask (read from /proc, since umask(2) cannot be read
 * without changing it under other threads). */
static void make_readable(int fd)
{
    unsigned mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        char line[128];
        while (fgets(line, sizeof(line), f) != NULL) {
            if (sscanf(line, "Umask: %o", &mask) == 1) {
                break;
            }
        }
        fclose(f);
    }
    (void)fchmod(fd, 0666 & ~(mode_t)mask);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

TNT_API uint64_t tnt_timeline_now_ns(void)
{
    return tnt_time_ns();
}

TNT_API int tnt_timeline_active(void)
{
    return tnt_tl_enabled();
}

TNT_API void tnt_timeline_record(tnt_timeline_kind_t kind, uint64_t start_ns, uint64_t end_ns,
                                 uint64_t number)
{
    if (!tnt_tl_enabled()) {
        return;
    }
    tnt_tl_event_t ev = { .start_ns = start_ns, .end_ns = end_ns, .number = number };
    if (kind == TNT_TIMELINE_STEP) {
        ev.name = "step";
        atomic_init(&ev.kind, TNT_TL_STEP);
    } else if (kind == TNT_TIMELINE_SYNCHRONIZE) {
        ev.name = "synchronize";
        atomic_init(&ev.kind, TNT_TL_SYNC);
    } else {
        return;
    }
    tnt_tl_add(&ev);
}

/* Rank 0: the temporary file beside path, created exclusively. */
static int open_tmp(const char *path, int *err_p)
{
    snprintf(job.tmp, sizeof(job.tmp), "%s.tmp-XXXXXX", path);
    int fd = mkstemp(job.tmp);
    if (fd < 0) {
        *err_p = errno;
        return -1;
    }
    make_readable(fd);
    job.file = fdopen(fd, "w");
    if (job.file == NULL) {
        *err_p = errno;
        close(fd);
        unlink(job.tmp);
        return -1;
    }
    return 0;
}

static void close_tmp(int keep)
{
    if (job.file != NULL) {
        fclose(job.file);
        job.file = NULL;
        if (!keep) {
            unlink(job.tmp);
        }
    }
}

/* Rounds of barrier, clock, allgather: every rank's offset to rank 0. */
static tnt_status_t align_clocks(tnt_comm_t *comm, int ok, int err)
{
    struct start_msg *all = calloc((size_t)comm->size, sizeof(*all));
    int64_t *samples = calloc((size_t)comm->size * ALIGN_ROUNDS, sizeof(*samples));
    tnt_status_t status = TNT_OK;

    if (all == NULL || samples == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "timeline: out of memory for %d ranks", comm->size);
        goto out;
    }
    for (int k = 0; k < ALIGN_ROUNDS; k++) {
        struct start_msg me = { ok, err, 0 };
        status = tnt_barrier(comm);
        if (status != TNT_OK) {
            goto out;
        }
        me.now_ns = tnt_time_ns();
        status = tnt_allgather(comm, &me, all, sizeof(me));
        if (status != TNT_OK) {
            goto out;
        }
        if (!all[0].ok) {
            status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                     "timeline: rank 0 cannot create a file beside '%s': %s; "
                                     "point TNT_TIMELINE (or tnt.timeline) at a writable "
                                     "directory on rank 0's node, or unset it",
                                     job.path, strerror(all[0].err));
            goto out;
        }
        if (k == 0) {
            job.origin_ns = (int64_t)all[0].now_ns;
        }
        for (int r = 0; r < comm->size; r++) {
            samples[(size_t)r * ALIGN_ROUNDS + (size_t)k] =
                (int64_t)all[0].now_ns - (int64_t)all[r].now_ns;
        }
    }
    for (int r = 0; r < comm->size; r++) {
        int64_t *s = &samples[(size_t)r * ALIGN_ROUNDS];
        qsort(s, ALIGN_ROUNDS, sizeof(*s), cmp_i64);
        job.offsets[r] = s[ALIGN_ROUNDS / 2];
    }
    /* Rank 0's first reading, in this rank's clock. */
    job.origin_ns -= job.offsets[comm->rank];
out:
    free(all);
    free(samples);
    return status;
}

TNT_API tnt_status_t tnt_timeline_start(tnt_comm_t *comm, const char *path)
{
    int ok = 1, err = 0;
    tnt_status_t status;

    if (comm == NULL || path == NULL || path[0] == '\0') {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_timeline_start: %s is %s",
                               comm == NULL ? "comm" : "path", comm == NULL ? "NULL" : "empty");
    }
    if (strlen(path) >= sizeof(job.path)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_timeline_start: the path is longer than %zu bytes",
                               sizeof(job.path) - 1);
    }
    if (job.owner != NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_timeline_start: a timeline already records into '%s' "
                               "(one per process; TNT_TIMELINE starts one in tnt_init)",
                               job.path);
    }
    snprintf(job.path, sizeof(job.path), "%s", path);
    job.offsets = calloc((size_t)comm->size, sizeof(*job.offsets));
    if (job.offsets == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "timeline: out of memory for %d ranks",
                               comm->size);
    }
    if (comm->rank == 0 && open_tmp(path, &err) != 0) {
        ok = 0;
    }
    /* Every rank learns rank 0's verdict in the first round, so all fail
     * alike, here, instead of losing the run at the end. */
    status = align_clocks(comm, ok, err);
    if (status != TNT_OK) {
        goto err_close;
    }
    status = tnt_tl_begin(comm->settings->timeline_events);
    if (status != TNT_OK) {
        status = tnt_error_raise(status,
                                 "timeline: no memory for %llu events (%zu bytes each); lower "
                                 "TNT_TIMELINE_EVENTS",
                                 (unsigned long long)comm->settings->timeline_events,
                                 sizeof(tnt_tl_event_t));
        goto err_close;
    }
    tnt_tl_name_thread("main");
    job.owner = comm;
    job.rank = comm->rank;
    job.size = comm->size;
    tnt_log_info("timeline: recording into %s (up to %llu events per rank)", job.path,
                 (unsigned long long)comm->settings->timeline_events);
    return TNT_OK;

err_close:
    close_tmp(0);
    free(job.offsets);
    job.offsets = NULL;
    return status;
}

/* The file's header: what a reader needs besides the events. */
static void write_header(FILE *f, int size, const int64_t *offsets, const struct part_info *parts)
{
    fprintf(f,
            "{\"otherData\":{\"writer\":\"tarantella %s\",\"ranks\":%d,\"capacity\":%llu,"
            "\"clock_offsets_ns\":[",
            tnt_version(), size, (unsigned long long)tnt_tl_capacity());
    for (int r = 0; r < size; r++) {
        fprintf(f, "%s%lld", r ? "," : "", (long long)offsets[r]);
    }
    fprintf(f, "],\"recorded\":[");
    for (int r = 0; r < size; r++) {
        fprintf(f, "%s%llu", r ? "," : "", (unsigned long long)parts[r].recorded);
    }
    fprintf(f, "],\"dropped\":[");
    for (int r = 0; r < size; r++) {
        fprintf(f, "%s%llu", r ? "," : "", (unsigned long long)parts[r].dropped);
    }
    fprintf(f, "]},\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
}

/* Closes f and renames tmp to path; 0 or -1 with errno. */
static int finish_file(FILE *f, const char *tmp, const char *path)
{
    fputs("\n]}\n", f);
    int failed = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int saved = errno;
    if (fclose(f) != 0 && !failed) {
        failed = 1;
        saved = errno;
    }
    if (failed || rename(tmp, path) != 0) {
        saved = failed ? saved : errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

/* This rank's part alone, to PATH.rankN on this node: what is left when the
 * parts cannot be merged (a failed gather, an abort). */
static void write_own_part(const char *text, size_t len, const char *why)
{
    char path[TNT_SETTINGS_PATH_MAX + 32], tmp[TNT_SETTINGS_PATH_MAX + 48];
    snprintf(path, sizeof(path), "%s.rank%d", job.path, job.rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        make_readable(fd);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        tnt_log_every_rank(TNT_LOG_ERROR, "timeline: could not write this rank's part to %s: %s",
                           path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return;
    }
    struct part_info me = { len, tnt_tl_recorded(), tnt_tl_dropped() };
    int64_t *offsets = calloc((size_t)job.rank + 1, sizeof(*offsets));
    struct part_info *parts = calloc((size_t)job.rank + 1, sizeof(*parts));
    if (offsets != NULL && parts != NULL) {
        /* Ranks below this one appear with empty parts, so that pid and
         * the position in the arrays agree with the merged file. */
        offsets[job.rank] = job.offsets[job.rank];
        parts[job.rank] = me;
        write_header(f, job.rank + 1, offsets, parts);
    }
    free(offsets);
    free(parts);
    fwrite(text, 1, len, f);
    if (finish_file(f, tmp, path) != 0) {
        tnt_log_every_rank(TNT_LOG_ERROR, "timeline: could not write %s: %s", path,
                           strerror(errno));
        return;
    }
    tnt_log_every_rank(TNT_LOG_WARN, "timeline: %s; this rank's part is in %s", why, path);
}

static void job_reset(void)
{
    free(job.offsets);
    job.offsets = NULL;
    job.owner = NULL;
}

/* Rank 0 receives every rank's part in GATHER_CHUNK pieces and appends
 * them to the file in rank order. */
static tnt_status_t gather_parts(tnt_comm_t *comm, const char *text, const struct part_info *parts)
{
    uint64_t longest = 0;
    for (int r = 0; r < comm->size; r++) {
        longest = parts[r].bytes > longest ? parts[r].bytes : longest;
    }
    /* Every rank computes the same chunk from the same sizes. */
    const size_t chunk =
        longest < GATHER_CHUNK ? (longest > 0 ? (size_t)longest : 1) : GATHER_CHUNK;
    char *piece = malloc(chunk);
    char *all = comm->rank == 0 ? malloc((size_t)comm->size * chunk) : NULL;
    FILE **ranks = NULL;
    tnt_status_t status = TNT_OK;
    int fail = piece == NULL || (comm->rank == 0 && all == NULL);

    /* Rank 0 spools each rank's part to its own temporary stream so that
     * the file holds them whole and in rank order. */
    if (!fail && comm->rank == 0) {
        ranks = calloc((size_t)comm->size, sizeof(*ranks));
        fail = ranks == NULL;
        for (int r = 0; !fail && r < comm->size; r++) {
            ranks[r] = tmpfile();
            fail = ranks[r] == NULL;
        }
    }
    /* Everyone learns whether anyone failed to set up, so that nobody
     * enters a gather another rank skips. */
    int32_t any = fail, any_all = 0;
    status = tnt_allreduce(comm, &any, &any_all, 1, TNT_INT32, TNT_MAX);
    if (status == TNT_OK && any_all) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "timeline: out of memory gathering the parts");
    }
    for (uint64_t off = 0; status == TNT_OK && off < longest; off += chunk) {
        size_t n = 0;
        if (off < parts[comm->rank].bytes) {
            n = parts[comm->rank].bytes - off < chunk ? parts[comm->rank].bytes - off : chunk;
            memcpy(piece, text + off, n);
        }
        status = tnt_gather(comm, piece, all, chunk, 0);
        for (int r = 0; status == TNT_OK && comm->rank == 0 && r < comm->size; r++) {
            if (off < parts[r].bytes) {
                uint64_t m = parts[r].bytes - off < chunk ? parts[r].bytes - off : chunk;
                fwrite(all + (size_t)r * chunk, 1, m, ranks[r]);
            }
        }
    }
    if (status == TNT_OK && comm->rank == 0) {
        write_header(job.file, comm->size, job.offsets, parts);
        char buf[65536];
        for (int r = 0; r < comm->size; r++) {
            rewind(ranks[r]);
            if (r > 0) {
                fputs(",\n", job.file);
            }
            size_t n;
            while ((n = fread(buf, 1, sizeof(buf), ranks[r])) > 0) {
                fwrite(buf, 1, n, job.file);
            }
        }
        FILE *f = job.file;
        job.file = NULL;
        if (finish_file(f, job.tmp, job.path) != 0) {
            status = tnt_error_raise(TNT_ERR_SYSTEM, "timeline: could not write %s: %s", job.path,
                                     strerror(errno));
        }
    }
    for (int r = 0; ranks != NULL && r < comm->size; r++) {
        if (ranks[r] != NULL) {
            fclose(ranks[r]);
        }
    }
    free(ranks);
    free(all);
    free(piece);
    return status;
}

TNT_API tnt_status_t tnt_timeline_stop(tnt_comm_t *comm)
{
    char *text = NULL;
    size_t len = 0;
    struct part_info *parts = NULL;
    tnt_status_t status;

    if (job.owner == NULL) {
        return TNT_OK;
    }
    if (comm != job.owner) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "tnt_timeline_stop: the timeline was started on communicator "
                               "%s; stop it there",
                               job.owner->name);
    }
    /* Posted operations record their events as they finish. */
    status = tnt_progress_drain(comm);
    tnt_tl_end();
    if (tnt_tl_format(comm->rank, job.origin_ns, &text, &len) != 0) {
        text = NULL;
        len = 0;
        status = status == TNT_OK
                     ? tnt_error_raise(TNT_ERR_NO_MEMORY, "timeline: out of memory formatting")
                     : status;
    }
    if (tnt_tl_dropped() > 0) {
        tnt_log_every_rank(TNT_LOG_WARN,
                           "timeline: %llu events did not fit and were dropped; raise "
                           "TNT_TIMELINE_EVENTS (now %llu)",
                           (unsigned long long)tnt_tl_dropped(),
                           (unsigned long long)tnt_tl_capacity());
    }
    parts = calloc((size_t)comm->size, sizeof(*parts));
    if (status == TNT_OK && parts == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "timeline: out of memory");
    }
    if (status == TNT_OK) {
        struct part_info me = { len, tnt_tl_recorded(), tnt_tl_dropped() };
        status = tnt_allgather(comm, &me, parts, sizeof(me));
    }
    if (status == TNT_OK) {
        status = gather_parts(comm, text, parts);
    }
    if (status != TNT_OK && text != NULL) {
        write_own_part(text, len, "the ranks' parts could not be merged");
    } else if (status == TNT_OK && comm->rank == 0) {
        tnt_log_info("timeline: wrote %s", job.path);
    }
    close_tmp(0);
    free(parts);
    free(text);
    job_reset();
    return status;
}

void tnt_timeline_finalize(tnt_comm_t *comm)
{
    if (job.owner != NULL && job.owner == comm) {
        (void)tnt_timeline_stop(comm);
    }
}

void tnt_timeline_abort(void)
{
    char *text = NULL;
    size_t len = 0;

    if (job.owner == NULL) {
        return;
    }
    tnt_tl_end();
    if (tnt_tl_format(job.rank, job.origin_ns, &text, &len) == 0) {
        write_own_part(text, len, "the job is aborting");
        free(text);
    }
    close_tmp(0);
}
