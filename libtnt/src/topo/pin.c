/*
 * Task pinning shared by the launcher and the SPANK plugin; see pin.h for the
 * modes and their exact distribution rule. This file never logs: it runs in
 * slurmstepd (where output must go through slurm_error) and in a forked child
 * of the launcher just before exec, so every problem is described in errbuf.
 */
#include "pin.h"

#include <errno.h>
#include <numaif.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pin_mode_names[] = {
    [TNT_PIN_NONE] = "none", [TNT_PIN_SOCKET] = "socket", [TNT_PIN_NUMA] = "numa",
    [TNT_PIN_CORE] = "core", [TNT_PIN_AUTO] = "auto",
};
#define PIN_MODE_COUNT ((int)(sizeof pin_mode_names / sizeof pin_mode_names[0]))

static void pin_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pin_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

int tnt_pin_mode_parse(const char *name, tnt_pin_mode_t *mode_p)
{
    if (name == NULL) {
        return -1;
    }
    for (int i = 0; i < PIN_MODE_COUNT; i++) {
        if (strcmp(name, pin_mode_names[i]) == 0) {
            *mode_p = (tnt_pin_mode_t)i;
            return 0;
        }
    }
    return -1;
}

const char *tnt_pin_mode_name(tnt_pin_mode_t mode)
{
    if ((int)mode < 0 || (int)mode >= PIN_MODE_COUNT) {
        return "?";
    }
    return pin_mode_names[mode];
}

const char *tnt_pin_mode_choices(void)
{
    return "none, socket, numa, core, auto";
}

int tnt_pin_get_allowed(hwloc_topology_t topology, hwloc_cpuset_t allowed_out, char *errbuf,
                        size_t errlen)
{
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    int ret = -1;

    if (bound == NULL) {
        pin_err(errbuf, errlen, "out of memory while reading the CPU binding");
        return -1;
    }
    /* The process binding (all threads) first; a freshly forked task has one
     * thread, so the thread binding is an equivalent fallback where the
     * process query is not supported. Without either, every allowed CPU. */
    if (hwloc_get_cpubind(topology, bound, HWLOC_CPUBIND_PROCESS) != 0 &&
        hwloc_get_cpubind(topology, bound, HWLOC_CPUBIND_THREAD) != 0) {
        hwloc_bitmap_copy(bound, hwloc_topology_get_allowed_cpuset(topology));
    }
    hwloc_bitmap_and(bound, bound, hwloc_topology_get_allowed_cpuset(topology));
    if (hwloc_bitmap_iszero(bound)) {
        pin_err(errbuf, errlen,
                "this process may run on no CPU of the topology (cpuset or cgroup empty?)");
        goto out;
    }
    hwloc_bitmap_copy(allowed_out, bound);
    ret = 0;
out:
    hwloc_bitmap_free(bound);
    return ret;
}

/*
 * The allowed part of every object of `type` that has allowed CPUs, in
 * logical order. Falls back to the children types that always exist when a
 * topology lacks the level (no package objects in some VMs: the whole
 * machine is one "package"; no cores: PUs). Returns the number of objects
 * (>= 0) with *sets_p malloc'd, or -1 on allocation failure.
 */
static int pin_collect(hwloc_topology_t topology, hwloc_obj_type_t type,
                       hwloc_const_cpuset_t allowed, hwloc_bitmap_t **sets_p)
{
    int total = hwloc_get_nbobjs_by_type(topology, type);
    hwloc_bitmap_t *sets;
    int count = 0;

    if (total <= 0) {
        if (type == HWLOC_OBJ_CORE) {
            return pin_collect(topology, HWLOC_OBJ_PU, allowed, sets_p);
        }
        /* No package or NUMA level: the machine is the single object. */
        sets = calloc(1, sizeof *sets);
        if (sets == NULL || (sets[0] = hwloc_bitmap_dup(allowed)) == NULL) {
            free(sets);
            return -1;
        }
        *sets_p = sets;
        return 1;
    }
    sets = calloc((size_t)total, sizeof *sets);
    if (sets == NULL) {
        return -1;
    }
    for (int i = 0; i < total; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topology, type, (unsigned)i);

        if (obj == NULL || obj->cpuset == NULL || !hwloc_bitmap_intersects(obj->cpuset, allowed)) {
            continue;
        }
        sets[count] = hwloc_bitmap_alloc();
        if (sets[count] == NULL) {
            goto err_free_sets;
        }
        hwloc_bitmap_and(sets[count], obj->cpuset, allowed);
        count++;
    }
    *sets_p = sets;
    return count;

err_free_sets:
    for (int i = 0; i < count; i++) {
        hwloc_bitmap_free(sets[i]);
    }
    free(sets);
    return -1;
}

static void pin_free_sets(hwloc_bitmap_t *sets, int count)
{
    for (int i = 0; i < count; i++) {
        hwloc_bitmap_free(sets[i]);
    }
    free(sets);
}

/* NUMA nodes (os indexes) whose local CPUs intersect cpuset; all nodes when
 * none do (a machine whose memory is CPU-less, or an odd topology), so the
 * memory policy never ends up empty. */
static void pin_nodes_of(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset,
                         hwloc_nodeset_t nodeset)
{
    int count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);

    hwloc_bitmap_zero(nodeset);
    for (int i = 0; i < count; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, (unsigned)i);

        if (node != NULL && node->cpuset != NULL && hwloc_bitmap_intersects(node->cpuset, cpuset)) {
            hwloc_bitmap_set(nodeset, node->os_index);
        }
    }
    if (hwloc_bitmap_iszero(nodeset)) {
        hwloc_bitmap_copy(nodeset, hwloc_get_root_obj(topology)->nodeset);
    }
}

static int pin_count_cores(hwloc_topology_t topology, hwloc_const_cpuset_t allowed)
{
    hwloc_obj_type_t type =
        hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int total = hwloc_get_nbobjs_by_type(topology, type);
    int count = 0;

    for (int i = 0; i < total; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topology, type, (unsigned)i);

        if (obj != NULL && obj->cpuset != NULL && hwloc_bitmap_intersects(obj->cpuset, allowed)) {
            count++;
        }
    }
    return count;
}

int tnt_pin_compute(hwloc_topology_t topology, hwloc_const_cpuset_t allowed, tnt_pin_mode_t mode,
                    int local_rank, int local_size, hwloc_cpuset_t cpuset_out,
                    hwloc_nodeset_t nodeset_out, char *errbuf, size_t errlen)
{
    hwloc_bitmap_t usable, result;
    hwloc_bitmap_t *sets = NULL;
    hwloc_obj_type_t type;
    int count = 0, first, last;
    int ret = -1;

    if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
        pin_err(errbuf, errlen, "local rank %d of %d is out of range", local_rank, local_size);
        return -1;
    }
    usable = hwloc_bitmap_alloc();
    result = hwloc_bitmap_alloc();
    if (usable == NULL || result == NULL) {
        pin_err(errbuf, errlen, "out of memory while computing the binding");
        goto err_free_bitmaps;
    }
    hwloc_bitmap_and(usable, allowed, hwloc_topology_get_topology_cpuset(topology));
    if (hwloc_bitmap_iszero(usable)) {
        pin_err(errbuf, errlen, "no allowed CPU is part of the topology (allowed set empty?)");
        goto err_free_bitmaps;
    }
    if (mode == TNT_PIN_AUTO) {
        mode = pin_count_cores(topology, usable) >= local_size ? TNT_PIN_CORE : TNT_PIN_NUMA;
    }

    switch (mode) {
    case TNT_PIN_NONE:
        hwloc_bitmap_copy(result, usable);
        goto done;
    case TNT_PIN_SOCKET:
        type = HWLOC_OBJ_PACKAGE;
        break;
    case TNT_PIN_NUMA:
        type = HWLOC_OBJ_NUMANODE;
        break;
    case TNT_PIN_CORE:
        type = HWLOC_OBJ_CORE;
        break;
    default:
        pin_err(errbuf, errlen, "invalid pinning mode %d; valid: %s", (int)mode,
                tnt_pin_mode_choices());
        goto err_free_bitmaps;
    }

    count = pin_collect(topology, type, usable, &sets);
    if (count < 0) {
        pin_err(errbuf, errlen, "out of memory while computing the binding");
        goto err_free_bitmaps;
    }
    if (count == 0) {
        /* Cannot happen for a non-empty usable set (every PU lies in some
         * core/package/NUMA node), but a broken topology must not crash. */
        hwloc_bitmap_copy(result, usable);
        goto done;
    }
    /* Block distribution: task i of n starts at object floor(i*k/n). In
     * product form with 64-bit arithmetic, so large counts cannot overflow. */
    first = (int)((long long)local_rank * count / local_size);
    last = (int)((long long)(local_rank + 1) * count / local_size);
    if (mode != TNT_PIN_CORE || last <= first) {
        last = first + 1; /* one object per task; shared when k < n */
    }
    hwloc_bitmap_zero(result);
    for (int i = first; i < last; i++) {
        hwloc_bitmap_or(result, result, sets[i]);
    }

done:
    pin_nodes_of(topology, result, nodeset_out);
    hwloc_bitmap_copy(cpuset_out, result);
    ret = 0;
    if (sets != NULL) {
        pin_free_sets(sets, count);
    }
err_free_bitmaps:
    hwloc_bitmap_free(result);
    hwloc_bitmap_free(usable);
    return ret;
}

static int pin_count_objects(hwloc_topology_t topology, hwloc_obj_type_t type,
                             hwloc_const_cpuset_t allowed)
{
    int total = hwloc_get_nbobjs_by_type(topology, type);
    int count = 0;

    if (total <= 0) {
        return type == HWLOC_OBJ_CORE ? pin_count_objects(topology, HWLOC_OBJ_PU, allowed) : 1;
    }
    for (int i = 0; i < total; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topology, type, (unsigned)i);

        if (obj != NULL && obj->cpuset != NULL && hwloc_bitmap_intersects(obj->cpuset, allowed)) {
            count++;
        }
    }
    return count;
}

int tnt_pin_thread_count(hwloc_topology_t topology, hwloc_const_cpuset_t allowed,
                         tnt_pin_mode_t mode, int local_rank, int local_size, char *errbuf,
                         size_t errlen)
{
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), nodes = hwloc_bitmap_alloc(), usable = NULL;
    long long k, n = local_size, j, sharers;
    int weight, ret = -1;

    if (cpus == NULL || nodes == NULL) {
        pin_err(errbuf, errlen, "out of memory while computing the thread count");
        goto out;
    }
    if (tnt_pin_compute(topology, allowed, mode, local_rank, local_size, cpus, nodes, errbuf,
                        errlen) != 0) {
        goto out;
    }
    weight = hwloc_bitmap_weight(cpus);
    usable = hwloc_bitmap_alloc();
    if (usable == NULL) {
        pin_err(errbuf, errlen, "out of memory while computing the thread count");
        goto out;
    }
    hwloc_bitmap_and(usable, allowed, hwloc_topology_get_topology_cpuset(topology));
    if (mode == TNT_PIN_AUTO) {
        mode = pin_count_cores(topology, usable) >= local_size ? TNT_PIN_CORE : TNT_PIN_NUMA;
    }
    switch (mode) {
    case TNT_PIN_SOCKET:
        k = pin_count_objects(topology, HWLOC_OBJ_PACKAGE, usable);
        break;
    case TNT_PIN_NUMA:
        k = pin_count_objects(topology, HWLOC_OBJ_NUMANODE, usable);
        break;
    case TNT_PIN_CORE:
        k = pin_count_objects(topology, HWLOC_OBJ_CORE, usable);
        break;
    default:
        k = 1;
        break; /* none: one object, the whole allowed set */
    }
    if (k < 1) {
        k = 1;
    }
    if (mode == TNT_PIN_CORE && n <= k) {
        sharers = 1; /* disjoint core groups */
    } else {
        /* Task i uses object floor(i*k/n) (pin.h); the tasks on object j are
         * i = ceil(j*n/k) .. ceil((j+1)*n/k) - 1. */
        j = (long long)local_rank * k / n;
        sharers = ((j + 1) * n + k - 1) / k - (j * n + k - 1) / k;
    }
    ret = (int)(weight / (sharers > 0 ? sharers : 1));
    if (ret < 1) {
        ret = 1;
    }
out:
    if (usable != NULL) {
        hwloc_bitmap_free(usable);
    }
    if (nodes != NULL) {
        hwloc_bitmap_free(nodes);
    }
    if (cpus != NULL) {
        hwloc_bitmap_free(cpus);
    }
    return ret;
}

/* Kernel node masks: 16 longs cover 1024 NUMA nodes, far beyond any machine
 * hwloc reports today; anything larger is refused rather than truncated. */
#define PIN_NODEMASK_LONGS 16

static int pin_set_mempolicy(int policy, hwloc_const_nodeset_t nodeset)
{
    unsigned long mask[PIN_NODEMASK_LONGS];

    memset(mask, 0, sizeof mask);
    if (hwloc_bitmap_last(nodeset) >= PIN_NODEMASK_LONGS * (int)(8 * sizeof(unsigned long))) {
        errno = EINVAL;
        return -1;
    }
    hwloc_bitmap_to_ulongs(nodeset, PIN_NODEMASK_LONGS, mask);
    /* The kernel reads maxnode - 1 bits, hence the + 1. */
    return (int)set_mempolicy(policy, mask, PIN_NODEMASK_LONGS * 8 * sizeof(unsigned long) + 1);
}

int tnt_pin_apply(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset,
                  hwloc_const_nodeset_t nodeset, int strict_memory, char *errbuf, size_t errlen)
{
    char cpus[256], nodes[128];
    hwloc_bitmap_t first_node;
    int rc;

    hwloc_bitmap_list_snprintf(cpus, sizeof cpus, cpuset);
    hwloc_bitmap_list_snprintf(nodes, sizeof nodes, nodeset);
    /* PROCESS binds every thread; in a single-threaded task (the usual
     * caller) binding the thread is the same and works where the process
     * variant is refused. */
    if (hwloc_set_cpubind(topology, cpuset, HWLOC_CPUBIND_PROCESS) != 0 &&
        hwloc_set_cpubind(topology, cpuset, HWLOC_CPUBIND_THREAD) != 0) {
        pin_err(errbuf, errlen, "cannot bind to CPUs %s: %s", cpus, strerror(errno));
        return -1;
    }
    if (nodeset == NULL || hwloc_bitmap_iszero(nodeset)) {
        return 0;
    }

    if (strict_memory) {
        if (pin_set_mempolicy(MPOL_BIND, nodeset) != 0) {
            pin_err(errbuf, errlen, "cannot bind memory to NUMA nodes %s: %s%s", nodes,
                    strerror(errno),
                    errno == EPERM ? " (containers often forbid set_mempolicy; drop the"
                                     " memory pinning option)"
                                   : "");
            return -1;
        }
        return 0;
    }
    /* Preferring every node is the default policy already. */
    if (hwloc_bitmap_isincluded(hwloc_get_root_obj(topology)->nodeset, nodeset)) {
        return 0;
    }
    if (hwloc_bitmap_weight(nodeset) > 1 && pin_set_mempolicy(MPOL_PREFERRED_MANY, nodeset) == 0) {
        return 0;
    }
    /* Single node, or a kernel older than 5.15 without MPOL_PREFERRED_MANY:
     * prefer the first node of the set. */
    first_node = hwloc_bitmap_alloc();
    if (first_node == NULL) {
        pin_err(errbuf, errlen, "out of memory while setting the memory preference");
        return 1;
    }
    hwloc_bitmap_only(first_node, (unsigned)hwloc_bitmap_first(nodeset));
    rc = pin_set_mempolicy(MPOL_PREFERRED, first_node);
    hwloc_bitmap_free(first_node);
    if (rc != 0) {
        pin_err(errbuf, errlen,
                "CPUs bound to %s, but memory could not be preferred on NUMA"
                " nodes %s: %s",
                cpus, nodes, strerror(errno));
        return 1;
    }
    return 0;
}

char *tnt_pin_describe(hwloc_const_cpuset_t cpuset, hwloc_const_nodeset_t nodeset, char *buf,
                       size_t len)
{
    char cpus[256], nodes[128];
    int weight;

    if (buf == NULL || len == 0) {
        return buf;
    }
    hwloc_bitmap_list_snprintf(cpus, sizeof cpus, cpuset);
    weight = hwloc_bitmap_weight(cpuset);
    if (nodeset != NULL) {
        hwloc_bitmap_list_snprintf(nodes, sizeof nodes, nodeset);
    } else {
        snprintf(nodes, sizeof nodes, "-");
    }
    snprintf(buf, len, "cpus %s (%d), numa %s", cpus, weight, nodes);
    return buf;
}
