/*
 * core/init.c's entry below the public tnt_init, for the unit tests that
 * build a communicator over their own bootstrap.
 */
#ifndef TNT_CORE_INIT_H
#define TNT_CORE_INIT_H

#include "boot/boot.h"
#include "comm/comm.h"

struct tnt_settings;

/* What tnt_init does after the bootstrap: the node layout, the shared-memory
 * segment and the multi-node transport, over any bootstrap (unit tests pass
 * boot/boot_threads.h's) and parsed settings. Takes ownership of boot and
 * settings, also on failure; tnt_finalize releases them. name: see
 * tnt_comm_name. The log lines' rank and host are the caller's to set
 * (tnt_log_set_identity), so a split leaves them alone. */
tnt_status_t tnt_comm_create(tnt_boot_t *boot, struct tnt_settings *settings, const char *name,
                             tnt_comm_t **comm_p);

/* tnt_abort's last act before the job ends: this rank's timeline part to
 * PATH.rankN when a timeline records (core/timeline.c). */
void tnt_timeline_abort(void);
/* tnt_finalize's: tnt_timeline_stop when comm started the timeline (its
 * errors are logged where they arise), nothing otherwise. */
void tnt_timeline_finalize(tnt_comm_t *comm);

#endif
