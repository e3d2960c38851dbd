/*
 * The one parser of TNT_* variables. Each row of settings_table names a
 * variable, its kind, its default (written as a user would write it and
 * parsed by the same code, as UCX does), its bounds or choices, and where
 * the parsed value goes in tnt_settings_t. Numbers are parsed by hand and
 * bounded before they are scaled, so no value can wrap around (strtoull
 * reads "-1" as 2^64-1, and 2^54 KiB times 1024 is 0).
 */
#include "util/settings.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
    SETTING_SIZE_KB, /* whole KiB, stored as size_t bytes */
    SETTING_SIZE_KB_OR_AUTO, /* the same, or "auto" stored as TNT_SETTINGS_TUNE */
    SETTING_SECONDS, /* decimal seconds, optional trailing "s", stored as double */
    SETTING_CHOICE,  /* a name from choices (case-insensitive), stored as an int-sized enum */
    SETTING_BOOL,    /* 1/0, true/false, yes/no, on/off, stored as int */
    SETTING_INT,     /* a whole number, stored as uint64_t */
    SETTING_PATH     /* a file path, stored in a char[TNT_SETTINGS_PATH_MAX]; "" = unset */
} setting_kind_t;

typedef struct {
    const char *name;
    int value;
} setting_choice_t;

typedef struct {
    const char *name;
    setting_kind_t kind;
    const char *default_value;       /* NULL: TNT_SETTINGS_BY_LAYOUT (sizes only) */
    double min, max;                 /* SIZE_KB (in KiB), SECONDS, INT */
    const setting_choice_t *choices; /* CHOICE: ends with { NULL, 0 } */
    size_t offset;                   /* of the field in tnt_settings_t */
    const char *note;                /* what special values mean, for messages; may be NULL */
} setting_desc_t;

/* Choice fields are written as int; these enums must be int-sized. */
_Static_assert(sizeof(tnt_log_level_t) == sizeof(int), "log level is stored as an int");
_Static_assert(sizeof(tnt_settings_algo_t) == sizeof(int), "algorithm is stored as an int");
_Static_assert(sizeof(tnt_settings_gpu_t) == sizeof(int), "GPU transport is stored as an int");
_Static_assert(sizeof(tnt_settings_stream_t) == sizeof(int), "stream mode is stored as an int");
_Static_assert(sizeof(tnt_settings_arrival_t) == sizeof(int), "arrival mode is stored as an int");
_Static_assert(sizeof(tnt_settings_p2p_t) == sizeof(int), "point-to-point mode is stored as an int");

static const setting_choice_t log_level_choices[] = {
    { "error", TNT_LOG_ERROR },
    { "warn", TNT_LOG_WARN },
    { "warning", TNT_LOG_WARN },
    { "info", TNT_LOG_INFO },
    { "debug", TNT_LOG_DEBUG },
    { "trace", TNT_LOG_TRACE },
    { NULL, 0 },
};

static const setting_choice_t algo_choices[] = {
    { "auto", TNT_SETTINGS_ALGO_AUTO },
    { "recursive_doubling", TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING },
    { "rd", TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING },
    { "ring", TNT_SETTINGS_ALGO_RING },
    { "rabenseifner", TNT_SETTINGS_ALGO_RABENSEIFNER },
    { "tree", TNT_SETTINGS_ALGO_TREE },
    { NULL, 0 },
};

/* A typo must not silently run another transport than the one asked for,
 * so a bad TNT_GPU_TRANSPORT fails tnt_init like every other value. */
static const setting_choice_t gpu_choices[] = {
    { "auto", TNT_SETTINGS_GPU_AUTO },
    { "nccl", TNT_SETTINGS_GPU_NCCL },
    { "host", TNT_SETTINGS_GPU_HOST },
    { NULL, 0 },
};

static const setting_choice_t stream_choices[] = {
    { "auto", TNT_SETTINGS_STREAM_AUTO },
    { "on", TNT_SETTINGS_STREAM_ON },
    { "off", TNT_SETTINGS_STREAM_OFF },
    { NULL, 0 },
};

/* With every word the setting took when it was a boolean. */
static const setting_choice_t cma_choices[] = {
    { "auto", TNT_SETTINGS_CMA_AUTO }, { "on", TNT_SETTINGS_CMA_ON },
    { "1", TNT_SETTINGS_CMA_ON },      { "true", TNT_SETTINGS_CMA_ON },
    { "yes", TNT_SETTINGS_CMA_ON },    { "off", TNT_SETTINGS_CMA_OFF },
    { "0", TNT_SETTINGS_CMA_OFF },     { "false", TNT_SETTINGS_CMA_OFF },
    { "no", TNT_SETTINGS_CMA_OFF },    { NULL, 0 },
};

static const setting_choice_t arrival_choices[] = {
    { "auto", TNT_SETTINGS_ARRIVAL_AUTO },
    { "on", TNT_SETTINGS_ARRIVAL_ON },
    { "off", TNT_SETTINGS_ARRIVAL_OFF },
    { NULL, 0 },
};

/* TNT_FUSION_THRESHOLD takes the word the issue and Horovod users know
 * (HOROVOD_AUTOTUNE sets HOROVOD_FUSION_THRESHOLD); a size goes in
 * TNT_FUSION_THRESHOLD_KB, so a Horovod byte count here is refused instead
 * of being read as KiB. */
static const setting_choice_t fusion_mode_choices[] = {
    { "fixed", 0 },
    { "auto", 1 },
    { NULL, 0 },
};

static const setting_choice_t overlap_choices[] = {
    { "auto", TNT_SETTINGS_OVERLAP_AUTO },
    { "on", TNT_SETTINGS_OVERLAP_ON },
    { "off", TNT_SETTINGS_OVERLAP_OFF },
    { NULL, 0 },
};

static const setting_choice_t p2p_choices[] = {
    { "on", TNT_SETTINGS_P2P_ON },
    { "off", TNT_SETTINGS_P2P_OFF },
    { NULL, 0 },
};

#define FIELD(f) offsetof(tnt_settings_t, f)

/* The bounds keep every product below in range and every layer's loops
 * advancing: 1 GiB of shared-memory staging per rank and 1 GiB chunks are
 * far beyond what pays; the fusion bound is the plugin's (4 GiB,
 * spank/args.h); TNT_TIMEOUT above 1e9 s means "no timeout", for which 0
 * is the way to say it. TNT_UCX_SPIN_US is off by default because spinning
 * hurts badly on oversubscribed hosts (CI, simulated nodes); about 50 pays
 * when every rank has its own core (docs/multinode.md). TNT_UCX_YIELD_US
 * (1 ms) polls with sched_yield before sleeping, which hands a shared core
 * to the rank that has work (transport/ucx/ucx_wait.c, tnt_ucx_idle).
 * TNT_UCX_TCP_SEG_KB (256) sets UCX's TCP segments, which UCX makes 64 KiB
 * and 8 KiB (transport/ucx/ucx_config.c, tnt_ucx_config_tcp_segments). TNT_SHM_SMALL_KB and
 * TNT_MULTINODE_RD_MAX_KB default to values the layers choose by layout (for
 * the latter: none, the cost model decides). TNT_MULTINODE_LATENCY_NS and
 * TNT_MULTINODE_LINK_MBPS replace the cost model's fitted alpha and beta.
 * docs/environment.md documents the same names and values. */
static const setting_desc_t settings_table[] = {
    { "TNT_TIMEOUT", SETTING_SECONDS, "300", 0, 1e9, NULL, FIELD(timeout_s), "0 = no timeout" },
    { "TNT_STALL_WARN", SETTING_SECONDS, "60", 0, 1e9, NULL, FIELD(stall_warn_s),
      "0 = no warning" },
    { "TNT_LOG_LEVEL", SETTING_CHOICE, "warn", 0, 0, log_level_choices, FIELD(log_level), NULL },
    { "TNT_LOG_ON_ALL_DEVICES", SETTING_BOOL, "0", 0, 0, NULL, FIELD(log_on_all_ranks), NULL },
    { "TNT_FUSION_THRESHOLD_KB", SETTING_SIZE_KB_OR_AUTO, "1024", 0, 4194304, NULL,
      FIELD(fusion_threshold_bytes), "0 = one allreduce per tensor, auto = tuned over the first training steps" },
    { "TNT_FUSION_THRESHOLD", SETTING_CHOICE, "fixed", 0, 0, fusion_mode_choices,
      FIELD(fusion_threshold_tune), "auto = tune the bucket size; a fixed size in KiB goes in TNT_FUSION_THRESHOLD_KB" },
    { "TNT_OVERLAP", SETTING_CHOICE, "auto", 0, 0, overlap_choices, FIELD(overlap), NULL },
    { "TNT_P2P", SETTING_CHOICE, "on", 0, 0, p2p_choices, FIELD(p2p),
      "off = communicators of several ranks make no point-to-point transport" },
    { "TNT_P2P_CMA_KB", SETTING_SIZE_KB, "256", 0, 1073741824, NULL, FIELD(p2p_cma_bytes),
      "0 = UCX carries every message" },
    { "TNT_SHM_STAGING_KB", SETTING_SIZE_KB, "4096", 64, 1048576, NULL, FIELD(shm_staging_bytes),
      NULL },
    { "TNT_SHM_SMALL_KB", SETTING_SIZE_KB, NULL, 0, 1048576, NULL, FIELD(shm_small_bytes), NULL },
    { "TNT_SHM_CMA", SETTING_CHOICE, "auto", 0, 0, cma_choices, FIELD(shm_cma), NULL },
    { "TNT_SHM_STREAM", SETTING_CHOICE, "auto", 0, 0, stream_choices, FIELD(shm_stream), NULL },
    { "TNT_SHM_STREAM_KB", SETTING_SIZE_KB, "1024", 0, 1073741824, NULL, FIELD(shm_stream_bytes),
      "0 = every staged message" },
    { "TNT_ALLREDUCE_ALGO", SETTING_CHOICE, "auto", 0, 0, algo_choices, FIELD(allreduce_algo),
      NULL },
    { "TNT_MULTINODE_RD_MAX_KB", SETTING_SIZE_KB, NULL, 0, 1073741824, NULL,
      FIELD(multinode_rd_max_bytes), NULL },
    { "TNT_MULTINODE_CHUNK_KB", SETTING_SIZE_KB, "1024", 4, 1048576, NULL,
      FIELD(multinode_chunk_bytes), NULL },
    { "TNT_MULTINODE_REDUCE_ON_ARRIVAL", SETTING_CHOICE, "auto", 0, 0, arrival_choices,
      FIELD(multinode_reduce_on_arrival), NULL },
    { "TNT_MULTINODE_LATENCY_NS", SETTING_INT, "0", 0, 1000000000, NULL,
      FIELD(multinode_latency_ns), "0 = the built-in fitted value" },
    { "TNT_MULTINODE_LINK_MBPS", SETTING_INT, "0", 0, 100000000, NULL, FIELD(multinode_link_mbps),
      "0 = the built-in fitted value" },
    { "TNT_UCX_SPIN_US", SETTING_INT, "0", 0, 1000000, NULL, FIELD(ucx_spin_us), NULL },
    { "TNT_UCX_YIELD_US", SETTING_INT, "1000", 0, 1000000, NULL, FIELD(ucx_yield_us), NULL },
    { "TNT_UCX_TCP_SEG_KB", SETTING_SIZE_KB, "256", 0, 65536, NULL, FIELD(ucx_tcp_seg_bytes),
      "0 = UCX's own" },
    { "TNT_GPU_TRANSPORT", SETTING_CHOICE, "auto", 0, 0, gpu_choices, FIELD(gpu_transport), NULL },
    { "TNT_GPU_STAGING_KB", SETTING_SIZE_KB, "4096", 64, 1048576, NULL, FIELD(gpu_staging_bytes),
      NULL },
    /* The timeline (docs/timeline.md): 72-byte events, so the default
     * array is 9 MiB and the largest 18 GiB. */
    { "TNT_TIMELINE", SETTING_PATH, "", 0, 0, NULL, FIELD(timeline_path), "empty = no timeline" },
    { "TNT_TIMELINE_EVENTS", SETTING_INT, "131072", 1024, 268435456, NULL, FIELD(timeline_events),
      NULL },
};

#define SETTINGS_COUNT (sizeof(settings_table) / sizeof(settings_table[0]))

static const setting_desc_t *setting_find(const char *name)
{
    for (size_t i = 0; i < SETTINGS_COUNT; i++) {
        if (strcmp(settings_table[i].name, name) == 0) {
            return &settings_table[i];
        }
    }
    return NULL;
}

/* Decimal digits only (no sign, no spaces, no suffix). Returns 0 and the
 * number, 1 for a number above max (a string of digits that is too large
 * is out of range, not malformed), -1 for anything that is not digits. */
static int setting_parse_whole(const char *value, uint64_t max, uint64_t *number_p)
{
    uint64_t number = 0;
    int too_large = 0;

    if (*value == '\0') {
        return -1;
    }
    for (const char *p = value; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return -1;
        }
        /* Once above max, stop accumulating (so nothing wraps) but keep
         * checking that the rest are digits. */
        if (!too_large) {
            number = number * 10 + (uint64_t)(*p - '0');
            too_large = number > max;
        }
    }
    *number_p = number;
    return too_large ? 1 : 0;
}

static int setting_parse_seconds(const char *value, double *seconds_p)
{
    char *end = NULL;
    double seconds;

    errno = 0;
    seconds = strtod(value, &end);
    if (end == value) {
        return -1;
    }
    while (*end == ' ' || *end == '\t') {
        end++;
    }
    /* A trailing "s" ("30s"), since that is how the docs write durations. */
    if (*end == 's') {
        end++;
    }
    if (*end != '\0' || !isfinite(seconds) || (errno == ERANGE && seconds != 0)) {
        return -1;
    }
    *seconds_p = seconds;
    return 0;
}

static int setting_parse_bool(const char *value, int *flag_p)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(value, yes[i]) == 0) {
            *flag_p = 1;
            return 0;
        }
        if (strcasecmp(value, no[i]) == 0) {
            *flag_p = 0;
            return 0;
        }
    }
    return -1;
}

/* "64 to 1048576 KiB", "error, warn, ...": what a valid value looks like. */
static void setting_describe_valid(const setting_desc_t *desc, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    switch (desc->kind) {
    case SETTING_SIZE_KB:
        snprintf(buf, len, "a whole number of KiB from %.0f to %.0f", desc->min, desc->max);
        break;
    case SETTING_SIZE_KB_OR_AUTO:
        snprintf(buf, len, "a whole number of KiB from %.0f to %.0f or auto", desc->min,
                 desc->max);
        break;
    case SETTING_SECONDS:
        snprintf(buf, len, "a number of seconds from %.15g to %.15g", desc->min, desc->max);
        break;
    case SETTING_INT:
        snprintf(buf, len, "a whole number from %.0f to %.0f", desc->min, desc->max);
        break;
    case SETTING_BOOL:
        snprintf(buf, len, "1 or 0 (also true/false, yes/no, on/off)");
        break;
    case SETTING_PATH:
        snprintf(buf, len, "a path of at most %d bytes", TNT_SETTINGS_PATH_MAX - 1);
        break;
    case SETTING_CHOICE:
        used = (size_t)snprintf(buf, len, "one of ");
        for (const setting_choice_t *c = desc->choices; c->name != NULL && used < len; c++) {
            int w =
                snprintf(buf + used, len - used, "%s%s", c == desc->choices ? "" : ", ", c->name);
            used += w > 0 ? (size_t)w : 0;
        }
        break;
    }
}

/* Parses value into *field; on failure writes the whole message into msg and
 * returns -1. Logs nothing, so that the logger can use it for its own two
 * variables before it is configured. */
static int setting_parse(const setting_desc_t *desc, const char *value, void *field, char *msg,
                         size_t msglen)
{
    const char *problem = NULL;
    char valid[160];
    uint64_t number = 0;
    int rc;

    switch (desc->kind) {
    case SETTING_SIZE_KB_OR_AUTO:
    case SETTING_SIZE_KB:
    case SETTING_INT:
        if (desc->kind == SETTING_SIZE_KB_OR_AUTO && strcasecmp(value, "auto") == 0) {
            const size_t tune = TNT_SETTINGS_TUNE;
            memcpy(field, &tune, sizeof(tune));
            break;
        }
        rc = setting_parse_whole(value, (uint64_t)desc->max, &number);
        if (rc < 0) {
            problem = "is not valid";
        } else if (rc > 0 || (double)number < desc->min) {
            problem = "is out of range";
        } else if (desc->kind != SETTING_INT) {
            /* number <= desc->max <= 2^30, so the product fits. */
            size_t bytes = (size_t)number * 1024;
            memcpy(field, &bytes, sizeof(bytes));
        } else {
            memcpy(field, &number, sizeof(number));
        }
        break;
    case SETTING_SECONDS: {
        double seconds = 0;
        if (setting_parse_seconds(value, &seconds) != 0) {
            problem = "is not valid";
        } else if (seconds < desc->min || seconds > desc->max) {
            problem = "is out of range";
        } else {
            memcpy(field, &seconds, sizeof(seconds));
        }
        break;
    }
    case SETTING_BOOL: {
        int flag = 0;
        if (setting_parse_bool(value, &flag) != 0) {
            problem = "is not valid";
        } else {
            memcpy(field, &flag, sizeof(flag));
        }
        break;
    }
    case SETTING_PATH:
        if (strlen(value) >= TNT_SETTINGS_PATH_MAX) {
            problem = "is too long";
        } else {
            memcpy(field, value, strlen(value) + 1);
        }
        break;
    case SETTING_CHOICE: {
        const setting_choice_t *c = desc->choices;
        while (c->name != NULL && strcasecmp(c->name, value) != 0) {
            c++;
        }
        if (c->name == NULL) {
            problem = "is not valid";
        } else {
            memcpy(field, &c->value, sizeof(c->value));
        }
        break;
    }
    }
    if (problem == NULL) {
        return 0;
    }
    setting_describe_valid(desc, valid, sizeof(valid));
    snprintf(msg, msglen, "%s='%.64s' %s: expected %s%s%s (default %s); fix the value or unset %s",
             desc->name, value, problem, valid, desc->note != NULL ? ", " : "",
             desc->note != NULL ? desc->note : "",
             desc->default_value != NULL ? desc->default_value : "chosen by the job's layout",
             desc->name);
    return -1;
}

static void setting_set_default(const setting_desc_t *desc, tnt_settings_t *settings)
{
    void *field = (char *)settings + desc->offset;
    char msg[512];

    if (desc->default_value == NULL) {
        const size_t by_layout = TNT_SETTINGS_BY_LAYOUT;
        memcpy(field, &by_layout, sizeof(by_layout));
        return;
    }
    /* The defaults are constants that test_settings parses; they cannot fail. */
    (void)setting_parse(desc, desc->default_value, field, msg, sizeof(msg));
}

void tnt_settings_set_defaults(tnt_settings_t *settings)
{
    memset(settings, 0, sizeof(*settings));
    for (size_t i = 0; i < SETTINGS_COUNT; i++) {
        setting_set_default(&settings_table[i], settings);
    }
}

tnt_status_t tnt_settings_parse(tnt_settings_t *settings, const char *name, const char *value)
{
    const setting_desc_t *desc = setting_find(name);
    char msg[512];

    if (desc == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "settings: %s is not a libtnt variable (a libtnt bug)", name);
    }
    if (value == NULL || *value == '\0') {
        setting_set_default(desc, settings);
        return TNT_OK;
    }
    if (setting_parse(desc, value, (char *)settings + desc->offset, msg, sizeof(msg)) != 0) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s", msg);
    }
    return TNT_OK;
}

int tnt_settings_parse_quietly(tnt_settings_t *settings, const char *name, const char *value)
{
    const setting_desc_t *desc = setting_find(name);
    char msg[512];

    if (desc == NULL) {
        return -1;
    }
    if (value == NULL || *value == '\0') {
        setting_set_default(desc, settings);
        return 0;
    }
    return setting_parse(desc, value, (char *)settings + desc->offset, msg, sizeof(msg));
}

/* TNT_FUSION_THRESHOLD=auto and TNT_FUSION_THRESHOLD_KB=auto say the same;
 * either makes fusion_threshold_bytes TNT_SETTINGS_TUNE. Two values that
 * say different things (auto and a size, fixed and auto) are refused rather
 * than one silently winning. */
static tnt_status_t settings_resolve_fusion(tnt_settings_t *settings, const char *mode_value,
                                            const char *kb_value)
{
    const int mode_set = mode_value != NULL && *mode_value != '\0';
    const int kb_set = kb_value != NULL && *kb_value != '\0';
    const int kb_auto = settings->fusion_threshold_bytes == TNT_SETTINGS_TUNE;

    if (mode_set && kb_set && settings->fusion_threshold_tune != kb_auto) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "TNT_FUSION_THRESHOLD='%.16s' and TNT_FUSION_THRESHOLD_KB='%.32s' "
                               "contradict each other: set one of them (TNT_FUSION_THRESHOLD=auto "
                               "or TNT_FUSION_THRESHOLD_KB=auto to tune the bucket size, "
                               "TNT_FUSION_THRESHOLD_KB=<KiB> to fix it) and unset the other",
                               mode_value, kb_value);
    }
    if (settings->fusion_threshold_tune) {
        settings->fusion_threshold_bytes = TNT_SETTINGS_TUNE;
    }
    settings->fusion_threshold_tune = settings->fusion_threshold_bytes == TNT_SETTINGS_TUNE;
    return TNT_OK;
}

tnt_status_t tnt_settings_load(tnt_settings_t *settings)
{
    tnt_status_t first = TNT_OK;
    char first_message[1024] = "";
    int first_printed = 0;
    tnt_settings_t parsed;

    tnt_settings_set_defaults(&parsed);
    /* Every bad value is reported, not only the first, so that one run
     * shows everything there is to fix. */
    for (size_t i = 0; i < SETTINGS_COUNT; i++) {
        const char *name = settings_table[i].name;
        tnt_status_t status = tnt_settings_parse(&parsed, name, getenv(name));
        if (status != TNT_OK && first == TNT_OK) {
            first = status;
            snprintf(first_message, sizeof(first_message), "%s", tnt_error_message());
            first_printed = tnt_error_printed();
        }
    }
    if (first != TNT_OK) {
        tnt_error_restore(first_message, first_printed);
        return first;
    }
    first = settings_resolve_fusion(&parsed, getenv("TNT_FUSION_THRESHOLD"),
                                    getenv("TNT_FUSION_THRESHOLD_KB"));
    if (first != TNT_OK) {
        return first;
    }
    *settings = parsed;
    return TNT_OK;
}

tnt_status_t tnt_settings_create(tnt_settings_t **settings_p)
{
    tnt_settings_t *settings = malloc(sizeof(*settings));
    tnt_status_t status;

    if (settings == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "settings: out of memory");
    }
    status = tnt_settings_load(settings);
    if (status != TNT_OK) {
        free(settings);
        return status;
    }
    *settings_p = settings;
    return TNT_OK;
}

void tnt_settings_destroy(tnt_settings_t *settings)
{
    free(settings);
}

size_t tnt_settings_count(void)
{
    return SETTINGS_COUNT;
}

const char *tnt_settings_name(size_t index)
{
    return index < SETTINGS_COUNT ? settings_table[index].name : NULL;
}

int tnt_settings_describe(size_t index, char *buf, size_t len)
{
    static const char *const kinds[] = { [SETTING_SIZE_KB] = "size_kb",
                                         [SETTING_SIZE_KB_OR_AUTO] = "size_kb",
                                         [SETTING_SECONDS] = "seconds",
                                         [SETTING_CHOICE] = "choice",
                                         [SETTING_BOOL] = "bool",
                                         [SETTING_INT] = "int",
                                         [SETTING_PATH] = "path" };
    if (index >= SETTINGS_COUNT || len == 0) {
        return -1;
    }
    const setting_desc_t *d = &settings_table[index];
    int used =
        snprintf(buf, len, "%s|%s|%s|%.17g|%.17g|", d->name,
                 d->default_value != NULL ? d->default_value : "", kinds[d->kind], d->min, d->max);
    for (const setting_choice_t *c = d->choices; c != NULL && c->name != NULL; c++) {
        if (used < 0 || (size_t)used >= len) {
            break;
        }
        used +=
            snprintf(buf + used, len - (size_t)used, "%s%s", c == d->choices ? "" : ",", c->name);
    }
    return 0;
}
