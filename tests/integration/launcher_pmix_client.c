/*
 * A PMIx client for the launcher's integration tests. It checks what the
 * launcher's PMIx server tells it against what the test told it to expect:
 *
 *   launcher_pmix_client SIZE NODES [EXPECT_ENV...]
 *
 * SIZE ranks in NODES simulated nodes (0 = no --simulate-nodes: one node
 * named after this machine). Ranks are laid out in contiguous blocks, node i
 * holding SIZE/NODES ranks plus one when i < SIZE % NODES. Each EXPECT_ENV is
 * VAR=VALUE that must be in the environment exactly ("VAR=" for empty).
 * Then it exchanges data through Put/Commit/Fence(collect)/Get and checks
 * every peer's value. Prints "rank R ok" on success; on failure, one line
 * per problem on stderr and exit status 1.
 *
 * Failure drills for the launcher tests (after the exchange, instead of
 * finalizing):
 *   --abort=R      rank R calls PMIx_Abort(5, "drill abort from rank R")
 *   --abort-echo=R the same, after printing "tarantella: <that message>" on
 *                  stderr (as tarantella's Python excepthook does)
 *   --exit=R:C     rank R prints "rank R exits with C" on stderr and exits C
 *   --delay-init=R:S rank R sleeps S seconds before PMIx_Init (rank from
 *                  PMIX_RANK), so that a test can connect in its place first
 *   --sleep=S      every other rank sleeps S seconds before finalizing, and
 *                  prints "rank R got signal N" on stderr when it gets
 *                  SIGTERM, SIGINT or SIGHUP (then exits 128+N), and
 *                  "rank R got usr1" for SIGUSR1 (and goes on sleeping)
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

/* Ranks are named in the messages that need one. */
#define CHECK_PROGRAM "launcher_pmix_client"
#define CHECK_RANK    -1
#include "check.h"

static long value_as_long(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_UINT32:
        return (long)v->data.uint32;
    case PMIX_UINT16:
        return (long)v->data.uint16;
    case PMIX_INT:
        return (long)v->data.integer;
    case PMIX_UINT:
        return (long)v->data.uint;
    case PMIX_PROC_RANK:
        return (long)v->data.rank;
    case PMIX_SIZE:
        return (long)v->data.size;
    default:
        return -999;
    }
}

static long get_long(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *val = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &val);
    long out;

    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "launcher_pmix_client: Get(%s, rank %u) failed: %s\n", key, proc->rank,
                PMIx_Error_string(rc));
        check_failures++;
        return -1;
    }
    out = value_as_long(val);
    PMIX_VALUE_RELEASE(val);
    return out;
}

static void node_of(int rank, int size, int nodes, int *node, int *local, int *local_size)
{
    int first = 0;

    for (int n = 0; n < nodes; n++) {
        int count = size / nodes + (n < size % nodes ? 1 : 0);

        if (rank < first + count) {
            *node = n;
            *local = rank - first;
            *local_size = count;
            return;
        }
        first += count;
    }
}

static void on_signal(int sig)
{
    char line[64];
    int n = snprintf(line, sizeof line, "rank %s got signal %d\n",
                     getenv("PMIX_RANK") != NULL ? getenv("PMIX_RANK") : "?", sig);

    if (n > 0) {
        (void)!write(STDERR_FILENO, line, (size_t)n);
    }
    _exit(128 + sig);
}

/* SIGUSR1 is a message, not a stop: report it and keep sleeping. */
static void on_usr1(int sig)
{
    char line[64];
    int n = snprintf(line, sizeof line, "rank %s got usr1\n",
                     getenv("PMIX_RANK") != NULL ? getenv("PMIX_RANK") : "?");

    (void)sig;
    if (n > 0) {
        (void)!write(STDERR_FILENO, line, (size_t)n);
    }
}

int main(int argc, char **argv)
{
    int abort_rank = -1, abort_echo = 0, exit_rank = -1, exit_code = 0, delay_rank = -1;
    unsigned delay_s = 0;
    double sleep_s = 0;
    pmix_proc_t me, wildcard, peer;
    pmix_value_t value, *val;
    pmix_info_t info;
    pmix_status_t rc;
    char host[256], expect_host[300], payload[128];
    int size, nodes, simulated, node = 0, local = 0, local_size = 0;
    bool collect = true;

    if (argc < 3) {
        fprintf(stderr, "usage: launcher_pmix_client SIZE NODES [VAR=VALUE...]\n");
        return 2;
    }
    size = atoi(argv[1]);
    nodes = atoi(argv[2]);
    simulated = nodes > 0;
    if (!simulated) {
        nodes = 1;
    }
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';

    for (int i = 3; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        char name[128];
        const char *have;

        if (sscanf(argv[i], "--abort-echo=%d", &abort_rank) == 1) {
            abort_echo = 1;
            continue;
        }
        if (sscanf(argv[i], "--abort=%d", &abort_rank) == 1 ||
            sscanf(argv[i], "--exit=%d:%d", &exit_rank, &exit_code) == 2 ||
            sscanf(argv[i], "--sleep=%lf", &sleep_s) == 1 ||
            sscanf(argv[i], "--delay-init=%d:%u", &delay_rank, &delay_s) == 2) {
            continue;
        }
        if (eq == NULL || (size_t)(eq - argv[i]) >= sizeof name) {
            continue;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
        have = getenv(name);
        EXPECT(have != NULL && strcmp(have, eq + 1) == 0, "env %s is '%s', expected '%s'", name,
               have != NULL ? have : "(unset)", eq + 1);
    }

    /* Before anything else, so that a rank stopped by the launcher while it
     * is still in a fence reports the signal too. */
    if (sleep_s > 0) {
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGHUP, on_signal);
        signal(SIGUSR1, on_usr1);
    }
    if (getenv("PMIX_RANK") != NULL && atoi(getenv("PMIX_RANK")) == delay_rank) {
        sleep(delay_s);
    }
    rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "launcher_pmix_client: PMIx_Init failed: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
    node_of((int)me.rank, size, nodes, &node, &local, &local_size);

    EXPECT(get_long(&wildcard, PMIX_JOB_SIZE) == size, "PMIX_JOB_SIZE != %d", size);
    /* mpirun reports its slot count as the universe size. */
    EXPECT(get_long(&wildcard, PMIX_UNIV_SIZE) >= size, "PMIX_UNIV_SIZE < %d", size);
    EXPECT(get_long(&me, PMIX_LOCAL_RANK) == local, "rank %u: PMIX_LOCAL_RANK != %d", me.rank,
           local);
    EXPECT(get_long(&me, PMIX_NODE_RANK) == local, "rank %u: PMIX_NODE_RANK != %d", me.rank, local);
    /* Node-level keys resolve through the node arrays by the client's own
     * PMIX_HOSTNAME, so every simulated node sees its own values. */
    {
        long got = get_long(&wildcard, PMIX_LOCAL_SIZE);
        char expect_peers[4096];
        size_t pos = 0;

        EXPECT(got == local_size, "rank %u: PMIX_LOCAL_SIZE %ld != %d", me.rank, got, local_size);
        for (int l = 0; l < local_size && pos < sizeof expect_peers; l++) {
            pos += (size_t)snprintf(expect_peers + pos, sizeof expect_peers - pos,
                                    l == 0 ? "%d" : ",%d", (int)me.rank - local + l);
        }
        val = NULL;
        rc = PMIx_Get(&wildcard, PMIX_LOCAL_PEERS, NULL, 0, &val);
        EXPECT(rc == PMIX_SUCCESS && val->type == PMIX_STRING &&
                   strcmp(val->data.string, expect_peers) == 0,
               "rank %u: PMIX_LOCAL_PEERS '%s', expected '%s'", me.rank,
               rc == PMIX_SUCCESS && val->type == PMIX_STRING ? val->data.string : "?",
               expect_peers);
        if (val != NULL) {
            PMIX_VALUE_RELEASE(val);
        }
    }

    /* Every peer's hostname, as libtnt reads them. */
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, NULL, PMIX_BOOL);
    for (int r = 0; r < size; r++) {
        int pnode = 0, plocal = 0, psize = 0;

        node_of(r, size, nodes, &pnode, &plocal, &psize);
        if (simulated) {
            snprintf(expect_host, sizeof expect_host, "%s-node%d", host, pnode);
        } else {
            snprintf(expect_host, sizeof expect_host, "%s", host);
        }
        PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)r);
        val = NULL;
        rc = PMIx_Get(&peer, PMIX_HOSTNAME, &info, 1, &val);
        EXPECT(rc == PMIX_SUCCESS && val->type == PMIX_STRING &&
                   strcmp(val->data.string, expect_host) == 0,
               "rank %u: PMIX_HOSTNAME of rank %d is '%s' (%s), expected '%s'", me.rank, r,
               rc == PMIX_SUCCESS && val->type == PMIX_STRING ? val->data.string : "?",
               PMIx_Error_string(rc), expect_host);
        if (val != NULL) {
            PMIX_VALUE_RELEASE(val);
        }
    }
    PMIX_INFO_DESTRUCT(&info);

    /* Data exchange through a collecting fence. */
    snprintf(payload, sizeof payload, "payload-of-rank-%u-%u", me.rank, me.rank * 7919u);
    PMIX_VALUE_LOAD(&value, payload, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, "tnt.test.payload", &value);
    PMIX_VALUE_DESTRUCT(&value);
    EXPECT(rc == PMIX_SUCCESS, "Put failed: %s", PMIx_Error_string(rc));
    rc = PMIx_Commit();
    EXPECT(rc == PMIX_SUCCESS, "Commit failed: %s", PMIx_Error_string(rc));
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(NULL, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    EXPECT(rc == PMIX_SUCCESS, "Fence failed: %s", PMIx_Error_string(rc));
    for (int r = 0; r < size; r++) {
        char expect[128];

        snprintf(expect, sizeof expect, "payload-of-rank-%d-%u", r, (unsigned)r * 7919u);
        PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)r);
        val = NULL;
        rc = PMIx_Get(&peer, "tnt.test.payload", NULL, 0, &val);
        EXPECT(
            rc == PMIX_SUCCESS && val->type == PMIX_STRING && strcmp(val->data.string, expect) == 0,
            "rank %u: payload of rank %d wrong or missing (%s)", me.rank, r, PMIx_Error_string(rc));
        if (val != NULL) {
            PMIX_VALUE_RELEASE(val);
        }
    }
    /* A second, non-collecting fence: a plain barrier. */
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    EXPECT(rc == PMIX_SUCCESS, "barrier Fence failed: %s", PMIx_Error_string(rc));

    if ((int)me.rank == abort_rank) {
        char message[64];

        snprintf(message, sizeof message, "drill abort from rank %u", me.rank);
        if (abort_echo) {
            fprintf(stderr, "tarantella: %s\n", message);
        } else {
            fprintf(stderr, "rank %u aborting\n", me.rank);
        }
        PMIx_Abort(5, message, NULL, 0);
        return 99; /* PMIx_Abort returned: the server did not kill us */
    }
    if ((int)me.rank == exit_rank) {
        fprintf(stderr, "rank %u exits with %d\n", me.rank, exit_code);
        _exit(exit_code);
    }
    if (sleep_s > 0) {
        struct timespec ts = { .tv_sec = (time_t)sleep_s,
                               .tv_nsec = (long)((sleep_s - (double)(time_t)sleep_s) * 1e9) };

        printf("rank %u sleeping\n", me.rank);
        fflush(stdout);
        while (nanosleep(&ts, &ts) != 0) {
            ;
        }
    }
    PMIx_Finalize(NULL, 0);
    if (check_failures > 0) {
        return 1;
    }
    printf("rank %u ok\n", me.rank);
    return 0;
}
