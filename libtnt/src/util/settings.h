/*
 * The TNT_* environment variables libtnt reads, parsed by one table-driven
 * parser (modelled on UCX's ucs config parser): each variable has a kind
 * (size in KiB, seconds, named choice, boolean, integer, path), a default, bounds
 * or choices, and a one-line description. tnt_init parses all of them once,
 * before the bootstrap and the transports exist, and the layers read the
 * resulting struct. A malformed or out-of-range value fails tnt_init with
 * TNT_ERR_INVALID_ARG and a message naming the variable, the value and what
 * is valid: it never falls back to a default, which once hid values that
 * wrapped sizes around (TNT_SHM_STAGING_KB=-1).
 *
 * An unset or empty variable means its default. docs/environment.md lists the
 * same names, defaults, bounds and choices; unit.settings_doc
 * (tests/unit/check_settings_doc.sh) checks that it does.
 */
#ifndef TNT_UTIL_SETTINGS_H
#define TNT_UTIL_SETTINGS_H

#include <tnt/tnt.h>
#include <stddef.h>
#include <stdint.h>

#include "util/log.h"

/* A size whose default depends on the job's layout (local ranks, nodes):
 * the layer that knows the layout picks it. */
#define TNT_SETTINGS_BY_LAYOUT SIZE_MAX
/* The value of a size that may also be "auto" (TNT_FUSION_THRESHOLD_KB=auto:
 * tune it, docs/tuning.md), distinct from TNT_SETTINGS_BY_LAYOUT. */
#define TNT_SETTINGS_TUNE (SIZE_MAX - 1)

/* The longest path a setting holds, NUL included. */
#define TNT_SETTINGS_PATH_MAX 1024

typedef enum {
    TNT_SETTINGS_ALGO_AUTO,
    TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING,
    TNT_SETTINGS_ALGO_RING,
    TNT_SETTINGS_ALGO_RABENSEIFNER,
    TNT_SETTINGS_ALGO_TREE
} tnt_settings_algo_t;

/* TNT_GPU_TRANSPORT: how device buffers travel (gpu/). */
typedef enum {
    TNT_SETTINGS_GPU_AUTO,
    TNT_SETTINGS_GPU_NCCL,
    TNT_SETTINGS_GPU_HOST
} tnt_settings_gpu_t;

/* TNT_MULTINODE_REDUCE_ON_ARRIVAL: auto = where UCX's rendezvous lands in
 * its own buffers anyway (TCP), on, off. */
typedef enum {
    TNT_SETTINGS_ARRIVAL_AUTO,
    TNT_SETTINGS_ARRIVAL_ON,
    TNT_SETTINGS_ARRIVAL_OFF
} tnt_settings_arrival_t;

/* TNT_SHM_STREAM: how large staged shared-memory copies are made. */
typedef enum {
    TNT_SETTINGS_STREAM_AUTO,
    TNT_SETTINGS_STREAM_ON,
    TNT_SETTINGS_STREAM_OFF
} tnt_settings_stream_t;

/* TNT_SHM_CMA: where single copies between local ranks' buffers
 * (process_vm_readv/writev) replace the staged ones (transport/shm.h). */
typedef enum {
    TNT_SETTINGS_CMA_AUTO, /* gather, scatter, alltoall(v), where they measured faster */
    TNT_SETTINGS_CMA_ON,   /* also allreduce, broadcast and allgather, at every size it can */
    TNT_SETTINGS_CMA_OFF
} tnt_settings_cma_t;

/* TNT_OVERLAP: whether posted operations run in the background (comm/). */
typedef enum {
    TNT_SETTINGS_OVERLAP_AUTO,
    TNT_SETTINGS_OVERLAP_ON,
    TNT_SETTINGS_OVERLAP_OFF
} tnt_settings_overlap_t;

/* TNT_P2P: whether communicators of several ranks make a point-to-point
 * transport at creation (p2p/p2p.h). */
typedef enum {
    TNT_SETTINGS_P2P_ON,
    TNT_SETTINGS_P2P_OFF
} tnt_settings_p2p_t;

typedef struct tnt_settings {
    double timeout_s;                   /* TNT_TIMEOUT; 0 = no timeout */
    double stall_warn_s;                /* TNT_STALL_WARN; 0 = no warning */
    tnt_log_level_t log_level;          /* TNT_LOG_LEVEL */
    int log_on_all_ranks;               /* TNT_LOG_ON_ALL_DEVICES */
    size_t fusion_threshold_bytes;      /* TNT_FUSION_THRESHOLD_KB, or TNT_SETTINGS_TUNE */
    int fusion_threshold_tune;          /* TNT_FUSION_THRESHOLD: 1 = auto, 0 = fixed */
    tnt_settings_overlap_t overlap;     /* TNT_OVERLAP */
    tnt_settings_p2p_t p2p;             /* TNT_P2P */
    size_t p2p_cma_bytes;               /* TNT_P2P_CMA_KB; 0 = never */
    size_t shm_staging_bytes;           /* TNT_SHM_STAGING_KB */
    size_t shm_small_bytes;             /* TNT_SHM_SMALL_KB, or TNT_SETTINGS_BY_LAYOUT */
    int shm_cma;                        /* TNT_SHM_CMA (tnt_settings_cma_t) */
    size_t shm_stream_bytes;            /* TNT_SHM_STREAM_KB */
    tnt_settings_stream_t shm_stream;   /* TNT_SHM_STREAM */
    tnt_settings_algo_t allreduce_algo; /* TNT_ALLREDUCE_ALGO */
    size_t multinode_rd_max_bytes;      /* TNT_MULTINODE_RD_MAX_KB, or TNT_SETTINGS_BY_LAYOUT */
    size_t multinode_chunk_bytes;       /* TNT_MULTINODE_CHUNK_KB */
    tnt_settings_arrival_t multinode_reduce_on_arrival; /* TNT_MULTINODE_REDUCE_ON_ARRIVAL */
    uint64_t multinode_latency_ns;                      /* TNT_MULTINODE_LATENCY_NS; 0 = built-in */
    uint64_t multinode_link_mbps;                       /* TNT_MULTINODE_LINK_MBPS; 0 = built-in */
    uint64_t ucx_spin_us;                               /* TNT_UCX_SPIN_US */
    uint64_t ucx_yield_us;                              /* TNT_UCX_YIELD_US */
    size_t ucx_tcp_seg_bytes;                           /* TNT_UCX_TCP_SEG_KB; 0 = UCX's default */
    tnt_settings_gpu_t gpu_transport;                   /* TNT_GPU_TRANSPORT */
    size_t gpu_staging_bytes; /* TNT_GPU_STAGING_KB: one chunk of the host-staged path */
    char timeline_path[TNT_SETTINGS_PATH_MAX]; /* TNT_TIMELINE; "" = no timeline */
    uint64_t timeline_events;                  /* TNT_TIMELINE_EVENTS */
} tnt_settings_t;

/* Every field at its default. */
void tnt_settings_set_defaults(tnt_settings_t *settings);

/* Parses value as the variable name and stores it in settings; NULL or ""
 * stores the default. On a bad value raises TNT_ERR_INVALID_ARG ("TNT_X='v'
 * is not valid: expected ...") and leaves settings unchanged. */
tnt_status_t tnt_settings_parse(tnt_settings_t *settings, const char *name, const char *value);

/* The same without logging or recording an error: returns 0, or -1 and leaves
 * settings unchanged. For the logger, which reads its two variables before
 * tnt_init and must not log from inside its own set-up; tnt_init reports a
 * bad value. */
int tnt_settings_parse_quietly(tnt_settings_t *settings, const char *name, const char *value);

/* Defaults, then every variable of the table from the environment. Each bad
 * value is logged as an error; the first one stays this thread's last error
 * and its status is returned. */
tnt_status_t tnt_settings_load(tnt_settings_t *settings);

/* tnt_settings_load into a new struct, for the communicator. */
tnt_status_t tnt_settings_create(tnt_settings_t **settings_p);
void tnt_settings_destroy(tnt_settings_t *settings);

/* The table's variable names, in table order (docs/environment.md check). */
size_t tnt_settings_count(void);
const char *tnt_settings_name(size_t index);
/* One line describing entry index for the docs check:
 * "NAME|DEFAULT|KIND|MIN|MAX|CHOICE,CHOICE..." (DEFAULT empty when the layers
 * choose by layout; MIN and MAX for sizes in KiB, seconds and whole numbers;
 * KIND one of size_kb, seconds, int, choice, bool, path). 0, or -1 past the end. */
int tnt_settings_describe(size_t index, char *buf, size_t len);

#endif
