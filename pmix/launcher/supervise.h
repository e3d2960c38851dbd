/*
 * Supervising a running job: one poll() over the signalfd, the PMIx server's
 * abort event and the ranks' stderr pipes. The first rank to fail stops the
 * job (SIGTERM, then SIGKILL after a grace period), and its exit status
 * becomes the launcher's.
 */
#ifndef TNT_LAUNCHER_SUPERVISE_H
#define TNT_LAUNCHER_SUPERVISE_H

#include "launch.h"
#include "server.h"

struct supervisor {
    struct launch *launch;
    tnt_launch_server_t *server;
    int running;      /* ranks not reaped yet */
    int failed_rank;  /* first failure; -1 = none */
    int failed_abort; /* the failure was a PMIx abort */
    double failed_at; /* when the failure was seen */
    int abort_status;
    char abort_message[512];
    int interrupt_signal; /* signal that stopped the launcher; 0 = none */
    double kill_at;       /* SIGKILL deadline; 0 = none */
};

/* Starts stopping the job: sig now, SIGKILL after the grace period. */
void tnt_launch_stop_job(struct supervisor *sv, int sig);

/* Runs until every rank is reaped (or poll() fails, and the ranks get
 * SIGKILL), reading signals from `sigfd`: a signalfd for SIGCHLD, SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2. Returns 0, or -1 when out
 * of memory (after sending SIGKILL to the ranks). */
int tnt_launch_supervise(struct supervisor *sv, int sigfd);

/* Prints the one line that says why the job failed (nothing when it did
 * not) and returns the launcher's exit status. */
int tnt_launch_report(const struct supervisor *sv);

#endif
