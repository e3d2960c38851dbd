/*
 * libFuzzer harness: a hang-doctor board message as a rank receives it from
 * another node: the UCX side message's header check (tnt_ucx_ctl_check),
 * then the board's own (tnt_doctor_decode, libtnt/src/coll/doctor_msg.c).
 * A forged board that is believed can keep every rank from ever timing out
 * (a "paused" entry) or blame the wrong rank, and one that is read past its
 * end crashes the progress thread.
 *
 * Input: 2 bytes the communicator's size - 1, 1 byte ranks per node - 1,
 * 2 bytes this rank (modulo the size), 3 bytes the sender its tag claims
 * (20 bits), then the side message: the control header (with the cookie of
 * fuzz_check.h) and the board. The payload reaches the decoder as
 * tnt_ucx_side_recv hands it over: cut to the doctor's receive buffer, in a
 * buffer of exactly its length. Accepted entries must obey doctor.h: a rank
 * is reported on only by a node-mate, never on this rank's own node.
 */
#include "fuzz_check.h"

#include "coll/doctor.h"
#include "transport/ucx/ucx.h"
#include "transport/ucx/ucx_ctl.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint64_t cookie[2] = { FUZZ_COOKIE_0, FUZZ_COOKIE_1 };
    const size_t header = sizeof(struct tnt_ucx_ctl_header);
    tnt_doctor_entry_use_t use[TNT_DOCTOR_MSG_MAX];
    char why[128];

    int comm_size = (int)fuzz_take(&data, &size, 2) + 1;
    int per_node = (int)fuzz_take(&data, &size, 1) + 1;
    int my_rank = (int)(fuzz_take(&data, &size, 2) % (uint32_t)comm_size);
    int sender = (int)(fuzz_take(&data, &size, 3) & ((1u << 20) - 1));
    size_t bytes = size > header + TNT_UCX_SIDE_MAX ? SIZE_MAX : size;

    if (!tnt_ucx_ctl_check(cookie, my_rank, comm_size, TNT_UCX_SEQ_SIDE, data, bytes, 0, sender,
                           "hang-doctor side message", why, sizeof(why))) {
        return 0;
    }
    size_t length = size - header;
    if (length > sizeof(struct tnt_doctor_msg)) {
        length = sizeof(struct tnt_doctor_msg);
    }
    /* malloc aligns for the struct; its size is the payload's, so ASan
     * catches a read of an entry the message does not hold. */
    struct tnt_doctor_msg *msg = malloc(length > 0 ? length : 1);
    memcpy(msg, data + header, length);
    int *node_of_rank = malloc(sizeof(int) * (size_t)comm_size);
    for (int r = 0; r < comm_size; r++) {
        node_of_rank[r] = r / per_node;
    }
    int my_node = node_of_rank[my_rank];

    int count = tnt_doctor_decode(msg, length, sender, comm_size, node_of_rank, my_node, use);
    if (count >= 0) {
        FUZZ_CHECK(count <= TNT_DOCTOR_MSG_MAX, "count %d", count);
        FUZZ_CHECK(length >= offsetof(struct tnt_doctor_msg, entries) +
                                 (size_t)count * sizeof(struct tnt_doctor_entry),
                   "%d entries decoded from %zu B", count, length);
        FUZZ_CHECK(msg->magic == TNT_DOCTOR_MSG_MAGIC, "magic %x", msg->magic);
        for (int k = 0; k < count; k++) {
            int r = msg->entries[k].rank;
            int valid = r >= 0 && r < comm_size;
            switch (use[k]) {
            case TNT_DOCTOR_ENTRY_TAKE:
                FUZZ_CHECK(valid && node_of_rank[r] == node_of_rank[sender] &&
                               node_of_rank[r] != my_node,
                           "believed rank %d's report on rank %d", sender, r);
                break;
            case TNT_DOCTOR_ENTRY_OVERREACH:
                FUZZ_CHECK(valid && node_of_rank[r] != node_of_rank[sender] &&
                               node_of_rank[r] != my_node,
                           "called rank %d's report on rank %d an overreach", sender, r);
                break;
            case TNT_DOCTOR_ENTRY_SKIP:
                FUZZ_CHECK(!valid || node_of_rank[r] == my_node,
                           "skipped rank %d's report on rank %d", sender, r);
                break;
            default:
                FUZZ_CHECK(0, "entry %d: use %d", k, (int)use[k]);
            }
        }
    }
    free(node_of_rank);
    free(msg);
    return 0;
}
