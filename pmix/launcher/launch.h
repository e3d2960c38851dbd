/*
 * One local launch, as the launcher's files share it. Each file does one job:
 *   main.c         the top-level flow: options, hand-off or plan, run, report
 *   handoff.c      --hostfile: replace the launcher with OpenMPI's mpirun
 *   which.c        finding a program the way execvp will
 *   launch.c       planning: layout, pinning and environment of every rank
 *   spawn.c        fork and exec of one rank
 *   forward.c      forwarding the ranks' stderr, line by line
 *   supervise.c    the wait loop: exits, aborts, signals, stopping, the report
 *   orphans.c      stopping what the ranks left behind
 *   shm_cleanup.c  removing the shared-memory names the ranks could not
 * plus the pure parts in options.c and plan.c and the PMIx server in server.c,
 * which admits only the ranks' processes (admit.c) and whose shutdown is
 * bounded (watchdog.c).
 */
#ifndef TNT_LAUNCHER_LAUNCH_H
#define TNT_LAUNCHER_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <hwloc.h>

#include "options.h"
#include "plan.h"

/* Exit statuses of the launcher itself (ranks' statuses pass through). */
enum {
    EXIT_LAUNCH_ERROR = 1, /* could not start the job */
    EXIT_USAGE = 2,        /* bad options */
    EXIT_NOT_FOUND = 127,  /* program or interpreter cannot be executed */
};

#define LAST_LINE_MAX 400
#define LINE_BUF      4096

struct rank_state {
    int rank, node, local_rank;
    hwloc_bitmap_t cpuset, nodeset;
    int nthreads;
    struct tnt_envlist added; /* what the launcher adds (shown by --dry-run) */
    pid_t pid;                /* 0 = not started or reaped */
    pid_t started_pid;        /* kept after reaping, for the report */
    int wait_status;
    int err_fd; /* read end of the rank's stderr pipe, -1 when closed */
    size_t line_len;
    char line[LINE_BUF];
    char last_line[LAST_LINE_MAX + 1];
};

struct launch {
    struct tnt_launch_options opts;
    int nranks, nnodes, ngpus;
    struct rank_state *ranks;
    int *node_of_rank, *local_rank, *node_first, *node_size;
    char (*node_names)[256];
    hwloc_topology_t topology;
    char **exec_argv;
    char *pythonpath; /* the ranks' PYTHONPATH when the launcher adds its package, or NULL */
};

/*
 * Fills in everything about the ranks from launch->opts: layout, binding,
 * environment and argv. Returns 0, or -1 after printing the error; either
 * way tnt_launch_free releases what was allocated.
 */
int tnt_launch_plan(struct launch *launch);

/* Releases the plan and the options (also after a failed tnt_launch_plan). */
void tnt_launch_free(struct launch *launch);

/* --dry-run: what each rank would get, on stdout. */
void tnt_launch_print_dry_run(const struct launch *launch);

/* Seconds on the monotonic clock, for deadlines. */
static inline double tnt_launch_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
