/*
 * Option parsing of spank_tarantella.so (spank/args.c): --tarantella
 * sub-options, merging an allocation's option with a step's, plugstack.conf
 * defaults, and the error messages users see.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "spank/args.h"
#include "spank/torch_env.h"

static void test_defaults(void **state)
{
    tnt_spank_config_t c;

    (void)state;
    tnt_spank_config_default(&c);
    assert_int_equal(c.enabled, 0);
    assert_int_equal(c.pin, TNT_PIN_AUTO);
    assert_true(c.fusion_kb < 0);
    assert_string_equal(c.log_level, "");
    assert_int_equal(c.pin_memory + c.log_all + c.output_all + c.no_gpu + c.verbose + c.help, 0);
}

/* A bare --tarantella reaches us as NULL, "" or (through sbatch) "(null)". */
static void test_bare(void **state)
{
    const char *bare[] = { NULL, "", "(null)", ",", " , " };
    char err[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        tnt_spank_config_t c, d;

        tnt_spank_config_default(&c);
        tnt_spank_config_default(&d);
        assert_int_equal(tnt_spank_args_parse(bare[i], &c, err, sizeof err), 0);
        assert_int_equal(c.enabled, 1);
        d.enabled = 1;
        assert_memory_equal(&c, &d, sizeof c);
    }
}

static void test_all_keys(void **state)
{
    tnt_spank_config_t c;
    char err[256], buf[256];

    (void)state;
    tnt_spank_config_default(&c);
    assert_int_equal(tnt_spank_args_parse("pin=core,pin-memory,fusion=64,log=debug,log-all,"
                                          "output-all,no-gpu,verbose",
                                          &c, err, sizeof err),
                     0);
    assert_int_equal(c.pin, TNT_PIN_CORE);
    assert_int_equal(c.pin_memory, 1);
    assert_int_equal(c.fusion_kb, 64);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.log_all, 1);
    assert_int_equal(c.output_all, 1);
    assert_int_equal(c.no_gpu, 1);
    assert_int_equal(c.verbose, 1);
    assert_int_equal(c.help, 0);
    assert_string_equal(tnt_spank_config_format(&c, buf, sizeof buf),
                        "pin=core,pin-memory,fusion=64,log=debug,log-all,output-all,no-gpu,"
                        "verbose");
}

static void test_pin_modes(void **state)
{
    const char *names[] = { "none", "socket", "numa", "core", "auto" };
    const tnt_pin_mode_t modes[] = { TNT_PIN_NONE, TNT_PIN_SOCKET, TNT_PIN_NUMA, TNT_PIN_CORE,
                                     TNT_PIN_AUTO };
    char arg[32], err[256];
    size_t i;

    (void)state;
    for (i = 0; i < 5; i++) {
        tnt_spank_config_t c;

        tnt_spank_config_default(&c);
        snprintf(arg, sizeof arg, "pin=%s", names[i]);
        assert_int_equal(tnt_spank_args_parse(arg, &c, err, sizeof err), 0);
        assert_int_equal(c.pin, modes[i]);
    }
}

/* Spaces, case of keys, and '_' for '-' (as in #SBATCH lines and plugstack). */
static void test_spelling(void **state)
{
    tnt_spank_config_t c;
    char err[256];

    (void)state;
    tnt_spank_config_default(&c);
    assert_int_equal(
        tnt_spank_args_parse(" PIN = socket , Pin_Memory,LOG=Warn, fusion=0 ", &c, err, sizeof err),
        0);
    assert_int_equal(c.pin, TNT_PIN_SOCKET);
    assert_int_equal(c.pin_memory, 1);
    assert_string_equal(c.log_level, "warn");
    assert_int_equal(c.fusion_kb, 0);
}

/* The allocation's option first, then the step's: key by key, last wins. */
static void test_merge_and_switch_off(void **state)
{
    tnt_spank_config_t c;
    char err[256];

    (void)state;
    tnt_spank_config_default(&c);
    assert_int_equal(tnt_spank_args_parse("pin=socket,verbose,fusion=128", &c, err, sizeof err), 0);
    assert_int_equal(tnt_spank_args_parse("pin=core,verbose=no", &c, err, sizeof err), 0);
    assert_int_equal(c.pin, TNT_PIN_CORE);
    assert_int_equal(c.verbose, 0);
    assert_int_equal(c.fusion_kb, 128);
    /* Applying the same value twice changes nothing (callbacks run twice). */
    assert_int_equal(tnt_spank_args_parse("pin=core,verbose=no", &c, err, sizeof err), 0);
    assert_int_equal(c.pin, TNT_PIN_CORE);
    assert_int_equal(c.fusion_kb, 128);
    assert_int_equal(
        tnt_spank_args_parse("no-gpu=yes,log-all=1,output-all=true", &c, err, sizeof err), 0);
    assert_int_equal(c.no_gpu + c.log_all + c.output_all, 3);
    assert_int_equal(
        tnt_spank_args_parse("no-gpu=off,log-all=0,output-all=FALSE", &c, err, sizeof err), 0);
    assert_int_equal(c.no_gpu + c.log_all + c.output_all, 0);
}

static void test_help(void **state)
{
    tnt_spank_config_t c;
    char err[256];

    (void)state;
    tnt_spank_config_default(&c);
    assert_int_equal(tnt_spank_args_parse("help", &c, err, sizeof err), 0);
    assert_int_equal(c.help, 1);
    assert_non_null(strstr(tnt_spank_help_text(), "pin=MODE"));
    assert_non_null(strstr(tnt_spank_help_text(), "none, socket, numa, core, auto"));
    tnt_spank_config_default(&c);
    assert_int_equal(tnt_spank_args_parse("help=1", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "help takes no value"));
}

/* Every error names the bad value and the valid ones, and leaves the
 * configuration as it was. */
static void test_errors(void **state)
{
    static const struct {
        const char *arg;
        const char *message;
    } cases[] = {
        { "pin=bogus", "invalid value 'bogus' for pin; valid: none, socket, numa, core, auto" },
        { "pin", "invalid value '' for pin; valid: none, socket, numa, core, auto" },
        { "fusion=abc", "invalid value 'abc' for fusion; valid: an integer 0..4194304 (KiB)" },
        { "fusion=-1", "invalid value '-1' for fusion" },
        { "fusion=12k", "invalid value '12k' for fusion" },
        { "fusion=4194305", "invalid value '4194305' for fusion" },
        { "fusion=99999999999999999999", "invalid value '99999999999999999999' for fusion" },
        { "fusion", "fusion needs a value" },
        { "log=loud", "invalid value 'loud' for log; valid: error, warn, info, debug, trace" },
        { "verbose=maybe", "invalid value 'maybe' for verbose; valid: no value (on), yes, no" },
        { "pin-memory=2", "invalid value '2' for pin-memory" },
        { "colour=red", "unknown sub-option 'colour'; valid: pin=MODE, pin-memory, fusion=KB, "
                        "log=LEVEL, log-all, output-all, no-gpu, verbose, help" },
        { "=core", "sub-option '=core' has no name" },
        { "verbose,pin=core,pin=sideways", "invalid value 'sideways' for pin" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tnt_spank_config_t c, before;
        char err[256] = "";

        tnt_spank_config_default(&c);
        c.fusion_kb = 7;
        before = c;
        assert_int_equal(tnt_spank_args_parse(cases[i].arg, &c, err, sizeof err), -1);
        if (strstr(err, cases[i].message) == NULL) {
            fail_msg("'%s': message '%s' lacks '%s'", cases[i].arg, err, cases[i].message);
        }
        assert_memory_equal(&c, &before, sizeof c);
    }
}

static void test_too_long(void **state)
{
    char arg[2048], err[256];
    tnt_spank_config_t c;

    (void)state;
    memset(arg, 'v', sizeof arg - 1);
    arg[sizeof arg - 1] = '\0';
    tnt_spank_config_default(&c);
    assert_int_equal(tnt_spank_args_parse(arg, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "too long"));
    /* A tiny or absent error buffer is never overrun. */
    assert_int_equal(tnt_spank_args_parse("pin=x", &c, err, 4), -1);
    assert_int_equal(strlen(err), 3);
    assert_int_equal(tnt_spank_args_parse("pin=x", &c, NULL, 0), -1);
}

static void test_plugstack(void **state)
{
    char *good[] = { "default_pin=socket", "default_pin_memory",  "default_fusion=16384",
                     "default_log=info",   "default_verbose=yes", "default_no-gpu" };
    char *unknown[] = { "pin=socket" };
    char *bad_value[] = { "default_pin=socket", "default_pin=diagonal" };
    char *no_help[] = { "default_help" };
    tnt_spank_config_t d, before;
    char err[512];

    (void)state;
    tnt_spank_config_default(&d);
    assert_int_equal(tnt_spank_plugstack_parse(6, good, &d, err, sizeof err), 0);
    assert_int_equal(d.enabled, 0); /* defaults never switch the plugin on */
    assert_int_equal(d.pin, TNT_PIN_SOCKET);
    assert_int_equal(d.pin_memory, 1);
    assert_int_equal(d.fusion_kb, 16384);
    assert_string_equal(d.log_level, "info");
    assert_int_equal(d.verbose, 1);
    assert_int_equal(d.no_gpu, 1);
    /* A step's option applies on top of the site defaults. */
    assert_int_equal(tnt_spank_args_parse("pin=core", &d, err, sizeof err), 0);
    assert_int_equal(d.pin, TNT_PIN_CORE);
    assert_int_equal(d.fusion_kb, 16384);

    tnt_spank_config_default(&d);
    before = d;
    assert_int_equal(tnt_spank_plugstack_parse(1, unknown, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown plugstack.conf argument 'pin=socket'"));
    assert_non_null(strstr(err, "default_pin=socket"));
    assert_int_equal(tnt_spank_plugstack_parse(2, bad_value, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "plugstack.conf argument 'default_pin=diagonal'"));
    assert_non_null(strstr(err, "invalid value 'diagonal' for pin"));
    assert_int_equal(tnt_spank_plugstack_parse(1, no_help, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown sub-option 'help'"));
    assert_memory_equal(&d, &before, sizeof d);
    assert_int_equal(tnt_spank_plugstack_parse(0, NULL, &d, err, sizeof err), 0);
}

/* master_port_range=LOW-HIGH: a site setting, not a user sub-option. */
static void test_plugstack_port_range(void **state)
{
    char *const good[] = { "default_pin=core", "master_port_range=31000-31009" };
    char *const one[] = { "master_port_range=40000-40000" };
    const char *bad[] = {
        "master_port_range=",      "master_port_range=31000",       "master_port_range=31009-31000",
        "master_port_range=80-90", "master_port_range=60000-70000", "master_port_range=1-2-3",
        "master_port_range=a-b",   "master_port_range=31000-31009x"
    };
    tnt_spank_config_t d, before;
    char err[512];

    (void)state;
    tnt_spank_config_default(&d);
    assert_int_equal(d.master_port_low, TNT_SPANK_MASTER_PORT_LOW);
    assert_int_equal(d.master_port_high, TNT_SPANK_MASTER_PORT_HIGH);
    assert_int_equal(tnt_spank_plugstack_parse(2, good, &d, err, sizeof err), 0);
    assert_int_equal(d.master_port_low, 31000);
    assert_int_equal(d.master_port_high, 31009);
    assert_int_equal(d.pin, TNT_PIN_CORE);
    assert_int_equal(tnt_spank_plugstack_parse(1, one, &d, err, sizeof err), 0);
    assert_int_equal(d.master_port_low, 40000);
    assert_int_equal(d.master_port_high, 40000);
    /* It carries through a step's resolution; users cannot set it. */
    {
        tnt_spank_config_t step;

        assert_int_equal(tnt_spank_resolve(&d, "verbose", "pin=none", &step, err, sizeof err), 0);
        assert_int_equal(step.master_port_low, 40000);
        assert_int_equal(tnt_spank_args_parse("master_port_range=1-2", &step, err, sizeof err), -1);
        assert_non_null(strstr(err, "unknown sub-option 'master-port-range'"));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *const arg[] = { (char *)bad[i] };

        before = d;
        assert_int_equal(tnt_spank_plugstack_parse(1, arg, &d, err, sizeof err), -1);
        assert_non_null(strstr(err, bad[i]));
        assert_non_null(strstr(err, "1024 <= LOW <= HIGH <= 65535 (default 29500-30499)"));
        assert_memory_equal(&d, &before, sizeof d);
    }
}

static void test_format_truncates(void **state)
{
    tnt_spank_config_t c;
    char buf[12], err[64];

    (void)state;
    tnt_spank_config_default(&c);
    assert_string_equal(tnt_spank_config_format(&c, buf, sizeof buf), "pin=auto");
    assert_int_equal(tnt_spank_args_parse("pin=socket,verbose,no-gpu", &c, err, sizeof err), 0);
    tnt_spank_config_format(&c, buf, sizeof buf);
    assert_true(strlen(buf) < sizeof buf);
    assert_int_equal(strncmp(buf, "pin=socket,", 11), 0);
}

/* Site defaults, then the allocation's option, then the step's own, key by
 * key; help is never inherited; a bad value names where it came from and
 * leaves *config as it was. */
static void test_resolve(void **state)
{
    tnt_spank_config_t defaults, c, before;
    char err[768];

    (void)state;
    tnt_spank_config_default(&defaults);
    defaults.fusion_kb = 64;
    assert_int_equal(
        tnt_spank_resolve(&defaults, "pin=socket,verbose,help", "pin=core", &c, err, sizeof err),
        0);
    assert_int_equal(c.enabled, 1);
    assert_int_equal(c.pin, TNT_PIN_CORE);
    assert_int_equal(c.verbose, 1);
    assert_int_equal(c.fusion_kb, 64);
    assert_int_equal(c.help, 0);
    /* Neither given: the defaults, not enabled. */
    assert_int_equal(tnt_spank_resolve(&defaults, NULL, NULL, &c, err, sizeof err), 0);
    assert_int_equal(c.enabled, 0);
    assert_int_equal(c.fusion_kb, 64);
    /* A bare --tarantella enables with the defaults. */
    assert_int_equal(tnt_spank_resolve(&defaults, NULL, "", &c, err, sizeof err), 0);
    assert_int_equal(c.enabled, 1);
    assert_int_equal(tnt_spank_resolve(&defaults, NULL, "help", &c, err, sizeof err), 0);
    assert_int_equal(c.help, 1);

    before = c;
    assert_int_equal(tnt_spank_resolve(&defaults, "pin=bogus", "pin=core", &c, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "the allocation's --tarantella=pin=bogus (from sbatch/salloc)"));
    assert_non_null(strstr(err, "invalid value 'bogus' for pin"));
    assert_memory_equal(&c, &before, sizeof c);
    assert_int_equal(tnt_spank_resolve(&defaults, "pin=core", "fusion=x", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "--tarantella=fusion=x: "));
    assert_memory_equal(&c, &before, sizeof c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_bare),
        cmocka_unit_test(test_all_keys),
        cmocka_unit_test(test_pin_modes),
        cmocka_unit_test(test_spelling),
        cmocka_unit_test(test_merge_and_switch_off),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_plugstack),
        cmocka_unit_test(test_plugstack_port_range),
        cmocka_unit_test(test_format_truncates),
        cmocka_unit_test(test_resolve),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
