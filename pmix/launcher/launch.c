/*
 * Planning: everything about the ranks that is decided before anything
 * starts (layout on the real or simulated nodes, CPU and memory binding,
 * thread counts, environment, argv), and the --dry-run report of it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <hwloc.h>

#include "launch.h"
#include "msg.h"
#include "pin.h"
#include "plan.h"
#include "pythonpath.h"

extern char **environ;

/* GPUs visible as /dev/nvidia<N> character devices. */
static int count_gpus(void)
{
    DIR *dir = opendir("/dev");
    struct dirent *entry;
    int count = 0;

    if (dir == NULL) {
        return 0;
    }
    while ((entry = readdir(dir)) != NULL) {
        const char *p = entry->d_name;

        if (strncmp(p, "nvidia", 6) != 0 || p[6] == '\0') {
            continue;
        }
        for (p += 6; *p >= '0' && *p <= '9'; p++) {
            ;
        }
        if (*p == '\0') {
            count++;
        }
    }
    closedir(dir);
    return count;
}

void tnt_launch_free(struct launch *launch)
{
    for (int r = 0; launch->ranks != NULL && r < launch->nranks; r++) {
        struct rank_state *rs = &launch->ranks[r];

        if (rs->cpuset != NULL) {
            hwloc_bitmap_free(rs->cpuset);
        }
        if (rs->nodeset != NULL) {
            hwloc_bitmap_free(rs->nodeset);
        }
        if (rs->err_fd >= 0) {
            close(rs->err_fd);
        }
        tnt_envlist_free(&rs->added);
    }
    free(launch->ranks);
    free(launch->node_of_rank);
    free(launch->local_rank);
    free(launch->node_first);
    free(launch->node_size);
    free(launch->node_names);
    free(launch->exec_argv);
    free(launch->pythonpath);
    if (launch->topology != NULL) {
        hwloc_topology_destroy(launch->topology);
    }
    tnt_launch_options_free(&launch->opts);
}

/*
 * Where this launcher's Python package lives, relative to the directory of
 * the launcher binary (CMake records both the build tree's and the install
 * tree's, ':'-separated), and the interpreter's sys.path at configure time.
 */
#ifndef TNT_LAUNCH_PYTHON_PKG_RELDIRS
#define TNT_LAUNCH_PYTHON_PKG_RELDIRS ""
#endif
#ifndef TNT_LAUNCH_PYTHON_SYS_PATH
#define TNT_LAUNCH_PYTHON_SYS_PATH ""
#endif

/*
 * The directory that holds this launcher's tarantella package (the one with
 * tarantella/__init__.py): build/python next to build/bin/tarantella, or the
 * install tree's package directory next to <prefix>/bin/tarantella. 0 and
 * the resolved path in out, or -1 when there is none (a build without the
 * Python package, or a launcher copied elsewhere).
 */
static int find_python_package(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash;

    if (n <= 0) {
        return -1;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL) {
        return -1;
    }
    *slash = '\0';
    return tnt_pythonpath_find_package(exe, TNT_LAUNCH_PYTHON_PKG_RELDIRS, out, len);
}

/*
 * The ranks' PYTHONPATH: this launcher's package first, unless the default
 * interpreter finds it anyway (installed into its site-packages), -x sets
 * PYTHONPATH, or PYTHONPATH has it already. 0, or -1 when out of memory.
 */
static int plan_pythonpath(struct launch *launch)
{
    const struct tnt_launch_options *opts = &launch->opts;
    char pkg[PATH_MAX];
    int oom;

    if (tnt_env_lookup(opts->exports, "PYTHONPATH") != NULL ||
        find_python_package(pkg, sizeof pkg) != 0) {
        return 0;
    }
    if (strcmp(opts->python, TNT_LAUNCH_DEFAULT_PYTHON) == 0 &&
        tnt_pythonpath_in_list(pkg, TNT_LAUNCH_PYTHON_SYS_PATH)) {
        return 0;
    }
    launch->pythonpath = tnt_pythonpath_prepend(pkg, getenv("PYTHONPATH"), &oom);
    return oom ? -1 : 0;
}

/*
 * MASTER_PORT for torch.distributed's env:// store, which rank 0 opens on
 * it: a port the kernel finds free on TNT_LAUNCH_MASTER_ADDR now (bind to
 * port 0, read it back, close). Nothing holds it between this close and
 * rank 0's bind, so another program may take it in between; holding it
 * open instead would make rank 0's own bind fail (docs/torch-distributed.md
 * describes the race). A socket that never listened leaves no TIME_WAIT,
 * so the port is free again at once. 0 with *port set, or -1 after
 * printing the error.
 */
static int pick_master_port(int *port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        tnt_launch_error("cannot pick MASTER_PORT: socket: %s; set MASTER_PORT yourself",
                         strerror(errno));
        return -1;
    }
    inet_pton(AF_INET, TNT_LAUNCH_MASTER_ADDR, &addr.sin_addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        tnt_launch_error("cannot pick MASTER_PORT: no free port on %s: %s; set MASTER_PORT "
                         "yourself",
                         TNT_LAUNCH_MASTER_ADDR, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(addr.sin_port);
    return 0;
}

/*
 * Layout, binding, environment and argv of every rank. Pinning and the GPU
 * index use the rank's position on this *machine* (rank r of N), also with
 * --simulate-nodes: the simulated nodes share the real CPUs and GPUs.
 */
int tnt_launch_plan(struct launch *launch)
{
    const struct tnt_launch_options *opts = &launch->opts;
    int n = opts->nranks, k = opts->simulate_nodes > 0 ? opts->simulate_nodes : 1;
    hwloc_bitmap_t allowed = NULL;
    struct tnt_launch_torch_ids torch_ids = { .world_size = n };
    char host[200], err[512];
    int master_port = 0, ret = -1;

    launch->nranks = n;
    launch->nnodes = k;
    launch->ranks = calloc((size_t)n, sizeof *launch->ranks);
    launch->node_of_rank = calloc((size_t)n, sizeof(int));
    launch->local_rank = calloc((size_t)n, sizeof(int));
    launch->node_first = calloc((size_t)k, sizeof(int));
    launch->node_size = calloc((size_t)k, sizeof(int));
    launch->node_names = calloc((size_t)k, sizeof *launch->node_names);
    launch->exec_argv = tnt_launch_exec_argv(opts);
    allowed = hwloc_bitmap_alloc();
    if (launch->ranks == NULL || launch->node_of_rank == NULL || launch->local_rank == NULL ||
        launch->node_first == NULL || launch->node_size == NULL || launch->node_names == NULL ||
        launch->exec_argv == NULL || allowed == NULL) {
        tnt_launch_error("out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        launch->ranks[r].err_fd = -1;
    }
    if (tnt_launch_layout(n, k, launch->node_of_rank, launch->local_rank, launch->node_first,
                          launch->node_size) != 0) {
        tnt_launch_error("cannot lay out %d ranks on %d nodes", n, k);
        goto out;
    }
    if (gethostname(host, sizeof host) != 0) {
        snprintf(host, sizeof host, "localhost");
    }
    host[sizeof host - 1] = '\0';
    for (int node = 0; node < k; node++) {
        if (opts->simulate_nodes > 0) {
            snprintf(launch->node_names[node], sizeof launch->node_names[node], "%s-node%d", host,
                     node);
        } else {
            snprintf(launch->node_names[node], sizeof launch->node_names[node], "%s", host);
        }
    }

    if (hwloc_topology_init(&launch->topology) != 0 || hwloc_topology_load(launch->topology) != 0) {
        tnt_launch_error("hwloc cannot read this machine's topology: %s", strerror(errno));
        goto out;
    }
    if (tnt_pin_get_allowed(launch->topology, allowed, err, sizeof err) != 0) {
        tnt_launch_error("%s", err);
        goto out;
    }
    launch->ngpus = opts->no_gpu ? 0 : count_gpus();
    for (int r = 0; r < n; r++) {
        struct rank_state *rs = &launch->ranks[r];

        rs->rank = r;
        rs->node = launch->node_of_rank[r];
        rs->local_rank = launch->local_rank[r];
        rs->cpuset = hwloc_bitmap_alloc();
        rs->nodeset = hwloc_bitmap_alloc();
        if (rs->cpuset == NULL || rs->nodeset == NULL) {
            tnt_launch_error("out of memory");
            goto out;
        }
        if (tnt_pin_compute(launch->topology, allowed, opts->pin, r, n, rs->cpuset, rs->nodeset,
                            err, sizeof err) != 0) {
            tnt_launch_error("cannot pin rank %d (--pin %s): %s", r, tnt_pin_mode_name(opts->pin),
                             err);
            goto out;
        }
    }
    if (plan_pythonpath(launch) != 0) {
        tnt_launch_error("out of memory");
        goto out;
    }
    /* One port for the whole job, and none taken when the user chose it. */
    if (tnt_env_lookup(environ, "MASTER_PORT") == NULL &&
        tnt_env_lookup(opts->exports, "MASTER_PORT") == NULL &&
        pick_master_port(&master_port) != 0) {
        goto out;
    }
    /* OMP_NUM_THREADS: the rank's CPUs divided among the ranks that share
     * them (the rule of tnt_pin_thread_count, shared with the plugin). */
    for (int r = 0; r < n; r++) {
        struct rank_state *rs = &launch->ranks[r];

        rs->nthreads =
            tnt_pin_thread_count(launch->topology, allowed, opts->pin, r, n, err, sizeof err);
        if (rs->nthreads < 1) {
            tnt_launch_error("cannot size rank %d's thread count: %s", r, err);
            goto out;
        }
        if (tnt_launch_rank_env(opts, environ, r, rs->nthreads, launch->ngpus, &rs->added) != 0 ||
            (launch->pythonpath != NULL &&
             tnt_envlist_set(&rs->added, "PYTHONPATH", launch->pythonpath) != 0)) {
            tnt_launch_error("out of memory");
            goto out;
        }
        torch_ids.rank = r;
        torch_ids.local_rank = launch->local_rank[r];
        torch_ids.local_world_size = launch->node_size[rs->node];
        torch_ids.node = rs->node;
        if (tnt_launch_torch_env(opts, environ, &torch_ids, master_port, &rs->added) != 0) {
            tnt_launch_error("out of memory");
            goto out;
        }
    }
    ret = 0;
out:
    if (allowed != NULL) {
        hwloc_bitmap_free(allowed);
    }
    return ret;
}

static const char *memory_policy(const struct launch *launch)
{
    if (launch->opts.pin_memory) {
        return "strict";
    }
    return launch->opts.pin == TNT_PIN_NONE ? "default" : "preferred";
}

void tnt_launch_print_dry_run(const struct launch *launch)
{
    char where[512];

    printf("tarantella: dry run: %d rank%s on %d %snode%s, nothing started\n", launch->nranks,
           launch->nranks == 1 ? "" : "s", launch->nnodes,
           launch->opts.simulate_nodes > 0 ? "simulated " : "", launch->nnodes == 1 ? "" : "s");
    for (int r = 0; r < launch->nranks; r++) {
        const struct rank_state *rs = &launch->ranks[r];

        tnt_pin_describe(rs->cpuset, rs->nodeset, where, sizeof where);
        printf("rank %d: host %s, local rank %d of %d, pin %s: %s, memory %s\n", r,
               launch->node_names[rs->node], rs->local_rank, launch->node_size[rs->node],
               tnt_pin_mode_name(launch->opts.pin), where, memory_policy(launch));
        printf("  env:");
        for (int i = 0; i < rs->added.n; i++) {
            const char *eq = strchr(rs->added.v[i], '=');

            /* Quote values so an empty CUDA_VISIBLE_DEVICES is visible. */
            printf(" %.*s\"%s\"", (int)(eq - rs->added.v[i] + 1), rs->added.v[i], eq + 1);
        }
        printf(" (+ PMIX_* from the PMIx server)\n  exec:");
        for (int i = 0; launch->exec_argv[i] != NULL; i++) {
            printf(" %s", launch->exec_argv[i]);
        }
        printf("\n");
    }
}
