/*
 * The one rule for naming a node's shared-memory segment. Local rank 0
 * (transport/shm.c) names it /tnt-<its pid>-<32 hex digits drawn with
 * getrandom(2)> and sends the name to the node's other ranks over the
 * bootstrap: nobody outside the job can know the name before the segment
 * exists, so no other user can create it first (and once it exists, mode
 * 0600 and the sticky /dev/shm keep them out). The pid part lets the
 * launcher (pmix/launcher/shm_cleanup.c) find what its killed ranks left
 * behind. Header-only: the launcher does not link libtnt.
 */
#ifndef TNT_TRANSPORT_SHM_NAME_H
#define TNT_TRANSPORT_SHM_NAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TNT_SHM_NAME_MAX    96
#define TNT_SHM_NONCE_BYTES 16

/* The shm_open(3) name "<prefix>-<nonce in hex>"; libtnt's prefix is
 * "/tnt-<pid>" (tnt_shm_name_prefix). Returns 0, or -1 when len is too
 * small. */
static inline int tnt_shm_segment_name(const char *prefix, const uint8_t nonce[TNT_SHM_NONCE_BYTES],
                                       char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s-", prefix);

    if (n < 0 || (size_t)n + 2 * TNT_SHM_NONCE_BYTES >= len) {
        return -1;
    }
    for (int i = 0; i < TNT_SHM_NONCE_BYTES; i++) {
        snprintf(buf + n + 2 * i, 3, "%02x", nonce[i]);
    }
    return 0;
}

/* The prefix of every segment that the process with this pid creates. */
static inline int tnt_shm_name_prefix(long long creator_pid, char *buf, size_t len)
{
    int n = snprintf(buf, len, "/tnt-%lld", creator_pid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* An fnmatch(3) pattern over /dev/shm entries (no leading '/') that matches
 * every segment a process with pid creator_pid creates. Returns 0, or -1
 * when len is too small. */
static inline int tnt_shm_segment_pattern(long long creator_pid, char *buf, size_t len)
{
    int n = snprintf(buf, len, "tnt-%lld-%s", creator_pid,
                     "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]*");

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

#endif
