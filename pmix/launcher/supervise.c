#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forward.h"
#include "msg.h"
#include "supervise.h"

/* Seconds between SIGTERM and SIGKILL when the job is stopped. */
#define STOP_GRACE_S 3

static const char *signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);

    snprintf(buf, len, "SIG%s", abbrev != NULL ? abbrev : "?");
    return buf;
}

static void signal_ranks(struct supervisor *sv, int sig)
{
    for (int r = 0; r < sv->launch->nranks; r++) {
        /* A rank that called abort exits by itself once released (its last
         * words stay its last stderr line); only SIGKILL is for it too. */
        if (sv->failed_abort && r == sv->failed_rank && sig != SIGKILL) {
            continue;
        }
        if (sv->launch->ranks[r].pid > 0) {
            kill(sv->launch->ranks[r].pid, sig);
        }
    }
}

void tnt_launch_stop_job(struct supervisor *sv, int sig)
{
    signal_ranks(sv, sig);
    if (sv->kill_at == 0) {
        sv->kill_at = tnt_launch_now_s() + STOP_GRACE_S;
    }
}

/*
 * Which failure is the root cause? libtnt's ranks notice a dead peer within
 * milliseconds (its robust locks are released early in the kernel's exit
 * path, before the process becomes a zombie) and exit with errors of their
 * own, so on a busy machine they may be reaped before the rank that really
 * died; waitpid's order says nothing about who died first. A death by a
 * signal is the strongest evidence: until the grace period ends the launcher
 * sends only SIGTERM, so any other signal within SETTLE_S of the first
 * failure came from elsewhere (kill -9, a segfault, the OOM killer) and
 * takes over the report from a plain error exit. Among equals in one batch,
 * the lowest rank is reported.
 */
#define SETTLE_S 0.5

static int outside_signal(int wait_status)
{
    return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) != SIGTERM;
}

static void reap_children(struct supervisor *sv)
{
    struct rank_state *culprit = NULL;
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct rank_state *rs = NULL;

        for (int r = 0; r < sv->launch->nranks; r++) {
            if (sv->launch->ranks[r].pid == pid) {
                rs = &sv->launch->ranks[r];
            }
        }
        if (rs == NULL) {
            continue; /* an orphan re-parented to us (orphans.c) */
        }
        rs->pid = 0;
        rs->wait_status = status;
        sv->running--;
        /* Everything the rank wrote before exiting is in the pipe now. */
        tnt_launch_forward_stderr(rs);
        tnt_launch_debug("rank %d (pid %ld) ended: wait status 0x%x", rs->rank, (long)pid, status);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            continue;
        }
        if (sv->failed_rank >= 0) {
            const struct rank_state *first = &sv->launch->ranks[sv->failed_rank];

            if (!sv->failed_abort && sv->interrupt_signal == 0 && outside_signal(status) &&
                !outside_signal(first->wait_status) &&
                tnt_launch_now_s() - sv->failed_at <= SETTLE_S) {
                sv->failed_rank = rs->rank;
            }
            continue;
        }
        if (culprit == NULL || (outside_signal(status) && !outside_signal(culprit->wait_status)) ||
            (outside_signal(status) == outside_signal(culprit->wait_status) &&
             rs->rank < culprit->rank)) {
            culprit = rs;
        }
    }
    if (culprit != NULL && sv->failed_rank < 0 && sv->interrupt_signal == 0) {
        sv->failed_rank = culprit->rank;
        sv->failed_at = tnt_launch_now_s();
        tnt_launch_stop_job(sv, SIGTERM);
    }
}

static void handle_abort(struct supervisor *sv)
{
    int rank, status;
    char message[512];

    if (!tnt_launch_server_abort_info(sv->server, &rank, &status, message, sizeof message)) {
        return;
    }
    if (sv->failed_rank >= 0 || sv->interrupt_signal != 0) {
        return;
    }
    sv->failed_rank = rank;
    sv->failed_abort = 1;
    sv->abort_status = status;
    snprintf(sv->abort_message, sizeof sv->abort_message, "%s", message);
    tnt_launch_stop_job(sv, SIGTERM);
}

static void handle_signal(struct supervisor *sv, const struct signalfd_siginfo *info)
{
    int sig = (int)info->ssi_signo;

    if (sig == SIGCHLD) {
        reap_children(sv);
        return;
    }
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        /* Messages for the program (e.g. a batch system's "checkpoint now"
         * before the time limit): passed on, the job goes on. */
        signal_ranks(sv, sig);
        return;
    }
    if (sv->interrupt_signal != 0 || sv->failed_rank >= 0) {
        /* Second interrupt: no more grace. */
        signal_ranks(sv, SIGKILL);
        return;
    }
    sv->interrupt_signal = sig;
    /* Ctrl-C / Ctrl-\ from the terminal (SI_KERNEL) already went to the
     * whole foreground process group, ranks included; sending it again
     * would interrupt their clean-up. Signals sent to the launcher alone
     * (kill, a batch system) are forwarded. */
    if (info->ssi_code == SI_KERNEL && (sig == SIGINT || sig == SIGQUIT)) {
        if (sv->kill_at == 0) {
            sv->kill_at = tnt_launch_now_s() + STOP_GRACE_S;
        }
    } else {
        tnt_launch_stop_job(sv, sig);
    }
}

int tnt_launch_supervise(struct supervisor *sv, int sigfd)
{
    int n = sv->launch->nranks;
    struct pollfd *fds = calloc((size_t)n + 2, sizeof *fds);
    int *fd_rank = calloc((size_t)n + 2, sizeof *fd_rank);

    if (fds == NULL || fd_rank == NULL) {
        free(fds);
        free(fd_rank);
        tnt_launch_error("out of memory");
        tnt_launch_stop_job(sv, SIGKILL);
        return -1;
    }
    /* Ranks may have exited before the first poll: catch up. */
    reap_children(sv);
    while (sv->running > 0) {
        int nfds = 0, timeout_ms = -1, ready;

        fds[nfds++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
        fds[nfds++] =
            (struct pollfd){ .fd = tnt_launch_server_event_fd(sv->server), .events = POLLIN };
        for (int r = 0; r < n; r++) {
            if (sv->launch->ranks[r].err_fd >= 0) {
                fd_rank[nfds] = r;
                fds[nfds++] =
                    (struct pollfd){ .fd = sv->launch->ranks[r].err_fd, .events = POLLIN };
            }
        }
        if (sv->kill_at > 0) {
            double left = sv->kill_at - tnt_launch_now_s();

            if (left <= 0) {
                tnt_launch_debug("grace period over: SIGKILL to the remaining ranks");
                signal_ranks(sv, SIGKILL);
                sv->kill_at = -1; /* done; wait for the reaping */
            } else {
                timeout_ms = (int)(left * 1000) + 1;
            }
        }
        ready = poll(fds, (nfds_t)nfds, timeout_ms);
        if (ready < 0 && errno != EINTR) {
            tnt_launch_error("poll: %s", strerror(errno));
            signal_ranks(sv, SIGKILL);
            break;
        }
        for (int i = 2; ready > 0 && i < nfds; i++) {
            if (fds[i].revents != 0) {
                tnt_launch_forward_stderr(&sv->launch->ranks[fd_rank[i]]);
            }
        }
        if (ready > 0 && fds[1].revents != 0) {
            handle_abort(sv);
        }
        if (ready > 0 && fds[0].revents != 0) {
            struct signalfd_siginfo info;

            while (read(sigfd, &info, sizeof info) == (ssize_t)sizeof info) {
                handle_signal(sv, &info);
            }
        }
    }
    /* Whatever children of the ranks still hold a pipe open cannot delay
     * the exit: take what is buffered, then close. */
    for (int r = 0; r < n; r++) {
        tnt_launch_forward_stderr(&sv->launch->ranks[r]);
    }
    free(fds);
    free(fd_rank);
    return 0;
}

int tnt_launch_report(const struct supervisor *sv)
{
    const struct rank_state *rs;
    char what[600], sig[32], tail[LAST_LINE_MAX + 64];
    int status;

    if (sv->failed_rank < 0) {
        if (sv->interrupt_signal != 0) {
            fprintf(stderr, "tarantella: stopped by %s; all ranks ended\n",
                    signal_name(sv->interrupt_signal, sig, sizeof sig));
            return 128 + sv->interrupt_signal;
        }
        return 0;
    }
    rs = &sv->launch->ranks[sv->failed_rank];
    if (sv->failed_abort && sv->abort_message[0] != '\0' &&
        strstr(rs->last_line, sv->abort_message) != NULL) {
        tail[0] = '\0'; /* the rank printed the abort's message: once is enough */
    } else if (rs->last_line[0] != '\0') {
        snprintf(tail, sizeof tail, "; last stderr line: \"%s\"", rs->last_line);
    } else {
        snprintf(tail, sizeof tail, "; no stderr output");
    }
    if (sv->failed_abort) {
        status = sv->abort_status != 0 ? sv->abort_status & 0xff : 1;
        if (status == 0) {
            status = 1;
        }
        snprintf(what, sizeof what, "called abort with status %d: \"%s\"", sv->abort_status,
                 sv->abort_message);
    } else if (WIFSIGNALED(rs->wait_status)) {
        int signo = WTERMSIG(rs->wait_status);

        status = 128 + signo;
        snprintf(what, sizeof what, "killed by signal %d (%s)", signo,
                 signal_name(signo, sig, sizeof sig));
    } else {
        status = WEXITSTATUS(rs->wait_status);
        snprintf(what, sizeof what, "exited with status %d", status);
    }
    fprintf(stderr, "tarantella: rank %d (pid %ld) %s%s\n", rs->rank, (long)rs->started_pid, what,
            tail);
    return status;
}
