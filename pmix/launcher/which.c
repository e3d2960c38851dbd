#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "which.h"

int tnt_launch_find_executable(const char *name, char *path, size_t len)
{
    const char *dirs = getenv("PATH");

    if (name == NULL || name[0] == '\0') {
        return -1;
    }
    if (strchr(name, '/') != NULL) {
        snprintf(path, len, "%s", name);
        return access(name, X_OK) == 0 ? 0 : -1;
    }
    if (dirs == NULL) {
        dirs = "/usr/local/bin:/usr/bin:/bin";
    }
    while (*dirs != '\0') {
        const char *end = strchr(dirs, ':');
        size_t dlen = end != NULL ? (size_t)(end - dirs) : strlen(dirs);
        struct stat st;

        snprintf(path, len, "%.*s/%s", (int)dlen, dlen > 0 ? dirs : ".", name);
        if (access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            return 0;
        }
        dirs += dlen;
        if (*dirs == ':') {
            dirs++;
        }
    }
    return -1;
}
