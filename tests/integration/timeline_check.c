/*
 * A rank program for the timeline tests (timeline_test.py checks the file
 * it leaves):
 *   timeline_check            a fixed set of collectives under TNT_TIMELINE
 *                             (blocking and posted, a split communicator)
 *   timeline_check --stall    rank 1 arrives 2.5 s late at a barrier, so the
 *                             others warn (TNT_STALL_WARN=1)
 *   timeline_check --bad-path tnt_init must fail on every rank with
 *                             TNT_ERR_INVALID_ARG naming TNT_TIMELINE
 *   timeline_check --start PATH  tnt_timeline_start/stop around the same
 *                             collectives, without TNT_TIMELINE; the file
 *                             exists before tnt_finalize
 */
#define CHECK_PROGRAM "timeline_check"
#define CHECK_RANK    check_rank
static int check_rank = -1;
#include "../common/check.h"

#include <tnt/tnt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The sizes timeline_test.py expects, in this order, on "world". */
static const size_t allreduce_counts[] = { 1, 1000, 300000 };

static void collectives(tnt_comm_t *comm)
{
    static float buf[300000];
    const int rank = tnt_rank(comm), size = tnt_size(comm);

    for (size_t i = 0; i < sizeof(allreduce_counts) / sizeof(allreduce_counts[0]); i++) {
        CHECK_OK(tnt_allreduce(comm, buf, buf, allreduce_counts[i], TNT_FLOAT32, TNT_SUM));
    }
    char bytes[100] = { 0 };
    CHECK_OK(tnt_broadcast(comm, bytes, sizeof(bytes), 0));
    int64_t mine[2] = { rank, rank }, all[2 * 16];
    CHECK(size <= 16, "at most 16 ranks");
    CHECK_OK(tnt_allgather(comm, mine, all, sizeof(mine)));
    /* A posted one: its event says when it was posted and how long it
     * queued. */
    tnt_request_t *req = NULL;
    CHECK_OK(tnt_allreduce_post(comm, buf, buf, 4096, TNT_FLOAT32, TNT_SUM, &req));
    CHECK_OK(tnt_wait(req));
    /* A split communicator: its events carry its name. */
    tnt_comm_t *half = NULL;
    CHECK_OK(tnt_comm_split(comm, rank % 2, rank, &half));
    CHECK_OK(tnt_allreduce(half, buf, buf, 8, TNT_FLOAT32, TNT_SUM));
    tnt_finalize(half);
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = NULL;

    if (argc > 1 && strcmp(argv[1], "--bad-path") == 0) {
        tnt_status_t status = tnt_init(&comm);
        CHECK(status == TNT_ERR_INVALID_ARG, "tnt_init returned %d (%s), not INVALID_ARG", status,
              tnt_last_error());
        CHECK(strstr(tnt_last_error(), "TNT_TIMELINE") != NULL,
              "the error does not name TNT_TIMELINE: %s", tnt_last_error());
        return 0;
    }
    CHECK_OK(tnt_init(&comm));
    check_rank = tnt_rank(comm);
    if (argc > 1 && strcmp(argv[1], "--stall") == 0) {
        CHECK(tnt_timeline_active(), "TNT_TIMELINE is set but nothing records");
        if (check_rank == 1) {
            usleep(2500000);
        }
        CHECK_OK(tnt_barrier(comm));
    } else if (argc > 2 && strcmp(argv[1], "--start") == 0) {
        struct stat st;
        CHECK(!tnt_timeline_active(), "recording without TNT_TIMELINE or a start");
        CHECK_OK(tnt_timeline_start(comm, argv[2]));
        CHECK(tnt_timeline_start(comm, argv[2]) == TNT_ERR_INVALID_ARG,
              "a second start while recording did not fail");
        collectives(comm);
        CHECK_OK(tnt_timeline_stop(comm));
        CHECK(!tnt_timeline_active(), "still recording after the stop");
        CHECK(check_rank != 0 || stat(argv[2], &st) == 0, "rank 0 did not write %s", argv[2]);
    } else {
        const char *env = getenv("TNT_TIMELINE");
        CHECK(tnt_timeline_active() == (env != NULL && env[0] != '\0'),
              "tnt_timeline_active() disagrees with TNT_TIMELINE");
        collectives(comm);
    }
    tnt_finalize(comm);
    return check_failures != 0;
}
