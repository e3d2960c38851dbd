#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "msg.h"
#include "pin.h"
#include "plan.h"
#include "spawn.h"

extern char **environ;

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
    if (getppid() != parent) {
        _exit(EXIT_LAUNCH_ERROR);
    }
    signal(SIGPIPE, SIG_DFL); /* the launcher ignores it; exec keeps SIG_IGN */
    sigprocmask(SIG_SETMASK, child_mask, NULL);
    if (dup2(err_write, STDERR_FILENO) < 0) {
        _exit(EXIT_LAUNCH_ERROR);
    }
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
        if (rc > 0) {
            fprintf(stderr, "tarantella: warning: rank %d: %s\n", rs->rank, err);
        }
    }
    execvpe(launch->exec_argv[0], launch->exec_argv, envp);
    fprintf(stderr, "tarantella: rank %d: cannot execute %s: %s\n", rs->rank, launch->exec_argv[0],
            strerror(errno));
    _exit(EXIT_NOT_FOUND);
}

int tnt_launch_spawn_rank(struct launch *launch, tnt_launch_server_t *server, struct rank_state *rs,
                          const sigset_t *child_mask)
{
    struct tnt_envlist env = { 0 };
    int pipe_fds[2] = { -1, -1 };
    pid_t parent = getpid(), pid;
    int ret = -1;

    if (tnt_envlist_copy(&env, environ) != 0) {
        goto err_env;
    }
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
    if (tnt_launch_server_setup_rank(server, rs->rank, &env) != 0) {
        goto err_env;
    }
    for (int i = 0; i < rs->added.n; i++) {
        if (tnt_envlist_put(&env, rs->added.v[i]) != 0) {
            goto err_env;
        }
    }
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
    if (pid == 0) {
        exec_rank(launch, rs, pipe_fds[1], env.v, child_mask, parent);
    }
    tnt_launch_server_rank_started(server, rs->rank, pid);
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
    if (pipe_fds[0] >= 0) {
        close(pipe_fds[0]);
    }
    if (pipe_fds[1] >= 0) {
        close(pipe_fds[1]);
    }
err_env:
    tnt_envlist_free(&env);
    return ret;
}
