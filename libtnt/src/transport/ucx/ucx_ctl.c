/*
 * The check of a received control message; see ucx_ctl.h. No UCX and no
 * logging here: the caller logs what is dropped (tnt_ucx_ctl_valid).
 */
#include "transport/ucx/ucx_ctl.h"

#include <stdio.h>
#include <string.h>

int tnt_ucx_ctl_check(const uint64_t cookie[2], int my_rank, int size, uint32_t seq,
                      const void *buf, size_t bytes, size_t expected, int sender, const char *what,
                      char *why, size_t whylen)
{
    struct tnt_ucx_ctl_header header;

    if (bytes == SIZE_MAX) {
        snprintf(why, whylen, "it is longer than any %s, or broke off", what);
    } else if (bytes < sizeof(header) || (expected != 0 && bytes != expected)) {
        snprintf(why, whylen, "it is %zu B, not the %zu B of a %s", bytes,
                 expected != 0 ? expected : sizeof(header), what);
    } else {
        memcpy(&header, buf, sizeof(header));
        /* Branch-free over all 128 bits: how much of a guess was right does
         * not show in the time this takes. */
        if (((header.cookie[0] ^ cookie[0]) | (header.cookie[1] ^ cookie[1])) != 0) {
            snprintf(why, whylen, "it does not carry this communicator's cookie");
        } else if (header.rank != sender || header.seq != seq) {
            snprintf(why, whylen, "its header (rank %d, kind %x) does not match its tag",
                     (int)header.rank, (unsigned)header.seq);
        } else if (sender >= size || sender == my_rank) {
            snprintf(why, whylen, "rank %d is not a peer in this communicator of %d", sender, size);
        } else {
            return 1;
        }
    }
    return 0;
}
