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
 * settings, also on failure; tnt_finalize releases them. */
tnt_status_t tnt_comm_create(tnt_boot_t *boot, struct tnt_settings *settings, tnt_comm_t **comm_p);

#endif
