/*
 * Starting one rank: its environment (the caller's, without an enclosing
 * PMIx job's variables, plus the PMIx server's and the plan's), a stderr
 * pipe back to the launcher, then fork, pinning and exec.
 */
#ifndef TNT_LAUNCHER_SPAWN_H
#define TNT_LAUNCHER_SPAWN_H

#include <signal.h>

#include "launch.h"
#include "server.h"

/* Forks and execs rank rs; the child gets `child_mask` as its signal mask
 * and dies with the launcher. Sets rs->pid, rs->started_pid and rs->err_fd.
 * Returns 0, or -1 after printing the error. */
int tnt_launch_spawn_rank(struct launch *launch, tnt_launch_server_t *server, struct rank_state *rs,
                          const sigset_t *child_mask);

#endif
