/*
 * A one-shot deadline for a step that runs inside a library the launcher
 * cannot interrupt (libpmix's shutdown joins its threads, and a thread stuck
 * in a read never returns). If the step is not finished in time, the
 * watchdog thread runs a clean-up hook, prints one line and ends the
 * process with a chosen status, so the launcher never hangs on it.
 */
#ifndef TNT_LAUNCHER_WATCHDOG_H
#define TNT_LAUNCHER_WATCHDOG_H

#include <pthread.h>

struct tnt_launch_watchdog {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int disarmed;
    double seconds;
    int status;
    char message[512];
    void (*on_expiry)(void *arg);
    void *arg;
};

/*
 * Starts the deadline: unless tnt_launch_watchdog_disarm is called within
 * seconds, on_expiry(arg) runs (NULL allowed), "tarantella: error: MESSAGE"
 * is printed and the process exits with status. Returns 0, or -1 when no
 * thread could be started (the step then runs unguarded).
 */
int tnt_launch_watchdog_arm(struct tnt_launch_watchdog *wd, double seconds, int status,
                            const char *message, void (*on_expiry)(void *arg), void *arg);

/* The step finished: stops and joins the watchdog thread. */
void tnt_launch_watchdog_disarm(struct tnt_launch_watchdog *wd);

#endif
