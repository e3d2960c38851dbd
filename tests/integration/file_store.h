/*
 * The integration checks' out-of-band store for tnt_comm_create_oob: files
 * <dir>/<round>.<rank> in a directory every rank can see, each written
 * whole and then renamed into place, so a reader never sees half a file.
 * A file store needs nothing but a shared file system, so it also joins
 * ranks that cannot reach each other by TCP on 127.0.0.1 (ranks in
 * network namespaces of their own: netfault_check).
 */
#ifndef TNT_TESTS_INTEGRATION_FILE_STORE_H
#define TNT_TESTS_INTEGRATION_FILE_STORE_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STORE_WAIT_S 30

struct file_store {
    const char *dir;
    int rank;
    int size;
    unsigned round;
};

struct store_req {
    struct file_store *store;
    unsigned round;
    void *recvbuf;
    size_t bytes;
};

static inline void store_path(char *path, size_t len, const struct file_store *s, unsigned round,
                              int r)
{
    snprintf(path, len, "%s/%u.%d", s->dir, round, r);
}

static inline int store_put(struct file_store *s, const void *buf, size_t bytes)
{
    char tmp[4200], path[4096];
    store_path(path, sizeof(path), s, s->round, s->rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || (bytes > 0 && fwrite(buf, 1, bytes, f) != bytes) || fclose(f) != 0) {
        return -1;
    }
    return rename(tmp, path);
}

/* 1 once every rank's file of the round is there (and read), 0 before. */
static inline int store_test(void *ctx, void *req_arg)
{
    struct store_req *req = req_arg;
    struct file_store *s = req->store;
    (void)ctx;
    for (int r = 0; r < s->size; r++) {
        char path[4096];
        store_path(path, sizeof(path), s, req->round, r);
        if (access(path, F_OK) != 0) {
            return 0;
        }
    }
    for (int r = 0; r < s->size; r++) {
        char path[4096];
        store_path(path, sizeof(path), s, req->round, r);
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            return -1;
        }
        size_t got = req->bytes > 0
                         ? fread((char *)req->recvbuf + (size_t)r * req->bytes, 1, req->bytes, f)
                         : 0;
        fclose(f);
        if (got != req->bytes) {
            return -1;
        }
    }
    return 1;
}

static inline int store_allgather_nb(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes,
                                     void **req_p)
{
    struct file_store *s = ctx;
    struct store_req *req = calloc(1, sizeof(*req));
    if (req == NULL || store_put(s, sendbuf, bytes) != 0) {
        free(req);
        return -1;
    }
    req->store = s;
    req->round = s->round++;
    req->recvbuf = recvbuf;
    req->bytes = bytes;
    *req_p = req;
    return 0;
}

static inline void store_req_free(void *ctx, void *req)
{
    (void)ctx;
    free(req);
}

/* The blocking form: waits itself, bounded. */
static inline int store_allgather(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes,
                                  void **req_p)
{
    void *req;
    int done = 0;
    (void)req_p;
    if (store_allgather_nb(ctx, sendbuf, recvbuf, bytes, &req) != 0) {
        return -1;
    }
    for (int i = 0; i < STORE_WAIT_S * 1000 && (done = store_test(ctx, req)) == 0; i++) {
        usleep(1000);
    }
    free(req);
    return done == 1 ? 0 : -1;
}

/* Removes the store's files and its directory (the ranks have ended). */
static inline void store_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
}

#define STORE_MAX_RANKS 64

/* Forks `ranks` processes (at most STORE_MAX_RANKS) that share a fresh
 * store directory /tmp/tnt-<prog>-XXXXXX; each exits with rank_main(dir,
 * rank, arg). Waits for all of them and removes the directory. Returns 0
 * when every rank exited with 0, else 1, naming each rank that did not. */
/* As store_fork_ranks, but rank `killed` must end by SIGKILL (a test of a
 * rank that dies; -1: none may), and the ranks' pids are stored in pids
 * (when not NULL; STORE_MAX_RANKS entries). */
static inline int store_fork_ranks_killing(const char *prog, int ranks, int killed,
                                           int (*rank_main)(const char *dir, int rank, void *arg),
                                           void *arg, pid_t *pids_out)
{
    char dir[256];
    pid_t pids[STORE_MAX_RANKS];
    int failed = 0, started = 0;

    if (ranks < 1 || ranks > STORE_MAX_RANKS) {
        fprintf(stderr, "%s: %d ranks; 1 .. %d can run\n", prog, ranks, STORE_MAX_RANKS);
        return 1;
    }
    snprintf(dir, sizeof(dir), "/tmp/tnt-%s-XXXXXX", prog);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "%s: mkdtemp: %s\n", prog, strerror(errno));
        return 1;
    }
    for (; started < ranks; started++) {
        pids[started] = fork();
        if (pids[started] < 0) {
            fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
            failed = 1;
            break;
        }
        if (pids[started] == 0) {
            _exit(rank_main(dir, started, arg));
        }
        if (pids_out != NULL) {
            pids_out[started] = pids[started];
        }
    }
    for (int r = 0; r < started; r++) {
        int wstatus;
        if (waitpid(pids[r], &wstatus, 0) != pids[r]) {
            fprintf(stderr, "%s: waitpid: %s\n", prog, strerror(errno));
            failed = 1;
        } else if (r == killed) {
            if (!WIFSIGNALED(wstatus) || WTERMSIG(wstatus) != SIGKILL) {
                fprintf(stderr, "%s: rank %d should have died by SIGKILL, ended with status 0x%x\n",
                        prog, r, wstatus);
                failed = 1;
            }
        } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
            fprintf(stderr, "%s: rank %d ended with status 0x%x\n", prog, r, wstatus);
            failed = 1;
        }
    }
    store_remove(dir);
    return failed;
}

static inline int store_fork_ranks(const char *prog, int ranks,
                                   int (*rank_main)(const char *dir, int rank, void *arg),
                                   void *arg)
{
    return store_fork_ranks_killing(prog, ranks, -1, rank_main, arg, NULL);
}

#endif
