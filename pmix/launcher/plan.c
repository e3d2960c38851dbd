/*
 * Pure parts of the launch: layout, per-rank environment, exec argv and the
 * mpirun hand-off. See plan.h for the rules.
 */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_name_matches(const char *entry, const char *name, size_t len)
{
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

const char *tnt_env_lookup(char *const *env, const char *name)
{
    size_t len = strlen(name);

    for (int i = 0; env != NULL && env[i] != NULL; i++) {
        if (env_name_matches(env[i], name, len)) {
            return env[i] + len + 1;
        }
    }
    return NULL;
}

static int envlist_store(struct tnt_envlist *list, char *entry, size_t name_len)
{
    char **grown;

    for (int i = 0; i < list->n; i++) {
        if (strncmp(list->v[i], entry, name_len + 1) == 0) {
            free(list->v[i]);
            list->v[i] = entry;
            return 0;
        }
    }
    grown = realloc(list->v, (size_t)(list->n + 2) * sizeof *grown);
    if (grown == NULL) {
        free(entry);
        return -1;
    }
    list->v = grown;
    list->v[list->n++] = entry;
    list->v[list->n] = NULL;
    return 0;
}

int tnt_envlist_set(struct tnt_envlist *list, const char *name, const char *value)
{
    size_t len = strlen(name);
    char *entry = malloc(len + strlen(value) + 2);

    if (entry == NULL) {
        return -1;
    }
    sprintf(entry, "%s=%s", name, value);
    return envlist_store(list, entry, len);
}

int tnt_envlist_put(struct tnt_envlist *list, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    char *entry;

    if (eq == NULL || (entry = strdup(assignment)) == NULL) {
        return -1;
    }
    return envlist_store(list, entry, (size_t)(eq - assignment));
}

int tnt_envlist_copy(struct tnt_envlist *list, char *const *env)
{
    for (int i = 0; env != NULL && env[i] != NULL; i++) {
        if (strchr(env[i], '=') != NULL && tnt_envlist_put(list, env[i]) != 0) {
            return -1;
        }
    }
    if (list->v == NULL) {
        /* An empty environment is still a valid, NULL-terminated one. */
        list->v = calloc(1, sizeof *list->v);
        if (list->v == NULL) {
            return -1;
        }
    }
    return 0;
}

void tnt_envlist_free(struct tnt_envlist *list)
{
    for (int i = 0; i < list->n; i++) {
        free(list->v[i]);
    }
    free(list->v);
    list->v = NULL;
    list->n = 0;
}

int tnt_launch_layout(int nranks, int nnodes, int *node_of_rank, int *local_rank, int *node_first,
                      int *node_size)
{
    int rank = 0;

    if (nranks < 1 || nnodes < 1 || nnodes > nranks) {
        return -1;
    }
    for (int node = 0; node < nnodes; node++) {
        int size = nranks / nnodes + (node < nranks % nnodes ? 1 : 0);

        node_first[node] = rank;
        node_size[node] = size;
        for (int l = 0; l < size; l++, rank++) {
            node_of_rank[rank] = node;
            local_rank[rank] = l;
        }
    }
    return 0;
}

/* Is NAME set by a -x option? */
static int exported(const struct tnt_launch_options *opts, const char *name)
{
    return tnt_env_lookup(opts->exports, name) != NULL;
}

int tnt_launch_rank_env(const struct tnt_launch_options *opts, char *const *base_env,
                        int local_rank, int nthreads, int ngpus, struct tnt_envlist *added)
{
    char number[32];

    if (tnt_envlist_set(added, "TNT_PIN", tnt_pin_mode_name(opts->pin)) != 0) {
        goto err_free;
    }
    if (opts->log_level != NULL && tnt_envlist_set(added, "TNT_LOG_LEVEL", opts->log_level) != 0) {
        goto err_free;
    }
    if (opts->log_on_all_devices && tnt_envlist_set(added, "TNT_LOG_ON_ALL_DEVICES", "1") != 0) {
        goto err_free;
    }
    if (opts->output_on_all_devices &&
        tnt_envlist_set(added, "TNT_OUTPUT_ON_ALL_DEVICES", "1") != 0) {
        goto err_free;
    }
    if (opts->fusion_threshold_kb >= 0 || opts->fusion_threshold_kb == TNT_LAUNCH_FUSION_AUTO) {
        if (opts->fusion_threshold_kb == TNT_LAUNCH_FUSION_AUTO) {
            snprintf(number, sizeof number, "auto");
        } else {
            snprintf(number, sizeof number, "%ld", opts->fusion_threshold_kb);
        }
        if (tnt_envlist_set(added, "TNT_FUSION_THRESHOLD_KB", number) != 0) {
            goto err_free;
        }
    }
    if (tnt_env_lookup(base_env, "OMP_NUM_THREADS") == NULL && !exported(opts, "OMP_NUM_THREADS")) {
        snprintf(number, sizeof number, "%d", nthreads > 0 ? nthreads : 1);
        if (tnt_envlist_set(added, "OMP_NUM_THREADS", number) != 0) {
            goto err_free;
        }
    }
    if (opts->no_gpu) {
        if (tnt_envlist_set(added, "CUDA_VISIBLE_DEVICES", "") != 0) {
            goto err_free;
        }
    } else if (ngpus > 0 && tnt_env_lookup(base_env, "CUDA_VISIBLE_DEVICES") == NULL &&
               !exported(opts, "CUDA_VISIBLE_DEVICES")) {
        snprintf(number, sizeof number, "%d", local_rank % ngpus);
        if (tnt_envlist_set(added, "CUDA_VISIBLE_DEVICES", number) != 0) {
            goto err_free;
        }
    }
    for (int i = 0; i < opts->nexports; i++) {
        if (tnt_envlist_put(added, opts->exports[i]) != 0) {
            goto err_free;
        }
    }
    return 0;

err_free:
    tnt_envlist_free(added);
    return -1;
}

int tnt_launch_torch_env(const struct tnt_launch_options *opts, char *const *base_env,
                         const struct tnt_launch_torch_ids *ids, int master_port,
                         struct tnt_envlist *added)
{
    const struct {
        const char *name;
        int value;
    } numbers[] = {
        { "RANK", ids->rank },
        { "WORLD_SIZE", ids->world_size },
        { "LOCAL_RANK", ids->local_rank },
        { "LOCAL_WORLD_SIZE", ids->local_world_size },
        { "GROUP_RANK", ids->node },
        { "MASTER_PORT", master_port },
    };
    char number[32];

    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        if (tnt_env_lookup(base_env, numbers[i].name) != NULL || exported(opts, numbers[i].name)) {
            continue;
        }
        snprintf(number, sizeof number, "%d", numbers[i].value);
        if (tnt_envlist_set(added, numbers[i].name, number) != 0) {
            return -1;
        }
    }
    if (tnt_env_lookup(base_env, "MASTER_ADDR") == NULL && !exported(opts, "MASTER_ADDR") &&
        tnt_envlist_set(added, "MASTER_ADDR", TNT_LAUNCH_MASTER_ADDR) != 0) {
        return -1;
    }
    return 0;
}

static int ends_with(const char *text, const char *suffix)
{
    size_t n = strlen(text), m = strlen(suffix);

    return n >= m && strcmp(text + n - m, suffix) == 0;
}

char **tnt_launch_exec_argv(const struct tnt_launch_options *opts)
{
    int python =
        opts->python != NULL && opts->python[0] != '\0' && ends_with(opts->program[0], ".py");
    char **argv = calloc((size_t)opts->nprogram + 2, sizeof *argv);
    int n = 0;

    if (argv == NULL) {
        return NULL;
    }
    if (python) {
        argv[n++] = (char *)opts->python;
    }
    for (int i = 0; i < opts->nprogram; i++) {
        argv[n++] = opts->program[i];
    }
    argv[n] = NULL;
    return argv;
}

void tnt_launch_argv_free(char **argv)
{
    for (int i = 0; argv != NULL && argv[i] != NULL; i++) {
        free(argv[i]);
    }
    free(argv);
}

static int argv_push(char ***argv_p, int *n, const char *text)
{
    char **grown = realloc(*argv_p, (size_t)(*n + 2) * sizeof *grown);

    if (grown == NULL) {
        return -1;
    }
    *argv_p = grown;
    if ((grown[*n] = strdup(text)) == NULL) {
        return -1;
    }
    grown[++*n] = NULL;
    return 0;
}

char **tnt_launch_mpirun_argv(const struct tnt_launch_options *opts, const char *mpirun)
{
    struct tnt_envlist added = { 0 };
    char **argv = NULL, **program = NULL;
    char number[32];
    int n = 0;

    snprintf(number, sizeof number, "%d", opts->nranks);
    if (argv_push(&argv, &n, mpirun) != 0 || argv_push(&argv, &n, "-np") != 0 ||
        argv_push(&argv, &n, number) != 0 || argv_push(&argv, &n, "--hostfile") != 0 ||
        argv_push(&argv, &n, opts->hostfile) != 0) {
        goto err_free;
    }
    /* auto: OpenMPI's own default binding policy is the closest match. */
    if (opts->pin != TNT_PIN_AUTO) {
        if (argv_push(&argv, &n, "--bind-to") != 0 ||
            argv_push(&argv, &n, tnt_pin_mode_name(opts->pin)) != 0) {
            goto err_free;
        }
    }
    /* The same variables as a local launch, except the per-rank ones
     * (OMP_NUM_THREADS, the GPU index) that mpirun cannot vary by rank. */
    if (tnt_launch_rank_env(opts, NULL, 0, 0, 0, &added) != 0) {
        goto err_free;
    }
    for (int i = 0; i < added.n; i++) {
        if (strncmp(added.v[i], "OMP_NUM_THREADS=", 16) == 0) {
            continue;
        }
        if (argv_push(&argv, &n, "-x") != 0 || argv_push(&argv, &n, added.v[i]) != 0) {
            goto err_free;
        }
    }
    program = tnt_launch_exec_argv(opts);
    if (program == NULL) {
        goto err_free;
    }
    for (int i = 0; program[i] != NULL; i++) {
        if (argv_push(&argv, &n, program[i]) != 0) {
            goto err_free;
        }
    }
    free(program);
    tnt_envlist_free(&added);
    return argv;

err_free:
    free(program);
    tnt_envlist_free(&added);
    tnt_launch_argv_free(argv);
    return NULL;
}
