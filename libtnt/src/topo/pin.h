/*
 * Task pinning, shared by the `tarantella` launcher (before exec) and the
 * SPANK plugin (in task_init). Pure computation (tnt_pin_compute) is separate
 * from applying it, so masks can be unit-tested on hwloc synthetic
 * topologies such as "package:2 numa:2 core:8 pu:2".
 * Built as a static PIC library (tnt_topo) so the plugin does not need to
 * load libtnt.so or PMIx inside slurmstepd. Nothing here logs or exits:
 * every function reports problems through errbuf and lets the caller decide
 * how to show them (slurm_error, stderr, ...).
 *
 * Typical use (one task of local_size on this node):
 *
 *     hwloc_topology_t topo;  hwloc_topology_init(&topo); hwloc_topology_load(topo);
 *     hwloc_cpuset_t allowed = hwloc_bitmap_alloc(), cpus = hwloc_bitmap_alloc();
 *     hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
 *     tnt_pin_get_allowed(topo, allowed, err, sizeof err);
 *     tnt_pin_compute(topo, allowed, TNT_PIN_AUTO, local_rank, local_size,
 *                     cpus, nodes, err, sizeof err);
 *     tnt_pin_apply(topo, cpus, nodes, strict_memory, err, sizeof err);
 */
#ifndef TNT_TOPO_PIN_H
#define TNT_TOPO_PIN_H

#include <stddef.h>
#include <hwloc.h>

/*
 * Pinning modes (the launcher's `--pin MODE`, the plugin's `pin=MODE`, and the
 * TNT_PIN variable the launcher and the plugin export to each task):
 *
 *  none    no CPU restriction: the task keeps the whole allowed set.
 *  socket  one package (socket) per task. Tasks are spread evenly over the
 *          packages that have allowed CPUs; when there are more tasks than
 *          packages, consecutive local ranks share a package.
 *  numa    the same with NUMA nodes (only nodes that have allowed CPUs).
 *  core    contiguous groups of cores: the allowed cores (in logical order)
 *          are cut into local_size groups of equal size (+-1), so that every
 *          core is used and a task's cores are neighbours. With more tasks
 *          than cores, consecutive local ranks share a core.
 *  auto    `core` when the node has at least as many allowed cores as local
 *          tasks, otherwise `numa` (oversubscribed tasks then share a NUMA
 *          node's CPUs and the OS balances them, rather than piling up on
 *          single cores).
 *
 * Task i of n always gets object floor(i * k / n) of k objects (core mode:
 * objects floor(i*k/n) .. floor((i+1)*k/n)-1, at least one), so the
 * distribution is block-wise and deterministic.
 */
typedef enum {
    TNT_PIN_NONE,
    TNT_PIN_SOCKET,
    TNT_PIN_NUMA,
    TNT_PIN_CORE,
    TNT_PIN_AUTO
} tnt_pin_mode_t;

/* "none|socket|numa|core|auto" -> mode; returns 0, or -1 for anything else
 * (including NULL) without touching *mode_p. */
int tnt_pin_mode_parse(const char *name, tnt_pin_mode_t *mode_p);
/* The name of a mode ("none", ...), or "?" for an invalid value. */
const char *tnt_pin_mode_name(tnt_pin_mode_t mode);
/* The valid names, for error messages: "none, socket, numa, core, auto". */
const char *tnt_pin_mode_choices(void);

/*
 * The CPUs this process may run on: its current binding intersected with the
 * topology's allowed CPUs (cgroups/cpusets may shrink both). Returns 0, or
 * -1 with a message in errbuf.
 */
int tnt_pin_get_allowed(hwloc_topology_t topology, hwloc_cpuset_t allowed_out, char *errbuf,
                        size_t errlen);

/*
 * Computes the CPUs (and NUMA nodes) for local task local_rank of local_size,
 * restricted to `allowed` (the task's current cpuset; cgroups may shrink it).
 * cpuset_out is a subset of allowed; nodeset_out (NUMA os indexes) holds the
 * NUMA nodes whose CPUs intersect cpuset_out (all nodes when none do, e.g.
 * CPU-less memory). Both outputs are written only on success.
 * Returns 0, or -1 with a message in errbuf (allowed set empty or outside the
 * topology, local_rank out of range, bad mode).
 */
int tnt_pin_compute(hwloc_topology_t topology, hwloc_const_cpuset_t allowed, tnt_pin_mode_t mode,
                    int local_rank, int local_size, hwloc_cpuset_t cpuset_out,
                    hwloc_nodeset_t nodeset_out, char *errbuf, size_t errlen);

/*
 * Binds the calling process (all threads) to cpuset and its memory to
 * nodeset (NUMA os indexes).
 *  - strict_memory: MPOL_BIND to the nodes (allocations never go elsewhere);
 *    failure is an error.
 *  - otherwise: the nodes are preferred (MPOL_PREFERRED_MANY, or the first
 *    node on kernels without it); nothing is done when nodeset covers every
 *    node of the machine. Failure here is only a warning.
 * The policy is inherited across fork and kept across execve, so the
 * launcher and the plugin call this in the task just before it execs.
 * Returns 0 on success, 1 when the CPUs were bound but the memory preference
 * could not be set (the reason is in errbuf, to show as a warning), or -1
 * with a message in errbuf.
 */
int tnt_pin_apply(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset,
                  hwloc_const_nodeset_t nodeset, int strict_memory, char *errbuf, size_t errlen);

/*
 * The OpenMP thread count for task local_rank of local_size under `mode`:
 * the CPUs of its mask divided by the number of local tasks that share that
 * mask (all of them with `none`, those on the same package/NUMA node/core
 * when tasks outnumber objects), at least 1. So N tasks never start more
 * threads than the allowed CPUs. Both the launcher and the plugin export it
 * as OMP_NUM_THREADS unless the user set that. Returns >= 1, or -1 with a
 * message in errbuf (the same errors as tnt_pin_compute).
 */
int tnt_pin_thread_count(hwloc_topology_t topology, hwloc_const_cpuset_t allowed,
                         tnt_pin_mode_t mode, int local_rank, int local_size, char *errbuf,
                         size_t errlen);

/*
 * One line describing a binding for verbose and dry-run output, e.g.
 * "cpus 0-3 (4), numa 0". Always NUL-terminates buf; returns buf.
 */
char *tnt_pin_describe(hwloc_const_cpuset_t cpuset, hwloc_const_nodeset_t nodeset, char *buf,
                       size_t len);

#endif
