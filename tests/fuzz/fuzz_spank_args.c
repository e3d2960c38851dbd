/*
 * libFuzzer harness: the SPANK plugin's option parsing (spank/args.c), which
 * runs inside srun and slurmstepd (as root) on strings any user chooses:
 * --tarantella's value, and the allocation's value that a step inherits
 * through its environment. plugstack.conf arguments are the admin's, but
 * parsed by the same code.
 *
 * Input: the first byte picks the entry point, the rest is text:
 *   0  tnt_spank_args_parse(text) on the defaults
 *   1  tnt_spank_plugstack_parse, the text split into arguments at spaces
 *   2  tnt_spank_resolve, the text split at the first newline into the
 *      allocation's option and the step's (no newline: no step option)
 * Properties, from args.h: a rejected value leaves the configuration
 * untouched and says why; an accepted one is within bounds, and for
 * --tarantella its canonical form (tnt_spank_config_format, which the
 * plugin logs) parses back to the same configuration.
 */
#include "fuzz_check.h"

#include "spank/args.h"
#include "spank/torch_env.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARGV_MAX 64

static void check_valid(const tnt_spank_config_t *c, const char *text)
{
    static const char *const levels[] = { "", "error", "warn", "info", "debug", "trace" };
    int level_ok = 0;

    FUZZ_CHECK(strcmp(tnt_pin_mode_name(c->pin), "?") != 0, "'%s': pin mode %d", text, (int)c->pin);
    FUZZ_CHECK(c->fusion_kb >= -1 && c->fusion_kb <= TNT_SPANK_FUSION_MAX_KB, "'%s': fusion %ld",
               text, c->fusion_kb);
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        level_ok |= strcmp(c->log_level, levels[i]) == 0;
    }
    FUZZ_CHECK(level_ok, "'%s': log level '%.8s'", text, c->log_level);
    FUZZ_CHECK(1024 <= c->master_port_low && c->master_port_low <= c->master_port_high &&
                   c->master_port_high <= 65535,
               "'%s': port range %d-%d", text, c->master_port_low, c->master_port_high);
}

static void fuzz_args(const char *text)
{
    tnt_spank_config_t before, c, back;
    char err[512] = "", canonical[512];

    tnt_spank_config_default(&before);
    memcpy(&c, &before, sizeof(c));
    if (tnt_spank_args_parse(text, &c, err, sizeof(err)) != 0) {
        FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0, "'%s' was rejected but changed the config",
                   text);
        FUZZ_CHECK(err[0] != '\0', "'%s' was rejected without a reason", text);
        return;
    }
    FUZZ_CHECK(c.enabled == 1, "'%s': accepted but not enabled", text);
    check_valid(&c, text);
    /* help is for the command line it was typed on and not part of the
     * canonical form. */
    tnt_spank_config_format(&c, canonical, sizeof(canonical));
    tnt_spank_config_default(&back);
    FUZZ_CHECK(tnt_spank_args_parse(canonical, &back, err, sizeof(err)) == 0,
               "'%s': its canonical form '%s' is rejected: %s", text, canonical, err);
    back.help = c.help;
    FUZZ_CHECK(memcmp(&back, &c, sizeof(c)) == 0,
               "'%s': its canonical form '%s' parses to another config", text, canonical);
}

static void fuzz_plugstack(char *text)
{
    tnt_spank_config_t before, c;
    char *argv[ARGV_MAX];
    char err[512] = "";
    int argc = 0;

    for (char *save = NULL, *arg = strtok_r(text, " ", &save); arg != NULL && argc < ARGV_MAX;
         arg = strtok_r(NULL, " ", &save)) {
        argv[argc++] = arg;
    }
    tnt_spank_config_default(&before);
    memcpy(&c, &before, sizeof(c));
    if (tnt_spank_plugstack_parse(argc, argv, &c, err, sizeof(err)) != 0) {
        FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0,
                   "plugstack arguments rejected but the defaults changed");
        FUZZ_CHECK(err[0] != '\0', "plugstack arguments rejected without a reason");
        return;
    }
    FUZZ_CHECK(c.enabled == 0 && c.help == 0, "plugstack defaults enabled %d help %d", c.enabled,
               c.help);
    check_valid(&c, "plugstack");
}

static void fuzz_resolve(char *text)
{
    tnt_spank_config_t defaults, c, before;
    char err[512] = "";
    char *own = strchr(text, '\n');

    if (own != NULL) {
        *own++ = '\0';
    }
    tnt_spank_config_default(&defaults);
    memset(&c, 0xa5, sizeof(c));
    memcpy(&before, &c, sizeof(c));
    if (tnt_spank_resolve(&defaults, text, own, &c, err, sizeof(err)) != 0) {
        FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0, "resolve failed but wrote the config");
        FUZZ_CHECK(err[0] != '\0', "resolve failed without a reason");
        return;
    }
    FUZZ_CHECK(c.enabled == 1, "resolved from an option but not enabled");
    /* help is never inherited: only the step's own option may ask for it. */
    FUZZ_CHECK(own != NULL || !c.help, "help inherited from the allocation's option '%s'", text);
    check_valid(&c, text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;

    if (size == 0) {
        return 0;
    }
    /* Exactly the bytes of the string and its NUL, so ASan sees any read
     * past its end. */
    text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 3) {
    case 0:
        fuzz_args(text);
        break;
    case 1:
        fuzz_plugstack(text);
        break;
    default:
        fuzz_resolve(text);
        break;
    }
    free(text);
    return 0;
}
