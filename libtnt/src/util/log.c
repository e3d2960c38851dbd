/*
 * Logging and the thread-local last error. Every line goes to stderr with one
 * write(2), so lines from several threads or ranks never interleave within a
 * line. The configuration (TNT_LOG_LEVEL, TNT_LOG_ON_ALL_DEVICES) comes from
 * tnt_init's settings; before that it is read once, on first use.
 */
#include "util/log.h"
#include "util/settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/sockios.h>

#define TNT_LOG_LINE_MAX  2048
#define TNT_ERROR_MSG_MAX 1024

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
/* Relaxed: each is a self-contained value, written before tnt_init returns
 * and read by any thread; nothing else is published through them. */
static _Atomic int log_level = TNT_LOG_WARN;
static _Atomic int log_all_ranks;

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
/* Whether last_error was printed where it was raised (tnt_error_raise) or
 * only recorded (tnt_error_set). Carried with the message when an error
 * moves between threads (tnt_error_restore), never recognised by its text:
 * two failures can have the same words. */
static _Thread_local int last_error_printed;
/* tnt_error_context_swap: the prefix, and how much of it is the name. */
static _Thread_local tnt_error_context_t error_context;

int tnt_log_level_parse(const char *name, tnt_log_level_t *level_p)
{
    tnt_settings_t settings;

    /* The names are TNT_LOG_LEVEL's choices; "" means "unset" there but is
     * no level here. */
    if (name == NULL || *name == '\0' ||
        tnt_settings_parse_quietly(&settings, "TNT_LOG_LEVEL", name) != 0) {
        return -1;
    }
    *level_p = settings.log_level;
    return 0;
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

/* Before tnt_init the logger reads its two variables itself, through the
 * settings parser but quietly (logging from here would re-enter log_init); a
 * bad value keeps the default until tnt_init rejects it with an error. */
static void log_read_env(void)
{
    tnt_settings_t settings;

    tnt_settings_set_defaults(&settings);
    (void)tnt_settings_parse_quietly(&settings, "TNT_LOG_LEVEL", getenv("TNT_LOG_LEVEL"));
    (void)tnt_settings_parse_quietly(&settings, "TNT_LOG_ON_ALL_DEVICES",
                                     getenv("TNT_LOG_ON_ALL_DEVICES"));
    atomic_store_explicit(&log_level, (int)settings.log_level, memory_order_relaxed);
    atomic_store_explicit(&log_all_ranks, settings.log_on_all_ranks, memory_order_relaxed);
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
}

void tnt_log_configure(tnt_log_level_t level, int all_ranks)
{
    log_init();
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
    atomic_store_explicit(&log_all_ranks, all_ranks, memory_order_relaxed);
}

int tnt_log_enabled(tnt_log_level_t level)
{
    log_init();
    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed)) {
        return 0;
    }
    /* Errors are always printed; everything else only on rank 0 (or while the
     * rank is unknown) unless TNT_LOG_ON_ALL_DEVICES asks for all ranks. */
    return level == TNT_LOG_ERROR || atomic_load_explicit(&log_all_ranks, memory_order_relaxed) ||
           log_rank_get() <= 0;
}

static void log_vprint(tnt_log_level_t level, const char *fmt, va_list ap)
{
    char msg[TNT_LOG_LINE_MAX - 300];
    char with_level[TNT_LOG_LINE_MAX - 200];

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

void tnt_log_every_rank(tnt_log_level_t level, const char *fmt, ...)
{
    log_init();
    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    log_vprint(level, fmt, ap);
    va_end(ap);
}

/* Puts "<context>: " before msg (of a buffer of len bytes), unless msg
 * names the context's communicator already; truncates at the end. */
static void error_add_context(char *msg, size_t len)
{
    const char *ctx = error_context.text;
    if (ctx == NULL || memmem(msg, strlen(msg), ctx, error_context.name_len) != NULL) {
        return;
    }
    size_t add = strlen(ctx) + 2, have = strlen(msg);
    if (add >= len) {
        return;
    }
    if (have + add >= len) {
        have = len - add - 1;
    }
    memmove(msg + add, msg, have);
    msg[add + have] = '\0';
    memcpy(msg, ctx, add - 2);
    memcpy(msg + add - 2, ": ", 2);
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
    error_add_context(last_error + prefix, sizeof(last_error) - (size_t)prefix);
    return last_error + prefix;
}

tnt_error_context_t tnt_error_context_swap(tnt_error_context_t context)
{
    tnt_error_context_t before = error_context;
    error_context = context;
    return before;
}

tnt_status_t tnt_error_raise(tnt_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = error_record(fmt, ap);
    va_end(ap);
    tnt_log(TNT_LOG_ERROR, "%s", msg);
    last_error_printed = 1;
    return status;
}

int tnt_error_printed(void)
{
    return last_error[0] != '\0' && last_error_printed;
}

tnt_status_t tnt_error_set(tnt_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_record(fmt, ap);
    va_end(ap);
    last_error_printed = 0;
    return status;
}

const char *tnt_error_message(void)
{
    return last_error;
}

void tnt_error_restore(const char *message, int printed)
{
    snprintf(last_error, sizeof(last_error), "%s", message != NULL ? message : "");
    last_error_printed = printed;
}

void tnt_error_clear(void)
{
    last_error[0] = '\0';
    last_error_printed = 0;
}

/* Bytes written to fd that its reader has not taken yet, or -1 when fd is
 * not a pipe or a socket (a file or a terminal loses nothing). */
static int log_fd_unread(int fd)
{
    struct stat st;
    int pending;

    if (fstat(fd, &st) != 0) {
        return -1;
    }
    if (S_ISFIFO(st.st_mode)) {
        return ioctl(fd, FIONREAD, &pending) == 0 ? pending : -1;
    }
    if (S_ISSOCK(st.st_mode)) {
        /* For a Unix stream socket the sender's queue holds a byte until the
         * receiver has read it. */
        return ioctl(fd, SIOCOUTQ, &pending) == 0 ? pending : -1;
    }
    return -1;
}

void tnt_log_drain(double timeout_s)
{
    const struct timespec pause = { 0, 5 * 1000 * 1000 };
    struct timespec now;
    double deadline;
    int fd;

    fflush(stdout);
    fflush(stderr);
    clock_gettime(CLOCK_MONOTONIC, &now);
    deadline = now.tv_sec + now.tv_nsec * 1e-9 + timeout_s;
    for (fd = 1; fd <= 2; ++fd) {
        while (log_fd_unread(fd) > 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec + now.tv_nsec * 1e-9 >= deadline) {
                return;
            }
            nanosleep(&pause, NULL);
        }
    }
}
