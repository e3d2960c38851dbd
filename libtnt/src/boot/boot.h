/*
 * The bootstrap: how ranks find each other before any transport exists. In
 * the spirit of UCC's OOB collective (ucc_oob_coll_t) the rest of libtnt sees
 * only a small operations table; each implementation fills one in:
 *   boot_pmix.c       PMIx client (tarantella, mpirun, srun --mpi=pmix)
 *   boot_singleton.c  a process of its own (size 1), when no PMIx server is there
 *   boot_threads.c    N ranks as threads of one process, for unit tests
 *   boot_oob.c        the caller's own exchange (tnt_comm_create_oob)
 *   core/split.c      a new communicator's ranks, over their parent's
 *                     collectives (tnt_comm_split; above comm/, so it lives
 *                     in core/)
 *
 * Layer: above util/ only; transports (UCX address exchange) and core/
 * (layout, tnt_abort) call down into it.
 */
#ifndef TNT_BOOT_BOOT_H
#define TNT_BOOT_BOOT_H

#include <tnt/tnt.h>
#include <stdatomic.h>
#include <stddef.h>

#define TNT_BOOT_HOSTNAME_MAX 256
#define TNT_BOOT_JOB_ID_MAX   64

typedef struct tnt_boot tnt_boot_t;

struct tnt_boot_info {
    int rank;
    int size;
    int local_rank; /* the launcher's view; -1 when it gives none */
    int local_size; /* the launcher's view; -1 when it gives none */
    int is_singleton;
    char job_id[TNT_BOOT_JOB_ID_MAX];     /* PMIx namespace, "singleton-<pid>", ... */
    char hostname[TNT_BOOT_HOSTNAME_MAX]; /* this rank's host as the launcher names it */
};

/* What an implementation provides. The wrappers below check arguments and
 * handle size 1, so the operations see only rank and size already validated.
 * Every collective operation is bounded by the timeout the implementation was
 * created with and names the missing ranks when it runs out. */
struct tnt_boot_ops {
    const char *name; /* "pmix", "singleton", "threads": for log messages */
    /* Collective: out receives size * bytes, rank r's block at r * bytes. */
    tnt_status_t (*allgather)(tnt_boot_t *boot, const void *in, void *out, size_t bytes);
    /* Asks the launcher to end the whole job (exit_code != 0). May return
     * when there is no launcher to ask; tnt_boot_abort then exits. */
    void (*abort)(tnt_boot_t *boot, int exit_code, const char *message);
    /* Frees boot (not collective). */
    void (*finalize)(tnt_boot_t *boot);
};

/* The part every implementation embeds as its first member (zeroed at
 * creation). */
struct tnt_boot {
    const struct tnt_boot_ops *ops;
    struct tnt_boot_info info;
    /* Holders besides the creator (tnt_boot_ref): a split communicator
     * aborts the job through its root's bootstrap, which must outlive the
     * parent communicator. */
    _Atomic int extra_refs;
};

/* The bootstrap of a real process: PMIx when the environment names a server
 * and it answers, otherwise a singleton (with a warning when the
 * environment suggests that more ranks were meant). timeout_s bounds every
 * collective operation (0: none). */
tnt_status_t tnt_boot_init(double timeout_s, tnt_boot_t **boot_p);

/* Result of tnt_boot_pmix_create when the environment has no PMIx server or
 * PMIx_Init cannot reach it: no error is logged, why says what happened. */
#define TNT_BOOT_PMIX_ABSENT TNT_ERR_UNSUPPORTED
tnt_status_t tnt_boot_pmix_create(double timeout_s, char *why, size_t why_len, tnt_boot_t **boot_p);
/* The most ranks a job may have: far above any real job, and small enough
 * that sizes times per-rank records never overflow. */
#define TNT_BOOT_MAX_SIZE (1L << 24)
/* 0 when PMIX_JOB_SIZE's value size can be the job size (1 to
 * TNT_BOOT_MAX_SIZE) and rank is one of its ranks, else -1. */
int tnt_boot_pmix_check_size(long size, unsigned long rank);
/* warn: the caller expected a launcher (why is then logged as a warning). */
tnt_status_t tnt_boot_singleton_create(const char *why, int warn, tnt_boot_t **boot_p);

/* The caller's exchange (tnt_oob_t, checked here); timeout_s bounds a
 * non-blocking one. */
tnt_status_t tnt_boot_oob_create(const tnt_oob_t *oob, double timeout_s, tnt_boot_t **boot_p);

/* One more holder; each holder calls tnt_boot_finalize once, and the last
 * call frees boot. */
void tnt_boot_ref(tnt_boot_t *boot);
void tnt_boot_finalize(tnt_boot_t *boot);
const struct tnt_boot_info *tnt_boot_info(const tnt_boot_t *boot);
tnt_status_t tnt_boot_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes);
/* Ends the whole job through the launcher; boot may be NULL (before
 * tnt_init). Does not return: in a process it exits, in boot_threads.c the
 * calling thread ends. */
void tnt_boot_abort(tnt_boot_t *boot, int exit_code, const char *message) __attribute__((noreturn));

#endif
