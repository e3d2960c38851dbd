/*
 * PMIx server of the launcher. Every rank runs on this machine and connects
 * to this one server, so a fence never needs data from elsewhere: the
 * library calls fence_nb once all participants have contributed, and the
 * collected blob is handed straight back. With --simulate-nodes the job is
 * *described* as K nodes (hostnames, local ranks, node maps), which is all
 * libtnt looks at to decide which ranks share a node.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>
#include <pmix_server.h>

#include "admit.h"
#include "msg.h"
#include "watchdog.h"

/* How long a connection claiming rank r waits for the main thread to record
 * the pid it forked for r: the child can connect before fork() has returned
 * in the parent. */
#define PID_WAIT_S 10

/* Bound on the whole shutdown of the server (deregistration and
 * PMIx_server_finalize take milliseconds when libpmix is healthy). */
#define STOP_TIMEOUT_S 10

struct tnt_launch_server {
    char tmpdir[512];
    pmix_nspace_t nspace;
    int nranks;
    int event_fd[2]; /* pipe: [0] read by main, [1] written by upcalls */
    int pmix_initialized;
    int nspace_registered;

    /* Written by the abort upcall (PMIx thread), read by the main thread;
     * the mutex orders the record before the byte on event_fd is seen. */
    pthread_mutex_t lock;
    int aborted;
    int abort_rank;
    int abort_status;
    char abort_message[512];

    /* Admission of connections (upcall_client_connected): the pids come
     * from the main thread (tnt_launch_server_rank_started), the rest is
     * written on libpmix's thread; all under lock. */
    pthread_cond_t pid_cond; /* a pid was recorded */
    pid_t *rank_pid;         /* nranks entries; 0 = not forked yet */
    unsigned char *rank_connected;
    unsigned long *admitted; /* inodes of our end of every admitted connection */
    size_t nadmitted, admitted_cap;
    int hole[2]; /* socketpair; refused connections are moved onto hole[0] */
};

/* The upcalls get no user pointer for the server object before a client is
 * registered, so the one server of this process is global. */
static struct tnt_launch_server *the_server;

/* ---- waiting for libpmix's completion callbacks ------------------------ */

struct op_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    pmix_status_t status;
};

static void op_init(struct op_wait *op)
{
    pthread_mutex_init(&op->lock, NULL);
    pthread_cond_init(&op->cond, NULL);
    op->done = 0;
    op->status = PMIX_ERROR;
}

static void op_destroy(struct op_wait *op)
{
    pthread_cond_destroy(&op->cond);
    pthread_mutex_destroy(&op->lock);
}

static void op_complete(pmix_status_t status, void *cbdata)
{
    struct op_wait *op = cbdata;

    pthread_mutex_lock(&op->lock);
    op->status = status;
    op->done = 1;
    pthread_cond_signal(&op->cond);
    pthread_mutex_unlock(&op->lock);
}

/* Registration callbacks come within milliseconds; 30 s means the library
 * is stuck, and the launcher gives up rather than hanging. */
static pmix_status_t op_wait(struct op_wait *op)
{
    struct timespec deadline;
    pmix_status_t status;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&op->lock);
    while (!op->done && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&op->cond, &op->lock, &deadline);
    }
    status = op->done ? op->status : PMIX_ERR_TIMEOUT;
    pthread_mutex_unlock(&op->lock);
    return status;
}

/* ---- upcalls (run on libpmix's progress thread) ------------------------ */

/*
 * Who may join the job. libpmix 4.2 listens on 127.0.0.1 and takes the uid a
 * client writes into its handshake on trust, so anyone on the machine who
 * finds the port and the namespace could pose as a rank, read the job's
 * data, contribute to its fences and abort it. The namespace is random
 * (tnt_launch_server_start), and on top of that every connection is checked
 * against the kernel: the client's end of the TCP connection must be held by
 * the process forked for the rank it claims, or by one of that process's
 * descendants (a rank started through a shell script), and a rank may have
 * one connection at a time.
 */

/* The verdict on the connection on fd, which claims proc; 0 = admit, or -1
 * with the reason in why. Called with server->lock held. */
static int judge_client(struct tnt_launch_server *server, const pmix_proc_t *proc, int fd,
                        char *why, size_t len)
{
    unsigned long client_inode = 0;
    struct timespec deadline;
    unsigned uid = 0;
    char from[128];
    pid_t pid, holder;

    if (!PMIX_CHECK_NSPACE(proc->nspace, server->nspace) ||
        proc->rank >= (pmix_rank_t)server->nranks) {
        snprintf(why, len, "%s is not a rank of this job", proc->nspace);
        return -1;
    }
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += PID_WAIT_S;
    while (server->rank_pid[proc->rank] == 0 &&
           pthread_cond_timedwait(&server->pid_cond, &server->lock, &deadline) != ETIMEDOUT) {
        ;
    }
    pid = server->rank_pid[proc->rank];
    if (pid <= 0) {
        snprintf(why, len, "rank %u has not been started", proc->rank);
        return -1;
    }
    if (tnt_admit_client_socket(fd, &client_inode, &uid, why, len) != 0) {
        return -1;
    }
    holder = tnt_admit_holder(client_inode);
    if (holder > 0) {
        snprintf(from, sizeof from, "uid %u, pid %ld", uid, (long)holder);
    } else {
        snprintf(from, sizeof from, "uid %u, pid unknown", uid);
    }
    if (server->rank_connected[proc->rank]) {
        snprintf(why, len, "it comes from %s, and rank %u (pid %ld) is connected already", from,
                 proc->rank, (long)pid);
        return -1;
    }
    if (!tnt_admit_tree_holds(pid, client_inode)) {
        snprintf(why, len,
                 "it comes from %s, which is not rank %u (pid %ld) or a process it "
                 "started",
                 from, proc->rank, (long)pid);
        return -1;
    }
    return 0;
}

/*
 * Refuses the connection on fd without telling libpmix. Returning an error
 * from client_connected is libpmix 4.2.2's own way, but its error path
 * releases the rank's record twice (ptl_base_connection_hdlr.c), so the
 * genuine rank's later connection would use freed memory; shutting the
 * socket down would make libpmix count the rank as gone and complete fences
 * without it. Instead the descriptor is replaced by one end of a socketpair
 * nobody writes to: the intruder's TCP connection closes at once (its last
 * descriptor is gone) before libpmix has read a single request from it, and
 * libpmix keeps a silent peer in its table until the job ends.
 */
static void refuse_connection(struct tnt_launch_server *server, int fd)
{
    if (dup3(server->hole[0], fd, O_CLOEXEC) < 0) {
        tnt_launch_warn("could not move a refused PMIx connection aside (%s); shutting it down",
                        strerror(errno));
        shutdown(fd, SHUT_RDWR);
    }
}

static pmix_status_t upcall_client_connected(const pmix_proc_t *proc, void *server_object,
                                             pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct tnt_launch_server *server = the_server;
    unsigned long inode = 0;
    char why[512];
    int fd = -1, verdict;

    /* libpmix 4.2 calls this synchronously (cbfunc NULL) from its
     * connection handler, after the handshake and before it reads anything
     * else from the client. */
    pthread_mutex_lock(&server->lock);
    if (tnt_admit_handshaking_socket(server->admitted, server->nadmitted, &fd, &inode, why,
                                     sizeof why) != 0) {
        pthread_mutex_unlock(&server->lock);
        /* The socket cannot be moved aside; libpmix's own refusal is all
         * that is left. */
        tnt_launch_error("refused a PMIx connection claiming rank %u: cannot tell which process "
                         "made it (%s)",
                         proc->rank, why);
        return PMIX_ERR_NO_PERMISSIONS;
    }
    verdict = judge_client(server, proc, fd, why, sizeof why);
    if (verdict == 0 && server->nadmitted == server->admitted_cap) {
        size_t cap = server->admitted_cap * 2 + 8;
        unsigned long *more = realloc(server->admitted, cap * sizeof *more);

        if (more == NULL) {
            snprintf(why, sizeof why, "out of memory");
            verdict = -1;
        } else {
            server->admitted = more;
            server->admitted_cap = cap;
        }
    }
    if (verdict == 0) {
        server->admitted[server->nadmitted++] = inode;
        server->rank_connected[proc->rank] = 1;
        pthread_mutex_unlock(&server->lock);
        tnt_launch_debug("rank %u connected", proc->rank);
        return PMIX_SUCCESS;
    }
    pthread_mutex_unlock(&server->lock);
    refuse_connection(server, fd);
    tnt_launch_warn("refused a PMIx connection claiming to be rank %u: %s; only the processes "
                    "this launcher started may join the job",
                    proc->rank, why);
    return PMIX_SUCCESS;
}

/*
 * Tools (PMIx_tool_init) have no business with a training job. Without this
 * upcall libpmix 4.2.2 admits a tool by itself, on the uid the tool claims;
 * and refusing it through the callback takes a path that dereferences a
 * namespace it never listed. So the callback is never called: the tool's
 * socket is closed here, and libpmix keeps only its record of the pending
 * connection (a few hundred bytes per attempt) and never reads from it.
 */
static void upcall_tool_connected(pmix_info_t *info, size_t ninfo,
                                  pmix_tool_connection_cbfunc_t cbfunc, void *cbdata)
{
    struct tnt_launch_server *server = the_server;
    unsigned long inode = 0, client_inode = 0;
    char why[512], from[128] = "a process this launcher cannot see";
    unsigned uid = 0;
    int fd = -1, found;

    pthread_mutex_lock(&server->lock);
    found = tnt_admit_handshaking_socket(server->admitted, server->nadmitted, &fd, &inode, why,
                                         sizeof why) == 0;
    pthread_mutex_unlock(&server->lock);
    if (found) {
        if (tnt_admit_client_socket(fd, &client_inode, &uid, why, sizeof why) == 0) {
            snprintf(from, sizeof from, "uid %u, pid %ld", uid,
                     (long)tnt_admit_holder(client_inode));
        }
        close(fd);
    }
    tnt_launch_warn("refused a PMIx tool connection (from %s): this launcher serves only the "
                    "ranks it started",
                    from);
}

static pmix_status_t upcall_client_finalized(const pmix_proc_t *proc, void *server_object,
                                             pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct tnt_launch_server *server = the_server;

    tnt_launch_debug("rank %u finalized", proc->rank);
    /* Its connection ends; a later PMIx_Init of the same rank (after
     * PMIx_Finalize) is a new, single connection again. */
    if (PMIX_CHECK_NSPACE(proc->nspace, server->nspace) &&
        proc->rank < (pmix_rank_t)server->nranks) {
        pthread_mutex_lock(&server->lock);
        server->rank_connected[proc->rank] = 0;
        pthread_mutex_unlock(&server->lock);
    }
    /* The client blocks in PMIx_Finalize until released. */
    if (cbfunc != NULL) {
        cbfunc(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static pmix_status_t upcall_abort(const pmix_proc_t *proc, void *server_object, int status,
                                  const char msg[], pmix_proc_t procs[], size_t nprocs,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    struct tnt_launch_server *server = the_server;
    char byte = 'a';

    /* A training job cannot continue without one of its ranks: whatever
     * subset the caller names, the main loop stops the whole job. */
    if (server != NULL) {
        pthread_mutex_lock(&server->lock);
        if (!server->aborted) {
            server->aborted = 1;
            server->abort_rank = (int)proc->rank;
            server->abort_status = status;
            snprintf(server->abort_message, sizeof server->abort_message, "%s",
                     msg != NULL ? msg : "");
        }
        pthread_mutex_unlock(&server->lock);
        /* Nonblocking pipe: a full pipe already holds a wake-up. */
        if (write(server->event_fd[1], &byte, 1) < 0 && errno != EAGAIN) {
            tnt_launch_debug("abort wake-up write failed: %s", strerror(errno));
        }
    }
    /* Release the caller; it exits right after, and the main loop kills
     * whatever is left of the job. */
    if (cbfunc != NULL) {
        cbfunc(PMIX_SUCCESS, cbdata);
    }
    return PMIX_SUCCESS;
}

static pmix_status_t upcall_fence_nb(const pmix_proc_t procs[], size_t nprocs,
                                     const pmix_info_t info[], size_t ninfo, char *data,
                                     size_t ndata, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    /* Every participant is a client of this server, so the library has
     * already collected all contributions: hand them back as the result.
     * libpmix keeps ownership of data (no release function). */
    if (cbfunc != NULL) {
        cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    }
    return PMIX_SUCCESS;
}

static pmix_status_t upcall_direct_modex(const pmix_proc_t *proc, const pmix_info_t info[],
                                         size_t ninfo, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    /* There is no other server to ask: data a local client has not put does
     * not exist anywhere. */
    return PMIX_ERR_NOT_FOUND;
}

static pmix_server_module_t server_module = {
    .client_connected = upcall_client_connected,
    .client_finalized = upcall_client_finalized,
    .tool_connected = upcall_tool_connected,
    .abort = upcall_abort,
    .fence_nb = upcall_fence_nb,
    .direct_modex = upcall_direct_modex,
};

/* ---- job registration -------------------------------------------------- */

/* "a,b,c" of ranks first .. first+count-1 (never "a-c": PMIx_generate_ppn in
 * 4.2.2 misreads ranges), appended to buf at *pos. */
static void append_ranks(char *buf, size_t len, size_t *pos, int first, int count)
{
    for (int r = first; r < first + count && *pos < len; r++) {
        int n = snprintf(buf + *pos, len - *pos, r == first ? "%d" : ",%d", r);

        if (n > 0) {
            *pos += (size_t)n;
        }
    }
}

static char *ranks_string(int first, int count)
{
    size_t len = (size_t)count * 12 + 1, pos = 0;
    char *buf = malloc(len);

    if (buf != NULL) {
        buf[0] = '\0';
        append_ranks(buf, len, &pos, first, count);
    }
    return buf;
}

static void info_u32(pmix_info_t *info, const char *key, uint32_t value)
{
    PMIX_INFO_LOAD(info, key, &value, PMIX_UINT32);
}

static void info_u16(pmix_info_t *info, const char *key, uint16_t value)
{
    PMIX_INFO_LOAD(info, key, &value, PMIX_UINT16);
}

static void info_rank(pmix_info_t *info, const char *key, pmix_rank_t value)
{
    PMIX_INFO_LOAD(info, key, &value, PMIX_PROC_RANK);
}

static void info_string(pmix_info_t *info, const char *key, const char *value)
{
    PMIX_INFO_LOAD(info, key, value, PMIX_STRING);
}

/* Hands an array of n infos to info as a PMIX_DATA_ARRAY (ownership moves:
 * PMIX_INFO_FREE of the outer array frees it). */
static pmix_info_t *info_array(pmix_info_t *info, const char *key, size_t n)
{
    pmix_data_array_t *array;

    PMIX_DATA_ARRAY_CREATE(array, n, PMIX_INFO);
    if (array == NULL) {
        return NULL;
    }
    PMIX_LOAD_KEY(info->key, key);
    info->value.type = PMIX_DATA_ARRAY;
    info->value.data.darray = array;
    return (pmix_info_t *)array->array;
}

static int register_job(struct tnt_launch_server *server, const struct tnt_launch_job *job)
{
    enum { JOB_KEYS = 11, NODE_KEYS = 6, PROC_KEYS = 6 };
    size_t ninfo = JOB_KEYS + (size_t)job->nnodes + (size_t)job->nranks, k = 0;
    size_t names_len = (size_t)job->nnodes * 257 + 1, names_pos = 0;
    size_t ppn_len = (size_t)job->nranks * 12 + (size_t)job->nnodes + 1, ppn_pos = 0;
    char *names = NULL, *ppn = NULL, *node_regex = NULL, *proc_regex = NULL;
    char *peers0 = NULL;
    pmix_info_t *info = NULL;
    struct op_wait op;
    pmix_status_t rc;
    int ret = -1;

    names = malloc(names_len);
    ppn = malloc(ppn_len);
    peers0 = ranks_string(job->node_first[0], job->node_size[0]);
    if (names == NULL || ppn == NULL || peers0 == NULL) {
        goto err_free;
    }
    names[0] = ppn[0] = '\0';
    for (int node = 0; node < job->nnodes; node++) {
        names_pos += (size_t)snprintf(names + names_pos, names_len - names_pos,
                                      node == 0 ? "%s" : ",%s", job->node_names[node]);
        if (node > 0 && ppn_pos + 1 < ppn_len) {
            ppn[ppn_pos++] = ';', ppn[ppn_pos] = '\0';
        }
        append_ranks(ppn, ppn_len, &ppn_pos, job->node_first[node], job->node_size[node]);
    }
    rc = PMIx_generate_regex(names, &node_regex);
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_generate_ppn(ppn, &proc_regex);
    }
    if (rc != PMIX_SUCCESS) {
        tnt_launch_error("PMIx could not encode the node map (%s)", PMIx_Error_string(rc));
        goto err_free;
    }

    PMIX_INFO_CREATE(info, ninfo);
    if (info == NULL) {
        goto err_free;
    }
    /* Job level. The "local" keys here describe node 0, this server's own
     * node. A client resolves node-level keys (PMIX_LOCAL_SIZE,
     * PMIX_LOCAL_PEERS) through the node arrays below by its own
     * PMIX_HOSTNAME, so on simulated nodes every rank sees its node's
     * values (checked by tests/integration/launcher_pmix_client.c). */
    info_u32(&info[k++], PMIX_UNIV_SIZE, (uint32_t)job->nranks);
    info_u32(&info[k++], PMIX_JOB_SIZE, (uint32_t)job->nranks);
    info_u32(&info[k++], PMIX_MAX_PROCS, (uint32_t)job->nranks);
    info_u32(&info[k++], PMIX_NUM_NODES, (uint32_t)job->nnodes);
    info_u32(&info[k++], PMIX_LOCAL_SIZE, (uint32_t)job->node_size[0]);
    info_u32(&info[k++], PMIX_NODE_SIZE, (uint32_t)job->node_size[0]);
    info_string(&info[k++], PMIX_LOCAL_PEERS, peers0);
    info_string(&info[k++], PMIX_NODE_MAP, node_regex);
    info_string(&info[k++], PMIX_PROC_MAP, proc_regex);
    info_string(&info[k++], PMIX_HOSTNAME, job->node_names[0]);
    info_string(&info[k++], PMIX_JOBID, server->nspace);

    for (int node = 0; node < job->nnodes; node++) {
        pmix_info_t *node_info = info_array(&info[k++], PMIX_NODE_INFO_ARRAY, NODE_KEYS);
        char *peers = ranks_string(job->node_first[node], job->node_size[node]);
        size_t j = 0;

        if (node_info == NULL || peers == NULL) {
            free(peers);
            goto err_free;
        }
        info_string(&node_info[j++], PMIX_HOSTNAME, job->node_names[node]);
        info_u32(&node_info[j++], PMIX_NODEID, (uint32_t)node);
        info_u32(&node_info[j++], PMIX_LOCAL_SIZE, (uint32_t)job->node_size[node]);
        info_u32(&node_info[j++], PMIX_NODE_SIZE, (uint32_t)job->node_size[node]);
        info_string(&node_info[j++], PMIX_LOCAL_PEERS, peers);
        info_rank(&node_info[j++], PMIX_LOCALLDR, (pmix_rank_t)job->node_first[node]);
        free(peers);
    }
    for (int rank = 0; rank < job->nranks; rank++) {
        pmix_info_t *proc_info = info_array(&info[k++], PMIX_PROC_DATA, PROC_KEYS);
        int node = job->node_of_rank[rank];
        size_t j = 0;

        if (proc_info == NULL) {
            goto err_free;
        }
        /* PMIX_RANK must come first in a proc-data array. */
        info_rank(&proc_info[j++], PMIX_RANK, (pmix_rank_t)rank);
        info_u16(&proc_info[j++], PMIX_LOCAL_RANK, (uint16_t)job->local_rank[rank]);
        info_u16(&proc_info[j++], PMIX_NODE_RANK, (uint16_t)job->local_rank[rank]);
        info_rank(&proc_info[j++], PMIX_GLOBAL_RANK, (pmix_rank_t)rank);
        info_string(&proc_info[j++], PMIX_HOSTNAME, job->node_names[node]);
        info_u32(&proc_info[j++], PMIX_NODEID, (uint32_t)node);
    }

    op_init(&op);
    /* nlocalprocs: every rank is a client of this server, simulated nodes
     * or not, so the library waits for all of them in each fence. */
    rc = PMIx_server_register_nspace(server->nspace, job->nranks, info, ninfo, op_complete, &op);
    if (rc == PMIX_SUCCESS) {
        rc = op_wait(&op);
    } else if (rc == PMIX_OPERATION_SUCCEEDED) {
        rc = PMIX_SUCCESS;
    }
    op_destroy(&op);
    if (rc != PMIX_SUCCESS) {
        tnt_launch_error("PMIx_server_register_nspace failed: %s", PMIx_Error_string(rc));
        goto err_free;
    }
    server->nspace_registered = 1;
    ret = 0;

err_free:
    if (info != NULL) {
        PMIX_INFO_FREE(info, ninfo);
    }
    free(node_regex);
    free(proc_regex);
    free(peers0);
    free(ppn);
    free(names);
    return ret;
}

/* ---- lifecycle --------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (remove(path) != 0 && errno != ENOENT) {
        tnt_launch_warn("could not remove %s: %s", path, strerror(errno));
    }
    return 0;
}

static void remove_tree(const char *path)
{
    if (path[0] != '\0') {
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* A private directory for the rendezvous socket and libpmix's files. Unix
 * socket paths are limited to 108 bytes, so a long TMPDIR falls back to
 * /tmp. */
static int make_tmpdir(char *dir, size_t len)
{
    const char *base = getenv("TMPDIR");

    if (base == NULL || base[0] == '\0' || strlen(base) > 60) {
        base = "/tmp";
    }
    snprintf(dir, len, "%s/tarantella.XXXXXX", base);
    if (mkdtemp(dir) == NULL) {
        tnt_launch_error("cannot create a temporary directory %s: %s; set TMPDIR to a "
                         "writable directory",
                         dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

/*
 * "tarantella.<pid>.<128 random bits>". A client must name a registered
 * namespace in its handshake, and libpmix rejects an unknown one before it
 * changes any state; the ranks learn it from their environment, which other
 * users cannot read. A guessable name would let anyone who finds the port
 * reach the checks in upcall_client_connected, after libpmix has already
 * taken the connecting side's choice of wire modules for the namespace.
 */
static int make_nspace(pmix_nspace_t nspace)
{
    unsigned char bits[16];
    char hex[2 * sizeof bits + 1];

    if (getrandom(bits, sizeof bits, 0) != (ssize_t)sizeof bits) {
        tnt_launch_error("cannot draw a random PMIx namespace: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof bits; i++) {
        snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    }
    snprintf(nspace, sizeof(pmix_nspace_t), "tarantella.%ld.%s", (long)getpid(), hex);
    return 0;
}

tnt_launch_server_t *tnt_launch_server_start(const struct tnt_launch_job *job)
{
    struct tnt_launch_server *server = calloc(1, sizeof *server);
    pthread_condattr_t attr;
    pmix_info_t *info = NULL;
    pmix_status_t rc;
    size_t ninfo = 3;

    if (server == NULL) {
        tnt_launch_error("out of memory");
        return NULL;
    }
    server->event_fd[0] = server->event_fd[1] = -1;
    server->hole[0] = server->hole[1] = -1;
    server->nranks = job->nranks;
    pthread_mutex_init(&server->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&server->pid_cond, &attr);
    pthread_condattr_destroy(&attr);
    server->rank_pid = calloc((size_t)job->nranks, sizeof *server->rank_pid);
    server->rank_connected = calloc((size_t)job->nranks, 1);
    if (server->rank_pid == NULL || server->rank_connected == NULL) {
        tnt_launch_error("out of memory");
        goto err_stop;
    }
    if (make_nspace(server->nspace) != 0) {
        goto err_stop;
    }
    if (pipe2(server->event_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        tnt_launch_error("pipe: %s", strerror(errno));
        goto err_stop;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, server->hole) != 0) {
        tnt_launch_error("socketpair: %s", strerror(errno));
        goto err_stop;
    }
    if (make_tmpdir(server->tmpdir, sizeof server->tmpdir) != 0) {
        goto err_stop;
    }

    PMIX_INFO_CREATE(info, ninfo);
    if (info == NULL) {
        goto err_stop;
    }
    info_string(&info[0], PMIX_SERVER_TMPDIR, server->tmpdir);
    info_string(&info[1], PMIX_SYSTEM_TMPDIR, server->tmpdir);
    info_string(&info[2], PMIX_SERVER_NSPACE, "tarantella-launcher");
    the_server = server;
    rc = PMIx_server_init(&server_module, info, ninfo);
    PMIX_INFO_FREE(info, ninfo);
    if (rc != PMIX_SUCCESS) {
        tnt_launch_error("PMIx_server_init failed: %s", PMIx_Error_string(rc));
        goto err_stop;
    }
    server->pmix_initialized = 1;
    if (register_job(server, job) != 0) {
        goto err_stop;
    }
    tnt_launch_debug("PMIx server up: namespace %s, %d ranks on %d node(s), tmpdir %s",
                     server->nspace, job->nranks, job->nnodes, server->tmpdir);
    return server;

err_stop:
    tnt_launch_server_stop(server, EXIT_FAILURE);
    return NULL;
}

void tnt_launch_server_rank_started(tnt_launch_server_t *server, int rank, pid_t pid)
{
    pthread_mutex_lock(&server->lock);
    server->rank_pid[rank] = pid;
    pthread_cond_broadcast(&server->pid_cond);
    pthread_mutex_unlock(&server->lock);
}

int tnt_launch_server_setup_rank(tnt_launch_server_t *server, int rank, struct tnt_envlist *env)
{
    struct op_wait op;
    pmix_proc_t proc;
    pmix_status_t rc;

    PMIX_LOAD_PROCID(&proc, server->nspace, (pmix_rank_t)rank);
    op_init(&op);
    rc = PMIx_server_register_client(&proc, getuid(), getgid(), NULL, op_complete, &op);
    if (rc == PMIX_SUCCESS) {
        rc = op_wait(&op);
    } else if (rc == PMIX_OPERATION_SUCCEEDED) {
        rc = PMIX_SUCCESS;
    }
    op_destroy(&op);
    if (rc != PMIX_SUCCESS) {
        tnt_launch_error("PMIx_server_register_client(rank %d) failed: %s", rank,
                         PMIx_Error_string(rc));
        return -1;
    }
    /* setup_fork grows env->v with its own (realloc-based) helpers; recount. */
    rc = PMIx_server_setup_fork(&proc, &env->v);
    for (env->n = 0; env->v != NULL && env->v[env->n] != NULL; env->n++) {
        ;
    }
    if (rc != PMIX_SUCCESS) {
        tnt_launch_error("PMIx_server_setup_fork(rank %d) failed: %s", rank, PMIx_Error_string(rc));
        return -1;
    }
    return 0;
}

int tnt_launch_server_event_fd(const tnt_launch_server_t *server)
{
    return server->event_fd[0];
}

int tnt_launch_server_abort_info(tnt_launch_server_t *server, int *rank_out, int *status_out,
                                 char *message, size_t len)
{
    char drain[64];
    int aborted;

    while (read(server->event_fd[0], drain, sizeof drain) > 0) {
        ;
    }
    pthread_mutex_lock(&server->lock);
    aborted = server->aborted;
    if (aborted) {
        *rank_out = server->abort_rank;
        *status_out = server->abort_status;
        snprintf(message, len, "%s", server->abort_message);
    }
    pthread_mutex_unlock(&server->lock);
    return aborted;
}

static void remove_tmpdir(void *arg)
{
    remove_tree(((struct tnt_launch_server *)arg)->tmpdir);
}

void tnt_launch_server_stop(tnt_launch_server_t *server, int exit_status)
{
    struct tnt_launch_watchdog watchdog;
    char message[300];

    if (server == NULL) {
        return;
    }
    /* libpmix's shutdown joins its progress thread, which never returns
     * from a blocking read of a handshake that a client left unfinished. */
    snprintf(message, sizeof message,
             "the PMIx server did not shut down within %d s (libpmix is stuck, for example on "
             "a connection that never finished its handshake); exiting with status %d without "
             "waiting for it",
             STOP_TIMEOUT_S, exit_status);
    tnt_launch_watchdog_arm(&watchdog, STOP_TIMEOUT_S, exit_status, message, remove_tmpdir, server);
    if (server->nspace_registered) {
        struct op_wait op;

        /* Wait for the deregistration: finalizing while it is still queued
         * on the progress thread would race with it. */
        op_init(&op);
        PMIx_server_deregister_nspace(server->nspace, op_complete, &op);
        op_wait(&op);
        op_destroy(&op);
    }
    if (server->pmix_initialized) {
        PMIx_server_finalize();
    }
    tnt_launch_watchdog_disarm(&watchdog);
    the_server = NULL;
    remove_tree(server->tmpdir);
    if (server->event_fd[0] >= 0) {
        close(server->event_fd[0]);
    }
    if (server->event_fd[1] >= 0) {
        close(server->event_fd[1]);
    }
    if (server->hole[0] >= 0) {
        close(server->hole[0]);
        close(server->hole[1]);
    }
    pthread_cond_destroy(&server->pid_cond);
    pthread_mutex_destroy(&server->lock);
    free(server->rank_pid);
    free(server->rank_connected);
    free(server->admitted);
    free(server);
}
