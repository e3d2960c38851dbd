/*
 * The device API on a machine where it cannot run (no GPU, or a build
 * without CUDA): every rank must get a clean TNT_ERR_UNSUPPORTED (or, for a
 * bad TNT_GPU_TRANSPORT, TNT_ERR_INVALID_ARG) with a message that names what
 * is missing, at once and on every rank alike, and the host collectives must
 * keep working afterwards. Links libtnt only, no CUDA.
 *
 *   gpu_unsupported_check EXPECTED_STATUS SUBSTRING
 * EXPECTED_STATUS: unsupported (the device calls fail) | invalid (tnt_init
 * rejects a bad TNT_GPU_* setting)
 */
#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(tnt_status_t got, tnt_status_t want, const char *substring, const char *what)
{
    const char *msg = tnt_last_error();
    if (got != want || strstr(msg, substring) == NULL) {
        fprintf(stderr, "FAIL %s: status %d (%s), expected %d; message: %s (wanted '%s')\n", what,
                (int)got, tnt_status_string(got), (int)want, msg, substring);
        failures++;
    }
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = NULL;
    if (argc != 3) {
        fprintf(stderr, "usage: %s unsupported|invalid SUBSTRING\n", argv[0]);
        return 2;
    }
    tnt_status_t want = strcmp(argv[1], "invalid") == 0 ? TNT_ERR_INVALID_ARG : TNT_ERR_UNSUPPORTED;
    const char *substring = argv[2];
    tnt_status_t init_status = tnt_init(&comm);
    if (init_status != TNT_OK) {
        /* A bad TNT_GPU_* value is a bad setting like any other: tnt_init
         * rejects it, naming the variable and the value. */
        if (want == TNT_ERR_INVALID_ARG && init_status == TNT_ERR_INVALID_ARG &&
            strstr(tnt_last_error(), substring) != NULL) {
            printf("gpu_unsupported_check: OK, tnt_init rejected it (%s)\n", substring);
            return 0;
        }
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    if (want == TNT_ERR_INVALID_ARG) {
        fprintf(stderr, "FAIL tnt_init accepted a bad setting; expected '%s'\n", substring);
        return 1;
    }
    /* Any non-NULL pointer: it must never be dereferenced on this path. */
    static float fake[4];
    tnt_gpu_transport_t transport = (tnt_gpu_transport_t)99;

    expect(tnt_device_init(comm), want, substring, "tnt_device_init");
    expect(tnt_allreduce_device(comm, fake, fake, 4, TNT_FLOAT32, TNT_SUM, NULL), want, substring,
           "tnt_allreduce_device");
    expect(tnt_broadcast_device(comm, fake, sizeof(fake), 0, NULL), want, substring,
           "tnt_broadcast_device");
    expect(tnt_allgather_device(comm, fake, fake, 0, NULL), TNT_OK, "", "empty allgather");
    /* The collective set: set-up is their first step (collective, before
     * the agreement round), so they fail alike too. */
    size_t *counts = calloc((size_t)tnt_size(comm), sizeof(*counts));
    counts[0] = 4;
    expect(tnt_reduce_device(comm, fake, fake, 4, TNT_FLOAT32, TNT_SUM, 0, NULL), want, substring,
           "tnt_reduce_device");
    expect(tnt_reduce_scatter_device(comm, fake, fake, 1, TNT_FLOAT32, TNT_SUM, NULL), want,
           substring, "tnt_reduce_scatter_device");
    expect(tnt_reduce_scatterv_device(comm, fake, fake, counts, TNT_FLOAT32, TNT_SUM, NULL), want,
           substring, "tnt_reduce_scatterv_device");
    expect(tnt_gather_device(comm, fake, fake, 4, 0, NULL), want, substring, "tnt_gather_device");
    expect(tnt_scatter_device(comm, fake, fake, 4, 0, NULL), want, substring, "tnt_scatter_device");
    expect(tnt_allgatherv_device(comm, fake, fake, counts, NULL), want, substring,
           "tnt_allgatherv_device");
    expect(tnt_alltoall_device(comm, fake, fake, 1, NULL), want, substring, "tnt_alltoall_device");
    expect(tnt_alltoallv_device(comm, fake, counts, fake, counts, NULL), want, substring,
           "tnt_alltoallv_device");
    free(counts);
    /* Messages are not collective: they cannot set the path up, and say
     * why they cannot run (no CUDA, or not set up). */
    if (want == TNT_ERR_UNSUPPORTED) {
        expect(tnt_recv_device(comm, fake, 4, TNT_ANY_SOURCE, 0, NULL, NULL), TNT_ERR_UNSUPPORTED,
               "tnt_recv_device", "tnt_recv_device");
        if (tnt_size(comm) > 1) {
            expect(tnt_send_device(comm, fake, 4, (tnt_rank(comm) + 1) % tnt_size(comm), 0, NULL),
                   TNT_ERR_UNSUPPORTED, "tnt_send_device", "tnt_send_device");
        }
    }
    if (tnt_device_transport(comm, &transport) != TNT_OK || transport != TNT_GPU_TRANSPORT_NONE) {
        fprintf(stderr, "FAIL tnt_device_transport: %d, expected none\n", (int)transport);
        failures++;
    }
    expect(tnt_device_synchronize(comm, NULL), TNT_ERR_UNSUPPORTED, "set up",
           "tnt_device_synchronize");
    /* Argument errors come first and need no device. */
    expect(tnt_allreduce_device(comm, fake, fake, 4, TNT_DTYPE_LAST, TNT_SUM, NULL),
           TNT_ERR_INVALID_ARG, "dtype", "bad dtype");
    expect(tnt_broadcast_device(comm, fake, 4, tnt_size(comm), NULL), TNT_ERR_INVALID_ARG, "root",
           "bad root");

    /* The host path is unaffected. */
    int64_t v = tnt_rank(comm) + 1, sum = 0;
    tnt_status_t status = tnt_allreduce(comm, &v, &sum, 1, TNT_INT64, TNT_SUM);
    int64_t n = tnt_size(comm);
    if (status != TNT_OK || sum != n * (n + 1) / 2) {
        fprintf(stderr, "FAIL host allreduce after device errors: %s\n", tnt_last_error());
        failures++;
    }
    tnt_finalize(comm);
    if (failures == 0) {
        printf("gpu_unsupported_check: OK (%s)\n", substring);
    }
    return failures == 0 ? 0 : 1;
}
