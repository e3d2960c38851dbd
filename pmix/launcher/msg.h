/*
 * The launcher's own messages: "tarantella: ..." on stderr. Errors always
 * print; info/debug lines only at --log-level info/debug (or TNT_LOG_LEVEL).
 */
#ifndef TNT_LAUNCHER_MSG_H
#define TNT_LAUNCHER_MSG_H

enum { TNT_LAUNCH_QUIET = 0, TNT_LAUNCH_INFO = 1, TNT_LAUNCH_DEBUG = 2 };

/* Set once by main from the log level; read by every message function. */
extern int tnt_launch_verbosity;

void tnt_launch_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tnt_launch_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tnt_launch_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tnt_launch_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
