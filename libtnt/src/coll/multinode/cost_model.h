/*
 * The alpha-beta-gamma cost model that picks the inter-node allreduce
 * algorithm. tests/bench/cost_model.py implements the same formulas, reads
 * the constants below from this file, fits them to benchmark runs and
 * evaluates them for large clusters (docs/scaling.md); unit.cost_model
 * checks that both give the same costs and choices.
 *
 * Model of one inter-node allreduce of m bytes among n members (one per
 * node; L such groups run at once, one per local rank, sharing the node's
 * link, so each sees beta * L):
 *   alpha  latency of one message (s)
 *   beta   link time per byte (s/B) for the whole node
 *   gamma  reduction time per byte (s/B), per rank with a core to itself
 *          (S ranks sharing a core see gamma * S)
 * A step that moves s bytes each way and reduces r bytes, cut into k
 * pipelined chunks, takes
 *   alpha + max(s beta L, r gamma S) + min(s beta L, r gamma S) / k
 * (k = 1: transfer then reduce; many chunks: the reduction hides behind
 * the transfer, or the other way round). Then, with p the largest power of
 * two <= n and one extra fold + hand-back when n != p:
 *   ring:          n-1 reduce-scatter steps of m/n (reducing), then n-1
 *                  allgather steps of m/n
 *   recursive dbl: log2 p steps of m (reducing)
 *   rabenseifner:  log2 p reduce-scatter steps of m/2, m/4, ... (reducing),
 *                  then the same sizes back (allgather)
 *   tree:          ceil(log2 n) binomial reduce steps of m (reducing), then
 *                  the same steps back (broadcast)
 *   fold:          one step of m (reducing) before, one of m after
 *
 * On a shared host (below; C cores, `over` = ranks / C) a step in which
 * only `a` of the n members send scales the shared parts by f = a / n:
 * alpha's oversubscription factor becomes max(1, over f), L and S become
 * max(C, L f) and max(C, S f) (a few streams cannot use more than the
 * host's cores). A rank that does not take part in a step leaves the cores
 * to the ones that do. This is what makes the tree (n - 1 messages per direction, most
 * rounds with few senders) the choice there for small and mid-size
 * vectors; steps in which every member sends are unchanged, so the fit
 * below still holds. On separate nodes nothing is shared and f plays no
 * part: there the tree's 2 log2 n steps of the whole vector never win.
 *
 * Alpha and beta are fitted to simulated-node runs (UCX over TCP loopback,
 * waits that yield before sleeping) and gamma is held at the reduction
 * kernel's measured rate, since on loopback the fit cannot tell it from
 * beta (the machine, the runs and the fit: docs/scaling.md, "Re-fit with
 * yielding waits"). There every simulated node lives on one host, so all ranks of the
 * job share its "link" (the loopback and the CPUs that run TCP): with the
 * built-in constants L and S are the job's size. On a real cluster
 * TNT_MULTINODE_LATENCY_NS and TNT_MULTINODE_LINK_MBPS replace alpha and
 * beta, and then L is the ranks per node and S is 1.
 */
#ifndef TNT_COLL_MULTINODE_COST_MODEL_H
#define TNT_COLL_MULTINODE_COST_MODEL_H

#include <stddef.h>

/* cost_model.py parses these four lines: keep the form "#define NAME value". */
#define TNT_MN_COST_ALPHA_S       9.8e-6
#define TNT_MN_COST_BETA_S_PER_B  0.379e-9
#define TNT_MN_COST_GAMMA_S_PER_B 0.1e-9
/* Smallest pipeline chunk: below it a chunk's message costs more than the
 * overlap wins (also in cost_model.py). */
#define TNT_MN_MIN_CHUNK_BYTES 32768

typedef enum {
    TNT_MN_ALGO_AUTO,
    TNT_MN_ALGO_RECURSIVE_DOUBLING,
    TNT_MN_ALGO_RING,
    TNT_MN_ALGO_RABENSEIFNER,
    TNT_MN_ALGO_TREE,
} tnt_mn_algo_t;

#define TNT_MN_ALGO_COUNT 5

typedef struct {
    double alpha;  /* s per message */
    double beta;   /* s per byte on the node's link */
    double gamma;  /* s per byte reduced */
    int links;     /* ranks sharing one link (ranks per node) */
    int cpu_share; /* ranks sharing one core (1 with a core per rank) */
    size_t chunk;  /* pipeline chunk (TNT_MULTINODE_CHUNK_KB) */
    int depth;     /* chunks in flight */
    /* Every rank on one host (tnt_mn_cost_shared_host), which has `cores`
     * CPUs: a step in which only some members send loads it less. */
    int shared_host;
    double cores;
} tnt_mn_cost_params_t;

/* Chunk size of a pipelined transfer of `bytes`: the configured chunk, made
 * smaller so that about `depth` chunks keep the pipeline full, but not below
 * TNT_MN_MIN_CHUNK_BYTES; whole elements. Shared with the algorithms. */
size_t tnt_mn_chunk_for(size_t bytes, size_t chunk, int depth, size_t esize);

/* The parameters for ranks that share one host (simulated nodes): every
 * one of the `ranks` shares the host's loopback "link" and its `cores`
 * CPUs, and a message waits for its receiver to be scheduled, so the
 * latency grows with ranks / cores. The built-in constants were fitted with
 * this form; cost_model.py's shared_host() is its twin. */
void tnt_mn_cost_shared_host(double alpha, double beta, double gamma, int ranks, int cores,
                             tnt_mn_cost_params_t *p);

/* Predicted seconds for one allreduce of `bytes` among n members. */
double tnt_mn_cost(tnt_mn_algo_t algo, int n, double bytes, const tnt_mn_cost_params_t *p);

/* The algorithm with the smallest predicted time (ties: the earlier of
 * recursive doubling, rabenseifner, ring, tree). */
tnt_mn_algo_t tnt_mn_cost_select(int n, double bytes, const tnt_mn_cost_params_t *p);

const char *tnt_mn_algo_name(tnt_mn_algo_t algo);

#endif
