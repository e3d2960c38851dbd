/*
 * Processes the ranks left behind (a shell's background job, a data loader
 * worker) are re-parented to the launcher, a child subreaper. Once the ranks
 * are gone the job is over, so nothing of it may outlive the launcher.
 */
#ifndef TNT_LAUNCHER_ORPHANS_H
#define TNT_LAUNCHER_ORPHANS_H

/* SIGTERM to the launcher's remaining children, SIGKILL after a second;
 * returns once they are reaped. `sigfd` is the supervision signalfd, read
 * (and its signals dropped) while waiting. */
void tnt_launch_sweep_orphans(int sigfd);

#endif
