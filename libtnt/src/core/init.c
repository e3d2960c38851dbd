/*
 * tnt_init / tnt_finalize: bootstrap (PMIx or a singleton), work out which ranks share
 * a node (from the hostnames the ranks report, never from PMIX_NODEID), then
 * connect the node's ranks through one shared-memory segment and the nodes
 * through the multi-node transport.
 */
#include "core/init.h"
#include "comm/comm.h"

#include "coll/coll.h"
#include "coll/doctor.h"
#include "coll/multinode.h"
#include "gpu/gpu.h"
#include "p2p/p2p.h"
#include "transport/shm.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What every rank contributes to the layout allgather. Ranks share a node
 * when all of hostname, boot id and /dev/shm agree: containers may share a
 * hostname (or run on hosts cloned with one), but two hosts never share a
 * kernel boot id, and two containers with /dev/shm mounts of their own
 * cannot reach each other's segments. */
struct peer_id {
    char hostname[TNT_BOOT_HOSTNAME_MAX];
    char boot_id[40]; /* /proc/sys/kernel/random/boot_id, "" if unreadable */
    uint64_t shm_dev;
    uint64_t shm_ino;
    int64_t pid;
    /* TNT_P2P=off on this rank: then no rank makes a point-to-point
     * transport (its creation is collective), and the calls name the rank. */
    int64_t p2p_off;
};

static void read_host_identity(struct peer_id *me)
{
    struct stat st;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(me->boot_id, sizeof(me->boot_id), f) == NULL) {
            me->boot_id[0] = '\0';
        }
        me->boot_id[strcspn(me->boot_id, "\n")] = '\0';
        fclose(f);
    }
    if (stat("/dev/shm", &st) == 0) {
        me->shm_dev = (uint64_t)st.st_dev;
        me->shm_ino = (uint64_t)st.st_ino;
    }
}

static int same_host(const struct peer_id *a, const struct peer_id *b)
{
    return strcmp(a->hostname, b->hostname) == 0 && strcmp(a->boot_id, b->boot_id) == 0 &&
           a->shm_dev == b->shm_dev && a->shm_ino == b->shm_ino;
}

/* Numbers the nodes in order of their lowest rank and fills every layout
 * field of comm. A small open-addressing table from hostname to node keeps
 * this linear in the number of ranks. */
static tnt_status_t derive_layout(tnt_comm_t *comm, const struct peer_id *peers)
{
    const int size = comm->size;
    size_t slots = 16;
    int *table = NULL;
    tnt_status_t status = TNT_ERR_NO_MEMORY;

    while (slots < 2 * (size_t)size) {
        slots *= 2;
    }
    table = malloc(slots * sizeof(*table));
    comm->node_of_rank = malloc((size_t)size * sizeof(int));
    comm->local_rank_of_rank = malloc((size_t)size * sizeof(int));
    comm->node_sizes = calloc((size_t)size, sizeof(int));
    comm->node_first_rank = malloc((size_t)size * sizeof(int));
    if (table == NULL || comm->node_of_rank == NULL || comm->local_rank_of_rank == NULL ||
        comm->node_sizes == NULL || comm->node_first_rank == NULL) {
        goto err_free_table;
    }
    for (size_t i = 0; i < slots; i++) {
        table[i] = -1;
    }

    int num_nodes = 0;
    for (int r = 0; r < size; r++) {
        size_t i = (tnt_fnv1a_string(peers[r].hostname) ^ tnt_fnv1a_string(peers[r].boot_id) ^
                    peers[r].shm_dev ^ peers[r].shm_ino) &
                   (slots - 1);
        int node = -1;
        while (table[i] >= 0) {
            if (same_host(&peers[comm->node_first_rank[table[i]]], &peers[r])) {
                node = table[i];
                break;
            }
            i = (i + 1) & (slots - 1);
        }
        if (node < 0) {
            node = num_nodes++;
            table[i] = node;
            comm->node_first_rank[node] = r;
        }
        comm->node_of_rank[r] = node;
        comm->local_rank_of_rank[r] = comm->node_sizes[node]++;
    }
    comm->num_nodes = num_nodes;
    comm->node_id = comm->node_of_rank[comm->rank];
    comm->local_rank = comm->local_rank_of_rank[comm->rank];
    comm->local_size = comm->node_sizes[comm->node_id];

    comm->local_to_global = malloc((size_t)comm->local_size * sizeof(int));
    if (comm->local_to_global == NULL) {
        goto err_free_table;
    }
    for (int r = 0, l = 0; r < size; r++) {
        if (comm->node_of_rank[r] == comm->node_id) {
            comm->local_to_global[l++] = r;
        }
    }
    free(table);
    return TNT_OK;

err_free_table:
    free(table);
    return tnt_error_raise(status, "tnt_init: out of memory for the layout of %d ranks", size);
}

static void free_layout(tnt_comm_t *comm)
{
    free(comm->node_of_rank);
    free(comm->local_rank_of_rank);
    free(comm->node_sizes);
    free(comm->node_first_rank);
    free(comm->local_to_global);
}

/* The launcher's own view of local rank and size must agree with the
 * hostnames; if not, hostnames win (they are what the shm segment needs) and
 * the difference is reported, since it usually means PMIX_HOSTNAME is missing
 * or inconsistent. */
static void check_local_layout(const tnt_comm_t *comm, const struct tnt_boot_info *info)
{
    if ((info->local_rank >= 0 && info->local_rank != comm->local_rank) ||
        (info->local_size >= 0 && info->local_size != comm->local_size)) {
        tnt_log(TNT_LOG_WARN,
                "PMIx says local rank %d of %d, but the ranks' hostnames give local rank %d of %d "
                "on %s; using the hostnames (is PMIX_HOSTNAME consistent across ranks?)",
                info->local_rank, info->local_size, comm->local_rank, comm->local_size,
                comm->hostname);
    }
}

/* The shm transport's exchange (tnt_shm_exchange_fn) over the bootstrap: an
 * allgather of every rank's addr, from which each rank keeps its node's
 * first rank's. Every rank of every node calls it once, at the same point
 * of tnt_init. */
struct shm_exchange {
    tnt_comm_t *comm;
};

static tnt_status_t exchange_shm_addr(void *arg, tnt_shm_addr_t *addr)
{
    struct shm_exchange *x = arg;
    tnt_comm_t *comm = x->comm;
    tnt_shm_addr_t *all = malloc((size_t)comm->size * sizeof(*all));
    tnt_status_t status;

    if (all == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for %d ranks",
                               comm->size);
    }
    status = tnt_boot_allgather(comm->boot, addr, all, sizeof(*addr));
    if (status == TNT_OK && comm->local_rank != 0) {
        *addr = all[comm->node_first_rank[comm->node_id]];
        addr->name[sizeof(addr->name) - 1] = '\0';
    }
    free(all);
    return status;
}

/* The doctor needs every rank's pid and host for its verdicts. */
static tnt_status_t create_doctor(tnt_comm_t *comm, const struct peer_id *peers)
{
    int64_t *pids = malloc((size_t)comm->size * sizeof(*pids));
    const char **hosts = malloc((size_t)comm->size * sizeof(*hosts));
    tnt_status_t status;

    if (pids == NULL || hosts == NULL) {
        free(pids);
        free(hosts);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for %d ranks",
                               comm->size);
    }
    for (int r = 0; r < comm->size; r++) {
        pids[r] = peers[r].pid;
        hosts[r] = peers[r].hostname;
    }
    status = tnt_doctor_create(comm, pids, hosts);
    free(pids);
    free(hosts);
    return status;
}

TNT_API tnt_status_t tnt_init(tnt_comm_t **comm_p)
{
    tnt_settings_t *settings;
    tnt_boot_t *boot;

    if (comm_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_init: comm_p is NULL");
    }
    tnt_error_clear();
    /* Every TNT_* value is checked before anything is set up, so a bad one
     * fails here, naming itself, instead of somewhere inside a transport. */
    tnt_status_t status = tnt_settings_create(&settings);
    if (status != TNT_OK) {
        return status;
    }
    tnt_log_configure(settings->log_level, settings->log_on_all_ranks);
    status = tnt_boot_init(settings->timeout_s, &boot);
    if (status != TNT_OK) {
        tnt_settings_destroy(settings);
        return status;
    }
    /* Log lines name this rank; a communicator split from this one later
     * leaves them naming the rank the user knows. */
    tnt_log_set_identity(tnt_boot_info(boot)->rank, tnt_boot_info(boot)->hostname);
    tnt_comm_t *comm;
    status = tnt_comm_create(boot, settings, "world", &comm);
    if (status != TNT_OK) {
        return status;
    }
    /* TNT_TIMELINE: checked and started here, so a path rank 0 cannot
     * write fails the start, not the end, of the run. */
    if (comm->settings->timeline_path[0] != '\0') {
        status = tnt_timeline_start(comm, comm->settings->timeline_path);
        if (status != TNT_OK) {
            char saved[TNT_REQUEST_ERROR_MAX];
            int printed = tnt_error_printed();
            snprintf(saved, sizeof(saved), "%s", tnt_error_message());
            tnt_finalize(comm);
            tnt_error_restore(saved, printed);
            return status;
        }
    }
    *comm_p = comm;
    return TNT_OK;
}

TNT_API tnt_status_t tnt_comm_create_oob(const tnt_oob_t *oob, tnt_comm_t **comm_p)
{
    tnt_settings_t *settings;
    tnt_boot_t *boot;

    if (comm_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_comm_create_oob: comm_p is NULL");
    }
    tnt_error_clear();
    tnt_status_t status = tnt_settings_create(&settings);
    if (status != TNT_OK) {
        return status;
    }
    tnt_log_configure(settings->log_level, settings->log_on_all_ranks);
    status = tnt_boot_oob_create(oob, settings->timeout_s, &boot);
    if (status != TNT_OK) {
        tnt_settings_destroy(settings);
        return status;
    }
    tnt_log_set_identity(oob->rank, tnt_boot_info(boot)->hostname);
    return tnt_comm_create(boot, settings,
                           oob->name != NULL && oob->name[0] != '\0' ? oob->name : "oob", comm_p);
}

tnt_status_t tnt_comm_create(tnt_boot_t *boot, tnt_settings_t *settings, const char *name,
                             tnt_comm_t **comm_p)
{
    tnt_comm_t *comm;
    struct peer_id *peers = NULL;
    struct peer_id me;
    tnt_status_t status;

    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        tnt_boot_finalize(boot);
        tnt_settings_destroy(settings);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory");
    }
    comm->settings = settings;
    comm->timeout_s = settings->timeout_s;
    comm->boot = boot;
    snprintf(comm->name, sizeof(comm->name), "%s", name);
    comm->tl_comm = tnt_tl_comm_id(comm->name);
    const struct tnt_boot_info *info = tnt_boot_info(comm->boot);
    comm->rank = info->rank;
    comm->size = info->size;
    snprintf(comm->hostname, sizeof(comm->hostname), "%s", info->hostname);
    if (strcmp(comm->name, "world") != 0) {
        char *text = comm->error_context_text;
        int name_len =
            snprintf(text, sizeof(comm->error_context_text), "communicator %s", comm->name);
        snprintf(text + name_len, sizeof(comm->error_context_text) - (size_t)name_len,
                 " (rank %d of %d)", comm->rank, comm->size);
        comm->error_context = (tnt_error_context_t){ .text = text, .name_len = (size_t)name_len };
    }

    status = tnt_progress_init(comm);
    if (status != TNT_OK) {
        goto err_boot;
    }

    /* Everyone learns everyone's host (the node layout) and pid (the
     * doctor's verdicts, and the only processes CMA may read or write). */
    peers = malloc((size_t)comm->size * sizeof(*peers));
    if (peers == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for %d ranks", comm->size);
        goto err_progress;
    }
    memset(&me, 0, sizeof(me));
    snprintf(me.hostname, sizeof(me.hostname), "%s", comm->hostname);
    me.pid = (int64_t)getpid();
    me.p2p_off = comm->settings->p2p == TNT_SETTINGS_P2P_OFF;
    read_host_identity(&me);
    status = tnt_boot_allgather(comm->boot, &me, peers, sizeof(me));
    if (status != TNT_OK) {
        goto err_free_peers;
    }
    /* The bytes are whatever the peers sent: every string ends here. */
    for (int r = 0; r < comm->size; r++) {
        peers[r].hostname[sizeof(peers[r].hostname) - 1] = '\0';
        peers[r].boot_id[sizeof(peers[r].boot_id) - 1] = '\0';
    }
    comm->p2p_off_rank = -1;
    for (int r = comm->size - 1; r >= 0; r--) {
        if (peers[r].p2p_off != 0) {
            comm->p2p_off_rank = r;
        }
    }
    status = derive_layout(comm, peers);
    if (status != TNT_OK) {
        goto err_free_layout;
    }
    check_local_layout(comm, info);
    status = create_doctor(comm, peers);
    if (status != TNT_OK) {
        goto err_free_layout;
    }

    /* The node's first rank names the segment at random and tells the
     * others through the bootstrap; the pids CMA may touch come from the
     * bootstrap too, never from the segment (transport/shm_name.h). */
    char shm_prefix[TNT_SHM_NAME_MAX];
    pid_t *local_pids = malloc((size_t)comm->local_size * sizeof(*local_pids));
    if (local_pids == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for %d ranks", comm->size);
        goto err_doctor;
    }
    for (int l = 0; l < comm->local_size; l++) {
        local_pids[l] = (pid_t)peers[comm->local_to_global[l]].pid;
    }
    (void)tnt_shm_name_prefix((long long)getpid(), shm_prefix, sizeof(shm_prefix));
    struct shm_exchange exchange = { comm };
    tnt_shm_params_t params = {
        .name = shm_prefix,
        .local_rank = comm->local_rank,
        .local_size = comm->local_size,
        .global_ranks = comm->local_to_global,
        .timeout_s = comm->timeout_s,
        .watch = comm->watch,
        .settings = comm->settings,
        .exchange = exchange_shm_addr,
        .exchange_arg = &exchange,
        .pids = local_pids,
        .extra_bytes = tnt_doctor_board_bytes(comm->local_size),
    };
    status = tnt_shm_create(&params, &comm->shm);
    free(local_pids);
    if (status != TNT_OK) {
        goto err_doctor;
    }
    tnt_doctor_attach_board(comm->doctor, tnt_shm_extra(comm->shm));
    if (comm->num_nodes > 1) {
        status = tnt_multinode_init(comm);
        if (status != TNT_OK) {
            goto err_shm;
        }
    }
    status = tnt_p2p_create(comm);
    if (status != TNT_OK) {
        goto err_multinode;
    }
    free(peers);

    tnt_log_info("communicator %s: rank %d of %d, node %d of %d, local rank %d of %d, job %s, "
                 "TNT_TIMEOUT %.0f s",
                 comm->name, comm->rank, comm->size, comm->node_id, comm->num_nodes,
                 comm->local_rank, comm->local_size, info->job_id, comm->timeout_s);
    *comm_p = comm;
    return TNT_OK;

err_multinode:
    if (comm->num_nodes > 1) {
        tnt_multinode_finalize(comm);
    }
err_shm:
    tnt_shm_destroy(comm->shm);
err_doctor:
    tnt_doctor_destroy(comm->doctor);
err_free_layout:
    free_layout(comm);
err_free_peers:
    free(peers);
err_progress:
    tnt_progress_finalize(comm);
err_boot:
    tnt_boot_finalize(comm->boot);
    tnt_settings_destroy(comm->settings);
    free(comm);
    return status;
}

TNT_API void tnt_finalize(tnt_comm_t *comm)
{
    if (comm == NULL) {
        return;
    }
    /* The timeline this communicator records is written while its
     * collectives still work (does nothing otherwise). */
    tnt_timeline_finalize(comm);
    /* First: NCCL's teardown may still talk to peers, which are finalizing
     * too; the host collectives are not needed for it. */
    tnt_gpu_finalize(comm);
    if (tnt_progress_finalize(comm) != TNT_OK) {
        /* The progress thread is stuck in an operation and still uses comm;
         * leave everything mapped and connected for it. */
        tnt_log_error("tnt_finalize: an operation on the progress thread never finished; "
                      "leaking the communicator");
        return;
    }
    /* A rank whose last call was an eager send (a small gather or reduce
     * off the root, a small scatter on it) learns here, having no next
     * call, whether the receivers found the calls to differ; its error is
     * logged where it is raised. This waits (within TNT_TIMEOUT, and
     * stops at once on a dead peer) until every receiver has arrived. */
    (void)tnt_coll_settle(comm);
    tnt_doctor_quiesce(comm->doctor);
    tnt_p2p_destroy(comm);
    if (comm->num_nodes > 1) {
        tnt_multinode_finalize(comm);
    }
    /* The doctor first: its board (and a report-on-signal handler that
     * reads it) lives in the shm segment. */
    tnt_doctor_destroy(comm->doctor);
    tnt_shm_destroy(comm->shm);
    tnt_boot_finalize(comm->boot);
    free_layout(comm);
    tnt_settings_destroy(comm->settings);
    free(comm);
}

TNT_API const char *tnt_comm_name(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->name : "";
}

TNT_API int tnt_rank(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->rank : -1;
}

TNT_API int tnt_size(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->size : -1;
}

TNT_API int tnt_local_rank(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->local_rank : -1;
}

TNT_API int tnt_local_size(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->local_size : -1;
}

TNT_API int tnt_node_id(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->node_id : -1;
}

TNT_API int tnt_num_nodes(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->num_nodes : -1;
}

TNT_API const char *tnt_hostname(const tnt_comm_t *comm)
{
    return comm != NULL ? comm->hostname : "";
}

TNT_API void tnt_abort(tnt_comm_t *comm, int exit_code, const char *message)
{
    const char *msg = message != NULL ? message : "(no message)";
    tnt_log(TNT_LOG_ERROR, "aborting the job (exit code %d): %s", exit_code, msg);
    tnt_timeline_abort();
    /* Stop NCCL kernels that wait for peers before the launcher kills us. */
    tnt_gpu_abort(comm);
    tnt_boot_abort(comm != NULL ? comm->boot : NULL, exit_code, msg);
}

TNT_API void tnt_stall_pause(tnt_comm_t *comm)
{
    if (comm != NULL) {
        tnt_doctor_pause(comm->doctor);
    }
}

TNT_API void tnt_stall_resume(tnt_comm_t *comm)
{
    if (comm != NULL) {
        tnt_doctor_resume(comm->doctor);
    }
}

TNT_API tnt_status_t tnt_report_on_signal(tnt_comm_t *comm, int signo)
{
    if (comm == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_report_on_signal: comm is NULL");
    }
    return tnt_doctor_report_on_signal(comm->doctor, signo);
}
