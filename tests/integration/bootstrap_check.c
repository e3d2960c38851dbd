/*
 * bootstrap_check: started by a launcher (or alone, as a singleton), checks
 * that tnt_init found the same rank, size, local rank, local size and node as
 * the launcher says, then runs each collective once, blocking and
 * nonblocking, and checks the results.
 *
 *   bootstrap_check [--launcher auto|none|ompi|slurm|tnt] [--expect-size N]
 *                   [--expect-nodes N] [--check-args] [--skip-barrier-rank R]
 *
 * --launcher: where the expected values come from. ompi: OMPI_COMM_WORLD_*;
 *   slurm: SLURM_PROCID/NTASKS/LOCALID/NODEID/NNODES; tnt: the tarantella
 *   launcher (PMIX_RANK; with --expect-nodes 1 the local rank and size are
 *   the rank and size); none: a singleton (rank 0 of 1). auto picks by the
 *   variables present.
 * --check-args: also checks the argument errors of the API (no
 *   communication involved).
 * --late-init-rank R: the bootstrap timeout test. Rank R (by PMIX_RANK)
 *   calls tnt_init only after TNT_TIMEOUT + 3 s; every other rank's
 *   tnt_init must fail with TNT_ERR_TIMEOUT within a few seconds, naming the
 *   bootstrap allgather and rank R.
 * --abort-rank R: rank R calls tnt_abort(comm, 3, ...) right after
 *   tnt_init while the others wait in a barrier; the launcher must stop the
 *   whole job (checked by the caller: non-zero exit, the message printed).
 * --skip-barrier-rank R: the timeout test. Rank R skips a barrier and sleeps
 *   TNT_TIMEOUT + 3 s; every other rank must fail that barrier with
 *   TNT_ERR_TIMEOUT within a few seconds, with a message naming the barrier
 *   ("barrier #N") and rank R, and later collectives must fail at once.
 *
 * Exits 0 when every check passed; prints what failed otherwise.
 */
#include <tnt/tnt.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int my_rank = -1;

#define CHECK_PROGRAM "bootstrap_check"
#define CHECK_RANK    my_rank
#include "check.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

static double env_timeout(const char *flag)
{
    const char *t = getenv("TNT_TIMEOUT");
    double timeout = t != NULL ? atof(t) : 0;
    if (timeout <= 0 || timeout > 30) {
        fprintf(stderr, "bootstrap_check: %s needs TNT_TIMEOUT between 0 and 30\n", flag);
        exit(2);
    }
    return timeout;
}

struct expected {
    int rank, size, local_rank, local_size, node_id, num_nodes; /* -1: not known */
};

static struct expected expected_from(const char *launcher)
{
    struct expected e = { -1, -1, -1, -1, -1, -1 };
    if (strcmp(launcher, "auto") == 0) {
        if (getenv("OMPI_COMM_WORLD_SIZE") != NULL) {
            launcher = "ompi";
        } else if (getenv("SLURM_PROCID") != NULL && getenv("PMIX_NAMESPACE") != NULL) {
            launcher = "slurm";
        } else if (getenv("PMIX_NAMESPACE") != NULL) {
            launcher = "tnt";
        } else {
            launcher = "none";
        }
    }
    if (strcmp(launcher, "none") == 0) {
        e = (struct expected){ 0, 1, 0, 1, 0, 1 };
    } else if (strcmp(launcher, "ompi") == 0) {
        e.rank = env_int("OMPI_COMM_WORLD_RANK", -1);
        e.size = env_int("OMPI_COMM_WORLD_SIZE", -1);
        e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
        e.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", -1);
    } else if (strcmp(launcher, "slurm") == 0) {
        e.rank = env_int("SLURM_PROCID", -1);
        e.size = env_int("SLURM_NTASKS", -1);
        e.local_rank = env_int("SLURM_LOCALID", -1);
        e.node_id = env_int("SLURM_NODEID", -1);
        e.num_nodes = env_int("SLURM_NNODES", -1);
    } else if (strcmp(launcher, "tnt") == 0) {
        /* The tarantella launcher's PMIx server exports PMIX_RANK to each
         * child; the rest follows from --expect-size and --expect-nodes. */
        e.rank = env_int("PMIX_RANK", -1);
    } else {
        fprintf(stderr, "bootstrap_check: unknown launcher '%s'\n", launcher);
        exit(2);
    }
    return e;
}

static void check_layout(tnt_comm_t *comm, struct expected e)
{
    int rank = tnt_rank(comm), size = tnt_size(comm);
    EXPECT(size >= 1 && rank >= 0 && rank < size, "rank %d of size %d", rank, size);
    EXPECT(tnt_local_rank(comm) >= 0 && tnt_local_rank(comm) < tnt_local_size(comm),
           "local rank %d of %d", tnt_local_rank(comm), tnt_local_size(comm));
    EXPECT(tnt_node_id(comm) >= 0 && tnt_node_id(comm) < tnt_num_nodes(comm), "node %d of %d",
           tnt_node_id(comm), tnt_num_nodes(comm));
    EXPECT(tnt_hostname(comm)[0] != '\0', "empty hostname");
#define EXPECT_FIELD(field, value)                                                            \
    EXPECT(e.field < 0 || e.field == (value), #field " is %d, the launcher says %d", (value), \
           e.field)
    EXPECT_FIELD(rank, rank);
    EXPECT_FIELD(size, size);
    EXPECT_FIELD(local_rank, tnt_local_rank(comm));
    EXPECT_FIELD(local_size, tnt_local_size(comm));
    EXPECT_FIELD(node_id, tnt_node_id(comm));
    EXPECT_FIELD(num_nodes, tnt_num_nodes(comm));
#undef EXPECT_FIELD
}

static void check_collectives(tnt_comm_t *comm)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    enum { N = 1000 };
    static float f[N], g[N];
    static double d[N];
    static int64_t l[N];

    EXPECT_OK(tnt_barrier(comm));

    /* float32 sum, out of place and in place. */
    for (int i = 0; i < N; i++) {
        f[i] = (float)(rank + 1) * (float)(i % 7);
    }
    EXPECT_OK(tnt_allreduce(comm, f, g, N, TNT_FLOAT32, TNT_SUM));
    float tri = (float)size * (float)(size + 1) / 2;
    for (int i = 0; i < N; i++) {
        if (g[i] != tri * (float)(i % 7)) {
            EXPECT(0, "float32 sum: element %d is %g, expected %g", i, g[i], tri * (i % 7));
            break;
        }
    }
    EXPECT_OK(tnt_allreduce(comm, f, f, N, TNT_FLOAT32, TNT_SUM));
    EXPECT(memcmp(f, g, sizeof(f)) == 0, "in-place float32 sum differs from out-of-place");

    /* int64 max and float64 average. */
    for (int i = 0; i < N; i++) {
        l[i] = (int64_t)rank * 1000003 - i;
        d[i] = (double)rank;
    }
    EXPECT_OK(tnt_allreduce(comm, l, l, N, TNT_INT64, TNT_MAX));
    EXPECT(l[5] == (int64_t)(size - 1) * 1000003 - 5, "int64 max: %lld", (long long)l[5]);
    EXPECT_OK(tnt_allreduce(comm, d, d, N, TNT_FLOAT64, TNT_AVG));
    EXPECT(fabs(d[N - 1] - (size - 1) / 2.0) < 1e-12, "float64 avg: %g, expected %g", d[N - 1],
           (size - 1) / 2.0);

    /* Broadcast from the last rank, an odd size. */
    unsigned char b[777];
    for (size_t i = 0; i < sizeof(b); i++) {
        b[i] = rank == size - 1 ? (unsigned char)(i * 31 + 7) : 0;
    }
    EXPECT_OK(tnt_broadcast(comm, b, sizeof(b), size - 1));
    for (size_t i = 0; i < sizeof(b); i++) {
        if (b[i] != (unsigned char)(i * 31 + 7)) {
            EXPECT(0, "broadcast: byte %zu is %u", i, b[i]);
            break;
        }
    }

    /* Allgather of 13 bytes per rank. */
    unsigned char mine[13];
    unsigned char *all = malloc(13 * (size_t)size);
    memset(mine, rank + 1, sizeof(mine));
    EXPECT_OK(tnt_allgather(comm, mine, all, sizeof(mine)));
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < 13; i++) {
            if (all[r * 13 + i] != (unsigned char)(r + 1)) {
                EXPECT(0, "allgather: rank %d's byte %d is %u", r, i, all[r * 13 + i]);
                r = size;
                break;
            }
        }
    }
    free(all);

    /* Nonblocking: post two, test until done, wait; then a posted operation
     * followed by a blocking one (which must run after it). */
    int32_t x[64], y[64];
    unsigned char bc[100];
    for (int i = 0; i < 64; i++) {
        x[i] = rank + i;
    }
    memset(bc, rank == 0 ? 0xab : 0, sizeof(bc));
    tnt_request_t *r1 = NULL, *r2 = NULL;
    EXPECT_OK(tnt_allreduce_post(comm, x, y, 64, TNT_INT32, TNT_SUM, &r1));
    EXPECT_OK(tnt_broadcast_post(comm, bc, sizeof(bc), 0, &r2));
    if (r1 != NULL && r2 != NULL) {
        double deadline = now_s() + 60;
        tnt_status_t s;
        while ((s = tnt_test(r2)) == TNT_IN_PROGRESS && now_s() < deadline) {
            usleep(100);
        }
        EXPECT(s == TNT_OK, "tnt_test(broadcast) = %d: %s", (int)s, tnt_last_error());
        /* r1 was posted first, so it is done too. */
        EXPECT(tnt_test(r1) == TNT_OK, "tnt_test(allreduce) not OK after a later request finished");
        EXPECT_OK(tnt_wait(r1));
        EXPECT_OK(tnt_wait(r2));
        for (int i = 0; i < 64; i++) {
            if (y[i] != size * (size - 1) / 2 + size * i) {
                EXPECT(0, "posted int32 sum: element %d is %d", i, y[i]);
                break;
            }
        }
        EXPECT(bc[0] == 0xab && bc[99] == 0xab, "posted broadcast: %x %x", bc[0], bc[99]);
    }
    for (int i = 0; i < 64; i++) {
        x[i] = 1;
    }
    tnt_request_t *r3 = NULL;
    EXPECT_OK(tnt_allreduce_post(comm, x, x, 64, TNT_INT32, TNT_SUM, &r3));
    int32_t z = rank;
    EXPECT_OK(tnt_allreduce(comm, &z, &z, 1, TNT_INT32, TNT_MAX));
    EXPECT(z == size - 1, "blocking max after a post: %d", z);
    if (r3 != NULL) {
        EXPECT(tnt_test(r3) == TNT_OK, "a blocking call returned before an earlier post finished");
        EXPECT_OK(tnt_wait(r3));
        EXPECT(x[63] == size, "posted in-place sum: %d", x[63]);
    }
    /* Empty operations complete at once. */
    tnt_request_t *r4 = NULL;
    EXPECT_OK(tnt_allreduce_post(comm, NULL, NULL, 0, TNT_FLOAT32, TNT_SUM, &r4));
    if (r4 != NULL) {
        EXPECT(tnt_test(r4) == TNT_OK, "count-0 post not complete");
        EXPECT_OK(tnt_wait(r4));
    }
    EXPECT_OK(tnt_barrier(comm));
}

#define EXPECT_ERR(expr, expected)                                                                \
    do {                                                                                          \
        tnt_status_t s_ = (expr);                                                                 \
        EXPECT(s_ == (expected), "%s returned %d, expected %d", #expr, (int)s_, (int)(expected)); \
        EXPECT(tnt_last_error()[0] != '\0', "%s left no tnt_last_error() message", #expr);        \
    } while (0)

static void check_args(tnt_comm_t *comm)
{
    float f[4] = { 0 };
    tnt_request_t *req = NULL;

    /* NULL communicator. */
    EXPECT_ERR(tnt_barrier(NULL), TNT_ERR_NOT_INITIALIZED);
    EXPECT_ERR(tnt_allreduce(NULL, f, f, 4, TNT_FLOAT32, TNT_SUM), TNT_ERR_NOT_INITIALIZED);
    EXPECT_ERR(tnt_broadcast(NULL, f, 4, 0), TNT_ERR_NOT_INITIALIZED);
    EXPECT_ERR(tnt_allgather(NULL, f, f, 4), TNT_ERR_NOT_INITIALIZED);
    EXPECT_ERR(tnt_allreduce_post(NULL, f, f, 4, TNT_FLOAT32, TNT_SUM, &req),
               TNT_ERR_NOT_INITIALIZED);
    EXPECT_ERR(tnt_broadcast_post(NULL, f, 4, 0, &req), TNT_ERR_NOT_INITIALIZED);
    EXPECT(strstr(tnt_last_error(), "tnt_init") != NULL,
           "message does not say to call tnt_init: %s", tnt_last_error());
    EXPECT(tnt_rank(NULL) == -1 && tnt_size(NULL) == -1, "getters on NULL");

    /* Bad dtype, op, root, buffers. */
    EXPECT_ERR(tnt_allreduce(comm, f, f, 4, (tnt_dtype_t)42, TNT_SUM), TNT_ERR_INVALID_ARG);
    EXPECT(strstr(tnt_last_error(), "dtype") != NULL, "message does not name dtype: %s",
           tnt_last_error());
    EXPECT_ERR(tnt_allreduce(comm, f, f, 4, TNT_FLOAT32, (tnt_op_t)-1), TNT_ERR_INVALID_ARG);
    EXPECT(strstr(tnt_last_error(), "op") != NULL, "message does not name op: %s",
           tnt_last_error());
    EXPECT_ERR(tnt_allreduce(comm, NULL, f, 4, TNT_FLOAT32, TNT_SUM), TNT_ERR_INVALID_ARG);
    EXPECT(strstr(tnt_last_error(), "sendbuf") != NULL, "message does not name sendbuf: %s",
           tnt_last_error());
    EXPECT_ERR(tnt_allreduce(comm, f, NULL, 4, TNT_FLOAT32, TNT_SUM), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allreduce(comm, f, f + 1, 2, TNT_FLOAT32, TNT_SUM), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allreduce(comm, f, f, SIZE_MAX / 2, TNT_FLOAT64, TNT_SUM), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_broadcast(comm, f, 4, tnt_size(comm)), TNT_ERR_INVALID_ARG);
    EXPECT(strstr(tnt_last_error(), "root") != NULL, "message does not name root: %s",
           tnt_last_error());
    EXPECT_ERR(tnt_broadcast(comm, f, 4, -1), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_broadcast(comm, NULL, 4, 0), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allgather(comm, NULL, f, 4), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allgather(comm, f, NULL, 4), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allreduce_post(comm, f, f, 4, TNT_FLOAT32, TNT_SUM, NULL), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_allreduce_post(comm, f, f, 4, TNT_DTYPE_LAST, TNT_SUM, &req),
               TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_broadcast_post(comm, f, 4, 99999, &req), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_test(NULL), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_wait(NULL), TNT_ERR_INVALID_ARG);
    EXPECT_ERR(tnt_init(NULL), TNT_ERR_INVALID_ARG);

    /* Count 0 is valid, even with NULL buffers. */
    EXPECT_OK(tnt_allreduce(comm, NULL, NULL, 0, TNT_FLOAT32, TNT_SUM));
    EXPECT_OK(tnt_broadcast(comm, NULL, 0, 0));
    EXPECT_OK(tnt_allgather(comm, NULL, NULL, 0));

    /* Status strings, sizes, version. */
    for (int s = TNT_IN_PROGRESS; s >= TNT_ERR_SYSTEM; s--) {
        const char *str = tnt_status_string((tnt_status_t)s);
        EXPECT(str != NULL && *str != '\0' && strcmp(str, "unknown status") != 0,
               "no string for status %d", s);
    }
    EXPECT(strcmp(tnt_status_string((tnt_status_t)-1000), "unknown status") == 0,
           "unknown status string");
    EXPECT(tnt_dtype_size(TNT_FLOAT32) == 4 && tnt_dtype_size(TNT_FLOAT64) == 8 &&
               tnt_dtype_size(TNT_FLOAT16) == 2 && tnt_dtype_size(TNT_BFLOAT16) == 2 &&
               tnt_dtype_size(TNT_INT32) == 4 && tnt_dtype_size(TNT_INT64) == 8 &&
               tnt_dtype_size(TNT_DTYPE_LAST) == 0,
           "tnt_dtype_size");
    char version[32];
    snprintf(version, sizeof(version), "%d.%d.%d", TNT_VERSION_MAJOR, TNT_VERSION_MINOR,
             TNT_VERSION_PATCH);
    EXPECT(strcmp(tnt_version(), version) == 0, "tnt_version() %s, header %s", tnt_version(),
           version);

    /* After all these errors the communicator still works. */
    EXPECT_OK(tnt_barrier(comm));
}

/* Does the message name rank r as a whole number (not as part of 12)? */
static int names_rank(const char *msg, int r)
{
    char num[16];
    snprintf(num, sizeof(num), "%d", r);
    for (const char *p = strstr(msg, num); p != NULL; p = strstr(p + 1, num)) {
        int before_ok = p == msg || !(p[-1] >= '0' && p[-1] <= '9');
        char after = p[strlen(num)];
        if (before_ok && !(after >= '0' && after <= '9')) {
            /* Skip the "rank R:" prefix of the message itself. */
            if (!(p - msg == 5 && strncmp(msg, "rank ", 5) == 0)) {
                return 1;
            }
        }
    }
    return 0;
}

static void check_timeout(tnt_comm_t *comm, int skip_rank)
{
    double timeout = env_timeout("--skip-barrier-rank");
    EXPECT_OK(tnt_barrier(comm)); /* everyone is here */
    if (tnt_rank(comm) == skip_rank) {
        /* Stay alive (a dead peer is a different error) until the others
         * have given up. */
        usleep((useconds_t)((timeout + 3) * 1e6));
        return;
    }
    double t0 = now_s();
    tnt_status_t s = tnt_barrier(comm);
    double elapsed = now_s() - t0;
    const char *msg = tnt_last_error();
    EXPECT(s == TNT_ERR_TIMEOUT,
           "barrier with rank %d missing returned %d (%s), expected "
           "TNT_ERR_TIMEOUT",
           skip_rank, (int)s, tnt_status_string(s));
    EXPECT(elapsed >= timeout - 0.5 && elapsed <= timeout + 5,
           "barrier gave up after %.1f s with TNT_TIMEOUT=%g", elapsed, timeout);
    /* The first barrier above was collective #1, this one is #2. */
    EXPECT(strstr(msg, "barrier #2 ") != NULL,
           "message does not name the collective "
           "(barrier #2): %s",
           msg);
    EXPECT(names_rank(msg, skip_rank), "message does not name missing rank %d: %s", skip_rank, msg);
    fprintf(stderr, "bootstrap_check[rank %d]: barrier failed as expected after %.1f s: %s\n",
            tnt_rank(comm), elapsed, msg);

    /* The ranks are out of step now: later collectives fail at once. */
    float f = 1;
    t0 = now_s();
    s = tnt_allreduce(comm, &f, &f, 1, TNT_FLOAT32, TNT_SUM);
    EXPECT(s < 0 && now_s() - t0 < 1.0,
           "allreduce after a failed barrier returned %d after "
           "%.1f s",
           (int)s, now_s() - t0);
}

static int check_late_init(int late_rank)
{
    double timeout = env_timeout("--late-init-rank");
    my_rank = env_int("PMIX_RANK", -1);
    if (my_rank == late_rank) {
        /* Arrive after the others gave up and finished looking for the
         * missing ranks (up to 1 s more). Still call tnt_init (mpirun treats
         * a rank that never initialises PMIx as abnormal); it fails too, as
         * nobody is left to meet it. */
        usleep((useconds_t)((timeout + 3) * 1e6));
        tnt_comm_t *comm = NULL;
        if (tnt_init(&comm) == TNT_OK) {
            tnt_finalize(comm);
        }
        return 0;
    }
    tnt_comm_t *comm = NULL;
    double t0 = now_s();
    tnt_status_t s = tnt_init(&comm);
    double elapsed = now_s() - t0;
    const char *msg = tnt_last_error();
    EXPECT(s == TNT_ERR_TIMEOUT,
           "tnt_init with rank %d missing returned %d (%s), expected "
           "TNT_ERR_TIMEOUT",
           late_rank, (int)s, tnt_status_string(s));
    EXPECT(comm == NULL, "tnt_init set its output on failure");
    EXPECT(elapsed >= timeout - 0.5 && elapsed <= timeout + 5,
           "tnt_init gave up after %.1f s with TNT_TIMEOUT=%g", elapsed, timeout);
    EXPECT(strstr(msg, "allgather #") != NULL, "message does not name the collective: %s", msg);
    EXPECT(names_rank(msg, late_rank), "message does not name missing rank %d: %s", late_rank, msg);
    if (s == TNT_OK) {
        tnt_finalize(comm);
    }
    if (check_failures > 0) {
        return 1;
    }
    printf("bootstrap_check: rank %d OK (tnt_init failed as expected after %.1f s)\n", my_rank,
           elapsed);
    return 0;
}

int main(int argc, char **argv)
{
    const char *launcher = "auto";
    int expect_size = -1, expect_nodes = -1, do_args = 0, skip_rank = -1, late_rank = -1;
    int abort_rank = -1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--launcher") == 0 && i + 1 < argc) {
            launcher = argv[++i];
        } else if (strcmp(argv[i], "--expect-size") == 0 && i + 1 < argc) {
            expect_size = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--expect-nodes") == 0 && i + 1 < argc) {
            expect_nodes = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--check-args") == 0) {
            do_args = 1;
        } else if (strcmp(argv[i], "--skip-barrier-rank") == 0 && i + 1 < argc) {
            skip_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--abort-rank") == 0 && i + 1 < argc) {
            abort_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--late-init-rank") == 0 && i + 1 < argc) {
            late_rank = atoi(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: %s [--launcher auto|none|ompi|slurm|tnt] [--expect-size N] "
                    "[--expect-nodes N] [--check-args] [--skip-barrier-rank R] "
                    "[--late-init-rank R] [--abort-rank R]\n",
                    argv[0]);
            return 2;
        }
    }
    if (late_rank >= 0) {
        return check_late_init(late_rank);
    }
    struct expected e = expected_from(launcher);
    if (expect_size >= 0) {
        e.size = expect_size;
    }
    if (expect_nodes >= 0) {
        e.num_nodes = expect_nodes;
    }
    if (e.num_nodes == 1) {
        /* One node: local ranks are the ranks. */
        e.node_id = 0;
        if (e.local_rank < 0) {
            e.local_rank = e.rank;
        }
        if (e.local_size < 0) {
            e.local_size = e.size;
        }
    }

    tnt_comm_t *comm = NULL;
    tnt_status_t s = tnt_init(&comm);
    if (s != TNT_OK) {
        fprintf(stderr, "bootstrap_check: tnt_init failed: %s: %s\n", tnt_status_string(s),
                tnt_last_error());
        return 1;
    }
    my_rank = tnt_rank(comm);
    printf("bootstrap_check: rank %d of %d, local rank %d of %d, node %d of %d, host %s\n",
           tnt_rank(comm), tnt_size(comm), tnt_local_rank(comm), tnt_local_size(comm),
           tnt_node_id(comm), tnt_num_nodes(comm), tnt_hostname(comm));
    fflush(stdout);

    check_layout(comm, e);
    if (abort_rank >= 0) {
        if (tnt_rank(comm) == abort_rank) {
            tnt_abort(comm, 3, "bootstrap_check aborts the job on purpose");
        }
        /* The others are killed by the launcher while they wait here (the
         * barrier cannot complete without the aborting rank). */
        tnt_barrier(comm);
        fprintf(stderr, "bootstrap_check[rank %d]: still alive after rank %d aborted\n", my_rank,
                abort_rank);
        return 1;
    }
    if (skip_rank >= 0) {
        check_timeout(comm, skip_rank);
    } else {
        check_collectives(comm);
        if (do_args) {
            check_args(comm);
        }
    }
    tnt_finalize(comm);
    if (check_failures > 0) {
        fprintf(stderr, "bootstrap_check[rank %d]: %d check(s) failed\n", my_rank, check_failures);
        return 1;
    }
    printf("bootstrap_check: rank %d OK\n", my_rank);
    return 0;
}
