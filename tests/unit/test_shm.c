/*
 * Shared-memory transport with real processes: each test forks local_size
 * children that call tnt_shm_create directly (a unique segment name per
 * run), run collectives and exit 0 on success. The parent reaps children as
 * they exit (so a dead child is not left a zombie), kills everything at the
 * test's deadline, and checks that /dev/shm holds no segment afterwards.
 *
 * Checks: allreduce for every dtype x op x counts (0, 1, primes, not
 * multiples of the rank count, sizes that use the small, staged and CMA
 * algorithms and several pipeline steps) x 1..8 ranks x in/out of place,
 * staged and with CMA (TNT_SHM_CMA=1); results exact
 * (tests/integration/collectives_values.h) and
 * random float32/float64 sums bitwise equal to a sequential reference in
 * local-rank order on every rank; broadcast, allgather, barrier,
 * reduce_scatter and allgather_slices; a child killed with SIGKILL in the
 * middle of a collective makes the others fail with TNT_ERR_PEER_FAILED
 * within seconds; a child that stays away makes them time out.
 * The streamed large-message path (TNT_SHM_STREAM_KB=0 streams every staged
 * message) runs the same matrices. Ranks that call different collectives
 * (allreduce against barrier, counts 100 against 200) all fail with
 * TNT_ERR_MISMATCH. Liveness across PID namespaces (as root): a rank whose
 * pid in its own namespace is a live process here still counts as dead
 * when it dies, and one whose pid does not exist here is not reported dead
 * while it is merely slow.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/syscall.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm.h"
#include "transport/shm_impl.h"
#include "util/wait.h"
#include "tests/integration/collectives_values.h"

#define MAX_RANKS 8

typedef int (*rank_fn)(tnt_shm_t *shm, int rank, int n, void *arg);

/* Shared between parent and children (MAP_SHARED before fork). */
struct shared_area {
    uint64_t hashes[MAX_RANKS][64];
    int counter;
    double elapsed[MAX_RANKS];
    int status[MAX_RANKS];
    /* The test's stand-in for the bootstrap (area_exchange). */
    tnt_shm_addr_t addr;
    int addr_ready;
};
static struct shared_area *area;
static unsigned test_counter;
static char segment_prefix[64];

static double now_s(void)
{
    return (double)tnt_time_ns() * 1e-9;
}

/* tnt_shm_exchange_fn through the shared area: local rank 0 publishes its
 * addr, the others wait for it (at most 30 s). arg: the local rank. */
static tnt_status_t area_exchange(void *arg, tnt_shm_addr_t *addr)
{
    if (*(int *)arg == 0) {
        area->addr = *addr;
        __atomic_store_n(&area->addr_ready, 1, __ATOMIC_RELEASE);
        return TNT_OK;
    }
    double deadline = now_s() + 30;
    while (!__atomic_load_n(&area->addr_ready, __ATOMIC_ACQUIRE)) {
        if (now_s() > deadline) {
            return tnt_error_raise(TNT_ERR_TIMEOUT, "test: no segment name within 30 s");
        }
        usleep(1000);
    }
    *addr = area->addr;
    return TNT_OK;
}

static int segments_left(void)
{
    DIR *dir = opendir("/dev/shm");
    int found = 0;
    if (dir == NULL) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (strncmp(e->d_name, segment_prefix + 1, strlen(segment_prefix) - 1) == 0) {
            found++;
        }
    }
    closedir(dir);
    return found;
}

/* Forks n ranks; returns how many did not exit with 0 (killed at deadline
 * counts). expect_signal: rank that is expected to die of SIGKILL (-1 none). */
static int run_ranks_env(int n, rank_fn fn, void *arg, double deadline_s, double timeout_s,
                         int victim)
{
    pid_t pids[MAX_RANKS];
    char name[96];
    int failures = 0;
    snprintf(name, sizeof name, "%s%u", segment_prefix, test_counter++);
    memset(area, 0, sizeof *area);

    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            alarm((unsigned)deadline_s + 5); /* belt and braces */
            int global[MAX_RANKS];
            for (int j = 0; j < n; j++) {
                global[j] = 100 + j; /* distinct from local ranks in messages */
            }
            /* The TNT_SHM_* variables the test case set, as tnt_init reads them. */
            tnt_settings_t settings;
            if (tnt_settings_load(&settings) != TNT_OK) {
                _exit(3);
            }
            tnt_shm_params_t params = { .name = name,
                                        .local_rank = r,
                                        .local_size = n,
                                        .global_ranks = global,
                                        .timeout_s = timeout_s,
                                        .settings = &settings,
                                        .exchange = area_exchange,
                                        .exchange_arg = &r };
            tnt_shm_t *shm = NULL;
            tnt_status_t st = tnt_shm_create(&params, &shm);
            if (st != TNT_OK) {
                fprintf(stderr, "rank %d: create failed: %s\n", r, tnt_status_string(st));
                _exit(2);
            }
            int rc = fn(shm, r, n, arg);
            tnt_shm_destroy(shm);
            _exit(rc);
        }
    }
    int alive = n;
    double deadline = now_s() + deadline_s;
    while (alive > 0) {
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, WNOHANG);
        if (pid > 0) {
            alive--;
            int r = 0;
            while (r < n && pids[r] != pid) {
                r++;
            }
            if (r == victim) {
                if (!(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)) {
                    failures++;
                }
            } else if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
                fprintf(stderr, "rank %d exited with %d (signal %d)\n", r,
                        WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
                        WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
                failures++;
            }
            continue;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "ranks still running after %.0f s: killing them\n", deadline_s);
            for (int r = 0; r < n; r++) {
                kill(pids[r], SIGKILL);
            }
            while (waitpid(-1, NULL, 0) > 0) {
                ;
            }
            return failures + alive;
        }
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    assert_int_equal(segments_left(), 0);
    return failures;
}

static int run_ranks(int n, rank_fn fn, void *arg)
{
    return run_ranks_env(n, fn, arg, 120, 60, -1);
}

/* Checks inside a rank function: a failed one ends that forked rank with
 * exit status 1, which run_ranks counts. */
#define CHECK_PROGRAM "test_shm"
#define CHECK_RANK    rank
#include "check.h"

/* ---- allreduce matrix ---------------------------------------------------- */

static const size_t matrix_counts[] = { 0, 1, 2, 3, 7, 13, 97, 1031, 4099, 40009, 300007 };

/* arg: NULL, or an int that is 1 to make even ranks stream and odd ones
 * copy through the cache in the same collectives. */
static void mix_stream_modes(tnt_shm_t *shm, int rank, void *arg)
{
    if (arg != NULL && *(int *)arg) {
        shm->stream_mode = rank % 2 ? TNT_SETTINGS_STREAM_OFF : TNT_SETTINGS_STREAM_ON;
    }
}

static int allreduce_matrix(tnt_shm_t *shm, int rank, int n, void *arg)
{
    mix_stream_modes(shm, rank, arg);
    size_t max_count = 300007;
    char *send = malloc(max_count * 8), *recv = malloc(max_count * 8);
    CHECK(send && recv, "malloc");
    uint64_t seed = 1;
    for (int dt = 0; dt < TNT_DTYPE_LAST; dt++) {
        size_t es = tnt_dtype_size((tnt_dtype_t)dt);
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t c = 0; c < sizeof matrix_counts / sizeof *matrix_counts; c++) {
                size_t count = matrix_counts[c];
                /* The biggest size only for the gradient dtypes: enough to
                 * cover the large algorithms without slowing the suite. */
                if (count > 100000 && (dt != TNT_FLOAT32 && dt != TNT_BFLOAT16)) {
                    continue;
                }
                for (int inplace = 0; inplace < 2; inplace++, seed++) {
                    cv_fill(dt, op, n, seed, rank, send, count);
                    memset(recv, 0x5a, count * es);
                    void *out = inplace ? send : recv;
                    tnt_status_t st = tnt_shm_allreduce(shm, send, out, count, dt, op);
                    CHECK(st == TNT_OK, "allreduce %s %s count %zu: %s", cv_dtype_names[dt],
                          cv_op_names[op], count, tnt_status_string(st));
                    size_t bad = cv_check(dt, op, n, seed, out, count);
                    CHECK(bad == count,
                          "allreduce %s %s count %zu %s: element %zu is %g, expected %g",
                          cv_dtype_names[dt], cv_op_names[op], count,
                          inplace ? "in place" : "out of place", bad, cv_load(dt, out, bad),
                          cv_expected(dt, op, n, seed, bad));
                }
            }
        }
    }
    free(send);
    free(recv);
    return 0;
}

/* Random floats: results must equal ((x0 + x1) + x2) + ... bit for bit on
 * every rank, whichever algorithm ran. */
static int allreduce_random_order(tnt_shm_t *shm, int rank, int n, void *arg)
{
    mix_stream_modes(shm, rank, arg);
    static const size_t counts[] = { 5, 3001, 70001, 400009 };
    for (size_t c = 0; c < 4; c++) {
        size_t count = counts[c];
        float *x = malloc(count * sizeof *x), *ref = malloc(count * sizeof *ref);
        double *y = malloc(count * sizeof *y), *yref = malloc(count * sizeof *yref);
        CHECK(x && ref && y && yref, "malloc");
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < count; i++) {
                uint64_t h = cv_mix(c * 1000 + (uint64_t)r * 7777 + i * 31);
                float v = (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 1e3f;
                double w = (double)(h >> 11) / 9007199254740992.0 * 3.0 - 1.5;
                if (r == rank) {
                    x[i] = v;
                    y[i] = w;
                }
                ref[i] = r == 0 ? v : ref[i] + v;
                yref[i] = r == 0 ? w : yref[i] + w;
            }
        }
        CHECK(tnt_shm_allreduce(shm, x, x, count, TNT_FLOAT32, TNT_SUM) == TNT_OK, "f32");
        CHECK(tnt_shm_allreduce(shm, y, y, count, TNT_FLOAT64, TNT_SUM) == TNT_OK, "f64");
        CHECK(memcmp(x, ref, count * sizeof *x) == 0,
              "float32 sum of %zu differs from the "
              "sequential order",
              count);
        CHECK(memcmp(y, yref, count * sizeof *y) == 0, "float64 sum of %zu differs", count);
        area->hashes[rank][c] = cv_hash(x, count * sizeof *x);
        free(x);
        free(ref);
        free(y);
        free(yref);
    }
    return 0;
}

static void check_hashes_equal(int n, int num)
{
    for (int r = 1; r < n; r++) {
        for (int c = 0; c < num; c++) {
            assert_true(area->hashes[r][c] == area->hashes[0][c]);
        }
    }
}

/* Default settings (staged copies for large messages). */
static void test_allreduce_all_ranks(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_RANKS; n++) {
        assert_int_equal(run_ranks(n, allreduce_matrix, NULL), 0);
        assert_int_equal(run_ranks(n, allreduce_random_order, NULL), 0);
        check_hashes_equal(n, 4);
    }
}

/* Single-copy CMA for large messages (TNT_SHM_CMA=1). */
static void test_allreduce_cma(void **state)
{
    (void)state;
    setenv("TNT_SHM_CMA", "1", 1);
    static const int ranks[] = { 2, 3, 4, 7, 8 };
    for (int i = 0; i < 5; i++) {
        assert_int_equal(run_ranks(ranks[i], allreduce_matrix, NULL), 0);
        assert_int_equal(run_ranks(ranks[i], allreduce_random_order, NULL), 0);
        check_hashes_equal(ranks[i], 4);
    }
    unsetenv("TNT_SHM_CMA");
}

/* A tiny staging area, so that the staged algorithm pipelines through many
 * steps, and the one-phase path off. */
static void test_allreduce_staged(void **state)
{
    (void)state;
    setenv("TNT_SHM_STAGING_KB", "64", 1);
    setenv("TNT_SHM_SMALL_KB", "0", 1);
    static const int ranks[] = { 2, 3, 8 };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(run_ranks(ranks[i], allreduce_matrix, NULL), 0);
        assert_int_equal(run_ranks(ranks[i], allreduce_random_order, NULL), 0);
        check_hashes_equal(ranks[i], 4);
    }
    unsetenv("TNT_SHM_SMALL_KB");
    unsetenv("TNT_SHM_STAGING_KB");
}

/* The streamed path: every staged message streams, with small slots so that
 * the matrix's sizes take several pipeline steps, and the one-phase path
 * off; bitwise equality with the sequential order as above. */
static void test_allreduce_streamed(void **state)
{
    (void)state;
    setenv("TNT_SHM_STREAM", "on", 1);
    setenv("TNT_SHM_STREAM_KB", "0", 1);
    setenv("TNT_SHM_STAGING_KB", "64", 1);
    setenv("TNT_SHM_SMALL_KB", "0", 1);
    static const int ranks[] = { 2, 3, 8 };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(run_ranks(ranks[i], allreduce_matrix, NULL), 0);
        assert_int_equal(run_ranks(ranks[i], allreduce_random_order, NULL), 0);
        check_hashes_equal(ranks[i], 4);
    }
    /* Default slots: the streamed path with few, large pieces. */
    unsetenv("TNT_SHM_STAGING_KB");
    assert_int_equal(run_ranks(2, allreduce_random_order, NULL), 0);
    check_hashes_equal(2, 4);
    /* auto: local rank 0 plans each call's kind one call ahead (per size
     * class) and the others follow, through every size of the matrix. */
    setenv("TNT_SHM_STREAM", "auto", 1);
    setenv("TNT_SHM_STAGING_KB", "64", 1);
    for (int n = 2; n <= 3; n++) {
        assert_int_equal(run_ranks(n, allreduce_matrix, NULL), 0);
        assert_int_equal(run_ranks(n, allreduce_random_order, NULL), 0);
        check_hashes_equal(n, 4);
    }
    /* Ranks that copy differently in the same collectives (ranks whose
     * TNT_SHM_STREAM differs): even ranks stream, odd ones do not. */
    setenv("TNT_SHM_STREAM", "on", 1);
    int mixed = 1;
    for (int n = 2; n <= 3; n++) {
        assert_int_equal(run_ranks(n, allreduce_matrix, &mixed), 0);
        assert_int_equal(run_ranks(n, allreduce_random_order, &mixed), 0);
        check_hashes_equal(n, 4);
    }
    unsetenv("TNT_SHM_STAGING_KB");
    unsetenv("TNT_SHM_SMALL_KB");
    unsetenv("TNT_SHM_STREAM_KB");
    unsetenv("TNT_SHM_STREAM");
}

/* ---- other collectives --------------------------------------------------- */

static int others(tnt_shm_t *shm, int rank, int n, void *arg)
{
    (void)arg;
    static const size_t sizes[] = { 0, 1, 13, 4099, 100003, 3 * 1024 * 1024 + 5 };
    size_t max = 3 * 1024 * 1024 + 5;
    unsigned char *buf = malloc(max), *all = malloc(max * (size_t)n);
    CHECK(buf && all, "malloc");

    for (size_t s = 0; s < 6; s++) {
        size_t bytes = sizes[s];
        for (int root = 0; root < n; root++) {
            for (size_t i = 0; i < bytes; i++) {
                buf[i] = rank == root ? (unsigned char)(i * 7 + (size_t)root) : 0xee;
            }
            CHECK(tnt_shm_broadcast(shm, buf, bytes, root) == TNT_OK, "broadcast");
            for (size_t i = 0; i < bytes; i++) {
                CHECK(buf[i] == (unsigned char)(i * 7 + (size_t)root),
                      "broadcast %zu from %d: byte %zu", bytes, root, i);
            }
        }
        /* allgather, out of place and with sendbuf inside recvbuf */
        size_t b = bytes < 200000 ? bytes : 200000;
        for (int inplace = 0; inplace < 2; inplace++) {
            unsigned char *src = inplace ? all + (size_t)rank * b : buf;
            memset(all, 0xee, b * (size_t)n);
            for (size_t i = 0; i < b; i++) {
                src[i] = (unsigned char)(i * 3 + (size_t)rank * 11);
            }
            CHECK(tnt_shm_allgather(shm, src, all, b) == TNT_OK, "allgather");
            for (int r = 0; r < n; r++) {
                for (size_t i = 0; i < b; i++) {
                    CHECK(all[(size_t)r * b + i] == (unsigned char)(i * 3 + (size_t)r * 11),
                          "allgather %zu: rank %d byte %zu", b, r, i);
                }
            }
        }
    }

    /* barrier: everyone's increment is visible after it */
    for (int it = 0; it < 200; it++) {
        __atomic_fetch_add(&area->counter, 1, __ATOMIC_SEQ_CST);
        CHECK(tnt_shm_barrier(shm) == TNT_OK, "barrier");
        CHECK(__atomic_load_n(&area->counter, __ATOMIC_SEQ_CST) >= n * (it + 1),
              "barrier %d let a rank through early", it);
        CHECK(tnt_shm_barrier(shm) == TNT_OK, "barrier");
    }

    /* reduce_scatter then allgather_slices = allreduce (the hierarchical
     * building blocks), in and out of place, dtypes x ops. */
    static const size_t counts[] = { 1, 5, 97, 4099, 70001, 300007 };
    float *send = malloc(300007 * 8), *recv = malloc(300007 * 8);
    CHECK(send && recv, "malloc");
    uint64_t seed = 77;
    for (int dt = 0; dt < TNT_DTYPE_LAST; dt++) {
        for (int op = 0; op < TNT_OP_LAST; op++) {
            for (size_t c = 0; c < 6; c++, seed++) {
                size_t count = counts[c], off, cnt, es = tnt_dtype_size((tnt_dtype_t)dt);
                int inplace = (int)(seed & 1);
                void *out = inplace ? (void *)send : (void *)recv;
                cv_fill(dt, op, n, seed, rank, send, count);
                if (!inplace) {
                    memset(recv, 0x5a, count * es);
                }
                CHECK(tnt_shm_reduce_scatter(shm, send, out, count, dt, op) == TNT_OK, "rs");
                tnt_slice(count, rank, n, &off, &cnt);
                for (size_t i = 0; i < cnt; i++) {
                    CHECK(cv_load(dt, out, off + i) == cv_expected(dt, op, n, seed, off + i),
                          "reduce_scatter %s %s %zu: element %zu", cv_dtype_names[dt],
                          cv_op_names[op], count, off + i);
                }
                CHECK(tnt_shm_allgather_slices(shm, out, count, dt) == TNT_OK, "ag slices");
                size_t wrong = cv_check(dt, op, n, seed, out, count);
                CHECK(wrong == count, "allgather_slices %s %s %zu: element %zu", cv_dtype_names[dt],
                      cv_op_names[op], count, wrong);
            }
        }
    }
    free(send);
    free(recv);
    free(buf);
    free(all);
    return 0;
}

static void test_other_collectives(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_RANKS; n++) {
        assert_int_equal(run_ranks(n, others, NULL), 0);
    }
    setenv("TNT_SHM_STAGING_KB", "64", 1);
    assert_int_equal(run_ranks(3, others, NULL), 0);
    unsetenv("TNT_SHM_STAGING_KB");
    setenv("TNT_SHM_CMA", "1", 1);
    assert_int_equal(run_ranks(3, others, NULL), 0);
    assert_int_equal(run_ranks(8, others, NULL), 0);
    unsetenv("TNT_SHM_CMA");
    /* reduce_scatter and allgather_slices streamed */
    setenv("TNT_SHM_STREAM", "on", 1);
    setenv("TNT_SHM_STREAM_KB", "0", 1);
    setenv("TNT_SHM_STAGING_KB", "64", 1);
    assert_int_equal(run_ranks(3, others, NULL), 0);
    unsetenv("TNT_SHM_STAGING_KB");
    unsetenv("TNT_SHM_STREAM_KB");
    unsetenv("TNT_SHM_STREAM");
}

/* ---- mismatched collectives ---------------------------------------------- */

/* mode 0: local rank 1 calls barrier while the others allreduce 100
 * elements; mode 1: local rank 1 allreduces 200 elements, the others 100
 * (mode 2: the same with 200000, the staged path); mode 3: the same count
 * but int32 on rank 1. Every rank must get TNT_ERR_MISMATCH naming rank
 * 101 (rank 1's global rank here), and results must be untouched. */
static int mismatch_rank(tnt_shm_t *shm, int rank, int n, void *varg)
{
    (void)n;
    int mode = *(int *)varg;
    size_t count = mode == 2 ? 200000 : 100;
    float *buf = malloc(2 * count * sizeof *buf);
    CHECK(buf, "malloc");
    for (size_t i = 0; i < 2 * count; i++) {
        buf[i] = 1.0f;
    }
    CHECK(tnt_shm_allreduce(shm, buf, buf, 10, TNT_FLOAT32, TNT_SUM) == TNT_OK, "first");
    for (size_t i = 0; i < 2 * count; i++) {
        buf[i] = 1.0f;
    }
    tnt_status_t st;
    if (rank != 1) {
        st = tnt_shm_allreduce(shm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
    } else if (mode == 0) {
        st = tnt_shm_barrier(shm);
    } else if (mode == 3) {
        st = tnt_shm_allreduce(shm, buf, buf, count, TNT_INT32, TNT_SUM);
    } else {
        st = tnt_shm_allreduce(shm, buf, buf, 2 * count, TNT_FLOAT32, TNT_SUM);
    }
    area->status[rank] = st;
    CHECK(st == TNT_ERR_MISMATCH, "mode %d: got %s, expected a mismatch", mode,
          tnt_status_string(st));
    CHECK(strstr(tnt_last_error(), "rank 101 called") != NULL, "message: %s", tnt_last_error());
    for (size_t i = 0; i < 2 * count; i++) {
        CHECK(buf[i] == 1.0f, "mode %d: element %zu changed to %g", mode, i, (double)buf[i]);
    }
    return 0;
}

static void test_mismatch(void **state)
{
    (void)state;
    for (int mode = 0; mode < 4; mode++) {
        assert_int_equal(run_ranks_env(3, mismatch_rank, &mode, 60, 20, -1), 0);
        for (int r = 0; r < 3; r++) {
            assert_int_equal(area->status[r], TNT_ERR_MISMATCH);
        }
    }
}

/* ---- failures ------------------------------------------------------------ */

struct failure_arg {
    int victim;
    size_t count;
    int stay_away; /* the victim sleeps instead of dying */
};

static int failure_rank(tnt_shm_t *shm, int rank, int n, void *varg)
{
    struct failure_arg *arg = varg;
    float *buf = calloc(arg->count, sizeof *buf);
    CHECK(buf, "malloc");
    for (int it = 0; it < 3; it++) {
        CHECK(tnt_shm_allreduce(shm, buf, buf, arg->count, TNT_FLOAT32, TNT_SUM) == TNT_OK, "ok");
    }
    if (rank == arg->victim) {
        if (arg->stay_away) {
            sleep(4);
            _exit(0);
        }
        raise(SIGKILL);
    }
    double t0 = now_s();
    tnt_status_t st = tnt_shm_allreduce(shm, buf, buf, arg->count, TNT_FLOAT32, TNT_SUM);
    if (st == TNT_OK) { /* some may finish their part before noticing */
        st = tnt_shm_allreduce(shm, buf, buf, arg->count, TNT_FLOAT32, TNT_SUM);
    }
    area->elapsed[rank] = now_s() - t0;
    area->status[rank] = st;
    tnt_status_t want = arg->stay_away ? TNT_ERR_TIMEOUT : TNT_ERR_PEER_FAILED;
    /* A rank may also learn of the failure from another survivor. */
    CHECK(st == want || st == TNT_ERR_PEER_FAILED, "got %s", tnt_status_string(st));
    CHECK(strstr(tnt_last_error(), arg->stay_away ? "did not join" : "died") != NULL ||
              st == TNT_ERR_PEER_FAILED,
          "message: %s", tnt_last_error());
    /* Later calls fail at once with the same status. */
    CHECK(tnt_shm_barrier(shm) == st, "sticky error");
    free(buf);
    return 0;
}

static void test_peer_killed(void **state)
{
    (void)state;
    static const size_t counts[] = { 16, 100000, 1000000, 1000000 };
    for (int c = 0; c < 4; c++) {
        if (c == 3) {
            setenv("TNT_SHM_CMA", "1", 1);
        }
        struct failure_arg arg = { 2, counts[c], 0 };
        assert_int_equal(run_ranks_env(4, failure_rank, &arg, 30, 30, 2), 0);
        for (int r = 0; r < 4; r++) {
            if (r != 2) {
                assert_int_equal(area->status[r], TNT_ERR_PEER_FAILED);
                assert_true(area->elapsed[r] < 3.0);
            }
        }
    }
    unsetenv("TNT_SHM_CMA");
}

static void test_peer_timeout(void **state)
{
    (void)state;
    struct failure_arg arg = { 1, 1000, 1 };
    assert_int_equal(run_ranks_env(3, failure_rank, &arg, 30, 1.0, -1), 0);
    for (int r = 0; r < 3; r++) {
        if (r != 1) {
            assert_int_equal(area->status[r], TNT_ERR_TIMEOUT);
            assert_true(area->elapsed[r] < 3.5);
        }
    }
}

/* A rank that never attaches: the others time out in create, rank 0 still
 * unlinks the name. */
static void test_attach_timeout(void **state)
{
    (void)state;
    char name[96];
    snprintf(name, sizeof name, "%s%u", segment_prefix, test_counter++);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tnt_settings_t settings;
        tnt_settings_set_defaults(&settings);
        int r = 0;
        tnt_shm_params_t params = { .name = name,
                                    .local_rank = 0,
                                    .local_size = 2,
                                    .timeout_s = 0.5,
                                    .settings = &settings,
                                    .exchange = area_exchange,
                                    .exchange_arg = &r };
        tnt_shm_t *shm = NULL;
        _exit(tnt_shm_create(&params, &shm) == TNT_ERR_TIMEOUT ? 0 : 1);
    }
    int wstatus;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    assert_int_equal(segments_left(), 0);
}

/* ---- forged segments ------------------------------------------------------ */

/* Local rank 1 of 2 is told (as if by local rank 0 over the bootstrap) to
 * attach to a segment that the test made wrong in one way: it must refuse
 * it with an error that names the segment, never map it blindly or crash.
 * The announced layout: 64 KiB slots, no extra bytes. */
#define FORGE_SLOT  (64 * 1024)
#define FORGE_BYTES (4096 + 2 * 2 * FORGE_SLOT + 2 * TNT_SHM_RING * TNT_SHM_RING_BYTES)

enum forge_kind {
    FORGE_NONE,         /* a correct segment: accepted (the control) */
    FORGE_MODE,         /* mode 0666 */
    FORGE_OWNER,        /* owned by nobody (as root only) */
    FORGE_SIZE,         /* 1 MiB instead of the announced size */
    FORGE_HEADER,       /* right size and mode, slot size 1 TiB in the header */
    FORGE_MISSING,      /* the name does not exist */
    FORGE_ANNOUNCEMENT, /* the announced slot size itself is absurd */
};

/* The child's exit: 0 accepted, 1 refused with the name in the message,
 * 2 anything else; run_forged: 3 crashed or hung. */
static int forged_attach(const char *name, enum forge_kind kind)
{
    tnt_settings_t settings;
    tnt_settings_set_defaults(&settings);
    memset(area, 0, sizeof *area);
    snprintf(area->addr.name, sizeof area->addr.name, "%s", name);
    area->addr.local_size = 2;
    area->addr.slot_bytes = kind == FORGE_ANNOUNCEMENT ? (uint64_t)1 << 40 : FORGE_SLOT;
    area->addr.segment_bytes = FORGE_BYTES;
    area->addr.small_max = 4096;
    area->addr_ready = 1;
    int r = 1;
    int global[2] = { 100, 101 };
    tnt_shm_params_t params = { .name = "/unused",
                                .local_rank = 1,
                                .local_size = 2,
                                .global_ranks = global,
                                .timeout_s = 0.5,
                                .settings = &settings,
                                .exchange = area_exchange,
                                .exchange_arg = &r };
    tnt_shm_t *shm = NULL;
    tnt_status_t st = tnt_shm_create(&params, &shm);
    /* Accepted: it attached, and then waited in vain for local rank 0,
     * which this test does not run. */
    if (st == TNT_ERR_TIMEOUT && strstr(tnt_last_error(), "shared-memory setup") != NULL) {
        return 0;
    }
    fprintf(stderr, "forged %d: %s: %s\n", (int)kind, tnt_status_string(st), tnt_last_error());
    if (st == TNT_OK) {
        tnt_shm_destroy(shm);
    }
    if (kind == FORGE_NONE) {
        return 2;
    }
    return (st == TNT_ERR_TRANSPORT || st == TNT_ERR_MISMATCH) && strstr(tnt_last_error(), name)
               ? 1
               : 2;
}

static int run_forged(enum forge_kind kind)
{
    char name[96];
    snprintf(name, sizeof name, "%s%u-forged", segment_prefix, test_counter++);
    if (kind != FORGE_MISSING) {
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        assert_true(fd >= 0);
        assert_int_equal(fchmod(fd, kind == FORGE_MODE ? 0666 : 0600), 0);
        if (kind == FORGE_OWNER && fchown(fd, 65534, 65534) != 0) {
            close(fd);
            shm_unlink(name);
            return -1;
        }
        assert_int_equal(ftruncate(fd, kind == FORGE_SIZE ? 1 << 20 : FORGE_BYTES), 0);
        struct tnt_shm_header *hdr =
            mmap(NULL, sizeof *hdr, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(hdr != MAP_FAILED);
        hdr->local_size = 2;
        hdr->segment_bytes = FORGE_BYTES;
        hdr->slot_bytes = kind == FORGE_HEADER ? (uint64_t)1 << 40 : FORGE_SLOT;
        hdr->small_max = 4096;
        hdr->attached = 1;
        /* A correct segment's liveness mutexes are initialised; these are
         * zero, which reads as unlocked: the peer counts as alive. */
        atomic_store(&hdr->magic, TNT_SHM_MAGIC);
        munmap(hdr, sizeof *hdr);
        close(fd);
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        _exit(forged_attach(name, kind));
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    shm_unlink(name);
    if (!WIFEXITED(ws)) {
        fprintf(stderr, "forged %d: the attacher died of signal %d\n", (int)kind,
                WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
        return 3;
    }
    return WEXITSTATUS(ws);
}

static void test_forged_segments(void **state)
{
    (void)state;
    assert_int_equal(run_forged(FORGE_NONE), 0);
    assert_int_equal(run_forged(FORGE_MODE), 1);
    int owner = geteuid() == 0 ? run_forged(FORGE_OWNER) : -1;
    assert_true(owner == 1 || owner == -1);
    assert_int_equal(run_forged(FORGE_SIZE), 1);
    assert_int_equal(run_forged(FORGE_HEADER), 1);
    assert_int_equal(run_forged(FORGE_MISSING), 1);
    assert_int_equal(run_forged(FORGE_ANNOUNCEMENT), 1);
    assert_int_equal(segments_left(), 0);
}

/* ---- liveness across PID namespaces -------------------------------------- */

/* Local rank 1 lives in a PID namespace of its own with pid ns_pid there
 * (clone3 with set_tid, as root). victim_dies: it dies (SIGKILL) after the
 * first barrier, and rank 0 must see TNT_ERR_PEER_FAILED within seconds even
 * though ns_pid is a live process in this namespace; otherwise it stays
 * away 1.5 s and rank 0 must simply wait, although no process ns_pid exists
 * here. */
struct pidns_arg {
    int victim_dies;
};

static int pidns_rank(tnt_shm_t *shm, int rank, int n, void *varg)
{
    (void)n;
    struct pidns_arg *arg = varg;
    CHECK(tnt_shm_barrier(shm) == TNT_OK, "first barrier: %s", tnt_last_error());
    if (rank == 1) {
        if (arg->victim_dies) {
            raise(SIGKILL);
        }
        sleep(1);
        usleep(500000);
    }
    double t0 = now_s();
    tnt_status_t st = tnt_shm_barrier(shm);
    area->elapsed[rank] = now_s() - t0;
    area->status[rank] = st;
    return 0;
}

static pid_t clone3_with_pid(pid_t pid)
{
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.exit_signal = SIGCHLD;
    args.set_tid = (uint64_t)(uintptr_t)&pid;
    args.set_tid_size = 1;
    return (pid_t)syscall(SYS_clone3, &args, sizeof args);
}

/* Returns 0 when both ranks exited 0 (the victim: killed), -1 to skip (no
 * permission for PID namespaces), else the number of bad exits. */
static int run_pidns(struct pidns_arg *arg, pid_t ns_pid, double timeout_s)
{
    char name[96];
    snprintf(name, sizeof name, "%s%u", segment_prefix, test_counter++);
    memset(area, 0, sizeof *area);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] != 0) {
            continue;
        }
        alarm(60);
        close(ready[0]);
        if (r == 1) {
            /* This process stays here; its next child is pid 1 of a new
             * namespace, which starts the rank as ns_pid and reaps it. */
            if (unshare(CLONE_NEWPID) != 0) {
                if (write(ready[1], "s", 1) != 1) {
                    _exit(4);
                }
                _exit(77);
            }
            pid_t init = fork();
            if (init == 0) {
                pid_t rank_pid = clone3_with_pid(ns_pid);
                if (rank_pid < 0) {
                    if (write(ready[1], "s", 1) != 1) {
                        _exit(4);
                    }
                    _exit(77);
                }
                if (rank_pid > 0) {
                    int ws;
                    while (waitpid(rank_pid, &ws, 0) < 0 && errno == EINTR) {
                        ;
                    }
                    _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
                }
            } else {
                int ws;
                while (waitpid(init, &ws, 0) < 0 && errno == EINTR) {
                    ;
                }
                _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
            }
            /* The rank, pid ns_pid in its namespace. */
        }
        if (write(ready[1], "g", 1) != 1) {
            _exit(4);
        }
        close(ready[1]);
        int global[2] = { 100, 101 };
        tnt_settings_t settings;
        tnt_settings_set_defaults(&settings);
        tnt_shm_params_t params = { .name = name,
                                    .local_rank = r,
                                    .local_size = 2,
                                    .global_ranks = global,
                                    .timeout_s = timeout_s,
                                    .settings = &settings,
                                    .exchange = area_exchange,
                                    .exchange_arg = &r };
        tnt_shm_t *shm = NULL;
        if (tnt_shm_create(&params, &shm) != TNT_OK) {
            _exit(2);
        }
        int rc = pidns_rank(shm, r, 2, arg);
        tnt_shm_destroy(shm);
        _exit(rc);
    }
    close(ready[1]);
    char c[2] = { 0, 0 };
    ssize_t got = read(ready[0], &c[0], 1);
    got += read(ready[0], &c[1], 1);
    close(ready[0]);
    if (c[0] == 's' || c[1] == 's') {
        kill(pids[0], SIGKILL);
        kill(pids[1], SIGKILL);
        while (waitpid(-1, NULL, 0) > 0) {
            ;
        }
        shm_unlink(name);
        return -1;
    }
    int bad = got == 2 ? 0 : 1;
    for (int r = 0; r < 2; r++) {
        int ws;
        assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        int want = r == 1 && arg->victim_dies ? 128 + SIGKILL : 0;
        if (code != want) {
            fprintf(stderr, "pidns: rank %d exited with %d, expected %d\n", r, code, want);
            bad++;
        }
    }
    assert_int_equal(segments_left(), 0);
    return bad;
}

static void test_liveness_pid_namespace(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    /* Dies, while its namespace pid is this test process: kill(pid, 0)
     * would call it alive until TNT_TIMEOUT. */
    struct pidns_arg dies = { 1 };
    int rc = run_pidns(&dies, getpid(), 20);
    if (rc < 0) {
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(area->status[0], TNT_ERR_PEER_FAILED);
    assert_true(area->elapsed[0] < 5.0);

    /* Slow, while no process here has its namespace pid: kill(pid, 0) would
     * call it dead after 0.1 s. */
    pid_t absent = 0;
    for (pid_t p = 30000; p > 1000 && absent == 0; p--) {
        if (kill(p, 0) != 0 && errno == ESRCH) {
            absent = p;
        }
    }
    assert_true(absent != 0);
    struct pidns_arg slow = { 0 };
    assert_int_equal(run_pidns(&slow, absent, 20), 0);
    assert_int_equal(area->status[0], TNT_OK);
    assert_int_equal(area->status[1], TNT_OK);
}

static void test_slice_rule(void **state)
{
    (void)state;
    for (size_t count = 0; count < 50; count++) {
        for (int n = 1; n <= 9; n++) {
            size_t next = 0;
            for (int r = 0; r < n; r++) {
                size_t off, cnt;
                tnt_slice(count, r, n, &off, &cnt);
                assert_int_equal(off, next);
                assert_int_equal(cnt, count / (size_t)n + ((size_t)r < count % (size_t)n));
                tnt_range_t range = tnt_shard_range(count, r, n);
                assert_int_equal(range.begin, off);
                assert_int_equal(range.end, off + cnt);
                next += cnt;
            }
            assert_int_equal(next, count);
        }
    }
}

/* A sender checks its eager sends against the peers' digests and reads
 * the signatures only where one differs (shm_impl.h, "Eager rooted
 * calls"): a change of any one word, the phase included, must change the
 * digest; the sent bit, which the comparison leaves out, must not. */
static void test_sig_digest(void **state)
{
    (void)state;
    const uint64_t base[4] = { 17, (5ull << 24) | (TNT_SHM_KIND_GATHER << 16), 4,
                               TNT_SHM_TERMS_EAGER | 1 };
    const uint64_t d = tnt_shm_sig_digest(base[0], base[1], base[2], base[3]);
    assert_int_equal(tnt_shm_sig_digest(base[0], base[1], base[2], base[3] | TNT_SHM_TERMS_SENT),
                     d);
    for (int w = 0; w < 4; w++) {
        for (int bit = 0; bit < 64; bit++) {
            uint64_t v[4] = { base[0], base[1], base[2], base[3] };
            v[w] ^= 1ull << bit;
            if (w == 3 && (1ull << bit) == TNT_SHM_TERMS_SENT) {
                continue;
            }
            assert_true(tnt_shm_sig_digest(v[0], v[1], v[2], v[3]) != d);
        }
    }
    /* The same call TNT_SHM_RING phases later (the same entry of the ring). */
    assert_true(tnt_shm_sig_digest(base[0] + TNT_SHM_RING, base[1], base[2], base[3]) != d);
}

int main(void)
{
    area = mmap(NULL, sizeof *area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        return 1;
    }
    snprintf(segment_prefix, sizeof segment_prefix, "/tnt-unit-shm-%d-", (int)getpid());
    unsetenv("TNT_SHM_CMA");
    unsetenv("TNT_SHM_STAGING_KB");
    unsetenv("TNT_SHM_SMALL_KB");
    unsetenv("TNT_SHM_STREAM_KB");
    unsetenv("TNT_SHM_STREAM");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_rule),        cmocka_unit_test(test_allreduce_all_ranks),
        cmocka_unit_test(test_allreduce_cma),     cmocka_unit_test(test_allreduce_staged),
        cmocka_unit_test(test_other_collectives), cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_peer_timeout),      cmocka_unit_test(test_attach_timeout),
        cmocka_unit_test(test_forged_segments),   cmocka_unit_test(test_allreduce_streamed),
        cmocka_unit_test(test_mismatch),          cmocka_unit_test(test_liveness_pid_namespace),
        cmocka_unit_test(test_sig_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
