/*
 * Step's first node and MASTER_PORT; see torch_env.h.
 */
#include "torch_env.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void torch_env_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void torch_env_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

int tnt_spank_first_node(const char *nodelist, char *out, size_t len, char *errbuf, size_t errlen)
{
    const char *p = nodelist;
    char name[256]; /* longer than any host name (HOST_NAME_MAX is 64) */
    size_t n = 0;

    if (p == NULL) {
        p = "";
    }
    while (*p == ' ' || *p == '\t' || *p == ',') {
        p++;
    }
    /* The first entry ends at a separator outside brackets. */
    while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t') {
        const char *take = p;
        size_t take_len = 1;

        if (*p == ']') {
            torch_env_err(errbuf, errlen, "node list '%s' has a ']' without '['", nodelist);
            return -1;
        }
        if (*p == '[') {
            const char *close = strchr(p, ']');

            if (close == NULL) {
                torch_env_err(errbuf, errlen, "node list '%s' has a '[' without ']'", nodelist);
                return -1;
            }
            /* "[07,09-12]" -> "07": the first range's first number. */
            take = p + 1;
            take_len = strspn(take, "0123456789");
            if (take_len == 0 ||
                (take[take_len] != ',' && take[take_len] != '-' && take[take_len] != ']')) {
                torch_env_err(errbuf, errlen,
                              "node list '%s' has a bracket that does not start with a number",
                              nodelist);
                return -1;
            }
            p = close + 1;
        } else {
            p++;
        }
        if (n + take_len >= sizeof name) {
            torch_env_err(errbuf, errlen, "the first node of '%s' is longer than %zu characters",
                          nodelist, sizeof name - 1);
            return -1;
        }
        memcpy(name + n, take, take_len);
        n += take_len;
    }
    if (n == 0) {
        torch_env_err(errbuf, errlen, "node list '%s' names no node", nodelist);
        return -1;
    }
    name[n] = '\0';
    if (n >= len) {
        torch_env_err(errbuf, errlen, "the first node of '%s' is longer than %zu characters",
                      nodelist, len - 1);
        return -1;
    }
    memcpy(out, name, n + 1);
    return 0;
}

int tnt_spank_master_port(uint32_t job_id, uint32_t step_id, int low, int high)
{
    /* 64 bits: job ids reach 2^26 and more, times 31 overflows 32 bits. */
    uint64_t key = (uint64_t)job_id * 31u + step_id;

    return low + (int)(key % (uint64_t)(high - low + 1));
}
