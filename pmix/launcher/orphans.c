#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"
#include "msg.h"
#include "orphans.h"

/* The launcher's children by /proc, up to max of them. */
static int list_orphans(pid_t *pids, int max)
{
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    pid_t self = getpid();
    int count = 0;

    if (proc == NULL) {
        return 0;
    }
    while ((entry = readdir(proc)) != NULL && count < max) {
        char path[64], buf[512], *paren;
        long ppid = 0;
        FILE *f;

        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%.20s/stat", entry->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        /* "pid (comm) state ppid ...": comm may hold spaces, so parse after
         * the last ')'. */
        if (fgets(buf, sizeof buf, f) != NULL && (paren = strrchr(buf, ')')) != NULL &&
            sscanf(paren + 1, " %*c %ld", &ppid) == 1 && ppid == (long)self) {
            pids[count++] = (pid_t)atol(entry->d_name);
        }
        fclose(f);
    }
    closedir(proc);
    return count;
}

void tnt_launch_sweep_orphans(int sigfd)
{
    pid_t pids[256];
    int count = list_orphans(pids, 256);
    double deadline = tnt_launch_now_s() + 1.0;

    if (count == 0) {
        return;
    }
    tnt_launch_debug("%d process(es) left behind by the ranks: SIGTERM", count);
    for (int i = 0; i < count; i++) {
        kill(pids[i], SIGTERM);
    }
    for (;;) {
        struct pollfd pfd = { .fd = sigfd, .events = POLLIN };
        struct signalfd_siginfo info;
        double left = deadline - tnt_launch_now_s();

        while (waitpid(-1, NULL, WNOHANG) > 0) {
            ;
        }
        if (list_orphans(pids, 256) == 0) {
            return;
        }
        if (left <= 0) {
            break;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0) {
            while (read(sigfd, &info, sizeof info) == (ssize_t)sizeof info) {
                ;
            }
        }
    }
    count = list_orphans(pids, 256);
    for (int i = 0; i < count; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
}
