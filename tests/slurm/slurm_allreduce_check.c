/*
 * End-to-end check under `srun --tarantella`: every rank bootstraps libtnt
 * through Slurm's PMIx server, compares what libtnt says (rank, size, local
 * rank/size, node id/count) with what Slurm put into its environment, and
 * checks allreduce results (small and large, float and int64, sum and max)
 * against values computed locally. Optional:
 *   --expect-size N   the step must have N ranks
 *   --affinity        print this task's Cpus_allowed_list (pinning tests)
 * Each rank prints one "check: rank R ..." line; rank 0 prints
 * "slurm_allreduce_check: PASSED" when every rank passed. Exit 0 only then.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tnt/tnt.h>

static int check_failures;

static void check_fail(int rank, const char *what)
{
    fprintf(stderr, "check: rank %d: FAILED: %s\n", rank, what);
    check_failures++;
}

static long env_long(const char *name)
{
    const char *v = getenv(name);

    return v == NULL ? -1 : strtol(v, NULL, 10);
}

/*
 * Tasks on node `node` from SLURM_STEP_TASKS_PER_NODE ("2(x4)", "3,2(x2),1").
 * Returns -1 when it cannot be told.
 */
static long tasks_on_node(long node)
{
    const char *p = getenv("SLURM_STEP_TASKS_PER_NODE");
    long index = 0;

    if (p == NULL) {
        return -1;
    }
    while (*p != '\0') {
        char *end;
        long count = strtol(p, &end, 10), repeat = 1;

        if (end == p) {
            return -1;
        }
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            repeat = strtol(p + 2, &end, 10);
            p = strchr(end, ')');
            if (p == NULL) {
                return -1;
            }
            p++;
        }
        if (node < index + repeat) {
            return count;
        }
        index += repeat;
        if (*p == ',') {
            p++;
        }
    }
    return -1;
}

static void print_affinity(int rank)
{
    char line[512];
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL) {
        check_fail(rank, "cannot open /proc/self/status");
        return;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;

            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = '\0';
            printf("affinity: rank %d cpus %s\n", rank, v);
        }
    }
    fclose(f);
}

static void check_identity(tnt_comm_t *comm, long expect_size)
{
    int rank = tnt_rank(comm), size = tnt_size(comm);
    long node = env_long("SLURM_NODEID");
    char msg[256];

    if (expect_size > 0 && size != expect_size) {
        snprintf(msg, sizeof msg, "size %d, expected %ld", size, expect_size);
        check_fail(rank, msg);
    }
    if (rank != env_long("SLURM_PROCID") || size != env_long("SLURM_NTASKS")) {
        snprintf(msg, sizeof msg, "rank/size %d/%d but SLURM_PROCID/SLURM_NTASKS %ld/%ld", rank,
                 size, env_long("SLURM_PROCID"), env_long("SLURM_NTASKS"));
        check_fail(rank, msg);
    }
    if (tnt_local_rank(comm) != env_long("SLURM_LOCALID")) {
        snprintf(msg, sizeof msg, "local rank %d but SLURM_LOCALID %ld", tnt_local_rank(comm),
                 env_long("SLURM_LOCALID"));
        check_fail(rank, msg);
    }
    if (tnt_local_size(comm) != tasks_on_node(node)) {
        snprintf(msg, sizeof msg, "local size %d but Slurm placed %ld tasks on node %ld",
                 tnt_local_size(comm), tasks_on_node(node), node);
        check_fail(rank, msg);
    }
    if (tnt_num_nodes(comm) != env_long("SLURM_STEP_NUM_NODES") || tnt_node_id(comm) != node) {
        snprintf(msg, sizeof msg, "node %d of %d but SLURM_NODEID %ld of SLURM_STEP_NUM_NODES %ld",
                 tnt_node_id(comm), tnt_num_nodes(comm), node, env_long("SLURM_STEP_NUM_NODES"));
        check_fail(rank, msg);
    }
    printf("check: rank %d size %d local %d/%d node %d/%d host %s slurm_node %s\n", rank, size,
           tnt_local_rank(comm), tnt_local_size(comm), tnt_node_id(comm), tnt_num_nodes(comm),
           tnt_hostname(comm), getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "?");
    fflush(stdout);
}

/* Sum over ranks r of (r + 1) * ((i % 97) + 1): exact in float for our sizes. */
static void check_float_sum(tnt_comm_t *comm, size_t count)
{
    int rank = tnt_rank(comm), size = tnt_size(comm);
    float *buf = malloc(count * sizeof *buf);
    float ranks_sum = (float)size * (float)(size + 1) / 2.0f;
    size_t i, bad = 0;
    char msg[256];
    tnt_status_t st;

    if (buf == NULL) {
        check_fail(rank, "out of memory");
        return;
    }
    for (i = 0; i < count; i++) {
        buf[i] = (float)(rank + 1) * (float)((i % 97) + 1);
    }
    st = tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
    if (st != TNT_OK) {
        snprintf(msg, sizeof msg, "allreduce float32 sum of %zu: %s", count, tnt_last_error());
        check_fail(rank, msg);
        free(buf);
        return;
    }
    for (i = 0; i < count; i++) {
        bad += buf[i] != ranks_sum * (float)((i % 97) + 1);
    }
    if (bad != 0) {
        snprintf(msg, sizeof msg, "allreduce float32 sum of %zu: %zu wrong elements", count, bad);
        check_fail(rank, msg);
    }
    free(buf);
}

static void check_int64(tnt_comm_t *comm)
{
    int rank = tnt_rank(comm), size = tnt_size(comm);
    int64_t v[3] = { rank, (int64_t)1 << 40, -rank }, m[3];
    char msg[256];

    if (tnt_allreduce(comm, v, v, 3, TNT_INT64, TNT_SUM) != TNT_OK ||
        v[0] != (int64_t)size * (size - 1) / 2 || v[1] != ((int64_t)1 << 40) * size ||
        v[2] != -(int64_t)size * (size - 1) / 2) {
        snprintf(msg, sizeof msg, "allreduce int64 sum: %s", tnt_last_error());
        check_fail(rank, msg);
    }
    m[0] = rank;
    m[1] = -rank;
    m[2] = 7;
    if (tnt_allreduce(comm, m, m, 3, TNT_INT64, TNT_MAX) != TNT_OK || m[0] != size - 1 ||
        m[1] != 0 || m[2] != 7) {
        snprintf(msg, sizeof msg, "allreduce int64 max: %s", tnt_last_error());
        check_fail(rank, msg);
    }
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = NULL;
    long expect_size = -1;
    int affinity = 0, i, rank;
    int64_t failures;
    tnt_status_t st;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-size") == 0 && i + 1 < argc) {
            expect_size = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--affinity") == 0) {
            affinity = 1;
        } else {
            fprintf(stderr, "usage: %s [--expect-size N] [--affinity]\n", argv[0]);
            return 2;
        }
    }
    st = tnt_init(&comm);
    if (st != TNT_OK) {
        fprintf(stderr, "check: tnt_init failed: %s\n", tnt_last_error());
        return 1;
    }
    rank = tnt_rank(comm);
    if (affinity) {
        print_affinity(rank);
    }
    check_identity(comm, expect_size);
    check_float_sum(comm, 1000);
    check_float_sum(comm, (size_t)1 << 20); /* the hierarchical large-message path */
    check_int64(comm);

    failures = check_failures;
    if (tnt_allreduce(comm, &failures, &failures, 1, TNT_INT64, TNT_SUM) != TNT_OK) {
        fprintf(stderr, "check: rank %d: final allreduce failed: %s\n", rank, tnt_last_error());
        failures = 1;
    }
    if (rank == 0) {
        if (failures == 0) {
            printf("slurm_allreduce_check: PASSED on %d ranks\n", tnt_size(comm));
        } else {
            printf("slurm_allreduce_check: FAILED (%lld failures)\n", (long long)failures);
        }
    }
    fflush(stdout);
    tnt_finalize(comm);
    return failures == 0 ? 0 : 1;
}
