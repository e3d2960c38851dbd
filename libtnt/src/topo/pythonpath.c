/* The task's PYTHONPATH (pythonpath.h). */
#include "pythonpath.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tnt_pythonpath_find_package(const char *base_dir, const char *reldirs, char *out, size_t len)
{
    char candidate[PATH_MAX + 64], resolved[PATH_MAX], probe[PATH_MAX + 32];
    const char *rel = reldirs;

    while (*rel != '\0') {
        const char *colon = strchr(rel, ':');
        int m = colon != NULL ? (int)(colon - rel) : (int)strlen(rel);

        if (m > 0) {
            if (rel[0] == '/') {
                snprintf(candidate, sizeof candidate, "%.*s", m, rel);
            } else {
                snprintf(candidate, sizeof candidate, "%s/%.*s", base_dir, m, rel);
            }
            if (realpath(candidate, resolved) != NULL) {
                snprintf(probe, sizeof probe, "%s/tarantella/__init__.py", resolved);
                if (access(probe, R_OK) == 0 && strlen(resolved) < len) {
                    strcpy(out, resolved);
                    return 0;
                }
            }
        }
        rel += m + (colon != NULL ? 1 : 0);
    }
    return -1;
}

int tnt_pythonpath_in_list(const char *dir, const char *list)
{
    char entry[PATH_MAX], resolved[PATH_MAX];

    while (*list != '\0') {
        const char *colon = strchr(list, ':');
        size_t n = colon != NULL ? (size_t)(colon - list) : strlen(list);

        if (n > 0 && n < sizeof entry) {
            memcpy(entry, list, n);
            entry[n] = '\0';
            if (realpath(entry, resolved) != NULL && strcmp(resolved, dir) == 0) {
                return 1;
            }
        }
        list += n + (colon != NULL ? 1 : 0);
    }
    return 0;
}

char *tnt_pythonpath_prepend(const char *pkg_dir, const char *current, int *oom)
{
    size_t len = strlen(pkg_dir);
    const char *p = current;
    char *value;

    *oom = 0;
    while (p != NULL && *p != '\0') {
        const char *colon = strchr(p, ':');
        size_t n = colon != NULL ? (size_t)(colon - p) : strlen(p);

        /* "dir" and "dir/" name the same entry. */
        if ((n == len || (n == len + 1 && p[len] == '/')) && strncmp(p, pkg_dir, len) == 0) {
            return NULL;
        }
        p = colon != NULL ? colon + 1 : NULL;
    }
    value = malloc(len + (current != NULL ? strlen(current) : 0) + 2);
    if (value == NULL) {
        *oom = 1;
        return NULL;
    }
    if (current != NULL && *current != '\0') {
        sprintf(value, "%s:%s", pkg_dir, current);
    } else {
        strcpy(value, pkg_dir);
    }
    return value;
}
