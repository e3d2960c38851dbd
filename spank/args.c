/*
 * --tarantella sub-options and plugstack arguments; see args.h.
 */
#include "args.h"
#include "torch_env.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest option string we accept; far beyond any real one, and it keeps the
 * parser free of allocation (it runs inside srun and slurmstepd). */
#define ARGS_MAX 1024

static const char *const args_log_levels[] = { "error", "warn", "info", "debug", "trace" };

static const char args_help[] =
    "Usage: --tarantella[=KEY[=VALUE],...]   (e.g. --tarantella=pin=socket,verbose)\n"
    "Runs the step as a Tarantella job: PMIx bootstrap, task pinning, TNT_* environment.\n"
    "Sub-options:\n"
    "  pin=MODE       CPU pinning per task: none, socket, numa, core, auto (default auto:\n"
    "                 core when there are enough cores for the tasks, else numa)\n"
    "  pin-memory     bind memory strictly to the task's NUMA nodes (default: preferred)\n"
    "  fusion=KB      gradient fusion threshold in KiB (TNT_FUSION_THRESHOLD_KB)\n"
    "  log=LEVEL      libtnt log level: error, warn, info, debug, trace (TNT_LOG_LEVEL)\n"
    "  log-all        log on every rank, not only rank 0 (TNT_LOG_ON_ALL_DEVICES=1)\n"
    "  output-all     print output on every rank (TNT_OUTPUT_ON_ALL_DEVICES=1)\n"
    "  no-gpu         hide GPUs from the tasks (CUDA_VISIBLE_DEVICES=\"\")\n"
    "  verbose        each task prints one line: rank, host, CPUs, NUMA nodes\n"
    "  help           print this text and exit\n"
    "Switches take =no to turn off what an allocation turned on (verbose=no).\n"
    "Options given to sbatch/salloc apply to every srun inside; srun's own\n"
    "--tarantella=... overrides them key by key.\n";

const char *tnt_spank_help_text(void)
{
    return args_help;
}

void tnt_spank_config_default(tnt_spank_config_t *config)
{
    memset(config, 0, sizeof *config);
    config->pin = TNT_PIN_AUTO;
    config->fusion_kb = -1;
    config->master_port_low = TNT_SPANK_MASTER_PORT_LOW;
    config->master_port_high = TNT_SPANK_MASTER_PORT_HIGH;
}

static void args_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void args_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

static char *args_trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s)) {
        s++;
    }
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) {
        *--end = '\0';
    }
    return s;
}

/* A switch: no value means on; otherwise yes/no/true/false/1/0/on/off. */
static int args_bool(const char *key, const char *value, int *out, char *errbuf, size_t errlen)
{
    static const char *const on[] = { "yes", "true", "1", "on" };
    static const char *const off[] = { "no", "false", "0", "off" };
    size_t i;

    if (value == NULL) {
        *out = 1;
        return 0;
    }
    for (i = 0; i < sizeof on / sizeof on[0]; i++) {
        if (strcasecmp(value, on[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(value, off[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    args_err(errbuf, errlen,
             "invalid value '%s' for %s; valid: no value (on), yes, no, true, false, 1, 0", value,
             key);
    return -1;
}

static int args_fusion(const char *value, long *out, char *errbuf, size_t errlen)
{
    char *end = NULL;
    long kb;

    if (value == NULL || *value == '\0') {
        args_err(errbuf, errlen, "fusion needs a value: fusion=KB, an integer 0..%ld (KiB)",
                 TNT_SPANK_FUSION_MAX_KB);
        return -1;
    }
    errno = 0;
    kb = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || kb < 0 || kb > TNT_SPANK_FUSION_MAX_KB) {
        args_err(errbuf, errlen, "invalid value '%s' for fusion; valid: an integer 0..%ld (KiB)",
                 value, TNT_SPANK_FUSION_MAX_KB);
        return -1;
    }
    *out = kb;
    return 0;
}

static int args_log(const char *value, char *out, size_t outlen, char *errbuf, size_t errlen)
{
    size_t i;

    for (i = 0; value != NULL && i < sizeof args_log_levels / sizeof args_log_levels[0]; i++) {
        if (strcasecmp(value, args_log_levels[i]) == 0) {
            snprintf(out, outlen, "%s", args_log_levels[i]);
            return 0;
        }
    }
    args_err(errbuf, errlen, "invalid value '%s' for log; valid: %s", value == NULL ? "" : value,
             TNT_SPANK_LOG_LEVELS);
    return -1;
}

/* One "key[=value]" item; key already has '_' turned into '-'. */
static int args_item(const char *key, const char *value, int allow_help, tnt_spank_config_t *config,
                     char *errbuf, size_t errlen)
{
    if (strcmp(key, "pin") == 0) {
        if (value == NULL || tnt_pin_mode_parse(value, &config->pin) != 0) {
            args_err(errbuf, errlen, "invalid value '%s' for pin; valid: %s",
                     value == NULL ? "" : value, tnt_pin_mode_choices());
            return -1;
        }
        return 0;
    }
    if (strcmp(key, "fusion") == 0) {
        return args_fusion(value, &config->fusion_kb, errbuf, errlen);
    }
    if (strcmp(key, "log") == 0) {
        return args_log(value, config->log_level, sizeof config->log_level, errbuf, errlen);
    }
    if (strcmp(key, "pin-memory") == 0) {
        return args_bool(key, value, &config->pin_memory, errbuf, errlen);
    }
    if (strcmp(key, "log-all") == 0) {
        return args_bool(key, value, &config->log_all, errbuf, errlen);
    }
    if (strcmp(key, "output-all") == 0) {
        return args_bool(key, value, &config->output_all, errbuf, errlen);
    }
    if (strcmp(key, "no-gpu") == 0) {
        return args_bool(key, value, &config->no_gpu, errbuf, errlen);
    }
    if (strcmp(key, "verbose") == 0) {
        return args_bool(key, value, &config->verbose, errbuf, errlen);
    }
    if (allow_help && strcmp(key, "help") == 0) {
        if (value != NULL) {
            args_err(errbuf, errlen, "help takes no value (got help=%s)", value);
            return -1;
        }
        config->help = 1;
        return 0;
    }
    args_err(errbuf, errlen,
             "unknown sub-option '%s'; valid: pin=MODE, pin-memory, fusion=KB, log=LEVEL, "
             "log-all, output-all, no-gpu, verbose%s",
             key, allow_help ? ", help" : "");
    return -1;
}

/* Splits "key[=value]" in place, trims both, and turns '_' in the key into '-'. */
static void args_split(char *item, char **key_p, char **value_p)
{
    char *eq = strchr(item, '=');
    char *p;

    *value_p = NULL;
    if (eq != NULL) {
        *eq = '\0';
        *value_p = args_trim(eq + 1);
    }
    *key_p = args_trim(item);
    for (p = *key_p; *p != '\0'; p++) {
        if (*p == '_') {
            *p = '-';
        } else {
            *p = (char)tolower((unsigned char)*p);
        }
    }
}

int tnt_spank_args_parse(const char *arg, tnt_spank_config_t *config, char *errbuf, size_t errlen)
{
    char copy[ARGS_MAX];
    tnt_spank_config_t next = *config;
    char *item, *save = NULL;

    /* Slurm hands a bare option on as NULL, "" or, through the job
     * environment of sbatch/salloc, the literal "(null)". */
    if (arg == NULL || strcmp(arg, "(null)") == 0) {
        arg = "";
    }
    if (strlen(arg) >= sizeof copy) {
        args_err(errbuf, errlen, "option value too long (%zu characters; at most %zu)", strlen(arg),
                 sizeof copy - 1);
        return -1;
    }
    memcpy(copy, arg, strlen(arg) + 1);
    for (item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *key, *value;

        args_split(item, &key, &value);
        if (*key == '\0') {
            if (value == NULL) {
                continue; /* "a,,b" or a trailing comma */
            }
            args_err(errbuf, errlen, "sub-option '=%s' has no name", value);
            return -1;
        }
        if (args_item(key, value, 1, &next, errbuf, errlen) != 0) {
            return -1;
        }
    }
    next.enabled = 1;
    *config = next;
    return 0;
}

/* "LOW-HIGH", whole port numbers, 1024 <= LOW <= HIGH <= 65535: below 1024
 * only root may listen, and torch's store runs as the user. */
static int args_port_range(const char *arg, const char *value, int *low, int *high, char *errbuf,
                           size_t errlen)
{
    char *end = NULL, *end2 = NULL;
    long lo, hi;

    errno = 0;
    lo = strtol(value, &end, 10);
    if (errno == 0 && end != value && *end == '-') {
        hi = strtol(end + 1, &end2, 10);
        if (errno == 0 && end2 != end + 1 && *end2 == '\0' && lo >= 1024 && lo <= hi &&
            hi <= 65535) {
            *low = (int)lo;
            *high = (int)hi;
            return 0;
        }
    }
    args_err(errbuf, errlen,
             "plugstack.conf argument '%s': expected master_port_range=LOW-HIGH with "
             "1024 <= LOW <= HIGH <= 65535 (default %d-%d)",
             arg, TNT_SPANK_MASTER_PORT_LOW, TNT_SPANK_MASTER_PORT_HIGH);
    return -1;
}

int tnt_spank_plugstack_parse(int argc, char *const argv[], tnt_spank_config_t *defaults,
                              char *errbuf, size_t errlen)
{
    static const char prefix[] = "default_";
    static const char port_range[] = "master_port_range=";
    tnt_spank_config_t next = *defaults;
    int i;

    for (i = 0; i < argc; i++) {
        char copy[ARGS_MAX];
        char *key, *value;

        if (strncmp(argv[i], port_range, sizeof port_range - 1) == 0) {
            if (args_port_range(argv[i], argv[i] + sizeof port_range - 1, &next.master_port_low,
                                &next.master_port_high, errbuf, errlen) != 0) {
                return -1;
            }
            continue;
        }
        if (strncmp(argv[i], prefix, sizeof prefix - 1) != 0) {
            args_err(errbuf, errlen,
                     "unknown plugstack.conf argument '%s'; valid: default_KEY[=VALUE] "
                     "with KEY one of pin, pin_memory, fusion, log, log_all, output_all, "
                     "no_gpu, verbose (e.g. default_pin=socket), and master_port_range=LOW-HIGH",
                     argv[i]);
            return -1;
        }
        if (strlen(argv[i]) >= sizeof copy) {
            args_err(errbuf, errlen, "plugstack.conf argument too long: '%.40s...'", argv[i]);
            return -1;
        }
        snprintf(copy, sizeof copy, "%s", argv[i] + sizeof prefix - 1);
        args_split(copy, &key, &value);
        if (args_item(key, value, 0, &next, errbuf, errlen) != 0) {
            /* Prefix the argument so admins see where the bad value is. */
            char inner[512];

            snprintf(inner, sizeof inner, "%s", errbuf != NULL ? errbuf : "");
            args_err(errbuf, errlen, "plugstack.conf argument '%s': %s", argv[i], inner);
            return -1;
        }
    }
    next.enabled = 0;
    next.help = 0;
    *defaults = next;
    return 0;
}

char *tnt_spank_config_format(const tnt_spank_config_t *config, char *buf, size_t len)
{
    size_t used = 0;

    if (buf == NULL || len == 0) {
        return buf;
    }
    buf[0] = '\0';
#define FMT_APPEND(...)                                                       \
    do {                                                                      \
        int n_ = snprintf(buf + used, len - used, "%s", used > 0 ? "," : ""); \
        if (n_ > 0 && (size_t)n_ < len - used)                                \
            used += (size_t)n_;                                               \
        n_ = snprintf(buf + used, len - used, __VA_ARGS__);                   \
        if (n_ > 0)                                                           \
            used = used + (size_t)n_ < len ? used + (size_t)n_ : len - 1;     \
    } while (0)
    FMT_APPEND("pin=%s", tnt_pin_mode_name(config->pin));
    if (config->pin_memory) {
        FMT_APPEND("pin-memory");
    }
    if (config->fusion_kb >= 0) {
        FMT_APPEND("fusion=%ld", config->fusion_kb);
    }
    if (config->log_level[0] != '\0') {
        FMT_APPEND("log=%s", config->log_level);
    }
    if (config->log_all) {
        FMT_APPEND("log-all");
    }
    if (config->output_all) {
        FMT_APPEND("output-all");
    }
    if (config->no_gpu) {
        FMT_APPEND("no-gpu");
    }
    if (config->verbose) {
        FMT_APPEND("verbose");
    }
#undef FMT_APPEND
    return buf;
}

/* The one instance per process; see tnt_spank_state_t. */
tnt_spank_state_t tnt_spank_state;

int tnt_spank_resolve(const tnt_spank_config_t *defaults, const char *inherited, const char *own,
                      tnt_spank_config_t *config, char *errbuf, size_t errlen)
{
    tnt_spank_config_t next = *defaults;
    char inner[512];

    if (inherited != NULL && tnt_spank_args_parse(inherited, &next, inner, sizeof inner) != 0) {
        snprintf(errbuf, errlen, "the allocation's --tarantella=%s (from sbatch/salloc): %s",
                 inherited, inner);
        return -1;
    }
    /* help is for the command line it was typed on, never inherited. */
    next.help = 0;
    if (own != NULL && tnt_spank_args_parse(own, &next, inner, sizeof inner) != 0) {
        snprintf(errbuf, errlen, "--tarantella=%s: %s", own, inner);
        return -1;
    }
    *config = next;
    return 0;
}
