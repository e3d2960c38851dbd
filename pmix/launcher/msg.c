/* Launcher messages; see msg.h. One fprintf per line so that lines from the
 * PMIx thread and the main thread never interleave mid-line. */
#include "msg.h"

#include <stdarg.h>
#include <stdio.h>

int tnt_launch_verbosity = TNT_LAUNCH_QUIET;

static void emit(const char *kind, const char *fmt, va_list ap)
{
    char line[2048];

    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "tarantella: %s%s\n", kind, line);
}

void tnt_launch_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit("error: ", fmt, ap);
    va_end(ap);
}

void tnt_launch_warn(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit("warning: ", fmt, ap);
    va_end(ap);
}

void tnt_launch_info(const char *fmt, ...)
{
    va_list ap;

    if (tnt_launch_verbosity < TNT_LAUNCH_INFO) {
        return;
    }
    va_start(ap, fmt);
    emit("", fmt, ap);
    va_end(ap);
}

void tnt_launch_debug(const char *fmt, ...)
{
    va_list ap;

    if (tnt_launch_verbosity < TNT_LAUNCH_DEBUG) {
        return;
    }
    va_start(ap, fmt);
    emit("debug: ", fmt, ap);
    va_end(ap);
}
