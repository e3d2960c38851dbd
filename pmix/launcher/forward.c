#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "forward.h"

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; /* stderr closed: drop the output, keep supervising */
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* Remembers a line (without its newline) as the rank's last stderr line. */
static void remember_line(struct rank_state *rs, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
        len--;
    }
    if (len == 0) {
        return; /* a blank line says nothing about why a rank failed */
    }
    if (len > LAST_LINE_MAX) {
        len = LAST_LINE_MAX;
    }
    memcpy(rs->last_line, line, len);
    rs->last_line[len] = '\0';
}

/* Writes out complete lines (each with one write, so ranks' lines do not
 * interleave mid-line); a full buffer or EOF flushes what is there. */
static void flush_lines(struct rank_state *rs, int at_eof)
{
    size_t start = 0;

    for (size_t i = 0; i < rs->line_len; i++) {
        if (rs->line[i] == '\n') {
            write_all(STDERR_FILENO, rs->line + start, i + 1 - start);
            remember_line(rs, rs->line + start, i + 1 - start);
            start = i + 1;
        }
    }
    if ((at_eof || (start == 0 && rs->line_len == sizeof rs->line)) && start < rs->line_len) {
        write_all(STDERR_FILENO, rs->line + start, rs->line_len - start);
        if (at_eof) {
            write_all(STDERR_FILENO, "\n", 1);
        }
        remember_line(rs, rs->line + start, rs->line_len - start);
        start = rs->line_len;
    }
    memmove(rs->line, rs->line + start, rs->line_len - start);
    rs->line_len -= start;
}

void tnt_launch_forward_stderr(struct rank_state *rs)
{
    while (rs->err_fd >= 0) {
        ssize_t n = read(rs->err_fd, rs->line + rs->line_len, sizeof rs->line - rs->line_len);

        if (n > 0) {
            rs->line_len += (size_t)n;
            flush_lines(rs, 0);
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return;
        }
        flush_lines(rs, 1);
        close(rs->err_fd);
        rs->err_fd = -1;
    }
}
