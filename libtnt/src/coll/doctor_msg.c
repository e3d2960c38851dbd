/*
 * The check of a received board message (see tnt_doctor_decode in
 * doctor.h). Apart from doctor.c so that it depends on nothing: the fuzz
 * harness links this file alone.
 */
#include "coll/doctor.h"

#include <stddef.h>

int tnt_doctor_decode(const struct tnt_doctor_msg *msg, size_t bytes, int sender, int size,
                      const int *node_of_rank, int my_node,
                      tnt_doctor_entry_use_t use[TNT_DOCTOR_MSG_MAX])
{
    const size_t head = offsetof(struct tnt_doctor_msg, entries);

    /* The count is checked against the maximum before it is multiplied, so
     * the product cannot wrap. */
    if (bytes < head || msg->magic != TNT_DOCTOR_MSG_MAGIC || msg->count > TNT_DOCTOR_MSG_MAX ||
        bytes < head + msg->count * sizeof(struct tnt_doctor_entry) || sender < 0 ||
        sender >= size) {
        return -1;
    }
    for (uint32_t k = 0; k < msg->count; k++) {
        const struct tnt_doctor_entry *e = &msg->entries[k];
        if (e->rank < 0 || e->rank >= size || node_of_rank[e->rank] == my_node) {
            use[k] = TNT_DOCTOR_ENTRY_SKIP;
        } else if (node_of_rank[e->rank] != node_of_rank[sender]) {
            /* A rank reports only what its node's board shows: an entry for
             * a rank elsewhere is a lie (one forged "paused" entry would
             * keep every rank from ever timing out), whoever sent it. */
            use[k] = TNT_DOCTOR_ENTRY_OVERREACH;
        } else {
            use[k] = TNT_DOCTOR_ENTRY_TAKE;
        }
    }
    return (int)msg->count;
}
