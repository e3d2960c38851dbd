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

/*
 * The names libtnt gives the segment of a node whose first rank has `pid`,
 * as an fnmatch(3) pattern over /dev/shm entries: libtnt (core/comm.c)
 * names it /tnt-<hash of the job id>-<pid>. The launcher does not know the
 * hash, so it matches any. Returns 0, or -1 when `len` is too small.
 */
static int segment_name_pattern(pid_t pid, char *pattern, size_t len)
{
    int n = snprintf(pattern, len, "tnt-*-%ld", (long)pid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

void tnt_launch_remove_leftover_segments(const struct launch *launch)
{
    DIR *dir = opendir("/dev/shm");
    struct dirent *entry;

    if (dir == NULL)
        return;
    while ((entry = readdir(dir)) != NULL) {
        for (int r = 0; r < launch->nranks; r++) {
            char pattern[64], path[300];

            if (launch->ranks[r].started_pid <= 0 ||
                segment_name_pattern(launch->ranks[r].started_pid, pattern, sizeof pattern) != 0 ||
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
