/*
 * libtnt removes a node's segment name as soon as every local rank has
 * attached. A rank killed while it waited for the others to attach (a peer
 * failed at start-up, and the launcher stopped the job) cannot do that, so
 * once every rank is gone the launcher removes what its own ranks left
 * behind. Only names that libtnt would give a segment of one of this job's
 * pids are touched.
 */
#include <dirent.h>
#include <fnmatch.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "msg.h"
#include "shm_cleanup.h"
#include "transport/shm_name.h"

void tnt_launch_remove_leftover_segments(const struct launch *launch)
{
    DIR *dir = opendir("/dev/shm");
    struct dirent *entry;

    if (dir == NULL)
        return;
    while ((entry = readdir(dir)) != NULL) {
        for (int r = 0; r < launch->nranks; r++) {
            /* The launcher does not know the job id's hash, so it matches
             * any job's segment of one of its own ranks' pids. */
            char pattern[TNT_SHM_NAME_MAX], path[300];

            if (launch->ranks[r].started_pid <= 0 ||
                tnt_shm_segment_pattern(launch->ranks[r].started_pid, pattern, sizeof pattern) !=
                    0 ||
                fnmatch(pattern, entry->d_name, 0) != 0)
                continue;
            snprintf(path, sizeof path, "/%s", entry->d_name);
            if (shm_unlink(path) == 0)
                tnt_launch_debug("removed %s left by rank %d", path, r);
            break;
        }
    }
    closedir(dir);
}
