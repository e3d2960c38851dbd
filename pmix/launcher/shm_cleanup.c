/*
 * libtnt removes a node's segment name as soon as every local rank has
 * attached. A rank killed while it waited for the others to attach (a peer
 * failed at start-up, and the launcher stopped the job) cannot do that, so
 * once every rank is gone the launcher removes what its own ranks left
 * behind: names that libtnt gives the segments a process with one of this
 * job's pids creates (transport/shm_name.h), and only those owned by the
 * user the ranks ran as. A launcher run as root may unlink anything in
 * /dev/shm, so the owner check is what keeps it from removing another
 * user's file that happens to match (or was made to match) the pattern.
 */
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "msg.h"
#include "shm_cleanup.h"
#include "transport/shm_name.h"

void tnt_launch_remove_leftover_segments(const struct launch *launch)
{
    DIR *dir = opendir("/dev/shm");
    struct dirent *entry;

    if (dir == NULL) {
        return;
    }
    while ((entry = readdir(dir)) != NULL) {
        for (int r = 0; r < launch->nranks; r++) {
            char pattern[TNT_SHM_NAME_MAX], path[300];
            struct stat st;

            if (launch->ranks[r].started_pid <= 0 ||
                tnt_shm_segment_pattern(launch->ranks[r].started_pid, pattern, sizeof pattern) !=
                    0 ||
                fnmatch(pattern, entry->d_name, 0) != 0) {
                continue;
            }
            /* The ranks run as the launcher's user. A file of anyone else is
             * not ours to remove, whatever its name. (If it is replaced
             * between this check and the unlink, the sticky /dev/shm lets
             * only its owner or root do that, and a root-owned file of
             * another root job cannot carry a name of our pids.) */
            if (fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
                tnt_launch_debug("left /dev/shm/%s alone: not a file of uid %u", entry->d_name,
                                 (unsigned)geteuid());
                break;
            }
            snprintf(path, sizeof path, "/%s", entry->d_name);
            if (shm_unlink(path) == 0) {
                tnt_launch_debug("removed %s left by rank %d", path, r);
            }
            break;
        }
    }
    closedir(dir);
}
