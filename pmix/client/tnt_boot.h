/*
 * Out-of-band bootstrap used by libtnt, in the spirit of UCC's OOB allgather:
 * the rest of libtnt sees only this interface. The PMIx implementation lives
 * in boot_pmix.c (PMIx_Init, Put/Commit/Fence(collect)/Get); without a
 * reachable PMIx server it falls back to a singleton (size 1).
 */
#ifndef TNT_PMIX_BOOT_H
#define TNT_PMIX_BOOT_H

#include <tnt/tnt.h>

#define TNT_BOOT_HOSTNAME_MAX 256

typedef struct tnt_boot tnt_boot_t;

struct tnt_boot_info {
    int rank;
    int size;
    int local_rank;
    int local_size;
    int is_singleton;
    char job_id[64];                      /* PMIx namespace (or "singleton-<pid>") */
    char hostname[TNT_BOOT_HOSTNAME_MAX]; /* this rank's PMIX_HOSTNAME */
};

/* Connects to the PMIx server (or becomes a singleton). timeout_s bounds
 * every fence. */
tnt_status_t tnt_boot_init(double timeout_s, tnt_boot_t **boot_p);
void tnt_boot_finalize(tnt_boot_t *boot);
const struct tnt_boot_info *tnt_boot_info(const tnt_boot_t *boot);

/* PMIX_HOSTNAME of another rank (Slurm 22.05's PMIX_NODEID is wrong for
 * peers, so node identity is derived from hostnames only). */
tnt_status_t tnt_boot_peer_hostname(tnt_boot_t *boot, int rank, char *buf, size_t len);

/* Collective over all ranks: out receives size * bytes, rank r's block at
 * r * bytes. Implemented as Put/Commit/Fence(collect)/Get. */
tnt_status_t tnt_boot_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes);
tnt_status_t tnt_boot_barrier(tnt_boot_t *boot);

/* Asks the launcher / slurmstepd to kill the whole job. Does not return. */
void tnt_boot_abort(tnt_boot_t *boot, int exit_code, const char *message) __attribute__((noreturn));

#endif
