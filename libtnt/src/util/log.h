/*
 * Logging and error reporting for libtnt (and the launcher/plugin helpers that
 * link it statically). Messages are prefixed "tarantella[rank R@host]: ".
 * Level comes from TNT_LOG_LEVEL (error|warn|info|debug|trace, default warn);
 * only rank 0 logs below "error" unless TNT_LOG_ON_ALL_DEVICES=1.
 *
 * Rule: an error is logged once, where it is first detected, with
 * tnt_error_raise(), which also records it as the calling thread's
 * tnt_last_error() message and returns the status so callers can write
 *     return tnt_error_raise(TNT_ERR_TIMEOUT, "...");
 */
#ifndef TNT_UTIL_LOG_H
#define TNT_UTIL_LOG_H

#include <tnt/tnt.h>

typedef enum {
    TNT_LOG_ERROR,
    TNT_LOG_WARN,
    TNT_LOG_INFO,
    TNT_LOG_DEBUG,
    TNT_LOG_TRACE
} tnt_log_level_t;

/* Called by tnt_init once rank and host are known; before that messages carry
 * only the pid. */
void tnt_log_set_identity(int rank, const char *hostname);
/* Level and whether ranks other than 0 log below error level, from the
 * settings tnt_init parsed (TNT_LOG_LEVEL, TNT_LOG_ON_ALL_DEVICES). */
void tnt_log_configure(tnt_log_level_t level, int all_ranks);
/* Parses "error|warn|info|debug|trace"; returns -1 for anything else. */
int tnt_log_level_parse(const char *name, tnt_log_level_t *level_p);
int tnt_log_enabled(tnt_log_level_t level);
/* Before the process is ended from outside (an abort): flushes stdio and
 * waits, up to timeout_s, until whoever reads stdout and stderr (slurmstepd,
 * the launcher) has taken every byte, so the last lines, the reason for the
 * abort, are not lost when the job is killed. */
void tnt_log_drain(double timeout_s);
void tnt_log(tnt_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like tnt_log, but on whichever rank it happens even below error level:
 * for what only that rank can see and an admin must hear of (a message
 * that did not come from the job, dropped by this rank). Callers rate-limit. */
void tnt_log_every_rank(tnt_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define tnt_log_error(...) tnt_log(TNT_LOG_ERROR, __VA_ARGS__)
#define tnt_log_warn(...)  tnt_log(TNT_LOG_WARN, __VA_ARGS__)
#define tnt_log_info(...)  tnt_log(TNT_LOG_INFO, __VA_ARGS__)
#define tnt_log_debug(...) tnt_log(TNT_LOG_DEBUG, __VA_ARGS__)

/* Records "rank R: <message>" as this thread's last error, logs it at error
 * level, and returns status. */
tnt_status_t tnt_error_raise(tnt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records without logging (for errors the caller expects and handles). */
tnt_status_t tnt_error_set(tnt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The communicator whose collective this thread runs: while set, every
 * error this thread records begins with its text ("communicator oob.1 (rank
 * 0 of 3)") unless the message already names the communicator (the text's
 * first name_len bytes). text NULL: none. Returns the context it replaces,
 * so nested collectives restore the outer one. */
typedef struct tnt_error_context {
    const char *text;
    size_t name_len;
} tnt_error_context_t;
tnt_error_context_t tnt_error_context_swap(tnt_error_context_t context);

/* This thread's last error message ("" if none); tnt_last_error() returns it. */
const char *tnt_error_message(void);
/* Copies a message recorded on another thread (the progress thread), or
 * saved earlier, into this thread's last error, unchanged and without
 * logging it again; printed is what tnt_error_printed() said of it there. */
void tnt_error_restore(const char *message, int printed);
void tnt_error_clear(void);
/* 1 when this thread's last error was printed by tnt_error_raise (here, or
 * on the thread it was restored from); tnt_last_error_printed() returns it. */
int tnt_error_printed(void);

#endif
