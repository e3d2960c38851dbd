/*
 * One rank of a training-like loop for the network fault tests
 * (netfault.sh): the script starts each rank inside a network namespace of
 * its own, so the traffic between "nodes" crosses veth links that the
 * script can cut or degrade with tc netem. The ranks bootstrap through
 * tnt_comm_create_oob over a file store (file_store.h), because the
 * launcher's PMIx server listens on 127.0.0.1, which another network
 * namespace cannot reach; the file system is shared by all of them.
 *
 *   netfault_check --store DIR --rank R --size N --host NAME --steps S
 *                  [--count C] [--sleep-ms M] [--expect-blame HOST]
 *
 * Every step allreduces a small and a C-element float buffer, whose exact
 * sums are known (small integers), and checks every element. "step <s>"
 * lines on stdout tell the script how far the job got. Without
 * --expect-blame every step must succeed (exit 0). With it, a step must
 * fail, and the rank exits without tnt_finalize (its peers are
 * unreachable, and their goodbyes would never come), with
 *   3  a verdict (TNT_ERR_TIMEOUT) that names HOST, the node whose link the
 *      script cut;
 *   4  a follow-on failure (TNT_ERR_PEER_FAILED): a peer that already gave
 *      up and exited broke its connection first; the script checks that
 *      this peer ended with 3 (a real launcher's abort would have killed
 *      this rank instead);
 *   1  anything else, a verdict that does not name HOST included.
 */
#include <tnt/tnt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;
#define CHECK_PROGRAM "netfault_check"
#define CHECK_RANK    g_rank
#include "check.h"
#include "file_store.h"

/* Exit statuses of a rank whose step failed as the test expected. */
#define EXIT_VERDICT   3
#define EXIT_FOLLOW_ON 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Element i of rank r's buffer in step s; the sum over ranks is
 * (1 + ... + size) * v, exact in float for these small integers. */
static float value(int r, int step, int i)
{
    return (float)(r + 1) * (float)((i + step) % 13);
}

/* One step: a latency-bound and a bandwidth-bound allreduce, both checked
 * element by element. Returns the first failing status. */
static tnt_status_t step_once(tnt_comm_t *comm, float *x, int count, int step)
{
    int size = tnt_size(comm);
    float ranks_sum = (float)size * (float)(size + 1) / 2;
    float small[8];
    for (int i = 0; i < 8; i++) {
        small[i] = value(g_rank, step + 1, i);
    }
    tnt_status_t st = tnt_allreduce(comm, small, small, 8, TNT_FLOAT32, TNT_SUM);
    if (st != TNT_OK) {
        return st;
    }
    for (int i = 0; i < 8; i++) {
        CHECK(small[i] == ranks_sum * value(0, step + 1, i),
              "step %d: small allreduce element %d is %g, expected %g", step, i, (double)small[i],
              (double)(ranks_sum * value(0, step + 1, i)));
    }
    for (int i = 0; i < count; i++) {
        x[i] = value(g_rank, step, i);
    }
    st = tnt_allreduce(comm, x, x, (size_t)count, TNT_FLOAT32, TNT_SUM);
    if (st != TNT_OK) {
        return st;
    }
    for (int i = 0; i < count; i++) {
        CHECK(x[i] == ranks_sum * value(0, step, i), "step %d: element %d is %g, expected %g", step,
              i, (double)x[i], (double)(ranks_sum * value(0, step, i)));
    }
    return TNT_OK;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *host = NULL, *expect_blame = NULL;
    int size = 0, steps = 0, count = 16384, sleep_ms = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc) {
            g_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            size = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            host = argv[++i];
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            count = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--sleep-ms") == 0 && i + 1 < argc) {
            sleep_ms = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--expect-blame") == 0 && i + 1 < argc) {
            expect_blame = argv[++i];
        } else {
            fprintf(stderr, "netfault_check: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    CHECK(dir != NULL && host != NULL && size >= 1 && g_rank >= 0 && g_rank < size && steps >= 1 &&
              count >= 1,
          "usage: netfault_check --store DIR --rank R --size N --host NAME --steps S [--count "
          "C] [--sleep-ms M] [--expect-blame HOST]");

    struct file_store store = { dir, g_rank, size, 0 };
    tnt_oob_t oob = { .allgather = store_allgather_nb,
                      .test = store_test,
                      .req_free = store_req_free,
                      .ctx = &store,
                      .rank = g_rank,
                      .size = size,
                      .job_id = "netfault_check",
                      .hostname = host };
    tnt_comm_t *comm = NULL;
    CHECK_OK(tnt_comm_create_oob(&oob, &comm));

    float *x = malloc((size_t)count * sizeof(float));
    CHECK(x != NULL, "malloc");
    double t0 = now_s(), last_ok = t0;
    for (int step = 0; step < steps; step++) {
        tnt_status_t st = step_once(comm, x, count, step);
        if (st != TNT_OK) {
            const char *err = tnt_last_error();
            printf("failed in step %d, %.2f s after the last good step: %s\n", step,
                   now_s() - last_ok, err);
            fflush(stdout);
            CHECK(expect_blame != NULL, "step %d failed: %s: %s", step, tnt_status_string(st), err);
            if (st == TNT_ERR_PEER_FAILED) {
                _exit(EXIT_FOLLOW_ON);
            }
            CHECK(st == TNT_ERR_TIMEOUT,
                  "step %d failed with %s, not a timeout or a failed peer: %s", step,
                  tnt_status_string(st), err);
            CHECK(strstr(err, expect_blame) != NULL,
                  "the verdict does not name %s, the node whose link was cut: %s", expect_blame,
                  err);
            _exit(EXIT_VERDICT);
        }
        last_ok = now_s();
        printf("step %d\n", step);
        fflush(stdout);
        /* The "backprop" between allreduces; it also leaves the two shared
         * cores some time for the other ranks. */
        usleep((useconds_t)sleep_ms * 1000);
    }
    CHECK(expect_blame == NULL, "all %d steps passed although %s was cut off", steps, expect_blame);
    printf("done: %d steps of %d floats in %.2f s\n", steps, count, now_s() - t0);
    free(x);
    tnt_finalize(comm);
    return 0;
}
