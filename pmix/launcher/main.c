/*
 * tarantella: the single-node launcher. It parses the command line, works
 * out each rank's binding and environment, starts a PMIx server, forks the
 * ranks, forwards their stderr line by line and supervises them: the first
 * rank to fail stops the job (SIGTERM, then SIGKILL after a grace period)
 * and its exit status becomes the launcher's. Multi-node runs belong to
 * SLURM; --hostfile hands the job to OpenMPI's mpirun. This file is the
 * top-level flow; launch.h says which file does each step.
 *
 * Threads: the main thread does everything below; libpmix runs its own
 * progress thread, whose only effect here is the abort record (server.c).
 * Signals are blocked in every thread and read through a signalfd, so the
 * wait loop is one poll() with no busy waiting.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <hwloc.h>
#include <pmix.h>

#include "handoff.h"
#include "launch.h"
#include "msg.h"
#include "options.h"
#include "orphans.h"
#include "plan.h"
#include "server.h"
#include "shm_cleanup.h"
#include "spawn.h"
#include "supervise.h"
#include "which.h"

#ifndef TNT_VERSION_STRING
#define TNT_VERSION_STRING "unknown"
#endif

static void set_verbosity(const struct tnt_launch_options *opts)
{
    const char *level = opts->log_level != NULL ? opts->log_level : getenv("TNT_LOG_LEVEL");

    if (level == NULL) {
        return;
    }
    if (strcmp(level, "info") == 0) {
        tnt_launch_verbosity = TNT_LAUNCH_INFO;
    } else if (strcmp(level, "debug") == 0 || strcmp(level, "trace") == 0) {
        tnt_launch_verbosity = TNT_LAUNCH_DEBUG;
    }
}

static int run_job(struct launch *launch)
{
    struct supervisor sv = { .launch = launch, .failed_rank = -1 };
    struct tnt_launch_job job = {
        .nranks = launch->nranks,
        .nnodes = launch->nnodes,
        .node_of_rank = launch->node_of_rank,
        .local_rank = launch->local_rank,
        .node_first = launch->node_first,
        .node_size = launch->node_size,
        .node_names = launch->node_names,
    };
    sigset_t mask, child_mask;
    int sigfd, status = EXIT_LAUNCH_ERROR;

    /* Block before libpmix starts its thread, so that every signal reaches
     * the signalfd and none lands on the progress thread. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sigprocmask(SIG_BLOCK, &mask, &child_mask);
    signal(SIGPIPE, SIG_IGN);
    sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) {
        tnt_launch_error("signalfd: %s", strerror(errno));
        return EXIT_LAUNCH_ERROR;
    }
    /* Descendants the ranks leave behind become our children, so they can
     * be found and stopped at the end (orphans.c). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sv.server = tnt_launch_server_start(&job);
    if (sv.server == NULL) {
        goto err_close_sigfd;
    }
    for (int r = 0; r < launch->nranks; r++) {
        if (tnt_launch_spawn_rank(launch, sv.server, &launch->ranks[r], &child_mask) != 0) {
            sv.running = r;
            tnt_launch_stop_job(&sv, SIGKILL);
            tnt_launch_supervise(&sv, sigfd);
            tnt_launch_sweep_orphans(sigfd);
            tnt_launch_remove_leftover_segments(launch);
            goto err_stop_server;
        }
    }
    sv.running = launch->nranks;
    tnt_launch_supervise(&sv, sigfd);
    tnt_launch_sweep_orphans(sigfd);
    tnt_launch_remove_leftover_segments(launch);
    status = tnt_launch_report(&sv);

err_stop_server:
    tnt_launch_server_stop(sv.server, status);
err_close_sigfd:
    close(sigfd);
    return status;
}

int main(int argc, char **argv)
{
    struct launch launch = { 0 };
    char err[1024], path[4096];
    int status;

    if (tnt_launch_options_parse(argc, argv, &launch.opts, err, sizeof err) != 0) {
        tnt_launch_error("%s", err);
        tnt_launch_options_free(&launch.opts);
        return EXIT_USAGE;
    }
    if (launch.opts.show_help) {
        fputs(tnt_launch_usage(), stdout);
        tnt_launch_options_free(&launch.opts);
        return 0;
    }
    if (launch.opts.show_version) {
        const char *pmix = PMIx_Get_version(); /* "OpenPMIx 4.2.2rc2 (PMIx Standard: ...)" */
        const char *paren = strstr(pmix, " (");

        printf("tarantella %s (%.*s, hwloc %s)\n", TNT_VERSION_STRING,
               paren != NULL ? (int)(paren - pmix) : (int)strlen(pmix), pmix, HWLOC_VERSION);
        tnt_launch_options_free(&launch.opts);
        return 0;
    }
    set_verbosity(&launch.opts);
    if (launch.opts.hostfile != NULL) {
        status = tnt_launch_handoff_mpirun(&launch.opts);
        tnt_launch_options_free(&launch.opts);
        return status;
    }
    {
        /* Inside a multi-node allocation the launcher still uses only this
         * node; say how to use them all. */
        const char *nodes = getenv("SLURM_JOB_NUM_NODES");

        if (nodes != NULL && atoi(nodes) > 1 && !launch.opts.dry_run) {
            tnt_launch_warn("this SLURM allocation has %s nodes, but tarantella starts every "
                            "rank on this one; to use them all: srun --tarantella -N %s "
                            "PROGRAM",
                            nodes, nodes);
        }
    }
    if (tnt_launch_plan(&launch) != 0) {
        status = EXIT_LAUNCH_ERROR;
        goto out;
    }
    if (launch.opts.dry_run) {
        tnt_launch_print_dry_run(&launch);
        status = 0;
        goto out;
    }
    /* Refuse before starting anything when the program cannot run. */
    if (tnt_launch_find_executable(launch.exec_argv[0], path, sizeof path) != 0) {
        tnt_launch_error("cannot execute '%s': %s", launch.exec_argv[0],
                         strchr(launch.exec_argv[0], '/') != NULL ? strerror(errno)
                                                                  : "not found in PATH");
        status = EXIT_NOT_FOUND;
        goto out;
    }
    /* A script given to the interpreter must exist too (python would say
     * so N times, once per rank). */
    if (launch.exec_argv[0] != launch.opts.program[0] &&
        access(launch.opts.program[0], R_OK) != 0) {
        tnt_launch_error("cannot open '%s': %s", launch.opts.program[0], strerror(errno));
        status = EXIT_NOT_FOUND;
        goto out;
    }
    status = run_job(&launch);
out:
    tnt_launch_free(&launch);
    return status;
}
