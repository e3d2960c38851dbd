/*
 * A libtnt program for the launcher's failure tests:
 *
 *   launcher_tnt_loop SECONDS [--exit-rank=R:CODE]
 *
 * Every rank runs float32 sum allreduces of 256 Ki elements in a loop for
 * SECONDS (by rank 0's clock), checking each result. After the first allreduce it prints
 * "rank R ready" on stdout, so a test knows the job is in the middle of its
 * collectives before it kills a rank. With --exit-rank, rank R writes
 * "rank R giving up" on stderr and exits CODE after 5 iterations.
 * A failed collective prints the libtnt error on stderr and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tnt/tnt.h>

#define COUNT (256 * 1024)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int exit_rank = -1, exit_code = 0;
    double seconds, start;
    tnt_comm_t *comm = NULL;
    tnt_status_t st;
    float *buf;
    long iter = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: launcher_tnt_loop SECONDS [--exit-rank=R:CODE]\n");
        return 2;
    }
    seconds = atof(argv[1]);
    for (int i = 2; i < argc; i++) {
        sscanf(argv[i], "--exit-rank=%d:%d", &exit_rank, &exit_code);
    }
    st = tnt_init(&comm);
    if (st != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    buf = malloc(COUNT * sizeof *buf);
    if (buf == NULL) {
        return 1;
    }
    start = now_s();
    for (;;) {
        int rank = tnt_rank(comm), size = tnt_size(comm);
        int32_t stop = rank == 0 && now_s() - start >= seconds;

        /* Rank 0's clock decides for everyone, so all ranks run the same
         * number of allreduces and finish together. */
        st = tnt_allreduce(comm, &stop, &stop, 1, TNT_INT32, TNT_MAX);
        if (st != TNT_OK) {
            fprintf(stderr, "rank %d: stop vote #%ld failed: %s\n", rank, iter, tnt_last_error());
            return 1;
        }
        if (stop) {
            break;
        }

        for (int i = 0; i < COUNT; i++) {
            buf[i] = (float)(rank + 1) + (float)(i % 7);
        }
        st = tnt_allreduce(comm, buf, buf, COUNT, TNT_FLOAT32, TNT_SUM);
        if (st != TNT_OK) {
            fprintf(stderr, "rank %d: allreduce #%ld failed: %s\n", rank, iter, tnt_last_error());
            return 1;
        }
        for (int i = 0; i < COUNT; i += 4099) {
            float want = (float)(size * (size + 1) / 2) + (float)(size * (i % 7));

            if (buf[i] != want) {
                fprintf(stderr, "rank %d: allreduce #%ld: element %d is %g, expected %g\n", rank,
                        iter, i, (double)buf[i], (double)want);
                return 1;
            }
        }
        if (iter == 0) {
            printf("rank %d ready\n", rank);
            fflush(stdout);
        }
        if (rank == exit_rank && iter == 5) {
            fprintf(stderr, "rank %d giving up\n", rank);
            exit(exit_code);
        }
        iter++;
    }
    free(buf);
    tnt_finalize(comm);
    return 0;
}
