/*
 * tarantella: the single-node launcher. It parses the command line, works
 * out each rank's binding and environment, starts a PMIx server, forks the
 * ranks, forwards their stderr line by line and supervises them: the first
 * rank to fail stops the job (SIGTERM, then SIGKILL after a grace period)
 * and its exit status becomes the launcher's. Multi-node runs belong to
 * SLURM; --hostfile hands the job to OpenMPI's mpirun.
 *
 * Threads: the main thread does everything below; libpmix runs its own
 * progress thread, whose only effect here is the abort record (server.c).
 * Signals are blocked in every thread and read through a signalfd, so the
 * wait loop is one poll() with no busy waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hwloc.h>
#include <pmix.h>

#include "msg.h"
#include "options.h"
#include "pin.h"
#include "plan.h"
#include "server.h"

#ifndef TNT_VERSION_STRING
#define TNT_VERSION_STRING "unknown"
#endif

extern char **environ;

/* Exit statuses of the launcher itself (ranks' statuses pass through). */
enum {
    EXIT_LAUNCH_ERROR = 1, /* could not start the job */
    EXIT_USAGE = 2,        /* bad options */
    EXIT_NOT_FOUND = 127,  /* program or interpreter cannot be executed */
};

/* Seconds between SIGTERM and SIGKILL when the job is stopped. */
#define STOP_GRACE_S  3
#define LAST_LINE_MAX 400
#define LINE_BUF      4096

struct rank_state {
    int rank, node, local_rank;
    hwloc_bitmap_t cpuset, nodeset;
    int nthreads;
    struct tnt_envlist added; /* what the launcher adds (shown by --dry-run) */
    pid_t pid;                /* 0 = not started or reaped */
    pid_t started_pid;        /* kept after reaping, for the report */
    int wait_status;
    int err_fd; /* read end of the rank's stderr pipe, -1 when closed */
    size_t line_len;
    char line[LINE_BUF];
    char last_line[LAST_LINE_MAX + 1];
};

struct launch {
    struct tnt_launch_options opts;
    int nranks, nnodes, ngpus;
    struct rank_state *ranks;
    int *node_of_rank, *local_rank, *node_first, *node_size;
    char (*node_names)[256];
    hwloc_topology_t topology;
    char **exec_argv;
};

/* ---- small helpers ----------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);

    snprintf(buf, len, "SIG%s", abbrev != NULL ? abbrev : "?");
    return buf;
}

/* GPUs visible as /dev/nvidia<N> character devices. */
static int count_gpus(void)
{
    DIR *dir = opendir("/dev");
    struct dirent *entry;
    int count = 0;

    if (dir == NULL)
        return 0;
    while ((entry = readdir(dir)) != NULL) {
        const char *p = entry->d_name;

        if (strncmp(p, "nvidia", 6) != 0 || p[6] == '\0')
            continue;
        for (p += 6; *p >= '0' && *p <= '9'; p++)
            ;
        if (*p == '\0')
            count++;
    }
    closedir(dir);
    return count;
}

/* Is `name` executable, directly or through PATH (as execvp would find it)? */
static int find_executable(const char *name, char *path, size_t len)
{
    const char *dirs = getenv("PATH");

    if (name == NULL || name[0] == '\0')
        return -1;
    if (strchr(name, '/') != NULL) {
        snprintf(path, len, "%s", name);
        return access(name, X_OK) == 0 ? 0 : -1;
    }
    if (dirs == NULL)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    while (*dirs != '\0') {
        const char *end = strchr(dirs, ':');
        size_t dlen = end != NULL ? (size_t)(end - dirs) : strlen(dirs);
        struct stat st;

        snprintf(path, len, "%.*s/%s", (int)dlen, dlen > 0 ? dirs : ".", name);
        if (access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return 0;
        dirs += dlen;
        if (*dirs == ':')
            dirs++;
    }
    return -1;
}

static void set_verbosity(const struct tnt_launch_options *opts)
{
    const char *level = opts->log_level != NULL ? opts->log_level : getenv("TNT_LOG_LEVEL");

    if (level == NULL)
        return;
    if (strcmp(level, "info") == 0)
        tnt_launch_verbosity = TNT_LAUNCH_INFO;
    else if (strcmp(level, "debug") == 0 || strcmp(level, "trace") == 0)
        tnt_launch_verbosity = TNT_LAUNCH_DEBUG;
}

/* ---- --hostfile: hand off to mpirun ------------------------------------ */

static int run_mpirun(const struct tnt_launch_options *opts)
{
    char path[4096];
    char **argv;

    if (getenv("SLURM_JOB_ID") != NULL) {
        tnt_launch_error("--hostfile is for machines without SLURM; inside a SLURM allocation "
                         "start the ranks with: srun --tarantella [-N NODES] "
                         "[--ntasks-per-node=R] PROGRAM");
        return EXIT_USAGE;
    }
    if (find_executable("mpirun", path, sizeof path) != 0) {
        tnt_launch_error("--hostfile hands multi-node jobs to OpenMPI's mpirun, which is not "
                         "installed here (Debian: apt install openmpi-bin). Multi-node runs "
                         "belong to SLURM: srun --tarantella -N NODES PROGRAM");
        return EXIT_LAUNCH_ERROR;
    }
    argv = tnt_launch_mpirun_argv(opts, path);
    if (argv == NULL) {
        tnt_launch_error("out of memory");
        return EXIT_LAUNCH_ERROR;
    }
    if (opts->dry_run || tnt_launch_verbosity >= TNT_LAUNCH_INFO) {
        FILE *out = opts->dry_run ? stdout : stderr;

        fprintf(out, "tarantella: %s:", opts->dry_run ? "dry run, would execute" : "executing");
        for (int i = 0; argv[i] != NULL; i++)
            fprintf(out, " %s", argv[i]);
        fprintf(out, "\n");
        if (opts->dry_run) {
            tnt_launch_argv_free(argv);
            return 0;
        }
    }
    if (opts->pin_memory)
        tnt_launch_warn("--pin-memory has no mpirun equivalent and is ignored with --hostfile");
    fflush(NULL);
    execv(path, argv);
    tnt_launch_error("cannot execute %s: %s", path, strerror(errno));
    tnt_launch_argv_free(argv);
    return EXIT_NOT_FOUND;
}

/* ---- planning ---------------------------------------------------------- */

static void launch_free(struct launch *launch)
{
    for (int r = 0; launch->ranks != NULL && r < launch->nranks; r++) {
        struct rank_state *rs = &launch->ranks[r];

        if (rs->cpuset != NULL)
            hwloc_bitmap_free(rs->cpuset);
        if (rs->nodeset != NULL)
            hwloc_bitmap_free(rs->nodeset);
        if (rs->err_fd >= 0)
            close(rs->err_fd);
        tnt_envlist_free(&rs->added);
    }
    free(launch->ranks);
    free(launch->node_of_rank);
    free(launch->local_rank);
    free(launch->node_first);
    free(launch->node_size);
    free(launch->node_names);
    free(launch->exec_argv);
    if (launch->topology != NULL)
        hwloc_topology_destroy(launch->topology);
    tnt_launch_options_free(&launch->opts);
}

/*
 * Layout, binding, environment and argv of every rank. Pinning and the GPU
 * index use the rank's position on this *machine* (rank r of N), also with
 * --simulate-nodes: the simulated nodes share the real CPUs and GPUs.
 */
static int plan_launch(struct launch *launch)
{
    const struct tnt_launch_options *opts = &launch->opts;
    int n = opts->nranks, k = opts->simulate_nodes > 0 ? opts->simulate_nodes : 1;
    hwloc_bitmap_t allowed = NULL;
    char host[200], err[512];
    int ret = -1;

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
    for (int r = 0; r < n; r++)
        launch->ranks[r].err_fd = -1;
    if (tnt_launch_layout(n, k, launch->node_of_rank, launch->local_rank, launch->node_first,
                          launch->node_size) != 0) {
        tnt_launch_error("cannot lay out %d ranks on %d nodes", n, k);
        goto out;
    }
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (int node = 0; node < k; node++) {
        if (opts->simulate_nodes > 0)
            snprintf(launch->node_names[node], sizeof launch->node_names[node], "%s-node%d", host,
                     node);
        else
            snprintf(launch->node_names[node], sizeof launch->node_names[node], "%s", host);
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
        if (tnt_launch_rank_env(opts, environ, r, rs->nthreads, launch->ngpus, &rs->added) != 0) {
            tnt_launch_error("out of memory");
            goto out;
        }
    }
    ret = 0;
out:
    if (allowed != NULL)
        hwloc_bitmap_free(allowed);
    return ret;
}

static const char *memory_policy(const struct launch *launch)
{
    if (launch->opts.pin_memory)
        return "strict";
    return launch->opts.pin == TNT_PIN_NONE ? "default" : "preferred";
}

static void print_dry_run(const struct launch *launch)
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
        for (int i = 0; launch->exec_argv[i] != NULL; i++)
            printf(" %s", launch->exec_argv[i]);
        printf("\n");
    }
}

/* ---- starting ranks ---------------------------------------------------- */

/* In the child, between fork and exec: only async-signal-safe-ish work on
 * memory prepared by the parent, plus the pinning calls (the parent's
 * threads do not exist here, and glibc's malloc is fork-safe). */
static void __attribute__((noreturn))
exec_rank(struct launch *launch, struct rank_state *rs, int err_write, char **envp,
          const sigset_t *child_mask, pid_t parent)
{
    char err[512];

    /* Die with the launcher, even if it is SIGKILLed, so no rank is left
     * behind; check the parent did not die before the prctl took effect. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(EXIT_LAUNCH_ERROR);
    signal(SIGPIPE, SIG_DFL); /* the launcher ignores it; exec keeps SIG_IGN */
    sigprocmask(SIG_SETMASK, child_mask, NULL);
    if (dup2(err_write, STDERR_FILENO) < 0)
        _exit(EXIT_LAUNCH_ERROR);
    if (rs->rank != 0) {
        /* Only rank 0 reads the terminal, as with mpirun. */
        int devnull = open("/dev/null", O_RDONLY);

        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            close(devnull);
        }
    }
    if (launch->opts.pin != TNT_PIN_NONE || launch->opts.pin_memory) {
        int rc = tnt_pin_apply(launch->topology, rs->cpuset, rs->nodeset, launch->opts.pin_memory,
                               err, sizeof err);

        if (rc < 0) {
            fprintf(stderr, "tarantella: rank %d: %s\n", rs->rank, err);
            _exit(EXIT_LAUNCH_ERROR);
        }
        if (rc > 0)
            fprintf(stderr, "tarantella: warning: rank %d: %s\n", rs->rank, err);
    }
    execvpe(launch->exec_argv[0], launch->exec_argv, envp);
    fprintf(stderr, "tarantella: rank %d: cannot execute %s: %s\n", rs->rank, launch->exec_argv[0],
            strerror(errno));
    _exit(EXIT_NOT_FOUND);
}

static int start_rank(struct launch *launch, tnt_launch_server_t *server, struct rank_state *rs,
                      const sigset_t *child_mask)
{
    struct tnt_envlist env = { 0 };
    int pipe_fds[2] = { -1, -1 };
    pid_t parent = getpid(), pid;
    int ret = -1;

    if (tnt_envlist_copy(&env, environ) != 0)
        goto err_env;
    /* Variables of an enclosing PMIx job (the launcher itself started by
     * srun or mpirun) must not leak into the ranks; PMIX_MCA_* settings
     * are the user's and stay. */
    for (int i = 0; i < env.n;) {
        if (strncmp(env.v[i], "PMIX_", 5) == 0 && strncmp(env.v[i], "PMIX_MCA_", 9) != 0) {
            free(env.v[i]);
            env.v[i] = env.v[--env.n];
            env.v[env.n] = NULL;
        } else {
            i++;
        }
    }
    if (tnt_launch_server_setup_rank(server, rs->rank, &env) != 0)
        goto err_env;
    for (int i = 0; i < rs->added.n; i++)
        if (tnt_envlist_put(&env, rs->added.v[i]) != 0)
            goto err_env;
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        tnt_launch_error("pipe: %s", strerror(errno));
        goto err_env;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        tnt_launch_error("cannot fork rank %d: %s", rs->rank, strerror(errno));
        goto err_pipe;
    }
    if (pid == 0)
        exec_rank(launch, rs, pipe_fds[1], env.v, child_mask, parent);
    close(pipe_fds[1]);
    pipe_fds[1] = -1;
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    rs->err_fd = pipe_fds[0];
    pipe_fds[0] = -1;
    rs->pid = pid;
    rs->started_pid = pid;
    if (tnt_launch_verbosity >= TNT_LAUNCH_INFO) {
        char where[512];

        tnt_launch_info("rank %d (pid %ld) on %s, local rank %d: %s", rs->rank, (long)pid,
                        launch->node_names[rs->node], rs->local_rank,
                        tnt_pin_describe(rs->cpuset, rs->nodeset, where, sizeof where));
    }
    ret = 0;

err_pipe:
    if (pipe_fds[0] >= 0)
        close(pipe_fds[0]);
    if (pipe_fds[1] >= 0)
        close(pipe_fds[1]);
err_env:
    tnt_envlist_free(&env);
    return ret;
}

/* ---- stderr forwarding ------------------------------------------------- */

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* stderr closed: drop the output, keep supervising */
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* Remembers a line (without its newline) as the rank's last stderr line. */
static void remember_line(struct rank_state *rs, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len == 0)
        return; /* a blank line says nothing about why a rank failed */
    if (len > LAST_LINE_MAX)
        len = LAST_LINE_MAX;
    memcpy(rs->last_line, line, len);
    rs->last_line[len] = '\0';
}

/* Writes out complete lines (each with one write, so ranks' lines do not
 * interleave mid-line); a full buffer or EOF flushes what is there. */
static void flush_lines(struct rank_state *rs, int at_eof)
{
    size_t start = 0;

    for (size_t i = 0; i < rs->line_len; i++) {
        if (rs->line[i] == '\n') {
            write_all(STDERR_FILENO, rs->line + start, i + 1 - start);
            remember_line(rs, rs->line + start, i + 1 - start);
            start = i + 1;
        }
    }
    if ((at_eof || (start == 0 && rs->line_len == sizeof rs->line)) && start < rs->line_len) {
        write_all(STDERR_FILENO, rs->line + start, rs->line_len - start);
        if (at_eof)
            write_all(STDERR_FILENO, "\n", 1);
        remember_line(rs, rs->line + start, rs->line_len - start);
        start = rs->line_len;
    }
    memmove(rs->line, rs->line + start, rs->line_len - start);
    rs->line_len -= start;
}

/* Reads what the pipe has now; closes it at EOF or error. */
static void drain_stderr(struct rank_state *rs)
{
    while (rs->err_fd >= 0) {
        ssize_t n = read(rs->err_fd, rs->line + rs->line_len, sizeof rs->line - rs->line_len);

        if (n > 0) {
            rs->line_len += (size_t)n;
            flush_lines(rs, 0);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        flush_lines(rs, 1);
        close(rs->err_fd);
        rs->err_fd = -1;
    }
}

/* ---- supervision ------------------------------------------------------- */

struct supervisor {
    struct launch *launch;
    tnt_launch_server_t *server;
    int running;      /* ranks not reaped yet */
    int failed_rank;  /* first failure; -1 = none */
    int failed_abort; /* the failure was a PMIx abort */
    double failed_at; /* when the failure was seen */
    int abort_status;
    char abort_message[512];
    int interrupt_signal; /* signal that stopped the launcher; 0 = none */
    double kill_at;       /* SIGKILL deadline; 0 = none */
};

static void signal_ranks(struct supervisor *sv, int sig)
{
    for (int r = 0; r < sv->launch->nranks; r++) {
        /* A rank that called abort exits by itself once released (its last
         * words stay its last stderr line); only SIGKILL is for it too. */
        if (sv->failed_abort && r == sv->failed_rank && sig != SIGKILL)
            continue;
        if (sv->launch->ranks[r].pid > 0)
            kill(sv->launch->ranks[r].pid, sig);
    }
}

/* Starts stopping the job: sig now, SIGKILL after the grace period. */
static void stop_job(struct supervisor *sv, int sig)
{
    signal_ranks(sv, sig);
    if (sv->kill_at == 0)
        sv->kill_at = now_s() + STOP_GRACE_S;
}

/*
 * Which failure is the root cause? libtnt's ranks notice a dead peer within
 * milliseconds (its robust locks are released early in the kernel's exit
 * path, before the process becomes a zombie) and exit with errors of their
 * own, so on a busy machine they may be reaped before the rank that really
 * died; waitpid's order says nothing about who died first. A death by a
 * signal is the strongest evidence: until the grace period ends the launcher
 * sends only SIGTERM, so any other signal within SETTLE_S of the first
 * failure came from elsewhere (kill -9, a segfault, the OOM killer) and
 * takes over the report from a plain error exit. Among equals in one batch,
 * the lowest rank is reported.
 */
#define SETTLE_S 0.5

static int outside_signal(int wait_status)
{
    return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) != SIGTERM;
}

static void reap_children(struct supervisor *sv)
{
    struct rank_state *culprit = NULL;
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct rank_state *rs = NULL;

        for (int r = 0; r < sv->launch->nranks; r++)
            if (sv->launch->ranks[r].pid == pid)
                rs = &sv->launch->ranks[r];
        if (rs == NULL)
            continue; /* an orphan re-parented to us (sweep_orphans) */
        rs->pid = 0;
        rs->wait_status = status;
        sv->running--;
        /* Everything the rank wrote before exiting is in the pipe now. */
        drain_stderr(rs);
        tnt_launch_debug("rank %d (pid %ld) ended: wait status 0x%x", rs->rank, (long)pid, status);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (sv->failed_rank >= 0) {
            const struct rank_state *first = &sv->launch->ranks[sv->failed_rank];

            if (!sv->failed_abort && sv->interrupt_signal == 0 && outside_signal(status) &&
                !outside_signal(first->wait_status) && now_s() - sv->failed_at <= SETTLE_S)
                sv->failed_rank = rs->rank;
            continue;
        }
        if (culprit == NULL || (outside_signal(status) && !outside_signal(culprit->wait_status)) ||
            (outside_signal(status) == outside_signal(culprit->wait_status) &&
             rs->rank < culprit->rank))
            culprit = rs;
    }
    if (culprit != NULL && sv->failed_rank < 0 && sv->interrupt_signal == 0) {
        sv->failed_rank = culprit->rank;
        sv->failed_at = now_s();
        stop_job(sv, SIGTERM);
    }
}

static void handle_abort(struct supervisor *sv)
{
    int rank, status;
    char message[512];

    if (!tnt_launch_server_abort_info(sv->server, &rank, &status, message, sizeof message))
        return;
    if (sv->failed_rank >= 0 || sv->interrupt_signal != 0)
        return;
    sv->failed_rank = rank;
    sv->failed_abort = 1;
    sv->abort_status = status;
    snprintf(sv->abort_message, sizeof sv->abort_message, "%s", message);
    stop_job(sv, SIGTERM);
}

static void handle_signal(struct supervisor *sv, const struct signalfd_siginfo *info)
{
    int sig = (int)info->ssi_signo;

    if (sig == SIGCHLD) {
        reap_children(sv);
        return;
    }
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        /* Messages for the program (e.g. a batch system's "checkpoint now"
         * before the time limit): passed on, the job goes on. */
        signal_ranks(sv, sig);
        return;
    }
    if (sv->interrupt_signal != 0 || sv->failed_rank >= 0) {
        /* Second interrupt: no more grace. */
        signal_ranks(sv, SIGKILL);
        return;
    }
    sv->interrupt_signal = sig;
    /* Ctrl-C / Ctrl-\ from the terminal (SI_KERNEL) already went to the
     * whole foreground process group, ranks included; sending it again
     * would interrupt their clean-up. Signals sent to the launcher alone
     * (kill, a batch system) are forwarded. */
    if (info->ssi_code == SI_KERNEL && (sig == SIGINT || sig == SIGQUIT)) {
        if (sv->kill_at == 0)
            sv->kill_at = now_s() + STOP_GRACE_S;
    } else {
        stop_job(sv, sig);
    }
}

static int supervise(struct supervisor *sv, int sigfd)
{
    int n = sv->launch->nranks;
    struct pollfd *fds = calloc((size_t)n + 2, sizeof *fds);
    int *fd_rank = calloc((size_t)n + 2, sizeof *fd_rank);

    if (fds == NULL || fd_rank == NULL) {
        free(fds);
        free(fd_rank);
        tnt_launch_error("out of memory");
        stop_job(sv, SIGKILL);
        return -1;
    }
    /* Ranks may have exited before the first poll: catch up. */
    reap_children(sv);
    while (sv->running > 0) {
        int nfds = 0, timeout_ms = -1, ready;

        fds[nfds++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
        fds[nfds++] =
            (struct pollfd){ .fd = tnt_launch_server_event_fd(sv->server), .events = POLLIN };
        for (int r = 0; r < n; r++) {
            if (sv->launch->ranks[r].err_fd >= 0) {
                fd_rank[nfds] = r;
                fds[nfds++] =
                    (struct pollfd){ .fd = sv->launch->ranks[r].err_fd, .events = POLLIN };
            }
        }
        if (sv->kill_at > 0) {
            double left = sv->kill_at - now_s();

            if (left <= 0) {
                tnt_launch_debug("grace period over: SIGKILL to the remaining ranks");
                signal_ranks(sv, SIGKILL);
                sv->kill_at = -1; /* done; wait for the reaping */
            } else {
                timeout_ms = (int)(left * 1000) + 1;
            }
        }
        ready = poll(fds, (nfds_t)nfds, timeout_ms);
        if (ready < 0 && errno != EINTR) {
            tnt_launch_error("poll: %s", strerror(errno));
            signal_ranks(sv, SIGKILL);
            break;
        }
        for (int i = 2; ready > 0 && i < nfds; i++)
            if (fds[i].revents != 0)
                drain_stderr(&sv->launch->ranks[fd_rank[i]]);
        if (ready > 0 && fds[1].revents != 0)
            handle_abort(sv);
        if (ready > 0 && fds[0].revents != 0) {
            struct signalfd_siginfo info;

            while (read(sigfd, &info, sizeof info) == (ssize_t)sizeof info)
                handle_signal(sv, &info);
        }
    }
    /* Whatever children of the ranks still hold a pipe open cannot delay
     * the exit: take what is buffered, then close. */
    for (int r = 0; r < n; r++)
        drain_stderr(&sv->launch->ranks[r]);
    free(fds);
    free(fd_rank);
    return 0;
}

/* Processes the ranks left behind (a shell's background job, a data
 * loader worker) were re-parented to the launcher, a child subreaper. Once
 * the ranks are gone the job is over: they get SIGTERM, then SIGKILL after
 * a second, so that nothing of the job outlives the launcher. */
static int list_orphans(pid_t *pids, int max)
{
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    pid_t self = getpid();
    int count = 0;

    if (proc == NULL)
        return 0;
    while ((entry = readdir(proc)) != NULL && count < max) {
        char path[64], buf[512], *paren;
        long ppid = 0;
        FILE *f;

        if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%.20s/stat", entry->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        /* "pid (comm) state ppid ...": comm may hold spaces, so parse after
         * the last ')'. */
        if (fgets(buf, sizeof buf, f) != NULL && (paren = strrchr(buf, ')')) != NULL &&
            sscanf(paren + 1, " %*c %ld", &ppid) == 1 && ppid == (long)self)
            pids[count++] = (pid_t)atol(entry->d_name);
        fclose(f);
    }
    closedir(proc);
    return count;
}

static void sweep_orphans(int sigfd)
{
    pid_t pids[256];
    int count = list_orphans(pids, 256);
    double deadline = now_s() + 1.0;

    if (count == 0)
        return;
    tnt_launch_debug("%d process(es) left behind by the ranks: SIGTERM", count);
    for (int i = 0; i < count; i++)
        kill(pids[i], SIGTERM);
    for (;;) {
        struct pollfd pfd = { .fd = sigfd, .events = POLLIN };
        struct signalfd_siginfo info;
        double left = deadline - now_s();

        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (list_orphans(pids, 256) == 0)
            return;
        if (left <= 0)
            break;
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0)
            while (read(sigfd, &info, sizeof info) == (ssize_t)sizeof info)
                ;
    }
    count = list_orphans(pids, 256);
    for (int i = 0; i < count; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
}

/* libtnt names a node's segment /dev/shm/tnt-<job hash>-<pid of the node's
 * first rank> and removes the name as soon as every local rank has attached.
 * A rank killed while it waited for the others to attach (a peer failed at
 * start-up, and we stopped the job) cannot do that, so once every rank is
 * gone the launcher removes what its own ranks left behind. Only names that
 * end in one of this job's pids are touched. */
static void remove_leftover_segments(const struct launch *launch)
{
    DIR *dir = opendir("/dev/shm");
    struct dirent *entry;

    if (dir == NULL)
        return;
    while ((entry = readdir(dir)) != NULL) {
        const char *dash;
        char *end;
        long pid;

        if (strncmp(entry->d_name, "tnt-", 4) != 0 || (dash = strrchr(entry->d_name, '-')) == NULL)
            continue;
        pid = strtol(dash + 1, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        for (int r = 0; r < launch->nranks; r++) {
            if (launch->ranks[r].started_pid == (pid_t)pid) {
                char path[300];
                snprintf(path, sizeof path, "/%s", entry->d_name);
                if (shm_unlink(path) == 0)
                    tnt_launch_debug("removed %s left by rank %d", path, r);
                break;
            }
        }
    }
    closedir(dir);
}

/* The one line that says why the job failed; returns the exit status. */
static int report(const struct supervisor *sv)
{
    const struct rank_state *rs;
    char what[600], sig[32], tail[LAST_LINE_MAX + 64];
    int status;

    if (sv->failed_rank < 0) {
        if (sv->interrupt_signal != 0) {
            fprintf(stderr, "tarantella: stopped by %s; all ranks ended\n",
                    signal_name(sv->interrupt_signal, sig, sizeof sig));
            return 128 + sv->interrupt_signal;
        }
        return 0;
    }
    rs = &sv->launch->ranks[sv->failed_rank];
    if (rs->last_line[0] != '\0')
        snprintf(tail, sizeof tail, "; last stderr line: \"%s\"", rs->last_line);
    else
        snprintf(tail, sizeof tail, "; no stderr output");
    if (sv->failed_abort) {
        status = sv->abort_status != 0 ? sv->abort_status & 0xff : 1;
        if (status == 0)
            status = 1;
        snprintf(what, sizeof what, "called abort with status %d: \"%s\"", sv->abort_status,
                 sv->abort_message);
    } else if (WIFSIGNALED(rs->wait_status)) {
        int signo = WTERMSIG(rs->wait_status);

        status = 128 + signo;
        snprintf(what, sizeof what, "killed by signal %d (%s)", signo,
                 signal_name(signo, sig, sizeof sig));
    } else {
        status = WEXITSTATUS(rs->wait_status);
        snprintf(what, sizeof what, "exited with status %d", status);
    }
    fprintf(stderr, "tarantella: rank %d (pid %ld) %s%s\n", rs->rank, (long)rs->started_pid, what,
            tail);
    return status;
}

static int run_job(struct launch *launch)
{
    struct supervisor sv = { .launch = launch, .failed_rank = -1 };
    struct tnt_launch_job job = {
        .nranks = launch->nranks,
        .nnodes = launch->nnodes,
        .node_of_rank = launch->node_of_rank,
        .local_rank = launch->local_rank,
        .node_first = launch->node_first,
        .node_size = launch->node_size,
        .node_names = launch->node_names,
    };
    sigset_t mask, child_mask;
    int sigfd, status = EXIT_LAUNCH_ERROR;

    /* Block before libpmix starts its thread, so that every signal reaches
     * the signalfd and none lands on the progress thread. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sigprocmask(SIG_BLOCK, &mask, &child_mask);
    signal(SIGPIPE, SIG_IGN);
    sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) {
        tnt_launch_error("signalfd: %s", strerror(errno));
        return EXIT_LAUNCH_ERROR;
    }
    /* Descendants the ranks leave behind become our children, so they can
     * be found and stopped at the end (sweep_orphans). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sv.server = tnt_launch_server_start(&job);
    if (sv.server == NULL)
        goto err_close_sigfd;
    for (int r = 0; r < launch->nranks; r++) {
        if (start_rank(launch, sv.server, &launch->ranks[r], &child_mask) != 0) {
            sv.running = r;
            stop_job(&sv, SIGKILL);
            supervise(&sv, sigfd);
            sweep_orphans(sigfd);
            remove_leftover_segments(launch);
            goto err_stop_server;
        }
    }
    sv.running = launch->nranks;
    supervise(&sv, sigfd);
    sweep_orphans(sigfd);
    remove_leftover_segments(launch);
    status = report(&sv);

err_stop_server:
    tnt_launch_server_stop(sv.server);
err_close_sigfd:
    close(sigfd);
    return status;
}

int main(int argc, char **argv)
{
    struct launch launch = { 0 };
    char err[1024], path[4096];
    int status;

    if (tnt_launch_options_parse(argc, argv, &launch.opts, err, sizeof err) != 0) {
        tnt_launch_error("%s", err);
        tnt_launch_options_free(&launch.opts);
        return EXIT_USAGE;
    }
    if (launch.opts.show_help) {
        fputs(tnt_launch_usage(), stdout);
        tnt_launch_options_free(&launch.opts);
        return 0;
    }
    if (launch.opts.show_version) {
        const char *pmix = PMIx_Get_version(); /* "OpenPMIx 4.2.2rc2 (PMIx Standard: ...)" */
        const char *paren = strstr(pmix, " (");

        printf("tarantella %s (%.*s, hwloc %s)\n", TNT_VERSION_STRING,
               paren != NULL ? (int)(paren - pmix) : (int)strlen(pmix), pmix, HWLOC_VERSION);
        tnt_launch_options_free(&launch.opts);
        return 0;
    }
    set_verbosity(&launch.opts);
    if (launch.opts.hostfile != NULL) {
        status = run_mpirun(&launch.opts);
        tnt_launch_options_free(&launch.opts);
        return status;
    }
    {
        /* Inside a multi-node allocation the launcher still uses only this
         * node; say how to use them all. */
        const char *nodes = getenv("SLURM_JOB_NUM_NODES");

        if (nodes != NULL && atoi(nodes) > 1 && !launch.opts.dry_run)
            tnt_launch_warn("this SLURM allocation has %s nodes, but tarantella starts every "
                            "rank on this one; to use them all: srun --tarantella -N %s "
                            "PROGRAM",
                            nodes, nodes);
    }
    if (plan_launch(&launch) != 0) {
        status = EXIT_LAUNCH_ERROR;
        goto out;
    }
    if (launch.opts.dry_run) {
        print_dry_run(&launch);
        status = 0;
        goto out;
    }
    /* Refuse before starting anything when the program cannot run. */
    if (find_executable(launch.exec_argv[0], path, sizeof path) != 0) {
        tnt_launch_error("cannot execute '%s': %s", launch.exec_argv[0],
                         strchr(launch.exec_argv[0], '/') != NULL ? strerror(errno)
                                                                  : "not found in PATH");
        status = EXIT_NOT_FOUND;
        goto out;
    }
    /* A script given to the interpreter must exist too (python would say
     * so N times, once per rank). */
    if (launch.exec_argv[0] != launch.opts.program[0] &&
        access(launch.opts.program[0], R_OK) != 0) {
        tnt_launch_error("cannot open '%s': %s", launch.opts.program[0], strerror(errno));
        status = EXIT_NOT_FOUND;
        goto out;
    }
    status = run_job(&launch);
out:
    launch_free(&launch);
    return status;
}
