/*
 * libFuzzer harness: the check of a received UCX control message
 * (tnt_ucx_ctl_check, libtnt/src/transport/ucx/ucx_ctl.c): the wire-up
 * hello, the goodbye and the hang doctor's side message, which anyone who
 * can reach a node's UCX ports can send, with any length and any claimed
 * sender.
 *
 * Input: 1 byte the kind (hello, goodbye, side message), 2 bytes the
 * communicator's size - 1, 2 bytes this rank (modulo the size), 3 bytes the
 * sender its tag claims (20 bits, as TNT_UCX_CTL_RANK reads it), then the
 * message. The message is handed over as ucx_wait.c receives it: in a
 * buffer of exactly its length, and reported as SIZE_MAX bytes when longer
 * than the receive buffer (a header for hello and goodbye, a header plus
 * TNT_UCX_SIDE_MAX for side messages). An accepted message must be one the
 * header's rules allow: the cookie, the kind, the claimed rank, a peer.
 */
#include "fuzz_check.h"

#include "transport/ucx/ucx.h"
#include "transport/ucx/ucx_ctl.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t kinds[] = { TNT_UCX_SEQ_WIREUP, TNT_UCX_SEQ_GOODBYE, TNT_UCX_SEQ_SIDE };
    static const char *const names[] = { "wire-up hello", "goodbye", "hang-doctor side message" };
    const uint64_t cookie[2] = { FUZZ_COOKIE_0, FUZZ_COOKIE_1 };
    struct tnt_ucx_ctl_header header;
    char why[128] = "";

    unsigned kind = fuzz_take(&data, &size, 1) % 3;
    int comm_size = (int)fuzz_take(&data, &size, 2) + 1;
    int my_rank = (int)(fuzz_take(&data, &size, 2) % (uint32_t)comm_size);
    int sender = (int)(fuzz_take(&data, &size, 3) & ((1u << 20) - 1));
    int is_side = kinds[kind] == TNT_UCX_SEQ_SIDE;
    size_t cap = sizeof(header) + (is_side ? TNT_UCX_SIDE_MAX : 0);
    size_t expected = is_side ? 0 : sizeof(header);
    size_t bytes = size > cap ? SIZE_MAX : size;

    unsigned char *msg = malloc(size > 0 ? size : 1);
    memcpy(msg, data, size);
    int ok = tnt_ucx_ctl_check(cookie, my_rank, comm_size, kinds[kind], msg, bytes, expected,
                               sender, names[kind], why, sizeof(why));
    if (ok) {
        FUZZ_CHECK(bytes != SIZE_MAX && bytes >= sizeof(header), "accepted %zu B", bytes);
        FUZZ_CHECK(expected == 0 || bytes == expected, "accepted a %s of %zu B", names[kind],
                   bytes);
        memcpy(&header, msg, sizeof(header));
        FUZZ_CHECK(header.cookie[0] == cookie[0] && header.cookie[1] == cookie[1],
                   "accepted a foreign cookie");
        FUZZ_CHECK(header.seq == kinds[kind], "accepted kind %x as %x", header.seq, kinds[kind]);
        FUZZ_CHECK(header.rank == sender && sender < comm_size && sender != my_rank,
                   "accepted rank %d (tag %d) at rank %d of %d", header.rank, sender, my_rank,
                   comm_size);
    } else {
        FUZZ_CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)) != NULL,
                   "dropped without a reason");
    }
    free(msg);
    return 0;
}
