/* Deadline for a step the launcher cannot interrupt; see watchdog.h. */
#include "watchdog.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"

static void *watch(void *arg)
{
    struct tnt_launch_watchdog *wd = arg;
    struct timespec deadline;
    int rc = 0;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)wd->seconds;
    deadline.tv_nsec += (long)((wd->seconds - (double)(time_t)wd->seconds) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&wd->lock);
    while (!wd->disarmed && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&wd->cond, &wd->lock, &deadline);
    }
    if (wd->disarmed) {
        pthread_mutex_unlock(&wd->lock);
        return NULL;
    }
    pthread_mutex_unlock(&wd->lock);
    /* The guarded thread is stuck inside a library: do not wait for it,
     * and do not run atexit handlers or stdio flushes that might need a
     * lock it holds. */
    if (wd->on_expiry != NULL) {
        wd->on_expiry(wd->arg);
    }
    tnt_launch_error("%s", wd->message);
    _exit(wd->status);
}

int tnt_launch_watchdog_arm(struct tnt_launch_watchdog *wd, double seconds, int status,
                            const char *message, void (*on_expiry)(void *arg), void *arg)
{
    pthread_condattr_t attr;
    int rc;

    memset(wd, 0, sizeof *wd);
    wd->seconds = seconds;
    wd->status = status;
    snprintf(wd->message, sizeof wd->message, "%s", message);
    wd->on_expiry = on_expiry;
    wd->arg = arg;
    pthread_mutex_init(&wd->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cond, &attr);
    pthread_condattr_destroy(&attr);
    rc = pthread_create(&wd->thread, NULL, watch, wd);
    if (rc != 0) {
        tnt_launch_warn("cannot start a watchdog thread (%s); a stuck step will not be "
                        "bounded",
                        strerror(rc));
        pthread_cond_destroy(&wd->cond);
        pthread_mutex_destroy(&wd->lock);
        wd->disarmed = -1; /* nothing to join */
        return -1;
    }
    return 0;
}

void tnt_launch_watchdog_disarm(struct tnt_launch_watchdog *wd)
{
    if (wd->disarmed < 0) {
        return;
    }
    pthread_mutex_lock(&wd->lock);
    wd->disarmed = 1;
    pthread_cond_signal(&wd->cond);
    pthread_mutex_unlock(&wd->lock);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cond);
    pthread_mutex_destroy(&wd->lock);
}
