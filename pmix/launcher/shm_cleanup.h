/*
 * Removing the shared-memory segment names that the launcher's ranks could
 * not remove themselves.
 */
#ifndef TNT_LAUNCHER_SHM_CLEANUP_H
#define TNT_LAUNCHER_SHM_CLEANUP_H

#include "launch.h"

/* Unlinks every /dev/shm name that libtnt gave a segment of this job's
 * ranks (by the pids they were started with). Call once every rank is gone. */
void tnt_launch_remove_leftover_segments(const struct launch *launch);

#endif
