/*
 * Logging and the thread-local last error. Every line goes to stderr with one
 * write(2), so lines from several threads or ranks never interleave within a
 * line. The configuration (TNT_LOG_LEVEL, TNT_LOG_ON_ALL_DEVICES) is read once,
 * on first use.
 */
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define TNT_LOG_LINE_MAX  2048
#define TNT_ERROR_MSG_MAX 1024

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static tnt_log_level_t log_level = TNT_LOG_WARN;
static int log_all_ranks;

/* Identity is set by the bootstrap as soon as it is known and only read
 * afterwards; rank -1 means "not known yet". The host is written before the
 * rank's release store, and readers load the rank with acquire order first.
 * (A second tnt_init sets the same values again, which writes nothing.) */
static _Atomic int log_rank = -1;
static char log_host[256];

static int log_rank_get(void)
{
    return atomic_load_explicit(&log_rank, memory_order_acquire);
}

static _Thread_local char last_error[TNT_ERROR_MSG_MAX];

/* Warnings about bad environment values, found before the rank is known.
 * They are held back until tnt_log_set_identity() so that a bad TNT_TIMEOUT
 * gives one line (from rank 0) instead of one per rank. */
#define TNT_LOG_PENDING_MAX 4
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static char pending[TNT_LOG_PENDING_MAX][400];
static _Atomic int num_pending; /* written under pending_lock */

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

int tnt_log_level_parse(const char *name, tnt_log_level_t *level_p)
{
    if (name == NULL) {
        return -1;
    }
    for (int i = 0; i <= TNT_LOG_TRACE; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *level_p = (tnt_log_level_t)i;
            return 0;
        }
    }
    /* Common spellings of the old CLI and of other tools. */
    if (strcasecmp(name, "warning") == 0) {
        *level_p = TNT_LOG_WARN;
        return 0;
    }
    return -1;
}

/* Writes one already formatted line (prefix added here) with one write(2). */
static void log_write_line(const char *msg)
{
    char line[TNT_LOG_LINE_MAX];
    int n;

    int rank = log_rank_get();
    if (rank >= 0) {
        n = snprintf(line, sizeof(line), "tarantella[rank %d@%s]: %s\n", rank, log_host, msg);
    } else {
        n = snprintf(line, sizeof(line), "tarantella[pid %ld]: %s\n", (long)getpid(), msg);
    }
    if (n < 0) {
        return;
    }
    if ((size_t)n >= sizeof(line)) {
        /* Truncated: keep the newline so the next line starts cleanly. */
        n = sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    const char *p = line;
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, (size_t)n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        p += w;
        n -= (int)w;
    }
}

static void pending_add(const char *msg)
{
    pthread_mutex_lock(&pending_lock);
    if (num_pending < TNT_LOG_PENDING_MAX) {
        snprintf(pending[num_pending], sizeof(pending[0]), "%s", msg);
        num_pending++;
    }
    pthread_mutex_unlock(&pending_lock);
}

static void pending_flush(void)
{
    pthread_mutex_lock(&pending_lock);
    for (int i = 0; i < num_pending; i++) {
        log_write_line(pending[i]);
    }
    num_pending = 0;
    pthread_mutex_unlock(&pending_lock);
}

static void log_read_env(void)
{
    const char *level = getenv("TNT_LOG_LEVEL");
    if (level != NULL && *level != '\0' && tnt_log_level_parse(level, &log_level) != 0) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "warning: TNT_LOG_LEVEL='%.64s' is not one of error, warn, info, debug, trace; "
                 "using the default 'warn'",
                 level);
        log_level = TNT_LOG_WARN;
        pending_add(msg);
    }
    const char *all = getenv("TNT_LOG_ON_ALL_DEVICES");
    if (all != NULL && *all != '\0') {
        if (strcmp(all, "1") == 0 || strcasecmp(all, "true") == 0 || strcasecmp(all, "yes") == 0 ||
            strcasecmp(all, "on") == 0) {
            log_all_ranks = 1;
        } else if (strcmp(all, "0") == 0 || strcasecmp(all, "false") == 0 ||
                   strcasecmp(all, "no") == 0 || strcasecmp(all, "off") == 0) {
            log_all_ranks = 0;
        } else {
            char msg[400];
            snprintf(msg, sizeof(msg),
                     "warning: TNT_LOG_ON_ALL_DEVICES='%.64s' is not 0 or 1; using the default 0 "
                     "(only rank 0 logs below error level)",
                     all);
            pending_add(msg);
        }
    }
}

static void log_init(void)
{
    pthread_once(&log_once, log_read_env);
}

void tnt_log_set_identity(int rank, const char *hostname)
{
    log_init();
    if (hostname == NULL) {
        hostname = "?";
    }
    if (strncmp(log_host, hostname, sizeof(log_host) - 1) != 0) {
        snprintf(log_host, sizeof(log_host), "%s", hostname);
    }
    if (log_rank_get() != rank) {
        atomic_store_explicit(&log_rank, rank, memory_order_release);
    }
    if (tnt_log_enabled(TNT_LOG_WARN)) {
        pending_flush();
    }
}

void tnt_log_env_warning(const char *fmt, ...)
{
    static const char prefix[] = "warning: ";
    char line[400];
    va_list ap;

    log_init();
    memcpy(line, prefix, sizeof(prefix));
    va_start(ap, fmt);
    vsnprintf(line + sizeof(prefix) - 1, sizeof(line) - (sizeof(prefix) - 1), fmt, ap);
    va_end(ap);
    if (log_rank_get() < 0) {
        pending_add(line);
    } else if (tnt_log_enabled(TNT_LOG_WARN)) {
        log_write_line(line);
    }
}

int tnt_log_enabled(tnt_log_level_t level)
{
    log_init();
    if (level > log_level) {
        return 0;
    }
    /* Errors are always printed; everything else only on rank 0 (or while the
     * rank is unknown) unless TNT_LOG_ON_ALL_DEVICES asks for all ranks. */
    return level == TNT_LOG_ERROR || log_all_ranks || log_rank_get() <= 0;
}

static void log_vprint(tnt_log_level_t level, const char *fmt, va_list ap)
{
    char msg[TNT_LOG_LINE_MAX - 300];
    char with_level[TNT_LOG_LINE_MAX - 200];

    /* A process that never learns its rank (the launcher, the plugin) still
     * sees its environment warnings, just before its first own line. */
    if (num_pending > 0 && log_rank_get() < 0) {
        pending_flush();
    }

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (level == TNT_LOG_ERROR || level == TNT_LOG_WARN) {
        snprintf(with_level, sizeof(with_level), "%s: %s",
                 level == TNT_LOG_ERROR ? "error" : "warning", msg);
        log_write_line(with_level);
    } else {
        log_write_line(msg);
    }
}

void tnt_log(tnt_log_level_t level, const char *fmt, ...)
{
    if (!tnt_log_enabled(level)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    log_vprint(level, fmt, ap);
    va_end(ap);
}

/* Formats "rank R: <message>" into this thread's last-error buffer and returns
 * the part after the rank prefix (what the log line shows after its own
 * "tarantella[rank R@host]: " prefix). */
static const char *error_record(const char *fmt, va_list ap)
{
    char own[32];
    int prefix = 0;
    int rank = log_rank_get();
    if (rank >= 0) {
        prefix = snprintf(own, sizeof(own), "rank %d: ", rank);
        memcpy(last_error, own, (size_t)prefix + 1);
    }
    vsnprintf(last_error + prefix, sizeof(last_error) - (size_t)prefix, fmt, ap);
    /* A caller that already wrote "rank R: " gets it once, not twice. */
    if (prefix > 0 && strncmp(last_error + prefix, own, (size_t)prefix) == 0) {
        memmove(last_error, last_error + prefix, strlen(last_error + prefix) + 1);
    }
    return last_error + prefix;
}

tnt_status_t tnt_error_raise(tnt_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = error_record(fmt, ap);
    va_end(ap);
    tnt_log(TNT_LOG_ERROR, "%s", msg);
    return status;
}

tnt_status_t tnt_error_set(tnt_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_record(fmt, ap);
    va_end(ap);
    return status;
}

const char *tnt_error_message(void)
{
    return last_error;
}

void tnt_error_restore(const char *message)
{
    snprintf(last_error, sizeof(last_error), "%s", message != NULL ? message : "");
}

void tnt_error_clear(void)
{
    last_error[0] = '\0';
}
