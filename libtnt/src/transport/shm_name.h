/*
 * The one rule for naming a node's shared-memory segment. libtnt (core/init.c)
 * names it /tnt-<16 hex digits of the job id's hash>-<pid of the node's
 * lowest rank>: unique per job and node, and the same on every rank of the
 * node. The launcher (pmix/launcher/shm_cleanup.c) removes what its killed
 * ranks left behind by matching the same rule. Header-only: the launcher does
 * not link libtnt.
 */
#ifndef TNT_TRANSPORT_SHM_NAME_H
#define TNT_TRANSPORT_SHM_NAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TNT_SHM_NAME_MAX 64

/* The shm_open(3) name ("/tnt-..."). Returns 0, or -1 when len is too small. */
static inline int tnt_shm_segment_name(uint64_t job_hash, long long first_pid, char *buf,
                                       size_t len)
{
    int n = snprintf(buf, len, "/tnt-%016llx-%lld", (unsigned long long)job_hash, first_pid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The hang doctor's per-node board (coll/doctor.c): "/tnt-<hash>-doctor-<pid>",
 * which the pattern below matches too. Returns 0, or -1 when len is too small. */
static inline int tnt_shm_doctor_name(uint64_t job_hash, long long first_pid, char *buf, size_t len)
{
    int n = snprintf(buf, len, "/tnt-%016llx-doctor-%lld", (unsigned long long)job_hash, first_pid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* An fnmatch(3) pattern over /dev/shm entries (no leading '/') that matches
 * the segment (and the doctor's board) of any job whose node's first rank has pid first_pid; for a
 * caller that does not know the job id's hash. Returns 0, or -1 when len is
 * too small. */
static inline int tnt_shm_segment_pattern(long long first_pid, char *buf, size_t len)
{
    int n = snprintf(buf, len, "tnt-%s-%lld", "[0-9a-f]*", first_pid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

#endif
