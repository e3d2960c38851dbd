/*
 * Communicators without PMIx, and communicators made from communicators:
 * this program forks its ranks itself and bootstraps them with
 * tnt_comm_create_oob over a small store of its own (files in a fresh
 * directory; a round is one file per rank, written whole with rename), the
 * way a torch c10d Store or any key-value store would carry it. Ranks can
 * claim different hostnames, so one machine holds several "nodes" and the
 * communicators use UCX between them.
 *
 *   comm_check --ranks N [--nodes K] [--cyclic] [--nonblocking] --mode M
 *
 * Modes:
 *   basic      create, check layout, allreduce / allgather / broadcast
 *   split      split by parity with reversed keys, TNT_COLOR_NONE, dup,
 *              dup of a split, the parent finalized first
 *   set        the collective set against serial references, and its bad
 *              inputs (collective_set.h), on the communicator and on a split
 *   threads    two communicators used at once from two threads of a rank
 *   cost       (a measurement, not a check) what one more communicator
 *              costs a rank: creation time, memory, descriptors, threads,
 *              for dups of the whole communicator and one-rank splits
 *   bad-color  rank 1 passes color -5: every rank fails, naming rank 1
 *   hang[-OP]  on a split, rank 1 never joins an allreduce (or OP, as in
 *              dies-OP): the others of its communicator end at TNT_TIMEOUT
 *              with a verdict that names the communicator and its rank 0
 *              (world rank 1), and the other communicator goes on
 *   hang-eager the same with an 8 B gather to that rank: the senders return
 *              at once, and their tnt_finalize ends at TNT_TIMEOUT with
 *              the verdict
 *   dies-[small-]OP  on a split of 6 ranks by parity, world rank 3 (rank 1 of
 *              oob.1) is killed (SIGKILL) as it would make its third call
 *              of OP (reduce, reduce_scatter, gather, scatter, allgatherv,
 *              alltoall, alltoallv; roots are rank 0; 16 KiB blocks, or 8 B
 *              with small-): the other ranks of
 *              oob.1 fail with TNT_ERR_PEER_FAILED naming the communicator
 *              within seconds (TNT_TIMEOUT is long here), a rank whose
 *              part was handed off before the death at the latest on its
 *              next call that waits (eager senders run several calls
 *              ahead: a barrier after the last; across nodes already in
 *              the second call, whose last message the kill may lose with
 *              its connection); the other communicator goes on
 *   bad-oob    NULL allgather, rank out of range: clear errors, no hang
 *   timeout    rank N-1 never joins: the others fail with TNT_ERR_TIMEOUT
 *              within TNT_TIMEOUT (non-blocking exchange)
 */
#include <tnt/tnt.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;
#define CHECK_PROGRAM "comm_check"
#define CHECK_RANK    g_rank
#include "check.h"
#include "collective_set.h"
#include "file_store.h"

/* --cyclic: rank r on node r % nodes (a node's ranks are not consecutive),
 * else blocks of consecutive ranks. */
static int g_cyclic;

static tnt_comm_t *create(struct file_store *store, int nodes, int nonblocking)
{
    char host[64];
    snprintf(host, sizeof(host), "oob-node%d",
             g_cyclic ? store->rank % nodes : store->rank * nodes / store->size);
    tnt_oob_t oob = {
        .allgather = nonblocking ? store_allgather_nb : store_allgather,
        .test = nonblocking ? store_test : NULL,
        .req_free = nonblocking ? store_req_free : NULL,
        .ctx = store,
        .rank = store->rank,
        .size = store->size,
        .job_id = "comm_check",
        .hostname = host,
    };
    tnt_comm_t *comm = NULL;
    CHECK_OK(tnt_comm_create_oob(&oob, &comm));
    return comm;
}

/* Allreduce, allgather and broadcast on comm, whose rank i is parent rank
 * members[i]: results that only the right membership gives. */
static void check_collectives(tnt_comm_t *comm, const int *members, const char *what)
{
    int size = tnt_size(comm), me = tnt_rank(comm);
    int64_t mine = members[me], sum = 0, expect = 0;
    for (int i = 0; i < size; i++) {
        expect += members[i];
    }
    CHECK_OK(tnt_allreduce(comm, &mine, &sum, 1, TNT_INT64, TNT_SUM));
    CHECK(sum == expect, "%s: allreduce gave %lld, expected %lld", what, (long long)sum,
          (long long)expect);
    int32_t *all = calloc((size_t)size, sizeof(*all)), v = members[me];
    CHECK(all != NULL, "calloc");
    CHECK_OK(tnt_allgather(comm, &v, all, sizeof(v)));
    for (int i = 0; i < size; i++) {
        CHECK(all[i] == members[i], "%s: allgather block %d is %d, expected parent rank %d", what,
              i, all[i], members[i]);
    }
    free(all);
    int64_t b = me == size - 1 ? 4242 + size : -1;
    CHECK_OK(tnt_broadcast(comm, &b, sizeof(b), size - 1));
    CHECK(b == 4242 + size, "%s: broadcast gave %lld", what, (long long)b);
    /* A larger allreduce: the transports' bulk paths, not only the small one. */
    enum { COUNT = 300007 };
    float *x = malloc(COUNT * sizeof(float));
    CHECK(x != NULL, "malloc");
    for (int i = 0; i < COUNT; i++) {
        x[i] = (float)(members[me] + 1) * (float)(i % 7);
    }
    CHECK_OK(tnt_allreduce(comm, x, x, COUNT, TNT_FLOAT32, TNT_SUM));
    float scale = (float)(expect + size);
    for (int i = 0; i < COUNT; i++) {
        CHECK(x[i] == scale * (float)(i % 7), "%s: element %d is %g, expected %g", what, i,
              (double)x[i], (double)(scale * (float)(i % 7)));
    }
    free(x);
}

static void mode_basic(tnt_comm_t *world, int nodes)
{
    int size = tnt_size(world);
    CHECK(tnt_rank(world) == g_rank, "rank %d", tnt_rank(world));
    CHECK(tnt_num_nodes(world) == nodes, "%d nodes, expected %d", tnt_num_nodes(world), nodes);
    CHECK(strcmp(tnt_comm_name(world), "oob") == 0, "name %s", tnt_comm_name(world));
    int *members = malloc((size_t)size * sizeof(int));
    for (int i = 0; i < size; i++) {
        members[i] = i;
    }
    check_collectives(world, members, "oob world");
    free(members);
}

static void mode_split(tnt_comm_t *world)
{
    int size = tnt_size(world);
    int color = g_rank % 2;
    tnt_comm_t *half = NULL, *dup = NULL, *none = NULL, *dup_of_half = NULL;

    /* Reversed keys: the highest parent rank of each color is rank 0. */
    CHECK_OK(tnt_comm_split(world, color, size - g_rank, &half));
    CHECK(half != NULL, "no communicator for color %d", color);
    int half_size = (size - color + 1) / 2;
    int members[64], n = 0;
    for (int r = size - 1; r >= 0; r--) {
        if (r % 2 == color) {
            members[n++] = r;
        }
    }
    CHECK(tnt_size(half) == half_size && n == half_size, "split size %d, expected %d",
          tnt_size(half), half_size);
    CHECK(members[tnt_rank(half)] == g_rank, "split rank %d is parent rank %d, not %d",
          tnt_rank(half), members[tnt_rank(half)], g_rank);
    char name[64];
    snprintf(name, sizeof(name), "oob.%d", color);
    CHECK(strcmp(tnt_comm_name(half), name) == 0, "name %s, expected %s", tnt_comm_name(half),
          name);
    check_collectives(half, members, "split");

    /* The parent still works, and its collectives do not mix with the
     * child's. */
    int all[64];
    for (int i = 0; i < size; i++) {
        all[i] = i;
    }
    check_collectives(world, all, "parent after split");

    /* Rank 0 wants none: NULL for it, the others get one without it. */
    CHECK_OK(tnt_comm_split(world, g_rank == 0 ? TNT_COLOR_NONE : 7, 0, &none));
    if (g_rank == 0) {
        CHECK(none == NULL, "TNT_COLOR_NONE gave a communicator");
    } else {
        CHECK(none != NULL && tnt_size(none) == size - 1 && tnt_rank(none) == g_rank - 1,
              "without rank 0: size %d rank %d", tnt_size(none), tnt_rank(none));
        check_collectives(none, all + 1, "without rank 0");
    }

    CHECK_OK(tnt_comm_dup(world, &dup));
    CHECK(strcmp(tnt_comm_name(dup), "oob.dup0") == 0, "dup name %s", tnt_comm_name(dup));
    CHECK_OK(tnt_comm_dup(half, &dup_of_half));
    check_collectives(dup_of_half, members, "dup of split");

    /* Each communicator stands alone once made: free the parent first. */
    tnt_finalize(world);
    check_collectives(dup, all, "dup after its parent was freed");
    check_collectives(half, members, "split after its parent was freed");
    tnt_finalize(dup_of_half);
    tnt_finalize(dup);
    tnt_finalize(none);
    tnt_finalize(half);
}

struct thread_arg {
    tnt_comm_t *comm;
    int rounds;
    tnt_status_t status;
    int wrong;
    char error[1024];
};

static void *allreduce_rounds(void *p)
{
    struct thread_arg *a = p;
    int size = tnt_size(a->comm);
    for (int i = 0; i < a->rounds && a->status == TNT_OK; i++) {
        int64_t v[257], expect = (int64_t)size * (size - 1) / 2 + (int64_t)i * size;
        for (int j = 0; j < 257; j++) {
            v[j] = tnt_rank(a->comm) + i;
        }
        a->status = tnt_allreduce(a->comm, v, v, 257, TNT_INT64, TNT_SUM);
        if (a->status != TNT_OK) {
            snprintf(a->error, sizeof(a->error), "%s", tnt_last_error());
        }
        a->wrong += a->status == TNT_OK && (v[0] != expect || v[256] != expect);
    }
    return NULL;
}

static void mode_threads(tnt_comm_t *world)
{
    tnt_comm_t *a = NULL, *b = NULL;
    CHECK_OK(tnt_comm_dup(world, &a));
    CHECK_OK(tnt_comm_dup(world, &b));
    struct thread_arg ta = { a, 300, TNT_OK, 0, "" }, tb = { b, 300, TNT_OK, 0, "" };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, allreduce_rounds, &ta) == 0, "pthread_create");
    allreduce_rounds(&tb);
    pthread_join(t, NULL);
    CHECK(ta.status == TNT_OK && tb.status == TNT_OK, "threads: %s / %s", ta.error, tb.error);
    CHECK(ta.wrong == 0 && tb.wrong == 0, "threads: %d + %d wrong sums", ta.wrong, tb.wrong);
    tnt_finalize(a);
    tnt_finalize(b);
}

static long proc_status_value(const char *key)
{
    char line[256];
    long value = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0) {
            value = atol(line + strlen(key));
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return value;
}

static int count_entries(const char *path)
{
    int n = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

struct cost_sample {
    long rss_kb;
    long mapped_kb;
    int fds;
    long threads;
    double t;
};

/* Seconds on the monotonic clock. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cost_sample(struct cost_sample *c)
{
    c->t = now_s();
    c->rss_kb = proc_status_value("VmRSS:");
    c->mapped_kb = proc_status_value("VmSize:");
    c->threads = proc_status_value("Threads:");
    c->fds = count_entries("/proc/self/fd");
}

/* Makes n communicators (dups of world, or one-rank splits), uses each
 * once (posted, so that its progress thread starts), and reports the
 * average cost of one on rank 0. */
static void cost_of(tnt_comm_t *world, int n, int one_rank, const char *what)
{
    tnt_comm_t **comms = calloc((size_t)n, sizeof(*comms));
    struct cost_sample before, made, used;
    CHECK(comms != NULL, "calloc");
    CHECK_OK(tnt_barrier(world));
    cost_sample(&before);
    for (int i = 0; i < n; i++) {
        CHECK_OK(one_rank ? tnt_comm_split(world, g_rank, 0, &comms[i])
                          : tnt_comm_dup(world, &comms[i]));
    }
    cost_sample(&made);
    for (int i = 0; i < n; i++) {
        float x = 1;
        tnt_request_t *req;
        CHECK_OK(tnt_allreduce_post(comms[i], &x, &x, 1, TNT_FLOAT32, TNT_SUM, &req));
        CHECK_OK(tnt_wait(req));
    }
    cost_sample(&used);
    int shm = count_entries("/dev/shm");
    if (g_rank == 0) {
        printf("cost: %s (%d ranks, %d node(s)): per communicator %.2f ms to make, %.0f KiB of "
               "memory once used (%.0f KiB mapped), %.1f file descriptors, %.1f threads once "
               "used; /dev/shm entries now %d\n",
               what, tnt_size(world), tnt_num_nodes(world), 1e3 * (made.t - before.t) / n,
               (double)(used.rss_kb - before.rss_kb) / n,
               (double)(used.mapped_kb - before.mapped_kb) / n, (double)(used.fds - before.fds) / n,
               (double)(used.threads - before.threads) / n, shm);
        fflush(stdout);
    }
    for (int i = 0; i < n; i++) {
        tnt_finalize(comms[i]);
    }
    free(comms);
}

static void mode_cost(tnt_comm_t *world)
{
    cost_of(world, 16, 0, "dup of the whole communicator");
    cost_of(world, 16, 1, "one-rank split");
}

static void mode_bad_color(tnt_comm_t *world)
{
    tnt_comm_t *child = (tnt_comm_t *)&child;
    tnt_status_t st = tnt_comm_split(world, g_rank == 1 ? -5 : 0, 0, &child);
    CHECK(st == TNT_ERR_INVALID_ARG, "bad color gave %s", tnt_status_string(st));
    CHECK(child == NULL, "bad color left a communicator");
    CHECK(strstr(tnt_last_error(), "rank 1") != NULL && strstr(tnt_last_error(), "-5") != NULL,
          "the error does not name rank 1 and color -5: %s", tnt_last_error());
    /* Found before anything was made: the parent goes on. */
    int all[64];
    for (int i = 0; i < tnt_size(world); i++) {
        all[i] = i;
    }
    check_collectives(world, all, "after a bad color");
}

static tnt_status_t call_op(tnt_comm_t *comm, const char *op, int32_t *in, int32_t *out,
                            size_t count);

/* op NULL: an allreduce. */
static void mode_hang(tnt_comm_t *world, const char *op)
{
    tnt_comm_t *half = NULL;
    int color = g_rank % 2;
    CHECK_OK(tnt_comm_split(world, color, g_rank, &half));
    if (color == 1 && g_rank == 1) {
        /* Rank 0 of oob.1 stays away (long enough for the others to give
         * up), then leaves without finalizing. */
        sleep(8);
        _exit(0);
    }
    int64_t one = 1, sum = 0;
    int32_t in[STORE_MAX_RANKS * 16] = { 0 }, out[STORE_MAX_RANKS * 16];
    tnt_status_t st = op == NULL ? tnt_allreduce(half, &one, &sum, 1, TNT_INT64, TNT_SUM)
                                 : call_op(half, op, in, out, 16);
    if (op != NULL && st == TNT_OK) {
        sum = tnt_size(half);
    }
    if (color == 0) {
        CHECK(st == TNT_OK && sum == tnt_size(half), "the other communicator: %s, sum %lld",
              tnt_status_string(st), (long long)sum);
        tnt_finalize(half);
        return;
    }
    CHECK(st == TNT_ERR_TIMEOUT, "a rank that never joins %s gave %s: %s",
          op != NULL ? op : "allreduce", tnt_status_string(st), tnt_last_error());
    CHECK(strstr(tnt_last_error(), "communicator oob.1") != NULL &&
              strstr(tnt_last_error(), "rank 0") != NULL,
          "the verdict does not name communicator oob.1 and its rank 0: %s", tnt_last_error());
    _exit(0); /* the communicator is broken; its peer is gone */
}

/* The eager form of mode_hang: the root of an 8 B gather on a split never
 * calls it. The senders hand their part off and return at once; their
 * tnt_finalize then waits for the root, and must end at TNT_TIMEOUT with
 * the hang doctor's verdict naming the split's rank 0, as a blocking call
 * would, rather than wait without one. */
static void mode_hang_eager(tnt_comm_t *world)
{
    tnt_comm_t *half = NULL;
    int color = g_rank % 2;
    CHECK_OK(tnt_comm_split(world, color, g_rank, &half));
    if (color == 1 && g_rank == 1) {
        sleep(8); /* rank 0 of oob.1, the gather's root, stays away */
        _exit(0);
    }
    int32_t mine = g_rank, all[STORE_MAX_RANKS];
    tnt_status_t st = tnt_gather(half, &mine, all, sizeof mine, 0);
    CHECK(st == TNT_OK, "gather: %s: %s", tnt_status_string(st), tnt_last_error());
    if (color == 0) {
        tnt_finalize(half);
        return;
    }
    double t0 = now_s();
    tnt_finalize(half);
    double waited = now_s() - t0;
    CHECK(waited < 6.0, "tnt_finalize waited %.1f s for the root (TNT_TIMEOUT=3)", waited);
    CHECK(strstr(tnt_last_error(), "communicator oob.1") != NULL &&
              strstr(tnt_last_error(), "rank 0") != NULL &&
              strstr(tnt_last_error(), "gather") != NULL,
          "finalize after an eager gather whose root never came: no verdict naming "
          "communicator oob.1, its rank 0 and the gather: %s", tnt_last_error());
    _exit(0); /* the communicator is broken; its peer is gone */
}

/* One call of the collective `op` on comm, every block `count` int32s. */
static tnt_status_t call_op(tnt_comm_t *comm, const char *op, int32_t *in, int32_t *out,
                            size_t count)
{
    int n = tnt_size(comm);
    size_t bytes = count * sizeof(int32_t), sizes[STORE_MAX_RANKS];
    for (int r = 0; r < n; r++) {
        sizes[r] = bytes;
    }
    if (strcmp(op, "reduce") == 0) {
        return tnt_reduce(comm, in, out, count, TNT_INT32, TNT_SUM, 0);
    } else if (strcmp(op, "reduce_scatter") == 0) {
        return tnt_reduce_scatter(comm, in, out, count, TNT_INT32, TNT_SUM);
    } else if (strcmp(op, "gather") == 0) {
        return tnt_gather(comm, in, out, bytes, 0);
    } else if (strcmp(op, "scatter") == 0) {
        return tnt_scatter(comm, in, out, bytes, 0);
    } else if (strcmp(op, "allgatherv") == 0) {
        return tnt_allgatherv(comm, in, out, sizes);
    } else if (strcmp(op, "alltoall") == 0) {
        return tnt_alltoall(comm, in, out, bytes);
    } else if (strcmp(op, "alltoallv") == 0) {
        return tnt_alltoallv(comm, in, sizes, out, sizes);
    }
    CHECK(0, "unknown collective %s", op);
    return TNT_ERR_INVALID_ARG;
}

static void mode_dies(tnt_comm_t *world, const char *op, int nodes)
{
    enum { CALLS = 6 };
    /* dies-small-OP: 8 B blocks, which gather, scatter and reduce send
     * eagerly on one node (c-api.md, "Eager rooted calls"). */
    int small = strncmp(op, "small-", 6) == 0;
    size_t count = small ? 2 : 4096;
    op += small ? 6 : 0;
    tnt_comm_t *half = NULL;
    int color = g_rank % 2, failed_at = -1;
    CHECK(tnt_size(world) == 6, "dies-%s wants 6 ranks", op);
    CHECK_OK(tnt_comm_split(world, color, g_rank, &half));
    int32_t *in = calloc(STORE_MAX_RANKS * count, sizeof(int32_t));
    int32_t *out = calloc(STORE_MAX_RANKS * count, sizeof(int32_t));
    CHECK(in != NULL && out != NULL, "out of memory");
    for (int call = 0; call < CALLS && failed_at < 0; call++) {
        if (g_rank == 3 && call == 2) {
            raise(SIGKILL);
        }
        double t0 = now_s();
        tnt_status_t st = call_op(half, op, in, out, count);
        double s = now_s() - t0;
        /* Across nodes the dying rank's last call may fail too: its part
         * of call #2 was handed to UCX, which the kill may stop on the way
         * (a TCP connection closed with unread data is reset, and what it
         * still held is lost), so the receiver learns of the death there. */
        if (color == 0 || call < (nodes > 1 ? 1 : 2)) {
            CHECK(st == TNT_OK, "%s #%d on oob.%d: %s: %s", op, call, color,
                  tnt_status_string(st), st == TNT_OK ? "" : tnt_last_error());
            continue;
        }
        if (st == TNT_OK) {
            continue; /* handed off before the death; the next call must fail */
        }
        failed_at = call;
        CHECK(st == TNT_ERR_PEER_FAILED, "%s after rank 1 of oob.1 died gave %s: %s", op,
              tnt_status_string(st), tnt_last_error());
        CHECK(strstr(tnt_last_error(), "oob.1") != NULL,
              "%s: the verdict does not name communicator oob.1: %s", op, tnt_last_error());
        CHECK(s < 10, "%s took %.1f s to fail after rank 1 of oob.1 died", op, s);
    }
    if (small && color == 1 && failed_at < 0) {
        /* A sender of eager calls runs several calls ahead without
         * waiting (c-api.md, "Eager rooted calls"): it learns of the death
         * in its next call that waits, as fast. */
        double t0 = now_s();
        tnt_status_t st = tnt_barrier(half);
        double s = now_s() - t0;
        CHECK(st == TNT_ERR_PEER_FAILED && strstr(tnt_last_error(), "oob.1") != NULL && s < 10,
              "%s: the barrier after the eager sends gave %s after %.1f s: %s", op,
              tnt_status_string(st), s, st == TNT_OK ? "" : tnt_last_error());
        failed_at = CALLS;
    }
    CHECK(color == 0 || failed_at == 2 || failed_at == 3 || (nodes > 1 && failed_at == 1) ||
              (small && failed_at == CALLS),
          "%s on oob.1: the death was not reported by call #3 (failed at #%d)", op, failed_at + 1);
    free(in);
    free(out);
    if (color == 1) {
        _exit(0); /* its communicator is broken; its peer is gone */
    }
    tnt_finalize(half);
}

static void mode_bad_oob(void)
{
    tnt_comm_t *comm = NULL;
    tnt_oob_t oob = { .rank = 0, .size = 2 };
    tnt_status_t st = tnt_comm_create_oob(&oob, &comm);
    CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "allgather") != NULL,
          "NULL allgather: %s: %s", tnt_status_string(st), tnt_last_error());
    oob.allgather = store_allgather;
    oob.rank = 2;
    st = tnt_comm_create_oob(&oob, &comm);
    CHECK(st == TNT_ERR_INVALID_ARG && strstr(tnt_last_error(), "rank 2 of size 2") != NULL,
          "rank out of range: %s: %s", tnt_status_string(st), tnt_last_error());
    CHECK(tnt_comm_create_oob(NULL, &comm) == TNT_ERR_INVALID_ARG, "NULL oob accepted");
    CHECK(comm == NULL, "a failed create left a communicator");
}

static int run_rank(const char *dir, int rank, int size, int nodes, int nonblocking,
                    const char *mode)
{
    struct file_store store = { dir, rank, size, 0 };
    g_rank = rank;
    if (strcmp(mode, "bad-oob") == 0) {
        mode_bad_oob();
        return 0;
    }
    if (strcmp(mode, "timeout") == 0) {
        if (rank == size - 1) {
            return 0; /* never joins */
        }
        tnt_oob_t oob = { .allgather = store_allgather_nb,
                          .test = store_test,
                          .req_free = store_req_free,
                          .ctx = &store,
                          .rank = rank,
                          .size = size };
        tnt_comm_t *comm = NULL;
        double t0 = now_s();
        tnt_status_t st = tnt_comm_create_oob(&oob, &comm);
        double s = now_s() - t0;
        CHECK(st == TNT_ERR_TIMEOUT && comm == NULL, "a missing rank gave %s: %s",
              tnt_status_string(st), tnt_last_error());
        CHECK(strstr(tnt_last_error(), "TNT_TIMEOUT") != NULL,
              "the error does not name "
              "TNT_TIMEOUT: %s",
              tnt_last_error());
        CHECK(s < 15, "the timeout took %.1f s", s);
        return 0;
    }
    tnt_comm_t *world = create(&store, nodes, nonblocking);
    if (strcmp(mode, "basic") == 0) {
        mode_basic(world, nodes);
    } else if (strcmp(mode, "split") == 0) {
        mode_split(world);
        return 0; /* mode_split freed world */
    } else if (strcmp(mode, "threads") == 0) {
        mode_threads(world);
    } else if (strcmp(mode, "set") == 0) {
        check_collective_set(world);
        tnt_comm_t *half = NULL;
        CHECK_OK(tnt_comm_split(world, g_rank % 2, g_rank, &half));
        check_collective_set(half);
        tnt_finalize(half);
    } else if (strcmp(mode, "hang") == 0) {
        mode_hang(world, NULL);
    } else if (strcmp(mode, "hang-eager") == 0) {
        mode_hang_eager(world);
    } else if (strncmp(mode, "hang-", 5) == 0) {
        mode_hang(world, mode + 5);
    } else if (strncmp(mode, "dies-", 5) == 0) {
        mode_dies(world, mode + 5, nodes);
    } else if (strcmp(mode, "cost") == 0) {
        mode_cost(world);
    } else if (strcmp(mode, "bad-color") == 0) {
        mode_bad_color(world);
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    tnt_finalize(world);
    return 0;
}

struct forked_args {
    int size, nodes, nonblocking;
    const char *mode;
};

static int run_forked_rank(const char *dir, int rank, void *arg)
{
    const struct forked_args *a = arg;
    return run_rank(dir, rank, a->size, a->nodes, a->nonblocking, a->mode);
}

int main(int argc, char **argv)
{
    int ranks = 2, nodes = 1, nonblocking = 0;
    const char *mode = "basic";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            ranks = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
            nodes = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--nonblocking") == 0) {
            nonblocking = 1;
        } else if (strcmp(argv[i], "--cyclic") == 0) {
            g_cyclic = 1; /* inherited by the forked ranks */
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            mode = argv[++i];
        } else {
            fprintf(stderr, "comm_check: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    CHECK(ranks >= 1 && ranks <= STORE_MAX_RANKS && nodes >= 1 && nodes <= ranks,
          "bad --ranks/--nodes");
    struct forked_args args = {
        .size = ranks, .nodes = nodes, .nonblocking = nonblocking, .mode = mode
    };
    /* In the dies-* modes world rank 3 must end by SIGKILL. */
    int failed = store_fork_ranks_killing("comm_check", ranks, strncmp(mode, "dies-", 5) == 0 ? 3 : -1,
                                          run_forked_rank, &args, NULL);
    if (!failed) {
        printf("comm_check: %s on %d ranks, %d node(s)%s%s: OK\n", mode, ranks, nodes,
               g_cyclic ? " (cyclic)" : "", nonblocking ? ", non-blocking exchange" : "");
    }
    return failed;
}
