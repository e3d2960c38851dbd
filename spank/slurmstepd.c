/*
 * Remote context (slurmstepd): resolve the step's settings once the step's
 * environment is readable (post_opt), then in task_init -- which runs in the
 * forked task, as the user, just before exec -- pin the task with the
 * launcher's code (libtnt/src/topo/pin.c), set TNT_* and OMP_NUM_THREADS, and
 * give the task its GPU.
 *
 * Nothing here may crash or hang slurmstepd: no blocking calls, every error
 * returns -1 with one slurm_error (and the same line on the task's stderr,
 * where the user looks).
 */
#include <dlfcn.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "pythonpath.h"
#include "tnt_spank.h"
#include "torch_env.h"

/* Where the plugin's Python package lives (spank/CMakeLists.txt). */
#ifndef TNT_SPANK_PYTHON_PKG_RELDIRS
#define TNT_SPANK_PYTHON_PKG_RELDIRS ""
#endif
#ifndef TNT_SPANK_PYTHON_SYS_PATH
#define TNT_SPANK_PYTHON_SYS_PATH ""
#endif

static void stepd_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* slurm_error goes to slurmd's log; the task's stderr goes to the user. */
static void stepd_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slurm_error("tarantella: %s", msg);
    if (spank_context() == S_CTX_REMOTE && tnt_spank_state.option_seen) {
        fprintf(stderr, "tarantella: %s\n", msg);
        fflush(stderr);
    }
}

int tnt_spank_stepd_option(const char *optarg)
{
    /* Validated in srun already; the value is kept and resolved together
     * with the allocation's in post_opt. Slurm may deliver it twice (launch
     * message and environment), always with the same value. */
    tnt_spank_state.option_seen = 1;
    tnt_spank_state.remote_arg_null = (optarg == NULL);
    tnt_spank_state.remote_arg_too_long = 0;
    if (optarg == NULL) {
        tnt_spank_state.remote_arg[0] = '\0';
    } else if (strlen(optarg) >= sizeof tnt_spank_state.remote_arg) {
        tnt_spank_state.remote_arg_too_long = 1;
    } else {
        memcpy(tnt_spank_state.remote_arg, optarg, strlen(optarg) + 1);
    }
    return 0;
}

/* The extern step (pam_slurm_adopt's container), the batch script and the
 * interactive step (salloc's shell) are not Tarantella ranks. */
static int stepd_is_rank_step(spank_t sp)
{
    uint32_t step_id = 0;

    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        return 0;
    }
    return step_id != SLURM_EXTERN_CONT && step_id != SLURM_BATCH_SCRIPT &&
           step_id != SLURM_INTERACTIVE_STEP && step_id != SLURM_PENDING_STEP;
}

/*
 * NodeAddr of a node, asked of slurmctld through the public
 * slurm_load_node_single. Looked up in the process (slurmstepd has
 * libslurm's functions) rather than linked: the plugin links no libslurm,
 * and a host without the function still loads it. 0 or -1.
 */
static int stepd_node_addr(const char *node, char *out, size_t len)
{
    __typeof__(&slurm_load_node_single) load;
    __typeof__(&slurm_free_node_info_msg) free_msg;
    node_info_msg_t *msg = NULL;
    char name[256];
    int ret = -1;

    *(void **)&load = dlsym(RTLD_DEFAULT, "slurm_load_node_single");
    *(void **)&free_msg = dlsym(RTLD_DEFAULT, "slurm_free_node_info_msg");
    if (load == NULL || free_msg == NULL) {
        return -1;
    }
    snprintf(name, sizeof name, "%s", node);
    if (load(&msg, name, 0) != 0 || msg == NULL) {
        return -1;
    }
    if (msg->record_count >= 1 && msg->node_array[0].node_addr != NULL &&
        msg->node_array[0].node_addr[0] != '\0' && strlen(msg->node_array[0].node_addr) < len) {
        strcpy(out, msg->node_array[0].node_addr);
        ret = 0;
    }
    free_msg(msg);
    return ret;
}

/*
 * MASTER_ADDR for the step: its first node (SLURM_STEP_NODELIST), where
 * task 0 runs under the block and cyclic distributions. Its Slurm name is
 * how nodes are usually reached; where it does not resolve here (a NodeName
 * that is no host name, with NodeAddr saying where the node is, as on the
 * test cluster), slurmctld's NodeAddr for it, one query per node and step.
 * Once per node, in slurmstepd: the tasks inherit the answer. Never fails
 * the step (a step that does not use torch.distributed does not need it):
 * out is "" when there is no node list, and note says why an address may
 * not work.
 */
static void stepd_master_addr(spank_t sp, char *out, size_t len, char *note, size_t notelen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    char nodelist[4096], first[256], err[512];

    out[0] = '\0';
    note[0] = '\0';
    if (spank_getenv(sp, "SLURM_STEP_NODELIST", nodelist, sizeof nodelist) != ESPANK_SUCCESS) {
        snprintf(note, notelen,
                 "SLURM_STEP_NODELIST is not readable, so MASTER_ADDR is not set; set it "
                 "yourself for torch.distributed's env://");
        return;
    }
    if (tnt_spank_first_node(nodelist, first, sizeof first, err, sizeof err) != 0) {
        snprintf(note, notelen, "MASTER_ADDR is not set: %.400s; set it yourself", err);
        return;
    }
    if (getaddrinfo(first, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        snprintf(out, len, "%s", first);
        return;
    }
    if (stepd_node_addr(first, out, len) == 0) {
        return;
    }
    snprintf(out, len, "%s", first);
    snprintf(note, notelen,
             "MASTER_ADDR=%s (the step's first node) does not resolve on this node and slurmctld "
             "gave no NodeAddr for it; set MASTER_ADDR yourself for torch.distributed's env://",
             first);
}

int tnt_spank_stepd_post_opt(spank_t sp)
{
    char inherited[1024];
    const char *inherited_p = NULL, *own = NULL;
    tnt_spank_config_t config;
    char err[768];
    spank_err_t rc;

    if (!stepd_is_rank_step(sp)) {
        return 0;
    }
    rc = spank_getenv(sp, TNT_SPANK_INHERITED_ENV, inherited, sizeof inherited);
    if (rc == ESPANK_SUCCESS) {
        inherited_p = inherited;
    } else if (rc == ESPANK_NOSPACE) {
        stepd_error("the allocation's --tarantella value is longer than %zu characters",
                    sizeof inherited - 1);
        return -1;
    }
    if (tnt_spank_state.option_seen) {
        if (tnt_spank_state.remote_arg_too_long) {
            stepd_error("--tarantella value longer than %zu characters",
                        sizeof tnt_spank_state.remote_arg - 1);
            return -1;
        }
        own = tnt_spank_state.remote_arg_null ? "" : tnt_spank_state.remote_arg;
    }
    if (inherited_p == NULL && own == NULL) {
        return 0; /* not a Tarantella step: behave as if we were not loaded */
    }
    if (tnt_spank_resolve(&tnt_spank_state.defaults, inherited_p, own, &config, err, sizeof err) !=
        0) {
        stepd_error("%s", err);
        return -1;
    }
    config.help = 0;
    tnt_spank_state.config = config;
    stepd_master_addr(sp, tnt_spank_state.master_addr, sizeof tnt_spank_state.master_addr,
                      tnt_spank_state.master_addr_note, sizeof tnt_spank_state.master_addr_note);
    return 0;
}

static int stepd_setenv(spank_t sp, const char *name, const char *value)
{
    if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS) {
        stepd_error("cannot set %s=%s in the task's environment", name, value);
        return -1;
    }
    return 0;
}

/* Entries of a comma-separated list ("0,1,3" -> 3; "" -> 0). */
static int stepd_list_count(const char *list)
{
    int n = 0;

    if (list == NULL || *list == '\0') {
        return 0;
    }
    for (n = 1; *list != '\0'; list++) {
        n += (*list == ',');
    }
    return n;
}

/*
 * GPUs: hide them (no-gpu), keep what Slurm bound per task (--gpus-per-task,
 * --gpu-bind: the task's CUDA_VISIBLE_DEVICES is then a strict subset of the
 * step's SLURM_STEP_GPUS), or give local rank r the GPU r mod n of the n the
 * step sees. desc receives e.g. "gpu 1" for the verbose line.
 */
static int stepd_gpus(spank_t sp, const tnt_spank_config_t *config, int local_rank, char *desc,
                      size_t desclen)
{
    char visible[512], step_gpus[512], tmp[64];
    const char *entry;
    int n, i, bound = 0;

    snprintf(desc, desclen, "gpus -");
    if (config->no_gpu) {
        snprintf(desc, desclen, "gpus hidden");
        if (stepd_setenv(sp, "CUDA_VISIBLE_DEVICES", "") != 0) {
            return -1;
        }
        if (spank_getenv(sp, "ROCR_VISIBLE_DEVICES", tmp, sizeof tmp) != ESPANK_ENV_NOEXIST &&
            stepd_setenv(sp, "ROCR_VISIBLE_DEVICES", "") != 0) {
            return -1;
        }
        return 0;
    }
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", visible, sizeof visible) != ESPANK_SUCCESS ||
        visible[0] == '\0') {
        return 0;
    }
    n = stepd_list_count(visible);
    if (spank_getenv(sp, "SLURM_GPUS_PER_TASK", tmp, sizeof tmp) == ESPANK_SUCCESS ||
        spank_getenv(sp, "SLURM_GPU_BIND", tmp, sizeof tmp) == ESPANK_SUCCESS) {
        bound = 1;
    }
    if (spank_getenv(sp, "SLURM_STEP_GPUS", step_gpus, sizeof step_gpus) == ESPANK_SUCCESS &&
        stepd_list_count(step_gpus) > n) {
        bound = 1;
    }
    if (n <= 1 || bound) {
        snprintf(desc, desclen, "gpus %.100s", visible);
        return 0;
    }
    entry = visible;
    for (i = 0; i < local_rank % n; i++) {
        entry = strchr(entry, ',') + 1;
    }
    snprintf(tmp, sizeof tmp, "%.*s", (int)strcspn(entry, ","), entry);
    snprintf(desc, desclen, "gpu %s", tmp);
    return stepd_setenv(sp, "CUDA_VISIBLE_DEVICES", tmp);
}

static int stepd_environment(spank_t sp, const tnt_spank_config_t *config, int ncpus)
{
    char value[64];

    if (stepd_setenv(sp, "TNT_PIN", tnt_pin_mode_name(config->pin)) != 0) {
        return -1;
    }
    if (config->fusion_kb >= 0) {
        snprintf(value, sizeof value, "%ld", config->fusion_kb);
        if (stepd_setenv(sp, "TNT_FUSION_THRESHOLD_KB", value) != 0) {
            return -1;
        }
    }
    if (config->log_level[0] != '\0' && stepd_setenv(sp, "TNT_LOG_LEVEL", config->log_level) != 0) {
        return -1;
    }
    if (config->log_all && stepd_setenv(sp, "TNT_LOG_ON_ALL_DEVICES", "1") != 0) {
        return -1;
    }
    if (config->output_all && stepd_setenv(sp, "TNT_OUTPUT_ON_ALL_DEVICES", "1") != 0) {
        return -1;
    }
    /* One OpenMP thread per CPU of the task, unless the user chose. */
    if (spank_getenv(sp, "OMP_NUM_THREADS", value, sizeof value) == ESPANK_ENV_NOEXIST) {
        snprintf(value, sizeof value, "%d", ncpus > 0 ? ncpus : 1);
        if (stepd_setenv(sp, "OMP_NUM_THREADS", value) != 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * The trap of srun's default --cpus-per-task=1: Slurm allocates (and, with
 * task/affinity or task/cgroup, binds) one CPU per rank, so each rank
 * computes with one thread while the node's other CPUs stay idle. Local rank
 * 0 says so once per node, with the --cpus-per-task that fills the node. Not
 * when the user set OMP_NUM_THREADS (a choice), when the ranks already fill
 * at least half the node, or when the rank was not confined to one CPU
 * (`threads`, what OMP_NUM_THREADS was set to, is more than 1: with
 * task/none nothing binds the task, and the warning would contradict the
 * CPUs the rank really has).
 */
static void stepd_cpu_hint(spank_t sp, hwloc_topology_t topology, int local_rank,
                           uint32_t local_size, int user_omp_threads, int threads)
{
    char node[64];
    uint32_t cpus_per_task = 0;
    int node_cpus = hwloc_bitmap_weight(hwloc_topology_get_topology_cpuset(topology));

    if (local_rank != 0 || user_omp_threads || threads > 1 || local_size == 0 ||
        node_cpus < 2 * (int)local_size) {
        return;
    }
    if (spank_get_item(sp, S_STEP_CPUS_PER_TASK, &cpus_per_task) != ESPANK_SUCCESS ||
        cpus_per_task != 1) {
        return;
    }
    if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof node) != ESPANK_SUCCESS) {
        snprintf(node, sizeof node, "?");
    }
    fprintf(stderr,
            "tarantella: warning: node %s: each of the %u rank%s here has 1 CPU "
            "(--cpus-per-task=1, srun's default) but the node has %d CPUs; give each rank "
            "more with --cpus-per-task=%d (or run fewer ranks, e.g. one per socket with "
            "--tarantella=pin=socket), or set OMP_NUM_THREADS to keep it so\n",
            node, local_size, local_size == 1 ? "" : "s", node_cpus, node_cpus / (int)local_size);
    fflush(stderr);
}

/* Sets name=value unless the task's environment has name already: what the
 * user set is never overwritten. */
static int stepd_setenv_default(spank_t sp, const char *name, const char *value)
{
    spank_err_t rc = spank_setenv(sp, name, value, 0);

    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS) {
        stepd_error("cannot set %s=%s in the task's environment", name, value);
        return -1;
    }
    return 0;
}

/*
 * The variables torchrun sets (docs/torch-distributed.md), so that
 * init_process_group's env:// works in an unmodified script: RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node's index in
 * the step), MASTER_ADDR (post_opt found it) and MASTER_PORT (the site's
 * range, keyed by job and step, the same on every node without talking).
 */
static int stepd_torch_env(spank_t sp, const tnt_spank_config_t *config, uint32_t rank,
                           int local_rank, uint32_t local_size)
{
    uint32_t world = 0, node = 0, job_id = 0, step_id = 0;
    char value[256];
    int user_addr;

    if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_NODEID, &node) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        stepd_error("task %u: cannot read the step's task count, node index, job id or step id "
                    "from Slurm",
                    rank);
        return -1;
    }
    const struct {
        const char *name;
        uint32_t value;
    } numbers[] = {
        { "RANK", rank },
        { "WORLD_SIZE", world },
        { "LOCAL_RANK", (uint32_t)local_rank },
        { "LOCAL_WORLD_SIZE", local_size },
        { "GROUP_RANK", node },
        { "MASTER_PORT", (uint32_t)tnt_spank_master_port(job_id, step_id, config->master_port_low,
                                                         config->master_port_high) },
    };

    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        snprintf(value, sizeof value, "%u", numbers[i].value);
        if (stepd_setenv_default(sp, numbers[i].name, value) != 0) {
            return -1;
        }
    }
    user_addr = spank_getenv(sp, "MASTER_ADDR", value, sizeof value) != ESPANK_ENV_NOEXIST;
    /* Not over the user's choice; none to offer when post_opt found no node
     * list (the note says why). */
    if (!user_addr && tnt_spank_state.master_addr[0] != '\0' &&
        stepd_setenv(sp, "MASTER_ADDR", tnt_spank_state.master_addr) != 0) {
        return -1;
    }
    /* Once per step (task 0), and only when it matters: the user chose no
     * address and the one offered may not work. */
    if (rank == 0 && !user_addr && tnt_spank_state.master_addr_note[0] != '\0') {
        fprintf(stderr, "tarantella: warning: %s\n", tnt_spank_state.master_addr_note);
        fflush(stderr);
    }
    return 0;
}

/*
 * PYTHONPATH: the tarantella package this plugin was built with goes first,
 * as the launcher does for its ranks, so `srun --tarantella python3 -m
 * tarantella.smoke` imports a package from a build tree or a private prefix
 * without the user exporting PYTHONPATH. The user's entries follow in their
 * order; nothing changes when the package is there already, when the user's
 * PYTHONPATH names another tarantella package (their choice), or when ours
 * is on the default interpreter's own sys.path (installed system-wide:
 * nothing to add, and another interpreter must not be pointed at it). The package is
 * found relative to this .so, whose path slurmstepd gave dlopen.
 */
static int stepd_pythonpath(spank_t sp, uint32_t rank)
{
    char dir[PATH_MAX], pkg[PATH_MAX], current[16384];
    const char *user = NULL;
    char *slash, *value;
    Dl_info info;
    spank_err_t rc;
    int oom, ret;

    if (dladdr((void *)&stepd_pythonpath, &info) == 0 || info.dli_fname == NULL ||
        info.dli_fname[0] != '/' || strlen(info.dli_fname) >= sizeof dir) {
        return 0;
    }
    strcpy(dir, info.dli_fname);
    slash = strrchr(dir, '/');
    *slash = '\0';
    if (tnt_pythonpath_find_package(dir[0] != '\0' ? dir : "/", TNT_SPANK_PYTHON_PKG_RELDIRS, pkg,
                                    sizeof pkg) != 0 ||
        tnt_pythonpath_in_list(pkg, TNT_SPANK_PYTHON_SYS_PATH)) {
        return 0;
    }
    rc = spank_getenv(sp, "PYTHONPATH", current, sizeof current);
    if (rc == ESPANK_SUCCESS) {
        user = current;
    } else if (rc != ESPANK_ENV_NOEXIST) {
        /* Too long to read back whole: the user's value stays as it is. */
        slurm_info("tarantella: task %u: PYTHONPATH left as is (longer than %zu bytes or "
                   "unreadable), without %s",
                   rank, sizeof current - 1, pkg);
        return 0;
    }
    /* The user's PYTHONPATH names a tarantella package already (their own
     * build or venv copy): theirs wins, as every other value they set does. */
    if (user != NULL && tnt_pythonpath_find_package(".", user, dir, sizeof dir) == 0 &&
        strcmp(dir, pkg) != 0) {
        return 0;
    }
    value = tnt_pythonpath_prepend(pkg, user, &oom);
    if (value == NULL) {
        if (oom) {
            stepd_error("task %u: out of memory building PYTHONPATH", rank);
            return -1;
        }
        return 0;
    }
    ret = stepd_setenv(sp, "PYTHONPATH", value);
    free(value);
    return ret;
}

int tnt_spank_stepd_task_init(spank_t sp)
{
    const tnt_spank_config_t *config = &tnt_spank_state.config;
    hwloc_topology_t topology;
    hwloc_bitmap_t allowed, cpuset, nodeset;
    int local_rank = 0, ret = -1, rc, threads, user_omp_threads;
    uint32_t local_size = 0, rank = 0;
    char err[512], where[640], gpu_desc[160], node[64], host[64];

    if (!config->enabled) {
        return 0;
    }
    if (spank_get_item(sp, S_TASK_ID, &local_rank) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_size) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS) {
        stepd_error("cannot read the task's local id, local task count or rank from Slurm");
        return -1;
    }
    if (hwloc_topology_init(&topology) != 0) {
        stepd_error("hwloc_topology_init failed; is libhwloc installed correctly?");
        return -1;
    }
    if (hwloc_topology_load(topology) != 0) {
        stepd_error("hwloc could not read this node's topology (/sys mounted?)");
        goto err_topology;
    }
    allowed = hwloc_bitmap_alloc();
    cpuset = hwloc_bitmap_alloc();
    nodeset = hwloc_bitmap_alloc();
    if (allowed == NULL || cpuset == NULL || nodeset == NULL) {
        stepd_error("out of memory allocating CPU sets");
        goto err_bitmaps;
    }
    /* Within what the task may use now: Slurm's cgroup or task plugin may
     * already have narrowed it. */
    if (tnt_pin_get_allowed(topology, allowed, err, sizeof err) != 0) {
        stepd_error("task %u: %s", rank, err);
        goto err_bitmaps;
    }
    if (tnt_pin_compute(topology, allowed, config->pin, local_rank, (int)local_size, cpuset,
                        nodeset, err, sizeof err) != 0) {
        stepd_error("task %u: pin=%s: %s", rank, tnt_pin_mode_name(config->pin), err);
        goto err_bitmaps;
    }
    if (config->pin != TNT_PIN_NONE) {
        rc = tnt_pin_apply(topology, cpuset, nodeset, config->pin_memory, err, sizeof err);
        if (rc < 0) {
            stepd_error("task %u: pin=%s: %s", rank, tnt_pin_mode_name(config->pin), err);
            goto err_bitmaps;
        }
        if (rc == 1) {
            slurm_info("tarantella: task %u: %s (CPUs are bound)", rank, err);
        }
    }
    /* The launcher's rule (shared code): the mask's CPUs divided by the
     * local tasks sharing that mask, so pin=none never oversubscribes. */
    threads = tnt_pin_thread_count(topology, allowed, config->pin, local_rank, (int)local_size, err,
                                   sizeof err);
    if (threads < 0) {
        stepd_error("task %u: pin=%s: %s", rank, tnt_pin_mode_name(config->pin), err);
        goto err_bitmaps;
    }
    user_omp_threads =
        spank_getenv(sp, "OMP_NUM_THREADS", gpu_desc, sizeof gpu_desc) != ESPANK_ENV_NOEXIST;
    if (stepd_environment(sp, config, threads) != 0) {
        goto err_bitmaps;
    }
    stepd_cpu_hint(sp, topology, local_rank, local_size, user_omp_threads, threads);
    if (stepd_torch_env(sp, config, rank, local_rank, local_size) != 0) {
        goto err_bitmaps;
    }
    if (stepd_gpus(sp, config, local_rank, gpu_desc, sizeof gpu_desc) != 0) {
        goto err_bitmaps;
    }
    if (stepd_pythonpath(sp, rank) != 0) {
        goto err_bitmaps;
    }
    if (config->verbose) {
        if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof node) != ESPANK_SUCCESS) {
            snprintf(node, sizeof node, "?");
        }
        if (gethostname(host, sizeof host) != 0) {
            snprintf(host, sizeof host, "?");
        }
        host[sizeof host - 1] = '\0';
        tnt_pin_describe(cpuset, nodeset, where, sizeof where);
        fprintf(stderr, "tarantella: rank %u local %d/%u node %s host %s: %s, %s, pin=%s%s\n", rank,
                local_rank, local_size, node, host, where, gpu_desc, tnt_pin_mode_name(config->pin),
                config->pin_memory ? " (memory strict)" : "");
        fflush(stderr);
    }
    ret = 0;
err_bitmaps:
    hwloc_bitmap_free(nodeset);
    hwloc_bitmap_free(cpuset);
    hwloc_bitmap_free(allowed);
err_topology:
    hwloc_topology_destroy(topology);
    return ret;
}
