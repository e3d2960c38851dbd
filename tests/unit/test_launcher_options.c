/*
 * The launcher's pure parts: option parsing, rank layout (--simulate-nodes),
 * per-rank environment, exec argv and the mpirun hand-off command.
 * The sources are compiled into this test directly (the unit-test glob links
 * libtnt and the pinning library, not the launcher).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "pmix/launcher/options.c"
#include "pmix/launcher/plan.c"
#include "topo/pythonpath.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static struct tnt_launch_options opts;
static char err[512];

static int parse(int argc, char **argv)
{
    tnt_launch_options_free(&opts);
    err[0] = '\0';
    return tnt_launch_options_parse(argc, argv, &opts, err, sizeof err);
}

static int teardown(void **state)
{
    (void)state;
    tnt_launch_options_free(&opts);
    return 0;
}

static void test_defaults(void **state)
{
    char *argv[] = { "tarantella", "model.py" };

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(opts.nranks, 1);
    assert_int_equal(opts.no_gpu, 0);
    assert_int_equal(opts.nexports, 0);
    assert_null(opts.log_level);
    assert_int_equal(opts.fusion_threshold_kb, -1);
    assert_int_equal(opts.pin, TNT_PIN_NONE);
    assert_int_equal(opts.pin_memory, 0);
    assert_string_equal(opts.python, "/usr/bin/python3");
    assert_int_equal(opts.dry_run, 0);
    assert_null(opts.hostfile);
    assert_int_equal(opts.simulate_nodes, 0);
    assert_int_equal(opts.nprogram, 1);
    assert_string_equal(opts.program[0], "model.py");
}

static void test_all_options(void **state)
{
    char *argv[] = { "tarantella",
                     "-n",
                     "4",
                     "--no-gpu",
                     "-x",
                     "A=1",
                     "-xB=two=2",
                     "--log-level",
                     "debug",
                     "--log-on-all-devices",
                     "--output-on-all-devices",
                     "--fusion-threshold=256",
                     "--pin",
                     "core",
                     "--pin-memory",
                     "--python-interpreter",
                     "",
                     "--dry-run",
                     "--simulate-nodes",
                     "2",
                     "--",
                     "prog",
                     "-n",
                     "7",
                     "--",
                     "x" };

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(opts.nranks, 4);
    assert_int_equal(opts.no_gpu, 1);
    assert_int_equal(opts.nexports, 2);
    assert_string_equal(opts.exports[0], "A=1");
    assert_string_equal(opts.exports[1], "B=two=2");
    assert_null(opts.exports[2]);
    assert_string_equal(opts.log_level, "debug");
    assert_int_equal(opts.log_on_all_devices, 1);
    assert_int_equal(opts.output_on_all_devices, 1);
    assert_int_equal(opts.fusion_threshold_kb, 256);
    assert_int_equal(opts.pin, TNT_PIN_CORE);
    assert_int_equal(opts.pin_memory, 1);
    assert_string_equal(opts.python, "");
    assert_int_equal(opts.dry_run, 1);
    assert_int_equal(opts.simulate_nodes, 2);
    /* Everything after "--" belongs to the program, options included. */
    assert_int_equal(opts.nprogram, 5);
    assert_string_equal(opts.program[0], "prog");
    assert_string_equal(opts.program[1], "-n");
    assert_string_equal(opts.program[4], "x");
}

static void test_old_cli_pinning(void **state)
{
    char *a[] = { "tarantella", "--pin-to-socket", "p" };
    char *b[] = { "tarantella", "--pin-memory-to-socket", "p" };
    char *c[] = { "tarantella", "--pin=auto", "-n8", "p" };

    (void)state;
    assert_int_equal(parse(ARGC(a), a), 0);
    assert_int_equal(opts.pin, TNT_PIN_SOCKET);
    assert_int_equal(opts.pin_memory, 0);
    assert_int_equal(parse(ARGC(b), b), 0);
    assert_int_equal(opts.pin, TNT_PIN_SOCKET);
    assert_int_equal(opts.pin_memory, 1);
    assert_int_equal(parse(ARGC(c), c), 0);
    assert_int_equal(opts.pin, TNT_PIN_AUTO);
    assert_int_equal(opts.nranks, 8);
}

static void test_program_without_dashes(void **state)
{
    char *argv[] = { "tarantella", "-n", "2", "train.py", "--epochs", "3" };

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(opts.nprogram, 3);
    assert_string_equal(opts.program[1], "--epochs");
}

static void test_help_version(void **state)
{
    char *h[] = { "tarantella", "--help" };
    char *v[] = { "tarantella", "--version" };

    (void)state;
    assert_int_equal(parse(ARGC(h), h), 0);
    assert_int_equal(opts.show_help, 1);
    assert_int_equal(parse(ARGC(v), v), 0);
    assert_int_equal(opts.show_version, 1);
    assert_non_null(strstr(tnt_launch_usage(), "--simulate-nodes"));
    assert_non_null(strstr(tnt_launch_usage(), "--pin MODE"));
}

/* Each bad command line fails with a message naming the value and (where
 * there is a list) the valid choices. */
static void expect_error(int argc, char **argv, const char *must1, const char *must2)
{
    if (parse(argc, argv) != -1) {
        fail_msg("accepted: %s %s", argv[1], argc > 2 ? argv[2] : "");
    }
    if (strstr(err, must1) == NULL || (must2 != NULL && strstr(err, must2) == NULL)) {
        fail_msg("message '%s' lacks '%s' / '%s'", err, must1, must2 ? must2 : "");
    }
}

static void test_errors(void **state)
{
    char *n0[] = { "tarantella", "-n", "0", "p" };
    char *nx[] = { "tarantella", "-n", "4x", "p" };
    char *nneg[] = { "tarantella", "-n", "-3", "p" };
    char *nbig[] = { "tarantella", "-n", "99999", "p" };
    char *nmiss[] = { "tarantella", "-n" };
    char *pin[] = { "tarantella", "--pin", "sockets", "p" };
    char *lvl[] = { "tarantella", "--log-level", "loud", "p" };
    char *fus[] = { "tarantella", "--fusion-threshold", "-1", "p" };
    char *fus2[] = { "tarantella", "--fusion-threshold", "12k", "p" };
    char *x1[] = { "tarantella", "-x", "NOEQUALS", "p" };
    char *x2[] = { "tarantella", "-x", "=v", "p" };
    char *x3[] = { "tarantella", "-x", "1A=v", "p" };
    char *unk[] = { "tarantella", "--frobnicate", "p" };
    char *noprog[] = { "tarantella", "-n", "2" };
    char *noprog2[] = { "tarantella", "-n", "2", "--" };
    char *sim[] = { "tarantella", "-n", "2", "--simulate-nodes", "3", "p" };
    char *sim0[] = { "tarantella", "--simulate-nodes", "0", "p" };
    char *hf[] = { "tarantella", "--hostfile", "h", "--simulate-nodes", "1", "p" };
    char *empty[] = { "tarantella", "--", "" };

    (void)state;
    expect_error(ARGC(n0), n0, "'0'", "1 to 4096");
    expect_error(ARGC(nx), nx, "'4x'", NULL);
    expect_error(ARGC(nneg), nneg, "'-3'", NULL);
    expect_error(ARGC(nbig), nbig, "'99999'", NULL);
    expect_error(ARGC(nmiss), nmiss, "-n needs a value", NULL);
    expect_error(ARGC(pin), pin, "'sockets'", "none, socket, numa, core, auto");
    expect_error(ARGC(lvl), lvl, "'loud'", "error, warn, info, debug, trace");
    expect_error(ARGC(fus), fus, "'-1'", "KiB");
    expect_error(ARGC(fus2), fus2, "'12k'", NULL);
    expect_error(ARGC(x1), x1, "'NOEQUALS'", "VAR=VALUE");
    expect_error(ARGC(x2), x2, "'=v'", NULL);
    expect_error(ARGC(x3), x3, "'1A=v'", NULL);
    expect_error(ARGC(unk), unk, "'--frobnicate'", "--help");
    expect_error(ARGC(noprog), noprog, "no program", NULL);
    expect_error(ARGC(noprog2), noprog2, "no program", NULL);
    expect_error(ARGC(sim), sim, "--simulate-nodes 3", "-n 2");
    expect_error(ARGC(sim0), sim0, "'0'", NULL);
    expect_error(ARGC(hf), hf, "cannot be combined", NULL);
    expect_error(ARGC(empty), empty, "empty", NULL);
}

/* The older launcher's spelling: levels in any case, stored lowercased. */
static void test_log_level_any_case(void **state)
{
    char *upper[] = { "tarantella", "--log-level", "INFO", "p" };
    char *mixed[] = { "tarantella", "--log-level=Debug", "p" };
    char *bad[] = { "tarantella", "--log-level", "VERBOSE", "p" };

    (void)state;
    assert_int_equal(parse(ARGC(upper), upper), 0);
    assert_string_equal(opts.log_level, "info");
    assert_int_equal(parse(ARGC(mixed), mixed), 0);
    assert_string_equal(opts.log_level, "debug");
    expect_error(ARGC(bad), bad, "'VERBOSE'", "error, warn, info, debug, trace");
}

/* The older launcher's removed options fail with what replaces them. */
static void test_removed_options(void **state)
{
    char *npernode[] = { "tarantella", "--npernode", "2", "p" };
    char *n_per_node[] = { "tarantella", "--n-per-node=4", "p" };
    char *cleanup[] = { "tarantella", "--cleanup" };
    char *force[] = { "tarantella", "--force", "-n", "2", "p" };

    (void)state;
    expect_error(ARGC(npernode), npernode, "--npernode", "-n N");
    expect_error(ARGC(npernode), npernode, "removed", "srun --tarantella -N NODES");
    expect_error(ARGC(n_per_node), n_per_node, "--n-per-node", "--ntasks-per-node");
    expect_error(ARGC(cleanup), cleanup, "--cleanup", "no longer needed");
    expect_error(ARGC(force), force, "--force", "no longer needed");
    /* Only the exact names: a program's own options after "--" are its own. */
    {
        char *after[] = { "tarantella", "--", "p", "--force" };
        assert_int_equal(parse(ARGC(after), after), 0);
    }
}

/* The ranks' PYTHONPATH gets the launcher's package first, once. */
static void test_pythonpath(void **state)
{
    int oom = -1;
    char *v;

    (void)state;
    v = tnt_pythonpath_prepend("/b/python", NULL, &oom);
    assert_string_equal(v, "/b/python");
    assert_int_equal(oom, 0);
    free(v);
    v = tnt_pythonpath_prepend("/b/python", "", &oom);
    assert_string_equal(v, "/b/python");
    free(v);
    v = tnt_pythonpath_prepend("/b/python", "/x:/y", &oom);
    assert_string_equal(v, "/b/python:/x:/y");
    free(v);
    v = tnt_pythonpath_prepend("/b/python", "/b/pythonx", &oom);
    assert_string_equal(v, "/b/python:/b/pythonx");
    free(v);
    assert_null(tnt_pythonpath_prepend("/b/python", "/x:/b/python", &oom));
    assert_int_equal(oom, 0);
    assert_null(tnt_pythonpath_prepend("/b/python", "/b/python/:/x", &oom));
    assert_int_equal(oom, 0);
}

static void test_layout(void **state)
{
    int node_of[7], local[7], first[3], size[3];

    (void)state;
    assert_int_equal(tnt_launch_layout(7, 3, node_of, local, first, size), 0);
    /* 7 over 3 nodes: 3, 2, 2 in contiguous blocks. */
    int want_node[] = { 0, 0, 0, 1, 1, 2, 2 }, want_local[] = { 0, 1, 2, 0, 1, 0, 1 };
    for (int r = 0; r < 7; r++) {
        assert_int_equal(node_of[r], want_node[r]);
        assert_int_equal(local[r], want_local[r]);
    }
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 3);
    assert_int_equal(first[2], 5);
    assert_int_equal(size[0], 3);
    assert_int_equal(size[2], 2);
    assert_int_equal(tnt_launch_layout(4, 1, node_of, local, first, size), 0);
    assert_int_equal(size[0], 4);
    assert_int_equal(local[3], 3);
    assert_int_equal(tnt_launch_layout(2, 3, node_of, local, first, size), -1);
    assert_int_equal(tnt_launch_layout(2, 0, node_of, local, first, size), -1);
}

static void test_rank_env(void **state)
{
    char *argv[] = { "tarantella",
                     "-n",
                     "4",
                     "--log-level",
                     "info",
                     "--log-on-all-devices",
                     "--fusion-threshold",
                     "0",
                     "-x",
                     "TNT_PIN=custom",
                     "-x",
                     "FOO=bar",
                     "--pin",
                     "core",
                     "p" };
    char *base[] = { "PATH=/bin", NULL };
    char *base_omp[] = { "OMP_NUM_THREADS=7", "CUDA_VISIBLE_DEVICES=3", NULL };
    struct tnt_envlist added = { 0 };

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(tnt_launch_rank_env(&opts, base, 5, 3, 4, &added), 0);
    assert_string_equal(tnt_env_lookup(added.v, "TNT_PIN"), "custom"); /* -x wins */
    assert_string_equal(tnt_env_lookup(added.v, "TNT_LOG_LEVEL"), "info");
    assert_string_equal(tnt_env_lookup(added.v, "TNT_LOG_ON_ALL_DEVICES"), "1");
    assert_null(tnt_env_lookup(added.v, "TNT_OUTPUT_ON_ALL_DEVICES"));
    assert_string_equal(tnt_env_lookup(added.v, "TNT_FUSION_THRESHOLD_KB"), "0");
    assert_string_equal(tnt_env_lookup(added.v, "OMP_NUM_THREADS"), "3");
    assert_string_equal(tnt_env_lookup(added.v, "CUDA_VISIBLE_DEVICES"), "1"); /* 5 % 4 */
    assert_string_equal(tnt_env_lookup(added.v, "FOO"), "bar");
    assert_null(added.v[added.n]);
    tnt_envlist_free(&added);

    /* Already set in the environment: left alone. No GPUs: nothing. */
    assert_int_equal(tnt_launch_rank_env(&opts, base_omp, 0, 3, 2, &added), 0);
    assert_null(tnt_env_lookup(added.v, "OMP_NUM_THREADS"));
    assert_null(tnt_env_lookup(added.v, "CUDA_VISIBLE_DEVICES"));
    tnt_envlist_free(&added);
    assert_int_equal(tnt_launch_rank_env(&opts, base, 0, 0, 0, &added), 0);
    assert_null(tnt_env_lookup(added.v, "CUDA_VISIBLE_DEVICES"));
    assert_string_equal(tnt_env_lookup(added.v, "OMP_NUM_THREADS"), "1"); /* at least 1 */
    tnt_envlist_free(&added);
}

static void test_rank_env_no_gpu(void **state)
{
    char *argv[] = { "tarantella", "--no-gpu", "-x", "OMP_NUM_THREADS=2", "p" };
    char *base[] = { "CUDA_VISIBLE_DEVICES=0,1", NULL };
    struct tnt_envlist added = { 0 };

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(tnt_launch_rank_env(&opts, base, 1, 8, 2, &added), 0);
    assert_string_equal(tnt_env_lookup(added.v, "CUDA_VISIBLE_DEVICES"), "");
    assert_string_equal(tnt_env_lookup(added.v, "OMP_NUM_THREADS"), "2");
    assert_string_equal(tnt_env_lookup(added.v, "TNT_PIN"), "none");
    tnt_envlist_free(&added);
}

/* What torchrun sets, for an unmodified env:// script; the user's values stay. */
static void test_torch_env(void **state)
{
    char *argv_plain[] = { "tarantella", "-n", "5", "p" };
    char *argv[] = { "tarantella", "-n", "5", "-x", "MASTER_ADDR=node7", "p" };
    char *base[] = { "PATH=/bin", NULL };
    char *base_user[] = { "MASTER_PORT=29999", "RANK=7", NULL };
    struct tnt_launch_torch_ids ids = {
        .rank = 4, .world_size = 5, .local_rank = 1, .local_world_size = 2, .node = 1
    };
    struct tnt_envlist added = { 0 };

    (void)state;
    assert_int_equal(parse(ARGC(argv_plain), argv_plain), 0);
    assert_int_equal(tnt_launch_torch_env(&opts, base, &ids, 40123, &added), 0);
    assert_string_equal(tnt_env_lookup(added.v, "RANK"), "4");
    assert_string_equal(tnt_env_lookup(added.v, "WORLD_SIZE"), "5");
    assert_string_equal(tnt_env_lookup(added.v, "LOCAL_RANK"), "1");
    assert_string_equal(tnt_env_lookup(added.v, "LOCAL_WORLD_SIZE"), "2");
    assert_string_equal(tnt_env_lookup(added.v, "GROUP_RANK"), "1");
    assert_string_equal(tnt_env_lookup(added.v, "MASTER_ADDR"), "127.0.0.1");
    assert_string_equal(tnt_env_lookup(added.v, "MASTER_PORT"), "40123");
    assert_int_equal(added.n, 7);
    tnt_envlist_free(&added);

    /* Set in the environment or with -x: not added, so the user's value is
     * what the rank sees. */
    assert_int_equal(parse(ARGC(argv), argv), 0);
    assert_int_equal(tnt_launch_torch_env(&opts, base_user, &ids, 40123, &added), 0);
    assert_null(tnt_env_lookup(added.v, "MASTER_PORT"));
    assert_null(tnt_env_lookup(added.v, "RANK"));
    assert_null(tnt_env_lookup(added.v, "MASTER_ADDR"));
    assert_string_equal(tnt_env_lookup(added.v, "WORLD_SIZE"), "5");
    assert_int_equal(added.n, 4);
    tnt_envlist_free(&added);
}

static void test_envlist(void **state)
{
    char *env[] = { "A=1", "B=2", "junk", NULL };
    struct tnt_envlist list = { 0 };

    (void)state;
    assert_int_equal(tnt_envlist_copy(&list, env), 0);
    assert_int_equal(list.n, 2);
    assert_int_equal(tnt_envlist_set(&list, "A", "x"), 0);
    assert_int_equal(tnt_envlist_put(&list, "AB=3"), 0);
    assert_int_equal(list.n, 3);
    assert_string_equal(tnt_env_lookup(list.v, "A"), "x");
    assert_string_equal(tnt_env_lookup(list.v, "AB"), "3");
    assert_null(tnt_env_lookup(list.v, "C"));
    assert_int_equal(tnt_envlist_put(&list, "novalue"), -1);
    tnt_envlist_free(&list);
    assert_int_equal(tnt_envlist_copy(&list, NULL), 0);
    assert_non_null(list.v);
    assert_null(list.v[0]);
    tnt_envlist_free(&list);
}

static void test_exec_argv(void **state)
{
    char *py[] = { "tarantella", "train.py", "--lr", "0.1" };
    char *bin[] = { "tarantella", "./a.out", "x" };
    char *direct[] = { "tarantella", "--python-interpreter", "", "train.py" };
    char *other[] = { "tarantella", "--python-interpreter", "/opt/py/bin/python", "t.py" };
    char **argv;

    (void)state;
    assert_int_equal(parse(ARGC(py), py), 0);
    argv = tnt_launch_exec_argv(&opts);
    assert_string_equal(argv[0], "/usr/bin/python3");
    assert_string_equal(argv[1], "train.py");
    assert_string_equal(argv[3], "0.1");
    assert_null(argv[4]);
    free(argv);
    assert_int_equal(parse(ARGC(bin), bin), 0);
    argv = tnt_launch_exec_argv(&opts);
    assert_string_equal(argv[0], "./a.out");
    assert_null(argv[2]);
    free(argv);
    assert_int_equal(parse(ARGC(direct), direct), 0);
    argv = tnt_launch_exec_argv(&opts);
    assert_string_equal(argv[0], "train.py");
    free(argv);
    assert_int_equal(parse(ARGC(other), other), 0);
    argv = tnt_launch_exec_argv(&opts);
    assert_string_equal(argv[0], "/opt/py/bin/python");
    free(argv);
}

static void test_mpirun_argv(void **state)
{
    char *argv[] = { "tarantella", "-n",       "8",  "--hostfile", "hosts",    "--pin",
                     "numa",       "--no-gpu", "-x", "FOO=1",      "train.py", "a" };
    char *autopin[] = { "tarantella", "--hostfile", "h", "--pin", "auto", "./bin" };
    char **cmd;
    char joined[1024] = "";

    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), 0);
    cmd = tnt_launch_mpirun_argv(&opts, "/usr/bin/mpirun");
    assert_non_null(cmd);
    for (int i = 0; cmd[i] != NULL; i++) {
        strcat(joined, cmd[i]);
        strcat(joined, " ");
    }
    assert_string_equal(joined, "/usr/bin/mpirun -np 8 --hostfile hosts --bind-to numa "
                                "-x TNT_PIN=numa -x CUDA_VISIBLE_DEVICES= -x FOO=1 "
                                "/usr/bin/python3 train.py a ");
    tnt_launch_argv_free(cmd);
    assert_int_equal(parse(ARGC(autopin), autopin), 0);
    cmd = tnt_launch_mpirun_argv(&opts, "mpirun");
    assert_string_equal(cmd[3], "--hostfile");
    assert_string_equal(cmd[5], "-x"); /* no --bind-to: OpenMPI's default */
    tnt_launch_argv_free(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_defaults, teardown),
        cmocka_unit_test_teardown(test_all_options, teardown),
        cmocka_unit_test_teardown(test_old_cli_pinning, teardown),
        cmocka_unit_test_teardown(test_program_without_dashes, teardown),
        cmocka_unit_test_teardown(test_help_version, teardown),
        cmocka_unit_test_teardown(test_errors, teardown),
        cmocka_unit_test_teardown(test_log_level_any_case, teardown),
        cmocka_unit_test_teardown(test_removed_options, teardown),
        cmocka_unit_test(test_pythonpath),
        cmocka_unit_test(test_layout),
        cmocka_unit_test_teardown(test_rank_env, teardown),
        cmocka_unit_test_teardown(test_rank_env_no_gpu, teardown),
        cmocka_unit_test_teardown(test_torch_env, teardown),
        cmocka_unit_test(test_envlist),
        cmocka_unit_test_teardown(test_exec_argv, teardown),
        cmocka_unit_test_teardown(test_mpirun_argv, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
