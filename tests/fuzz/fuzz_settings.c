/*
 * libFuzzer harness: the TNT_* settings parser (libtnt/src/util/settings.c),
 * which reads every libtnt variable from the environment of a job.
 *
 * Input: the first byte picks the variable (index modulo the table's size
 * plus one; the extra index is a name the table lacks), the rest is the
 * value, up to the first NUL as in an environment string. Besides memory
 * errors and undefined behaviour (ASan, UBSan), the properties checked are
 * the header's promises: tnt_settings_parse and tnt_settings_parse_quietly
 * agree; a rejected value leaves the settings unchanged and the error names
 * the variable; an accepted value parses to the same settings again.
 */
#include "fuzz_check.h"

#include "util/log.h"
#include "util/settings.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int devnull_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* tnt_settings_parse logs every rejected value as an error; thousands
     * of lines a second would slow the fuzzer down to the terminal's pace. */
    fuzz_report_fd = dup(2);
    devnull_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

/* tnt_settings_parse with stderr pointed at /dev/null. */
static tnt_status_t parse_silenced(tnt_settings_t *settings, const char *name, const char *value)
{
    tnt_status_t status;

    if (devnull_fd >= 0) {
        dup2(devnull_fd, 2);
    }
    status = tnt_settings_parse(settings, name, value);
    if (fuzz_report_fd >= 0) {
        dup2(fuzz_report_fd, 2);
    }
    return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tnt_settings_t before, quiet, loud, again;
    size_t count = tnt_settings_count();
    const char *name;
    char *value;
    int rc_quiet;
    tnt_status_t rc_loud;

    if (size == 0) {
        return 0;
    }
    size_t index = data[0] % (count + 1);
    name = index < count ? tnt_settings_name(index) : "TNT_NOT_A_SETTING";
    /* Exactly the bytes of the value and its NUL, so ASan sees any read
     * past the end of the string. */
    value = malloc(size);
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';

    /* The structs are copied with memcpy and compared with memcmp: padding
     * included, set once by tnt_settings_set_defaults's memset. */
    tnt_settings_set_defaults(&before);
    memcpy(&quiet, &before, sizeof(before));
    memcpy(&loud, &before, sizeof(before));
    tnt_error_clear();
    rc_quiet = tnt_settings_parse_quietly(&quiet, name, value);
    rc_loud = parse_silenced(&loud, name, value);

    FUZZ_CHECK((rc_quiet == 0) == (rc_loud == TNT_OK), "%s='%s': quiet %d, loud %d", name, value,
               rc_quiet, (int)rc_loud);
    FUZZ_CHECK(memcmp(&quiet, &loud, sizeof(quiet)) == 0,
               "%s='%s': the two parsers stored different settings", name, value);
    if (rc_loud != TNT_OK) {
        FUZZ_CHECK(rc_loud == TNT_ERR_INVALID_ARG, "%s='%s': status %d", name, value, (int)rc_loud);
        FUZZ_CHECK(memcmp(&loud, &before, sizeof(loud)) == 0,
                   "%s='%s' was rejected but changed the settings", name, value);
        FUZZ_CHECK(strstr(tnt_error_message(), name) != NULL,
                   "%s='%s': the error does not name the variable: %s", name, value,
                   tnt_error_message());
    } else {
        FUZZ_CHECK(index < count, "%s was accepted but is not in the table", name);
        memcpy(&again, &loud, sizeof(loud));
        FUZZ_CHECK(tnt_settings_parse_quietly(&again, name, value) == 0 &&
                       memcmp(&again, &loud, sizeof(loud)) == 0,
                   "%s='%s' parsed once but not twice to the same settings", name, value);
    }
    free(value);
    return 0;
}
