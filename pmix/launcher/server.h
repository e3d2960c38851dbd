/*
 * The launcher's PMIx server (libpmix 4.2 server API). It owns a private
 * temporary directory for the rendezvous files, registers one namespace for
 * the job (with the node layout, real or simulated) and each rank as a
 * client, and answers the clients' upcalls. Upcalls arrive on libpmix's
 * progress thread; the only thing they hand to the main thread is an abort,
 * announced by a byte on tnt_launch_server_event_fd().
 */
#ifndef TNT_LAUNCHER_SERVER_H
#define TNT_LAUNCHER_SERVER_H

#include <stddef.h>
#include <sys/types.h>

#include "plan.h"

struct tnt_launch_job {
    int nranks;
    int nnodes;
    const int *node_of_rank; /* nranks entries */
    const int *local_rank;   /* nranks entries */
    const int *node_first;   /* nnodes entries */
    const int *node_size;    /* nnodes entries */
    char (*node_names)[256]; /* nnodes entries: the PMIX_HOSTNAME of each node */
};

typedef struct tnt_launch_server tnt_launch_server_t;

/* Starts the server and registers the job. Returns NULL after printing why. */
tnt_launch_server_t *tnt_launch_server_start(const struct tnt_launch_job *job);

/* Registers rank as a client and adds the PMIx variables it needs to env
 * (PMIx_server_setup_fork). Returns 0, or -1 after printing why. */
int tnt_launch_server_setup_rank(tnt_launch_server_t *server, int rank, struct tnt_envlist *env);

/* Records the pid forked for rank; a connection claiming rank is admitted
 * only from that process or its descendants (server.c). */
void tnt_launch_server_rank_started(tnt_launch_server_t *server, int rank, pid_t pid);

/* Readable when a rank called abort (PMIx_Abort). */
int tnt_launch_server_event_fd(const tnt_launch_server_t *server);

/* Reads the abort record: returns 1 and fills the outputs (message
 * truncated to len) when a rank aborted, 0 otherwise. Drains the event fd. */
int tnt_launch_server_abort_info(tnt_launch_server_t *server, int *rank_out, int *status_out,
                                 char *message, size_t len);

/* Finalizes libpmix and removes the temporary directory. NULL is allowed.
 * Bounded: when libpmix does not finish within a few seconds, the process
 * exits with exit_status after saying so (watchdog.h). */
void tnt_launch_server_stop(tnt_launch_server_t *server, int exit_status);

#endif
