/*
 * Task pinning, shared by the `tarantella` launcher (before exec) and the
 * SPANK plugin (in task_init). Pure computation (tnt_pin_compute) is separate
 * from applying it, so masks can be unit-tested on hwloc synthetic
 * topologies such as "package:2 numa:2 core:8 pu:2".
 * Built as a static PIC library (tnt_topo) so the plugin does not need to
 * load libtnt.so or PMIx inside slurmstepd.
 */
#ifndef TNT_TOPO_PIN_H
#define TNT_TOPO_PIN_H

#include <hwloc.h>

typedef enum {
    TNT_PIN_NONE,
    TNT_PIN_SOCKET,
    TNT_PIN_NUMA,
    TNT_PIN_CORE,
    TNT_PIN_AUTO      /* core when there are at least as many cores as tasks, else socket... */
} tnt_pin_mode_t;

/* "none|socket|numa|core|auto" -> mode; returns -1 for anything else. */
int tnt_pin_mode_parse(const char *name, tnt_pin_mode_t *mode_p);
const char *tnt_pin_mode_name(tnt_pin_mode_t mode);
/* The valid names, for error messages: "none, socket, numa, core, auto". */
const char *tnt_pin_mode_choices(void);

/*
 * Computes the CPUs (and NUMA nodes) for local task local_rank of local_size,
 * restricted to `allowed` (the task's current cpuset; cgroups may shrink it).
 * Tasks are spread evenly over the chosen objects, in order.
 * Returns 0, or -1 with a message in errbuf (e.g. allowed set empty).
 */
int tnt_pin_compute(hwloc_topology_t topology, hwloc_const_cpuset_t allowed, tnt_pin_mode_t mode,
                    int local_rank, int local_size, hwloc_cpuset_t cpuset_out,
                    hwloc_nodeset_t nodeset_out, char *errbuf, size_t errlen);

/* Binds the calling process (all threads) to cpuset and its memory to
 * nodeset: strict binding when strict_memory, preferred otherwise. */
int tnt_pin_apply(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset,
                  hwloc_const_nodeset_t nodeset, int strict_memory, char *errbuf, size_t errlen);

#endif
