/*
 * Pin-mask computation (libtnt/src/topo/pin.c) on hwloc synthetic
 * topologies, so every mode is checked on machines this host is not, plus
 * one real bind in a forked child.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topo/pin.h"

/* 2 packages x 2 NUMA nodes x 8 cores x 2 PUs = 64 PUs, 32 cores. PU
 * numbering is logical = physical in synthetic topologies: NUMA node n holds
 * PUs 16n .. 16n+15 and core c holds PUs 2c, 2c+1. */
#define BIG   "package:2 numa:2 core:8 pu:2"
#define SMALL "package:1 core:4 pu:1"

struct pin_fixture {
    hwloc_topology_t topo;
    hwloc_bitmap_t allowed, cpus, nodes;
};

static hwloc_topology_t load_synthetic(const char *description)
{
    hwloc_topology_t topo;

    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_set_synthetic(topo, description), 0);
    assert_int_equal(hwloc_topology_load(topo), 0);
    return topo;
}

static int setup_common(void **state, const char *description)
{
    static struct pin_fixture fixture;

    fixture.topo = load_synthetic(description);
    fixture.allowed = hwloc_bitmap_dup(hwloc_topology_get_topology_cpuset(fixture.topo));
    fixture.cpus = hwloc_bitmap_alloc();
    fixture.nodes = hwloc_bitmap_alloc();
    *state = &fixture;
    return 0;
}

static int setup_big(void **state)
{
    return setup_common(state, BIG);
}
static int setup_small(void **state)
{
    return setup_common(state, SMALL);
}

static int teardown(void **state)
{
    struct pin_fixture *f = *state;

    hwloc_bitmap_free(f->allowed);
    hwloc_bitmap_free(f->cpus);
    hwloc_bitmap_free(f->nodes);
    hwloc_topology_destroy(f->topo);
    return 0;
}

/* Computes rank/size in mode and compares with list strings ("0-15"). */
static void expect_pin(struct pin_fixture *f, tnt_pin_mode_t mode, int rank, int size,
                       const char *cpus, const char *nodes)
{
    char err[256] = "", got_cpus[256], got_nodes[64];

    if (tnt_pin_compute(f->topo, f->allowed, mode, rank, size, f->cpus, f->nodes, err,
                        sizeof err) != 0) {
        fail_msg("%s rank %d/%d: %s", tnt_pin_mode_name(mode), rank, size, err);
    }
    hwloc_bitmap_list_snprintf(got_cpus, sizeof got_cpus, f->cpus);
    hwloc_bitmap_list_snprintf(got_nodes, sizeof got_nodes, f->nodes);
    if (strcmp(got_cpus, cpus) != 0 || strcmp(got_nodes, nodes) != 0) {
        fail_msg("%s rank %d/%d: got cpus %s nodes %s, expected cpus %s nodes %s",
                 tnt_pin_mode_name(mode), rank, size, got_cpus, got_nodes, cpus, nodes);
    }
}

static void test_mode_names(void **state)
{
    tnt_pin_mode_t mode = TNT_PIN_CORE;

    (void)state;
    const char *names[] = { "none", "socket", "numa", "core", "auto" };
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tnt_pin_mode_parse(names[i], &mode), 0);
        assert_int_equal((int)mode, i);
        assert_string_equal(tnt_pin_mode_name(mode), names[i]);
        assert_non_null(strstr(tnt_pin_mode_choices(), names[i]));
    }
    mode = TNT_PIN_CORE;
    assert_int_equal(tnt_pin_mode_parse("sockets", &mode), -1);
    assert_int_equal(tnt_pin_mode_parse("", &mode), -1);
    assert_int_equal(tnt_pin_mode_parse("Core", &mode), -1);
    assert_int_equal(tnt_pin_mode_parse(NULL, &mode), -1);
    assert_int_equal((int)mode, TNT_PIN_CORE); /* untouched on failure */
    assert_string_equal(tnt_pin_mode_name((tnt_pin_mode_t)42), "?");
}

static void test_big_socket(void **state)
{
    struct pin_fixture *f = *state;

    expect_pin(f, TNT_PIN_SOCKET, 0, 1, "0-31", "0-1");
    expect_pin(f, TNT_PIN_SOCKET, 0, 2, "0-31", "0-1");
    expect_pin(f, TNT_PIN_SOCKET, 1, 2, "32-63", "2-3");
    /* More tasks than packages: consecutive ranks share. */
    expect_pin(f, TNT_PIN_SOCKET, 0, 4, "0-31", "0-1");
    expect_pin(f, TNT_PIN_SOCKET, 1, 4, "0-31", "0-1");
    expect_pin(f, TNT_PIN_SOCKET, 2, 4, "32-63", "2-3");
    expect_pin(f, TNT_PIN_SOCKET, 2, 3, "32-63", "2-3");
    expect_pin(f, TNT_PIN_SOCKET, 1, 3, "0-31", "0-1");
}

static void test_big_numa(void **state)
{
    struct pin_fixture *f = *state;

    expect_pin(f, TNT_PIN_NUMA, 0, 4, "0-15", "0");
    expect_pin(f, TNT_PIN_NUMA, 3, 4, "48-63", "3");
    /* Fewer tasks than nodes: spread, not packed. */
    expect_pin(f, TNT_PIN_NUMA, 0, 2, "0-15", "0");
    expect_pin(f, TNT_PIN_NUMA, 1, 2, "32-47", "2");
    /* More tasks than nodes. */
    expect_pin(f, TNT_PIN_NUMA, 0, 8, "0-15", "0");
    expect_pin(f, TNT_PIN_NUMA, 1, 8, "0-15", "0");
    expect_pin(f, TNT_PIN_NUMA, 5, 8, "32-47", "2");
    expect_pin(f, TNT_PIN_NUMA, 7, 8, "48-63", "3");
}

static void test_big_core(void **state)
{
    struct pin_fixture *f = *state;

    expect_pin(f, TNT_PIN_CORE, 0, 1, "0-63", "0-3");
    expect_pin(f, TNT_PIN_CORE, 1, 4, "16-31", "1");
    expect_pin(f, TNT_PIN_CORE, 0, 32, "0-1", "0");
    expect_pin(f, TNT_PIN_CORE, 31, 32, "62-63", "3");
    /* 32 cores over 3 tasks: 10, 11, 11 cores. */
    expect_pin(f, TNT_PIN_CORE, 0, 3, "0-19", "0-1");
    expect_pin(f, TNT_PIN_CORE, 1, 3, "20-41", "1-2");
    expect_pin(f, TNT_PIN_CORE, 2, 3, "42-63", "2-3");
    /* 64 tasks on 32 cores: two per core. */
    expect_pin(f, TNT_PIN_CORE, 0, 64, "0-1", "0");
    expect_pin(f, TNT_PIN_CORE, 1, 64, "0-1", "0");
    expect_pin(f, TNT_PIN_CORE, 63, 64, "62-63", "3");
}

static void test_big_none_auto(void **state)
{
    struct pin_fixture *f = *state;

    expect_pin(f, TNT_PIN_NONE, 3, 8, "0-63", "0-3");
    /* Enough cores: auto is core. */
    expect_pin(f, TNT_PIN_AUTO, 1, 8, "8-15", "0");
    expect_pin(f, TNT_PIN_AUTO, 31, 32, "62-63", "3");
    /* 40 tasks > 32 cores: auto is numa, 10 tasks per node. */
    expect_pin(f, TNT_PIN_AUTO, 0, 40, "0-15", "0");
    expect_pin(f, TNT_PIN_AUTO, 9, 40, "0-15", "0");
    expect_pin(f, TNT_PIN_AUTO, 10, 40, "16-31", "1");
    expect_pin(f, TNT_PIN_AUTO, 39, 40, "48-63", "3");
}

/* A cgroup that grants NUMA nodes 1 and 2 only (PUs 16-47). */
static void test_big_restricted(void **state)
{
    struct pin_fixture *f = *state;

    hwloc_bitmap_zero(f->allowed);
    hwloc_bitmap_set_range(f->allowed, 16, 47);
    expect_pin(f, TNT_PIN_NONE, 0, 2, "16-47", "1-2");
    expect_pin(f, TNT_PIN_SOCKET, 0, 2, "16-31", "1");
    expect_pin(f, TNT_PIN_SOCKET, 1, 2, "32-47", "2");
    expect_pin(f, TNT_PIN_NUMA, 0, 2, "16-31", "1");
    expect_pin(f, TNT_PIN_NUMA, 1, 2, "32-47", "2");
    expect_pin(f, TNT_PIN_NUMA, 2, 3, "32-47", "2");
    expect_pin(f, TNT_PIN_CORE, 0, 16, "16-17", "1");
    expect_pin(f, TNT_PIN_CORE, 15, 16, "46-47", "2");
    /* 17 tasks > 16 allowed cores: auto falls back to numa. */
    expect_pin(f, TNT_PIN_AUTO, 16, 17, "32-47", "2");

    /* One hyperthread per core (even PUs): cores count, not PUs. */
    hwloc_bitmap_zero(f->allowed);
    for (unsigned pu = 0; pu < 64; pu += 2) {
        hwloc_bitmap_set(f->allowed, pu);
    }
    expect_pin(f, TNT_PIN_CORE, 0, 32, "0", "0");
    expect_pin(f, TNT_PIN_CORE, 1, 16, "4,6", "0");
    expect_pin(f, TNT_PIN_AUTO, 31, 32, "62", "3");

    /* A single allowed PU: everyone shares it, whatever the mode. */
    hwloc_bitmap_only(f->allowed, 37);
    for (int mode = TNT_PIN_NONE; mode <= TNT_PIN_AUTO; mode++) {
        for (int rank = 0; rank < 5; rank++) {
            expect_pin(f, (tnt_pin_mode_t)mode, rank, 5, "37", "2");
        }
    }
}

/* For every mode and task count: masks are non-empty subsets of the allowed
 * set with non-empty node sets; core mode with n <= cores partitions the
 * allowed set exactly; socket/numa masks are whole objects. */
static void test_big_properties(void **state)
{
    struct pin_fixture *f = *state;
    hwloc_bitmap_t seen = hwloc_bitmap_alloc();
    char err[256];

    for (int mode = TNT_PIN_NONE; mode <= TNT_PIN_AUTO; mode++) {
        for (int size = 1; size <= 70; size++) {
            hwloc_bitmap_zero(seen);
            for (int rank = 0; rank < size; rank++) {
                assert_int_equal(tnt_pin_compute(f->topo, f->allowed, (tnt_pin_mode_t)mode, rank,
                                                 size, f->cpus, f->nodes, err, sizeof err),
                                 0);
                assert_false(hwloc_bitmap_iszero(f->cpus));
                assert_false(hwloc_bitmap_iszero(f->nodes));
                assert_true(hwloc_bitmap_isincluded(f->cpus, f->allowed));
                if ((mode == TNT_PIN_CORE || mode == TNT_PIN_AUTO) && size <= 32) {
                    assert_false(hwloc_bitmap_intersects(seen, f->cpus));
                    /* whole cores: PU pairs */
                    assert_int_equal(hwloc_bitmap_weight(f->cpus) % 2, 0);
                }
                if (mode == TNT_PIN_NUMA) {
                    assert_int_equal(hwloc_bitmap_weight(f->cpus), 16);
                }
                if (mode == TNT_PIN_SOCKET) {
                    assert_int_equal(hwloc_bitmap_weight(f->cpus), 32);
                }
                hwloc_bitmap_or(seen, seen, f->cpus);
            }
            /* Every CPU gets used once there are enough tasks to cover the objects. */
            if (mode != TNT_PIN_SOCKET || size >= 2) {
                if (mode != TNT_PIN_NUMA || size >= 4) {
                    assert_true(hwloc_bitmap_isequal(seen, f->allowed));
                }
            }
        }
    }
    hwloc_bitmap_free(seen);
}

static int threads(struct pin_fixture *f, tnt_pin_mode_t mode, int rank, int size)
{
    char err[256];

    return tnt_pin_thread_count(f->topo, f->allowed, mode, rank, size, err, sizeof err);
}

/* Thread counts never add up to more than the allowed CPUs per object, and
 * match a brute-force count of the tasks sharing each mask. */
static void test_big_threads(void **state)
{
    struct pin_fixture *f = *state;
    hwloc_bitmap_t other = hwloc_bitmap_alloc();
    char err[256];

    assert_int_equal(threads(f, TNT_PIN_NONE, 0, 1), 64);
    assert_int_equal(threads(f, TNT_PIN_NONE, 3, 4), 16);
    assert_int_equal(threads(f, TNT_PIN_NONE, 0, 100), 1);
    assert_int_equal(threads(f, TNT_PIN_SOCKET, 0, 2), 32);
    assert_int_equal(threads(f, TNT_PIN_SOCKET, 0, 4), 16);
    assert_int_equal(threads(f, TNT_PIN_SOCKET, 2, 3), 32); /* alone on package 1 */
    assert_int_equal(threads(f, TNT_PIN_SOCKET, 1, 3), 16);
    assert_int_equal(threads(f, TNT_PIN_NUMA, 0, 8), 8);
    assert_int_equal(threads(f, TNT_PIN_CORE, 0, 3), 20);
    assert_int_equal(threads(f, TNT_PIN_CORE, 5, 64), 1);
    assert_int_equal(threads(f, TNT_PIN_AUTO, 0, 40), 1); /* numa, 10 per node, 16 PUs */
    assert_int_equal(threads(f, TNT_PIN_CORE, 0, 0), -1);
    for (int mode = TNT_PIN_NONE; mode <= TNT_PIN_AUTO; mode++) {
        for (int size = 1; size <= 70; size += 3) {
            for (int rank = 0; rank < size; rank++) {
                int sharers = 0;

                assert_int_equal(tnt_pin_compute(f->topo, f->allowed, (tnt_pin_mode_t)mode, rank,
                                                 size, f->cpus, f->nodes, err, sizeof err),
                                 0);
                for (int q = 0; q < size; q++) {
                    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, (tnt_pin_mode_t)mode, q,
                                                     size, other, f->nodes, err, sizeof err),
                                     0);
                    sharers += hwloc_bitmap_intersects(other, f->cpus) ? 1 : 0;
                }
                int want = hwloc_bitmap_weight(f->cpus) / sharers;
                if (threads(f, (tnt_pin_mode_t)mode, rank, size) != (want > 0 ? want : 1)) {
                    fail_msg("%s rank %d/%d: %d threads, brute force says %d",
                             tnt_pin_mode_name((tnt_pin_mode_t)mode), rank, size,
                             threads(f, (tnt_pin_mode_t)mode, rank, size), want > 0 ? want : 1);
                }
            }
        }
    }
    hwloc_bitmap_free(other);
}

static void test_errors(void **state)
{
    struct pin_fixture *f = *state;
    char err[256] = "";

    hwloc_bitmap_only(f->cpus, 5);
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, TNT_PIN_CORE, 4, 4, f->cpus, f->nodes,
                                     err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, TNT_PIN_CORE, 0, 0, f->cpus, f->nodes,
                                     err, sizeof err),
                     -1);
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, TNT_PIN_CORE, -1, 2, f->cpus, f->nodes,
                                     err, sizeof err),
                     -1);
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, (tnt_pin_mode_t)9, 0, 2, f->cpus,
                                     f->nodes, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "none, socket, numa, core, auto"));
    /* Allowed set outside the topology (PU 500 does not exist). */
    hwloc_bitmap_only(f->allowed, 500);
    err[0] = '\0';
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, TNT_PIN_NONE, 0, 1, f->cpus, f->nodes,
                                     err, sizeof err),
                     -1);
    assert_true(strlen(err) > 0);
    hwloc_bitmap_zero(f->allowed);
    assert_int_equal(tnt_pin_compute(f->topo, f->allowed, TNT_PIN_AUTO, 0, 1, f->cpus, f->nodes,
                                     err, sizeof err),
                     -1);
    /* Outputs untouched on failure. */
    assert_int_equal(hwloc_bitmap_weight(f->cpus), 1);
    assert_true(hwloc_bitmap_isset(f->cpus, 5));
    /* A NULL errbuf is allowed. */
    assert_int_equal(
        tnt_pin_compute(f->topo, f->allowed, TNT_PIN_AUTO, 0, 1, f->cpus, f->nodes, NULL, 0), -1);
}

static void test_small(void **state)
{
    struct pin_fixture *f = *state;

    for (int rank = 0; rank < 4; rank++) {
        char cpu[16];

        snprintf(cpu, sizeof cpu, "%d", rank);
        expect_pin(f, TNT_PIN_CORE, rank, 4, cpu, "0");
        expect_pin(f, TNT_PIN_AUTO, rank, 4, cpu, "0");
        expect_pin(f, TNT_PIN_SOCKET, rank, 4, "0-3", "0");
        expect_pin(f, TNT_PIN_NUMA, rank, 4, "0-3", "0");
    }
    expect_pin(f, TNT_PIN_CORE, 0, 2, "0-1", "0");
    expect_pin(f, TNT_PIN_CORE, 1, 2, "2-3", "0");
    expect_pin(f, TNT_PIN_CORE, 0, 3, "0", "0");
    expect_pin(f, TNT_PIN_CORE, 1, 3, "1", "0");
    expect_pin(f, TNT_PIN_CORE, 2, 3, "2-3", "0");
    /* 6 tasks on 4 cores: core mode shares cores 0 0 1 2 2 3, auto uses the
     * whole NUMA node instead. */
    const char *shared[] = { "0", "0", "1", "2", "2", "3" };
    for (int rank = 0; rank < 6; rank++) {
        expect_pin(f, TNT_PIN_CORE, rank, 6, shared[rank], "0");
        expect_pin(f, TNT_PIN_AUTO, rank, 6, "0-3", "0");
    }
    hwloc_bitmap_zero(f->allowed);
    hwloc_bitmap_set(f->allowed, 1);
    hwloc_bitmap_set(f->allowed, 3);
    expect_pin(f, TNT_PIN_CORE, 0, 2, "1", "0");
    expect_pin(f, TNT_PIN_CORE, 1, 2, "3", "0");
    expect_pin(f, TNT_PIN_AUTO, 2, 3, "1,3", "0");
}

static void test_describe(void **state)
{
    struct pin_fixture *f = *state;
    char buf[128], tiny[8];

    hwloc_bitmap_zero(f->cpus);
    hwloc_bitmap_set_range(f->cpus, 0, 3);
    hwloc_bitmap_set(f->cpus, 8);
    hwloc_bitmap_only(f->nodes, 1);
    assert_string_equal(tnt_pin_describe(f->cpus, f->nodes, buf, sizeof buf),
                        "cpus 0-3,8 (5), numa 1");
    assert_string_equal(tnt_pin_describe(f->cpus, NULL, buf, sizeof buf), "cpus 0-3,8 (5), numa -");
    tnt_pin_describe(f->cpus, f->nodes, tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* A real bind, in a child so the test process keeps its affinity: bind to
 * the first allowed CPU, then check with sched_getaffinity. */
static void test_apply_real(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        hwloc_topology_t topo;
        hwloc_bitmap_t allowed = hwloc_bitmap_alloc(), cpus = hwloc_bitmap_alloc();
        hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
        char err[256];
        cpu_set_t set;
        int last;

        if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
            _exit(10);
        }
        if (tnt_pin_get_allowed(topo, allowed, err, sizeof err) != 0) {
            _exit(11);
        }
        last = hwloc_bitmap_weight(allowed);
        if (tnt_pin_compute(topo, allowed, TNT_PIN_CORE, last - 1, last, cpus, nodes, err,
                            sizeof err) != 0) {
            _exit(12);
        }
        if (tnt_pin_apply(topo, cpus, nodes, 0, err, sizeof err) < 0) {
            fprintf(stderr, "apply: %s\n", err);
            _exit(13);
        }
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0) {
            _exit(14);
        }
        if (CPU_COUNT(&set) != hwloc_bitmap_weight(cpus) ||
            !CPU_ISSET(hwloc_bitmap_first(cpus), &set)) {
            _exit(15);
        }
        /* Re-reading the binding gives the mask just applied. */
        if (tnt_pin_get_allowed(topo, allowed, err, sizeof err) != 0 ||
            !hwloc_bitmap_isequal(allowed, cpus)) {
            _exit(16);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Memory policies, in a child: strict binds (MPOL_BIND), preferred prefers
 * (MPOL_PREFERRED / MPOL_PREFERRED_MANY), or nothing when the set covers the
 * whole machine. Skipped where the kernel or a container forbids
 * set_mempolicy. */
static void test_apply_memory(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        hwloc_topology_t topo;
        hwloc_bitmap_t allowed = hwloc_bitmap_alloc(), cpus = hwloc_bitmap_alloc();
        hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
        unsigned long mask[16];
        char err[256];
        int policy = -1, rc;

        if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0 ||
            tnt_pin_get_allowed(topo, allowed, err, sizeof err) != 0 ||
            tnt_pin_compute(topo, allowed, TNT_PIN_NUMA, 0, 1, cpus, nodes, err, sizeof err) != 0) {
            _exit(10);
        }
        rc = tnt_pin_apply(topo, cpus, nodes, 1, err, sizeof err);
        if (rc < 0 && strstr(err, "Operation not permitted") != NULL) {
            _exit(77);
        }
        if (rc != 0) {
            fprintf(stderr, "strict: %s\n", err);
            _exit(11);
        }
        if (get_mempolicy(&policy, mask, sizeof mask * 8, NULL, 0) != 0 || policy != MPOL_BIND ||
            (mask[0] & 1ul << hwloc_bitmap_first(nodes)) == 0) {
            _exit(12);
        }
        /* Preferred on every node = the default policy: nothing to set, and
         * no warning. */
        if (set_mempolicy(MPOL_DEFAULT, NULL, 0) != 0) {
            _exit(13);
        }
        hwloc_bitmap_copy(nodes, hwloc_get_root_obj(topo)->nodeset);
        if (tnt_pin_apply(topo, cpus, nodes, 0, err, sizeof err) != 0) {
            _exit(14);
        }
        if (get_mempolicy(&policy, mask, sizeof mask * 8, NULL, 0) != 0 || policy != MPOL_DEFAULT) {
            _exit(15);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_names),
        cmocka_unit_test_setup_teardown(test_big_socket, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_numa, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_core, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_none_auto, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_restricted, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_properties, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_big_threads, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_small, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_describe, setup_small, teardown),
        cmocka_unit_test(test_apply_real),
        cmocka_unit_test(test_apply_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
