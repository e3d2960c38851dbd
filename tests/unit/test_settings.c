/*
 * The TNT_* settings parser (libtnt/src/util/settings.c): defaults, every
 * kind of value (sizes in KiB, seconds, choices, booleans, integers) good
 * and bad, the messages a bad value gives, the two bugs the parser replaced
 * (TNT_SHM_STAGING_KB=-1 wrapped the segment size; a huge value made the
 * slot size 0), and tnt_init failing on a bad value before it bootstraps.
 *
 * `test_settings --list-names` prints the table's variable names, one per
 * line, and `--describe` each one's default, kind, bounds and choices, for
 * tests/unit/check_settings_doc.sh (the docs/environment.md check).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tnt/tnt.h>
#include "util/log.h"
#include "util/settings.h"

/* Every variable of the table, so that each test starts from a clean slate
 * whatever the environment ctest runs in. */
static void unset_all(void)
{
    for (size_t i = 0; i < tnt_settings_count(); i++) {
        unsetenv(tnt_settings_name(i));
    }
}

static int setup(void **state)
{
    (void)state;
    unset_all();
    return 0;
}

/* Parses name=value into fresh defaults; returns the status. */
static tnt_status_t parse(const char *name, const char *value, tnt_settings_t *settings)
{
    tnt_settings_set_defaults(settings);
    tnt_error_clear();
    return tnt_settings_parse(settings, name, value);
}

/* name=value must be rejected with a message naming the variable, the value
 * and (want) the valid values, and must leave the defaults in place. */
static void expect_rejected(const char *name, const char *value, const char *want)
{
    tnt_settings_t settings, defaults;
    char quoted[160];

    tnt_settings_set_defaults(&defaults);
    if (parse(name, value, &settings) != TNT_ERR_INVALID_ARG) {
        fail_msg("%s='%s' was accepted", name, value);
    }
    snprintf(quoted, sizeof(quoted), "%s='%s'", name, value);
    if (strstr(tnt_last_error(), quoted) == NULL || strstr(tnt_last_error(), want) == NULL) {
        fail_msg("%s='%s': message \"%s\" lacks \"%s\" or \"%s\"", name, value, tnt_last_error(),
                 quoted, want);
    }
    assert_memory_equal(&settings, &defaults, sizeof(settings));
}

static void test_defaults(void **state)
{
    (void)state;
    tnt_settings_t settings;
    assert_int_equal(tnt_settings_load(&settings), TNT_OK);
    assert_true(settings.timeout_s == 300.0);
    assert_int_equal(settings.log_level, TNT_LOG_WARN);
    assert_int_equal(settings.log_on_all_ranks, 0);
    assert_int_equal(settings.fusion_threshold_bytes, TNT_FUSION_THRESHOLD_DEFAULT_BYTES);
    assert_int_equal(settings.shm_staging_bytes, 4096 * 1024);
    assert_int_equal(settings.shm_small_bytes, TNT_SETTINGS_BY_LAYOUT);
    assert_int_equal(settings.shm_cma, TNT_SETTINGS_CMA_AUTO);
    assert_int_equal(settings.allreduce_algo, TNT_SETTINGS_ALGO_AUTO);
    assert_int_equal(settings.multinode_rd_max_bytes, TNT_SETTINGS_BY_LAYOUT);
    assert_int_equal(settings.multinode_chunk_bytes, 1024 * 1024);
    assert_int_equal(settings.ucx_spin_us, 0);
    assert_int_equal(settings.ucx_yield_us, 1000);
    assert_int_equal(settings.ucx_tcp_seg_bytes, 256 * 1024);
    /* An empty value means unset. */
    setenv("TNT_SHM_STAGING_KB", "", 1);
    assert_int_equal(tnt_settings_load(&settings), TNT_OK);
    assert_int_equal(settings.shm_staging_bytes, 4096 * 1024);
}

static void test_size_kb(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_SHM_STAGING_KB", "64", &s), TNT_OK);
    assert_int_equal(s.shm_staging_bytes, 64 * 1024);
    assert_int_equal(parse("TNT_SHM_STAGING_KB", "1048576", &s), TNT_OK);
    assert_int_equal(s.shm_staging_bytes, (size_t)1 << 30);
    assert_int_equal(parse("TNT_SHM_SMALL_KB", "0", &s), TNT_OK);
    assert_int_equal(s.shm_small_bytes, 0);
    assert_int_equal(parse("TNT_FUSION_THRESHOLD_KB", "4194304", &s), TNT_OK);
    assert_int_equal(s.fusion_threshold_bytes, (size_t)4 << 30);
    assert_int_equal(parse("TNT_MULTINODE_RD_MAX_KB", "512", &s), TNT_OK);
    assert_int_equal(s.multinode_rd_max_bytes, 512 * 1024);
    assert_int_equal(parse("TNT_MULTINODE_CHUNK_KB", "4", &s), TNT_OK);
    assert_int_equal(s.multinode_chunk_bytes, 4096);

    static const char *malformed[] = { "abc", "12k", " 5", "5 ", "+5", "1.5", "0x40", "-0" };
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        expect_rejected("TNT_FUSION_THRESHOLD_KB", malformed[i],
                        "is not valid: expected a whole number of KiB from 0 to 4194304");
    }
    expect_rejected("TNT_SHM_STAGING_KB", "63",
                    "out of range: expected a whole number of KiB "
                    "from 64 to 1048576 (default 4096)");
    expect_rejected("TNT_SHM_STAGING_KB", "1048577", "out of range");
    expect_rejected("TNT_MULTINODE_CHUNK_KB", "3", "from 4 to 1048576");
    expect_rejected("TNT_SHM_SMALL_KB", "99999999999999999999999999", "out of range");
    expect_rejected("TNT_MULTINODE_RD_MAX_KB", "x", "default chosen by the job's layout");
}

/* TNT_FUSION_THRESHOLD_KB=auto and TNT_FUSION_THRESHOLD=auto ask for the
 * bucket size to be tuned (TNT_SETTINGS_TUNE); contradicting values fail
 * tnt_init's load with one message that names both; anything but
 * auto/fixed in TNT_FUSION_THRESHOLD (a Horovod byte count) is refused. */
static void test_fusion_auto(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_FUSION_THRESHOLD_KB", "auto", &s), TNT_OK);
    assert_true(s.fusion_threshold_bytes == TNT_SETTINGS_TUNE);
    assert_int_equal(parse("TNT_FUSION_THRESHOLD_KB", "AUTO", &s), TNT_OK);
    assert_true(s.fusion_threshold_bytes == TNT_SETTINGS_TUNE);
    expect_rejected("TNT_FUSION_THRESHOLD_KB", "automatic", "4194304 or auto");
    expect_rejected("TNT_FUSION_THRESHOLD", "67108864",
                    "expected one of fixed, auto, auto = tune the bucket size; a fixed size in "
                    "KiB goes in TNT_FUSION_THRESHOLD_KB");

    const struct {
        const char *mode, *kb;
        int tune;      /* expected after a successful load */
        size_t bytes;  /* when not tuned */
        int conflict;
    } cases[] = {
        { NULL, NULL, 0, TNT_FUSION_THRESHOLD_DEFAULT_BYTES, 0 },
        { "auto", NULL, 1, 0, 0 },
        { "Auto", "auto", 1, 0, 0 },
        { NULL, "auto", 1, 0, 0 },
        { "fixed", NULL, 0, TNT_FUSION_THRESHOLD_DEFAULT_BYTES, 0 },
        { "fixed", "512", 0, 512 * 1024, 0 },
        { "", "512", 0, 512 * 1024, 0 },
        { "auto", "512", 0, 0, 1 },
        { "auto", "0", 0, 0, 1 },
        { "fixed", "auto", 0, 0, 1 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unset_all();
        if (cases[i].mode != NULL) {
            setenv("TNT_FUSION_THRESHOLD", cases[i].mode, 1);
        }
        if (cases[i].kb != NULL) {
            setenv("TNT_FUSION_THRESHOLD_KB", cases[i].kb, 1);
        }
        tnt_error_clear();
        tnt_status_t status = tnt_settings_load(&s);
        if (cases[i].conflict) {
            assert_int_equal(status, TNT_ERR_INVALID_ARG);
            if (strstr(tnt_last_error(), "contradict each other") == NULL ||
                strstr(tnt_last_error(), cases[i].kb) == NULL) {
                fail_msg("case %zu: message \"%s\"", i, tnt_last_error());
            }
            continue;
        }
        assert_int_equal(status, TNT_OK);
        assert_int_equal(s.fusion_threshold_tune, cases[i].tune);
        if (cases[i].tune) {
            assert_true(s.fusion_threshold_bytes == TNT_SETTINGS_TUNE);
        } else {
            assert_int_equal(s.fusion_threshold_bytes, cases[i].bytes);
        }
    }
    unset_all();
}

/* The two bugs the parser replaced: strtoull read "-1" as 2^64-1, whose
 * product with 1024 wrapped the segment size (a write out of bounds), and
 * 2^54 KiB times 1024 is 0 bytes, a slot the copy loops never got through. */
static void test_staging_regressions(void **state)
{
    (void)state;
    expect_rejected("TNT_SHM_STAGING_KB", "-1", "is not valid");
    expect_rejected("TNT_SHM_STAGING_KB", "18014398509481984", "is out of range");
    expect_rejected("TNT_SHM_STAGING_KB", "18446744073709551615", "is out of range");
    expect_rejected("TNT_SHM_STAGING_KB", "18446744073709551616", "is out of range");
}

static void test_seconds(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_TIMEOUT", "2.5", &s), TNT_OK);
    assert_true(s.timeout_s == 2.5);
    assert_int_equal(parse("TNT_TIMEOUT", "45s", &s), TNT_OK);
    assert_true(s.timeout_s == 45.0);
    assert_int_equal(parse("TNT_TIMEOUT", "0", &s), TNT_OK);
    assert_true(s.timeout_s == 0.0);
    assert_int_equal(parse("TNT_TIMEOUT", "1e9", &s), TNT_OK);
    assert_true(s.timeout_s == 1e9);

    static const char *malformed[] = { "abc", "10x", "nan", "inf", "1e999", "5 s s" };
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        expect_rejected("TNT_TIMEOUT", malformed[i],
                        "is not valid: expected a number of seconds from 0 to 1000000000, "
                        "0 = no timeout (default 300)");
    }
    expect_rejected("TNT_TIMEOUT", "-1", "is out of range");
    expect_rejected("TNT_TIMEOUT", "1e10", "is out of range");
}

static void test_choice(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_ALLREDUCE_ALGO", "ring", &s), TNT_OK);
    assert_int_equal(s.allreduce_algo, TNT_SETTINGS_ALGO_RING);
    assert_int_equal(parse("TNT_ALLREDUCE_ALGO", "rd", &s), TNT_OK);
    assert_int_equal(s.allreduce_algo, TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING);
    assert_int_equal(parse("TNT_ALLREDUCE_ALGO", "Recursive_Doubling", &s), TNT_OK);
    assert_int_equal(s.allreduce_algo, TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING);
    assert_int_equal(parse("TNT_MULTINODE_REDUCE_ON_ARRIVAL", "off", &s), TNT_OK);
    assert_int_equal(s.multinode_reduce_on_arrival, TNT_SETTINGS_ARRIVAL_OFF);
    expect_rejected("TNT_MULTINODE_REDUCE_ON_ARRIVAL", "1", "one of auto, on, off");
    assert_int_equal(parse("TNT_ALLREDUCE_ALGO", "tree", &s), TNT_OK);
    assert_int_equal(s.allreduce_algo, TNT_SETTINGS_ALGO_TREE);
    assert_int_equal(parse("TNT_ALLREDUCE_ALGO", "rabenseifner", &s), TNT_OK);
    assert_int_equal(s.allreduce_algo, TNT_SETTINGS_ALGO_RABENSEIFNER);
    assert_int_equal(parse("TNT_MULTINODE_LATENCY_NS", "1500", &s), TNT_OK);
    assert_int_equal(s.multinode_latency_ns, 1500);
    assert_int_equal(parse("TNT_MULTINODE_LINK_MBPS", "25000", &s), TNT_OK);
    assert_int_equal(s.multinode_link_mbps, 25000);
    assert_int_equal(parse("TNT_LOG_LEVEL", "debug", &s), TNT_OK);
    assert_int_equal(s.log_level, TNT_LOG_DEBUG);
    assert_int_equal(parse("TNT_LOG_LEVEL", "WARNING", &s), TNT_OK);
    assert_int_equal(s.log_level, TNT_LOG_WARN);

    expect_rejected(
        "TNT_ALLREDUCE_ALGO", "fast",
        "is not valid: expected one of auto, recursive_doubling, rd, ring, rabenseifner, "
        "tree (default auto)");
    expect_rejected("TNT_ALLREDUCE_ALGO", "ring ", "one of auto");
    expect_rejected("TNT_LOG_LEVEL", "loud", "one of error, warn, warning, info, debug, trace");
}

static void test_bool(void **state)
{
    (void)state;
    tnt_settings_t s;
    static const char *yes[] = { "1", "true", "YES", "on" };
    static const char *no[] = { "0", "false", "no", "Off" };
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(parse("TNT_LOG_ON_ALL_DEVICES", yes[i], &s), TNT_OK);
        assert_int_equal(s.log_on_all_ranks, 1);
        assert_int_equal(parse("TNT_LOG_ON_ALL_DEVICES", no[i], &s), TNT_OK);
        assert_int_equal(s.log_on_all_ranks, 0);
        /* TNT_SHM_CMA was a boolean before it had auto: its words still work. */
        assert_int_equal(parse("TNT_SHM_CMA", yes[i], &s), TNT_OK);
        assert_int_equal(s.shm_cma, TNT_SETTINGS_CMA_ON);
        assert_int_equal(parse("TNT_SHM_CMA", no[i], &s), TNT_OK);
        assert_int_equal(s.shm_cma, TNT_SETTINGS_CMA_OFF);
    }
    assert_int_equal(parse("TNT_SHM_CMA", "auto", &s), TNT_OK);
    assert_int_equal(s.shm_cma, TNT_SETTINGS_CMA_AUTO);
    expect_rejected("TNT_SHM_CMA", "2", "is not valid: expected one of auto, on, 1");
    expect_rejected("TNT_LOG_ON_ALL_DEVICES", "all", "1 or 0 (also true/false, yes/no, on/off)");
}

static void test_integer(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_UCX_SPIN_US", "50", &s), TNT_OK);
    assert_int_equal(s.ucx_spin_us, 50);
    assert_int_equal(parse("TNT_UCX_SPIN_US", "1000000", &s), TNT_OK);
    assert_int_equal(s.ucx_spin_us, 1000000);
    expect_rejected("TNT_UCX_SPIN_US", "1000001",
                    "out of range: expected a whole number from 0 to 1000000");
    expect_rejected("TNT_UCX_SPIN_US", "-5", "is not valid");
    expect_rejected("TNT_UCX_SPIN_US", "5us", "is not valid");
    assert_int_equal(parse("TNT_UCX_YIELD_US", "0", &s), TNT_OK);
    assert_int_equal(s.ucx_yield_us, 0);
    expect_rejected("TNT_UCX_YIELD_US", "1000001",
                    "out of range: expected a whole number from 0 to 1000000");
    assert_int_equal(parse("TNT_UCX_TCP_SEG_KB", "0", &s), TNT_OK);
    assert_int_equal(s.ucx_tcp_seg_bytes, 0);
    assert_int_equal(parse("TNT_UCX_TCP_SEG_KB", "1024", &s), TNT_OK);
    assert_int_equal(s.ucx_tcp_seg_bytes, 1024 * 1024);
    expect_rejected("TNT_UCX_TCP_SEG_KB", "65537", "out of range: expected a whole number of KiB");
}

static void test_unknown_name(void **state)
{
    (void)state;
    tnt_settings_t s;
    assert_int_equal(parse("TNT_NO_SUCH_THING", "1", &s), TNT_ERR_INVALID_ARG);
    assert_non_null(strstr(tnt_last_error(), "TNT_NO_SUCH_THING is not a libtnt variable"));
    assert_int_equal(tnt_settings_parse_quietly(&s, "TNT_NO_SUCH_THING", "1"), -1);
}

/* load reports every bad value (each is logged), keeps the first one as the
 * last error, and leaves the caller's struct alone. */
static void test_load_reports_first(void **state)
{
    (void)state;
    tnt_settings_t settings;
    memset(&settings, 0x5a, sizeof(settings));
    tnt_settings_t before = settings;
    setenv("TNT_TIMEOUT", "soon", 1);
    setenv("TNT_UCX_SPIN_US", "lots", 1);
    assert_int_equal(tnt_settings_load(&settings), TNT_ERR_INVALID_ARG);
    assert_non_null(strstr(tnt_last_error(), "TNT_TIMEOUT='soon'"));
    assert_memory_equal(&settings, &before, sizeof(settings));
    unset_all();
}

/* The logger's own reading of its two variables goes through the parser but
 * never logs; a bad value keeps its default until tnt_init rejects it. */
static void test_quiet_parse(void **state)
{
    (void)state;
    tnt_settings_t s;
    tnt_settings_set_defaults(&s);
    tnt_error_clear();
    assert_int_equal(tnt_settings_parse_quietly(&s, "TNT_LOG_LEVEL", "loud"), -1);
    assert_int_equal(s.log_level, TNT_LOG_WARN);
    assert_string_equal(tnt_last_error(), "");
    assert_int_equal(tnt_settings_parse_quietly(&s, "TNT_LOG_LEVEL", "trace"), 0);
    assert_int_equal(s.log_level, TNT_LOG_TRACE);
}

/* tnt_init checks the settings before it bootstraps: a bad value fails at
 * once, with the message, and returns no communicator. */
static void test_init_rejects(void **state)
{
    (void)state;
    static const char *const pmix[] = { "PMIX_NAMESPACE", "PMIX_RANK", "SLURM_NTASKS",
                                        "SLURM_NPROCS" };
    for (size_t i = 0; i < sizeof(pmix) / sizeof(pmix[0]); i++) {
        unsetenv(pmix[i]);
    }
    tnt_comm_t *comm = NULL;
    setenv("TNT_SHM_STAGING_KB", "-1", 1);
    assert_int_equal(tnt_init(&comm), TNT_ERR_INVALID_ARG);
    assert_null(comm);
    assert_non_null(strstr(tnt_last_error(), "TNT_SHM_STAGING_KB='-1' is not valid"));
    assert_non_null(strstr(tnt_last_error(), "from 64 to 1048576"));
    /* The same process initialises once the value is fixed. */
    setenv("TNT_SHM_STAGING_KB", "128", 1);
    assert_int_equal(tnt_init(&comm), TNT_OK);
    assert_non_null(comm);
    assert_int_equal(tnt_size(comm), 1);
    tnt_finalize(comm);
    unset_all();
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list-names") == 0) {
        for (size_t i = 0; i < tnt_settings_count(); i++) {
            printf("%s\n", tnt_settings_name(i));
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--describe") == 0) {
        char line[1024];
        for (size_t i = 0; tnt_settings_describe(i, line, sizeof(line)) == 0; i++) {
            printf("%s\n", line);
        }
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, setup),
        cmocka_unit_test_setup(test_size_kb, setup),
        cmocka_unit_test_setup(test_staging_regressions, setup),
        cmocka_unit_test_setup(test_fusion_auto, setup),
        cmocka_unit_test_setup(test_seconds, setup),
        cmocka_unit_test_setup(test_choice, setup),
        cmocka_unit_test_setup(test_bool, setup),
        cmocka_unit_test_setup(test_integer, setup),
        cmocka_unit_test_setup(test_unknown_name, setup),
        cmocka_unit_test_setup(test_load_reports_first, setup),
        cmocka_unit_test_setup(test_quiet_parse, setup),
        cmocka_unit_test_setup(test_init_rejects, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
