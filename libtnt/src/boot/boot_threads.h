/*
 * A fake, in-process bootstrap: the ranks of a job are threads of one
 * process that meet in a shared rendezvous object (the group). Unit tests use
 * it to run several ranks without a launcher or PMIx. Every wait is bounded
 * by the group's timeout; a timeout, a size mismatch or an abort breaks the
 * group for good, as a failed bootstrap collective ends a real job.
 */
#ifndef TNT_BOOT_BOOT_THREADS_H
#define TNT_BOOT_BOOT_THREADS_H

#include "boot/boot.h"

typedef struct tnt_boot_threads_group tnt_boot_threads_group_t;

/* A job of size ranks. hostnames has size entries (the "node" of each rank;
 * ranks with equal names share a node) or is NULL (all on "localhost").
 * timeout_s > 0 bounds every wait. */
tnt_status_t tnt_boot_threads_group_create(int size, const char *const *hostnames, double timeout_s,
                                           tnt_boot_threads_group_t **group_p);
/* Once every rank's bootstrap is finalized (or its thread is gone). */
void tnt_boot_threads_group_destroy(tnt_boot_threads_group_t *group);
/* The bootstrap of one rank, used by one thread at a time; the group must
 * outlive it. Each rank is created once. */
tnt_status_t tnt_boot_threads_create(tnt_boot_threads_group_t *group, int rank,
                                     tnt_boot_t **boot_p);
/* The exit code a rank aborted the job with (its message in message), or 0
 * when nobody aborted. */
int tnt_boot_threads_abort_code(tnt_boot_threads_group_t *group, char *message, size_t len);

#endif
