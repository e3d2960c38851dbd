/*
 * A fake SPANK host: this program provides the spank_* and slurm_* functions
 * that Slurm provides to plugins (exported with ENABLE_EXPORTS), dlopens the
 * built spank_tarantella.so and drives its hooks the way srun, sbatch and
 * slurmstepd do -- mostly through the paths real daemons rarely take: bad
 * values, a missing environment, Slurm refusing items or variables,
 * callbacks called twice, steps the plugin must leave alone.
 * Each test loads a fresh copy of the plugin (dlopen/dlclose), so the
 * plugin's static state starts clean.
 */
#ifdef TNT_SPANK_PLUGIN_PATH

#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

#define INHERITED "SLURM_SPANK__SLURM_SPANK_OPTION_tarantella_tarantella"

/* ---- the host ---------------------------------------------------------- */

/* The build hides symbols by default; these must be visible to the plugin. */
#pragma GCC visibility push(default)

static struct {
    spank_context_t context;
    struct spank_option *options[8];
    int num_options;
    char last_error[2048];
    int errors;
    char *env[64]; /* the step's environment ("NAME=VALUE"), remote context */
    int items_missing;
    int setenv_fails;
    uint32_t step_id;
    int task_id;
    uint32_t local_count;
    uint32_t global_id;
    uint32_t total_count, node_id, job_id;
    uint32_t cpus_per_task; /* 0: Slurm does not say (the item is refused) */
} host;

static char host_handle_storage;
#define HOST_SPANK ((spank_t)(void *)&host_handle_storage)

spank_context_t spank_context(void)
{
    return host.context;
}

spank_err_t spank_option_register(spank_t spank, struct spank_option *opt)
{
    if (spank != HOST_SPANK || host.num_options == 8) {
        return ESPANK_BAD_ARG;
    }
    host.options[host.num_options++] = opt;
    return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t spank, spank_item_t item, ...)
{
    va_list ap;
    spank_err_t rc = ESPANK_SUCCESS;

    if (host.items_missing) {
        return ESPANK_NOT_TASK;
    }
    va_start(ap, item);
    switch (item) {
    case S_JOB_STEPID:
        *va_arg(ap, uint32_t *) = host.step_id;
        break;
    case S_TASK_ID:
        *va_arg(ap, int *) = host.task_id;
        break;
    case S_JOB_LOCAL_TASK_COUNT:
        *va_arg(ap, uint32_t *) = host.local_count;
        break;
    case S_TASK_GLOBAL_ID:
        *va_arg(ap, uint32_t *) = host.global_id;
        break;
    case S_JOB_TOTAL_TASK_COUNT:
        *va_arg(ap, uint32_t *) = host.total_count;
        break;
    case S_JOB_NODEID:
        *va_arg(ap, uint32_t *) = host.node_id;
        break;
    case S_JOB_ID:
        *va_arg(ap, uint32_t *) = host.job_id;
        break;
    case S_STEP_CPUS_PER_TASK:
        if (host.cpus_per_task == 0) {
            rc = ESPANK_BAD_ARG;
        } else {
            *va_arg(ap, uint32_t *) = host.cpus_per_task;
        }
        break;
    default:
        rc = ESPANK_BAD_ARG;
    }
    va_end(ap);
    return rc;
}

static int host_env_find(const char *var)
{
    size_t len = strlen(var);
    int i;

    for (i = 0; i < 64; i++) {
        if (host.env[i] != NULL && strncmp(host.env[i], var, len) == 0 && host.env[i][len] == '=') {
            return i;
        }
    }
    return -1;
}

static const char *host_env_get(const char *var)
{
    int i = host_env_find(var);

    return i < 0 ? NULL : host.env[i] + strlen(var) + 1;
}

static void host_env_set(const char *var, const char *val)
{
    int i = host_env_find(var);
    char *entry = malloc(strlen(var) + strlen(val) + 2);

    assert_non_null(entry);
    sprintf(entry, "%s=%s", var, val);
    if (i < 0) {
        for (i = 0; i < 64 && host.env[i] != NULL; i++) {
            ;
        }
    }
    assert_true(i < 64);
    free(host.env[i]);
    host.env[i] = entry;
}

static int host_env_count(void)
{
    int i, n = 0;

    for (i = 0; i < 64; i++) {
        n += host.env[i] != NULL;
    }
    return n;
}

spank_err_t spank_getenv(spank_t spank, const char *var, char *buf, int len)
{
    const char *v;

    if (spank != HOST_SPANK || len <= 0) {
        return ESPANK_BAD_ARG;
    }
    if (host.context != S_CTX_REMOTE) {
        return ESPANK_NOT_REMOTE;
    }
    v = host_env_get(var);
    if (v == NULL) {
        return ESPANK_ENV_NOEXIST;
    }
    if (strlen(v) >= (size_t)len) {
        return ESPANK_NOSPACE;
    }
    memcpy(buf, v, strlen(v) + 1);
    return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t spank, const char *var, const char *val, int overwrite)
{
    if (spank != HOST_SPANK || var == NULL || val == NULL) {
        return ESPANK_BAD_ARG;
    }
    if (host.context != S_CTX_REMOTE) {
        return ESPANK_NOT_REMOTE;
    }
    if (host.setenv_fails) {
        return ESPANK_ERROR;
    }
    if (!overwrite && host_env_get(var) != NULL) {
        return ESPANK_ENV_EXISTS;
    }
    host_env_set(var, val);
    return ESPANK_SUCCESS;
}

static void host_log(int is_error, const char *format, va_list ap)
{
    char msg[2048];

    vsnprintf(msg, sizeof msg, format, ap);
    if (is_error) {
        host.errors++;
        snprintf(host.last_error, sizeof host.last_error, "%s", msg);
    }
}

#define HOST_LOGGER(name, is_error)     \
    void name(const char *format, ...)  \
    {                                   \
        va_list ap;                     \
        va_start(ap, format);           \
        host_log(is_error, format, ap); \
        va_end(ap);                     \
    }
HOST_LOGGER(slurm_error, 1)
HOST_LOGGER(slurm_info, 0)
HOST_LOGGER(slurm_verbose, 0)
HOST_LOGGER(slurm_debug, 0)
HOST_LOGGER(slurm_debug2, 0)
HOST_LOGGER(slurm_debug3, 0)

#pragma GCC visibility pop

/* ---- the plugin -------------------------------------------------------- */

static struct {
    void *dl;
    spank_f *init;
    spank_f *post_opt;
    spank_f *task_init;
} plugin;

static int setup(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < 64; i++) {
        free(host.env[i]);
    }
    memset(&host, 0, sizeof host);
    host.local_count = 1;
    /* srun reads these from its own process environment. */
    unsetenv("SLURM_MPI_TYPE");
    unsetenv(INHERITED);
    plugin.dl = dlopen(TNT_SPANK_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (plugin.dl == NULL) {
        fail_msg("dlopen %s: %s", TNT_SPANK_PLUGIN_PATH, dlerror());
    }
    *(void **)&plugin.init = dlsym(plugin.dl, "slurm_spank_init");
    *(void **)&plugin.post_opt = dlsym(plugin.dl, "slurm_spank_init_post_opt");
    *(void **)&plugin.task_init = dlsym(plugin.dl, "slurm_spank_task_init");
    assert_non_null(plugin.init);
    assert_non_null(plugin.post_opt);
    assert_non_null(plugin.task_init);
    return 0;
}

static int teardown(void **state)
{
    int i;

    (void)state;
    dlclose(plugin.dl);
    for (i = 0; i < 64; i++) {
        free(host.env[i]);
        host.env[i] = NULL;
    }
    unsetenv("SLURM_MPI_TYPE");
    unsetenv(INHERITED);
    return 0;
}

static int option_cb(const char *arg, int remote)
{
    assert_int_equal(host.num_options, 1);
    return host.options[0]->cb(host.options[0]->val, arg, remote);
}

static void assert_error_contains(const char *needle)
{
    if (strstr(host.last_error, needle) == NULL) {
        fail_msg("last error '%s' lacks '%s'", host.last_error, needle);
    }
    if (strncmp(host.last_error, "tarantella: ", 12) != 0) {
        fail_msg("error '%s' does not start with 'tarantella: '", host.last_error);
    }
}

static void assert_env(const char *var, const char *expected)
{
    const char *v = host_env_get(var);

    if (expected == NULL) {
        if (v != NULL) {
            fail_msg("%s=%s set, expected unset", var, v);
        }
        return;
    }
    if (v == NULL) {
        fail_msg("%s unset, expected %s", var, expected);
    }
    assert_string_equal(v, expected);
}

/* Remote context up to post_opt for a normal step with `arg` (NULL: none). */
static int remote_step(const char *arg)
{
    host.context = S_CTX_REMOTE;
    host.step_id = 0;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    if (arg != NULL) {
        /* Slurm delivers it twice: launch message and environment. */
        assert_int_equal(option_cb(arg, 1), 0);
        assert_int_equal(option_cb(arg, 1), 0);
    }
    return plugin.post_opt(HOST_SPANK, 0, NULL);
}

/* ---- tests ------------------------------------------------------------- */

static void test_init_registers_once(void **state)
{
    (void)state;
    host.context = S_CTX_LOCAL;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host.num_options, 1);
    assert_string_equal(host.options[0]->name, "tarantella");
    assert_int_equal(host.options[0]->has_arg, 2);
    assert_non_null(strstr(host.options[0]->usage, "--tarantella=help"));
    assert_int_equal(host.errors, 0);
}

static void test_init_other_contexts(void **state)
{
    (void)state;
    host.context = S_CTX_SLURMD;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    host.context = S_CTX_JOB_SCRIPT;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host.num_options, 0);
}

static void test_bad_plugstack(void **state)
{
    char *argv[] = { "default_pin=diagonal" };

    (void)state;
    host.context = S_CTX_REMOTE;
    assert_int_equal(plugin.init(HOST_SPANK, 1, argv), -1);
    assert_error_contains("plugstack.conf argument 'default_pin=diagonal'");
    assert_error_contains("valid: none, socket, numa, core, auto");
}

static void test_local_bad_values(void **state)
{
    (void)state;
    host.context = S_CTX_LOCAL;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(option_cb("pin=bogus", 0), -1);
    assert_error_contains("--tarantella=pin=bogus: invalid value 'bogus' for pin");
    assert_int_equal(option_cb("fusion=x", 0), -1);
    assert_error_contains("valid: an integer 0..4194304");
    host.errors = 0;
    assert_int_equal(option_cb("pin=core", 0), 0);
    assert_int_equal(option_cb("pin=core", 0), 0);
    assert_int_equal(option_cb(NULL, 0), 0);
    assert_int_equal(host.errors, 0);
}

/* srun: a step that would not use PMIx fails in post_opt, naming the fixes;
 * without the option nothing is checked. */
static void test_local_mpi_check(void **state)
{
    (void)state;
    host.context = S_CTX_LOCAL;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    setenv("SLURM_MPI_TYPE", "none", 1);
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0); /* not requested */
    assert_int_equal(option_cb("verbose", 0), 0);
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), -1);
    assert_error_contains("--mpi=none");
    assert_error_contains("srun --mpi=pmix");
    assert_error_contains("MpiDefault=pmix");
    setenv("SLURM_MPI_TYPE", "pmix_v4", 1);
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0);
    unsetenv("SLURM_MPI_TYPE"); /* a Slurm that does not say: let it pass */
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0);
}

/* srun inside sbatch/salloc --tarantella selects PMIx in init, before srun
 * reads SLURM_MPI_TYPE; a type chosen by the user is kept. */
static void test_local_inherited_selects_pmix(void **state)
{
    (void)state;
    host.context = S_CTX_LOCAL;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_null(getenv("SLURM_MPI_TYPE")); /* our own argv has no --tarantella */
    teardown(state);
    setup(state);
    host.context = S_CTX_LOCAL;
    setenv(INHERITED, "pin=core", 1);
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_non_null(getenv("SLURM_MPI_TYPE"));
    assert_string_equal(getenv("SLURM_MPI_TYPE"), "pmix");
    teardown(state);
    setup(state);
    host.context = S_CTX_LOCAL;
    setenv(INHERITED, "(null)", 1);
    setenv("SLURM_MPI_TYPE", "pmi2", 1);
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_string_equal(getenv("SLURM_MPI_TYPE"), "pmi2");
    assert_int_equal(option_cb("(null)", 0), 0); /* srun's env processing */
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), -1);
    assert_error_contains("--mpi=pmi2");
}

/* --tarantella=help prints the sub-options and exits 0, in srun and sbatch. */
static void test_help_exits(void **state)
{
    spank_context_t contexts[] = { S_CTX_LOCAL, S_CTX_ALLOCATOR };
    size_t i;

    (void)state;
    for (i = 0; i < 2; i++) {
        int fds[2], status;
        char out[4096] = "";
        ssize_t n, len = 0;
        pid_t pid;

        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            host.context = contexts[i];
            if (plugin.init(HOST_SPANK, 0, NULL) != 0) {
                _exit(3);
            }
            option_cb("help", 0);
            _exit(4); /* not reached when help exits */
        }
        close(fds[1]);
        while ((n = read(fds[0], out + len, sizeof out - 1 - (size_t)len)) > 0) {
            len += n;
        }
        out[len] = '\0';
        close(fds[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_non_null(strstr(out, "pin=MODE"));
        assert_non_null(strstr(out, "no-gpu"));
    }
}

static void test_allocator_bad_value(void **state)
{
    (void)state;
    host.context = S_CTX_ALLOCATOR;
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(option_cb("log=chatty", 0), -1);
    assert_error_contains("invalid value 'chatty' for log; valid: error, warn, info, debug, trace");
    assert_int_equal(option_cb("log=info,pin=numa", 0), 0);
}

static long allowed_cpus(void)
{
    cpu_set_t set;

    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

static void test_remote_environment(void **state)
{
    char omp[16];

    (void)state;
    assert_int_equal(remote_step("pin=none,fusion=64,log=debug,log-all,output-all"), 0);
    host.task_id = 1;
    host.local_count = 4;
    host.global_id = 5;
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host.errors, 0);
    assert_env("TNT_PIN", "none");
    assert_env("TNT_FUSION_THRESHOLD_KB", "64");
    assert_env("TNT_LOG_LEVEL", "debug");
    assert_env("TNT_LOG_ON_ALL_DEVICES", "1");
    assert_env("TNT_OUTPUT_ON_ALL_DEVICES", "1");
    /* pin=none: the task keeps every CPU it may use, but its 4 local tasks
     * share them, so each gets allowed/4 threads (at least 1), as under the
     * launcher. */
    snprintf(omp, sizeof omp, "%ld", allowed_cpus() / 4 > 0 ? allowed_cpus() / 4 : 1);
    assert_env("OMP_NUM_THREADS", omp);
    assert_env("CUDA_VISIBLE_DEVICES", NULL);
    /* task_init may run again (idempotent): same result. */
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("TNT_PIN", "none");
    /* + RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
     * MASTER_PORT (no SLURM_STEP_NODELIST here: no MASTER_ADDR), and
     * PYTHONPATH when the build has the Python package. */
#ifdef TNT_TEST_PYTHON_PKG_DIR
    assert_int_equal(host_env_count(), 13);
#else
    assert_int_equal(host_env_count(), 12);
#endif
}

/* The torchrun variables: from Slurm's items, the port from the default
 * range keyed by job and step, MASTER_ADDR the step's first node; what the
 * user set stays. */
static void test_remote_torch_env(void **state)
{
    char port[16];

    (void)state;
    host_env_set("SLURM_STEP_NODELIST", "localhost,n[2-3]");
    host_env_set("RANK", "99"); /* the user's: kept */
    assert_int_equal(remote_step(""), 0);
    host.task_id = 1;
    host.local_count = 2;
    host.global_id = 5;
    host.total_count = 6;
    host.node_id = 2;
    host.job_id = 1234;
    host.step_id = 5;
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host.errors, 0);
    assert_env("RANK", "99");
    assert_env("WORLD_SIZE", "6");
    assert_env("LOCAL_RANK", "1");
    assert_env("LOCAL_WORLD_SIZE", "2");
    assert_env("GROUP_RANK", "2");
    assert_env("MASTER_ADDR", "localhost");
    snprintf(port, sizeof port, "%d", 29500 + (1234 * 31 + 5) % 1000);
    assert_env("MASTER_PORT", port);
}

/* The site's range (plugstack.conf) and the user's MASTER_PORT/MASTER_ADDR. */
static void test_remote_torch_env_site_range_and_user_values(void **state)
{
    char *const args[] = { "master_port_range=31000-31009" };

    (void)state;
    host.context = S_CTX_REMOTE;
    assert_int_equal(plugin.init(HOST_SPANK, 1, (char **)args), 0);
    host_env_set("SLURM_STEP_NODELIST", "localhost");
    assert_int_equal(option_cb("", 1), 0);
    host.local_count = 1;
    host.total_count = 1;
    host.job_id = 7;
    host.step_id = 0;
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("MASTER_PORT", "31007"); /* 31000 + (7 * 31) % 10 */
    host_env_set("MASTER_PORT", "12345");
    host_env_set("MASTER_ADDR", "head");
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("MASTER_PORT", "12345");
    assert_env("MASTER_ADDR", "head");
}

static void test_remote_unset_options_leave_env_alone(void **state)
{
    (void)state;
    host_env_set("OMP_NUM_THREADS", "7");
    host_env_set("TNT_LOG_LEVEL", "info");
    assert_int_equal(remote_step("pin=none"), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("OMP_NUM_THREADS", "7");
    assert_env("TNT_LOG_LEVEL", "info");
    assert_env("TNT_FUSION_THRESHOLD_KB", NULL);
    assert_env("TNT_LOG_ON_ALL_DEVICES", NULL);
}

/* PYTHONPATH: the package the plugin was built with (found relative to the
 * .so: build/lib -> build/python here) first, the user's entries after it
 * in their order, and never twice. */
static void test_remote_pythonpath(void **state)
{
#ifdef TNT_TEST_PYTHON_PKG_DIR
    char pkg[PATH_MAX], want[PATH_MAX + 64];

    (void)state;
    assert_non_null(realpath(TNT_TEST_PYTHON_PKG_DIR, pkg));
    assert_int_equal(remote_step(""), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host.errors, 0);
    assert_env("PYTHONPATH", pkg);
    host_env_set("PYTHONPATH", "/u1:/u2");
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    snprintf(want, sizeof want, "%s:/u1:/u2", pkg);
    assert_env("PYTHONPATH", want);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("PYTHONPATH", want);
    snprintf(want, sizeof want, "/u1:%s/", pkg);
    host_env_set("PYTHONPATH", want);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("PYTHONPATH", want);
    /* The user's PYTHONPATH names another tarantella package: theirs wins. */
    {
        char other[] = "/tmp/tnt-pythonpath-XXXXXX", path[PATH_MAX + 64];
        FILE *f;

        assert_non_null(mkdtemp(other));
        snprintf(path, sizeof path, "%s/tarantella", other);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/tarantella/__init__.py", other);
        f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        snprintf(want, sizeof want, "/u1:%s", other);
        host_env_set("PYTHONPATH", want);
        assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
        assert_env("PYTHONPATH", want);
        unlink(path);
        snprintf(path, sizeof path, "%s/tarantella", other);
        rmdir(path);
        rmdir(other);
    }
#else
    (void)state;
    skip(); /* a build without the Python package: nothing to put there */
#endif
}

/* Without --tarantella (and nothing inherited) the plugin does nothing. */
static void test_remote_absent(void **state)
{
    (void)state;
    assert_int_equal(remote_step(NULL), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(host_env_count(), 0);
    assert_int_equal(host.errors, 0);
}

static void test_remote_skips_special_steps(void **state)
{
    const uint32_t steps[] = { SLURM_BATCH_SCRIPT, SLURM_EXTERN_CONT, SLURM_INTERACTIVE_STEP };
    size_t i;

    (void)state;
    host.context = S_CTX_REMOTE;
    host_env_set(INHERITED, "verbose");
    assert_int_equal(plugin.init(HOST_SPANK, 0, NULL), 0);
    assert_int_equal(option_cb("pin=core,verbose", 1), 0);
    for (i = 0; i < 3; i++) {
        host.step_id = steps[i];
        assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0);
        assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
        assert_env("TNT_PIN", NULL);
        assert_env("OMP_NUM_THREADS", NULL);
    }
}

/* The allocation's option and the step's merge key by key, the step last. */
static void test_remote_inherited_merge(void **state)
{
    (void)state;
    host_env_set(INHERITED, "pin=none,fusion=32,log=warn");
    assert_int_equal(remote_step("log=info"), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("TNT_PIN", "none");
    assert_env("TNT_FUSION_THRESHOLD_KB", "32");
    assert_env("TNT_LOG_LEVEL", "info");
}

static void test_remote_inherited_only(void **state)
{
    (void)state;
    host_env_set(INHERITED, "(null)"); /* sbatch --tarantella, bare */
    assert_int_equal(remote_step(NULL), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("TNT_PIN", "auto");
}

static void test_remote_bad_inherited(void **state)
{
    (void)state;
    host_env_set(INHERITED, "pin=wobbly");
    assert_int_equal(remote_step(NULL), -1);
    assert_error_contains("the allocation's --tarantella=pin=wobbly");
    assert_error_contains("invalid value 'wobbly' for pin");
}

static void test_remote_too_long(void **state)
{
    char arg[1500];

    (void)state;
    memset(arg, 'v', sizeof arg - 1);
    arg[sizeof arg - 1] = '\0';
    assert_int_equal(remote_step(arg), -1);
    assert_error_contains("longer than");
    teardown(state);
    setup(state);
    host_env_set(INHERITED, arg);
    assert_int_equal(remote_step(NULL), -1);
    assert_error_contains("longer than");
}

static void test_remote_missing_items(void **state)
{
    (void)state;
    assert_int_equal(remote_step("pin=none"), 0);
    host.items_missing = 1;
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), -1);
    assert_error_contains("cannot read the task's local id");
    /* post_opt cannot tell the step either: it leaves it alone. */
    assert_int_equal(plugin.post_opt(HOST_SPANK, 0, NULL), 0);
}

static void test_remote_setenv_fails(void **state)
{
    (void)state;
    assert_int_equal(remote_step("pin=none"), 0);
    host.setenv_fails = 1;
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), -1);
    assert_error_contains("cannot set TNT_PIN=none");
}

static void test_remote_bad_local_rank(void **state)
{
    (void)state;
    assert_int_equal(remote_step("pin=core"), 0);
    host.task_id = 3;
    host.local_count = 2; /* Slurm would never say so; we must not crash */
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), -1);
    assert_error_contains("pin=core");
}

static void test_remote_gpus(void **state)
{
    (void)state;
    /* Four GPUs visible to the step: local rank 5 gets 5 mod 4 = 1. */
    host_env_set("CUDA_VISIBLE_DEVICES", "0,1,2,3");
    assert_int_equal(remote_step("pin=none"), 0);
    host.task_id = 5;
    host.local_count = 8;
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("CUDA_VISIBLE_DEVICES", "1");
    /* Slurm bound GPUs per task (--gpus-per-task): keep its choice. */
    host_env_set("CUDA_VISIBLE_DEVICES", "2,3");
    host_env_set("SLURM_GPUS_PER_TASK", "2");
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("CUDA_VISIBLE_DEVICES", "2,3");
    /* --gpu-bind style: the task sees fewer GPUs than the step has. */
    teardown(state);
    setup(state);
    host_env_set("CUDA_VISIBLE_DEVICES", "6,7");
    host_env_set("SLURM_STEP_GPUS", "4,5,6,7");
    assert_int_equal(remote_step(""), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("CUDA_VISIBLE_DEVICES", "6,7");
}

static void test_remote_no_gpu(void **state)
{
    (void)state;
    host_env_set("CUDA_VISIBLE_DEVICES", "0,1");
    host_env_set("ROCR_VISIBLE_DEVICES", "0,1");
    assert_int_equal(remote_step("pin=none,no-gpu"), 0);
    assert_int_equal(plugin.task_init(HOST_SPANK, 0, NULL), 0);
    assert_env("CUDA_VISIBLE_DEVICES", "");
    assert_env("ROCR_VISIBLE_DEVICES", "");
}

/* pin=core in a child process (the binding would stay on this one): the
 * task ends up on a strict, non-empty subset of the CPUs it had. */
static void test_remote_pin_core(void **state)
{
    long before = allowed_cpus();
    int status;
    pid_t pid;

    (void)state;
    if (before < 2) {
        skip();
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        host.context = S_CTX_REMOTE;
        if (plugin.init(HOST_SPANK, 0, NULL) != 0 || option_cb("pin=core,verbose", 1) != 0 ||
            plugin.post_opt(HOST_SPANK, 0, NULL) != 0) {
            _exit(3);
        }
        host.task_id = 1;
        host.local_count = 2;
        if (plugin.task_init(HOST_SPANK, 0, NULL) != 0) {
            _exit(4);
        }
        if (allowed_cpus() < 1 || allowed_cpus() >= before) {
            _exit(5);
        }
        if (host_env_get("OMP_NUM_THREADS") == NULL ||
            atol(host_env_get("OMP_NUM_THREADS")) != allowed_cpus()) {
            _exit(6);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* srun's default --cpus-per-task=1, one task on a node with more CPUs, in a
 * child (the affinity change and the redirected stderr stay there): exits
 * 1 when the plugin printed the --cpus-per-task hint, 0 when it did not, 2+
 * on errors. `one_cpu` first confines the task to one CPU, as task/affinity
 * or task/cgroup would. */
static int cpu_hint_child(int one_cpu)
{
    char text[4096];
    cpu_set_t set;
    size_t len;
    FILE *err;
    int status, cpu;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        if (one_cpu) {
            if (sched_getaffinity(0, sizeof set, &set) != 0) {
                _exit(2);
            }
            for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++) {
                ;
            }
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            if (sched_setaffinity(0, sizeof set, &set) != 0) {
                _exit(3);
            }
        }
        err = tmpfile();
        if (err == NULL || dup2(fileno(err), STDERR_FILENO) < 0) {
            _exit(4);
        }
        if (remote_step("pin=none") != 0) {
            _exit(5);
        }
        host.cpus_per_task = 1;
        host.task_id = 0;
        host.local_count = 1;
        if (plugin.task_init(HOST_SPANK, 0, NULL) != 0) {
            _exit(6);
        }
        /* The hint and OMP_NUM_THREADS must agree on the CPUs the rank has. */
        if (host_env_get("OMP_NUM_THREADS") == NULL ||
            atol(host_env_get("OMP_NUM_THREADS")) != (one_cpu ? 1 : allowed_cpus())) {
            _exit(7);
        }
        fflush(stderr);
        rewind(err);
        len = fread(text, 1, sizeof text - 1, err);
        text[len] = '\0';
        _exit(strstr(text, "each of the 1 rank here has 1 CPU (--cpus-per-task=1") != NULL);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The hint is printed when the rank really has one CPU, and not when nothing
 * bound it (task/none): there it used to say "1 CPU" next to
 * OMP_NUM_THREADS=2. */
static void test_remote_cpu_hint_only_for_one_cpu(void **state)
{
    (void)state;
    if (allowed_cpus() < 2) {
        skip();
    }
    assert_int_equal(cpu_hint_child(0), 0);
    assert_int_equal(cpu_hint_child(1), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_init_registers_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_other_contexts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_plugstack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_bad_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_mpi_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_inherited_selects_pmix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocator_bad_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_torch_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_torch_env_site_range_and_user_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_remote_unset_options_leave_env_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_pythonpath, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_skips_special_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_inherited_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_inherited_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_bad_inherited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_missing_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_setenv_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_bad_local_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_no_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_pin_core, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_cpu_hint_only_for_one_cpu, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without the plugin (TNT_WITH_SPANK=OFF): the test is disabled */

int main(void)
{
    return 0;
}

#endif
