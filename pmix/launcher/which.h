/*
 * Finding a program the way execvp will, so the launcher can refuse a job
 * (or the mpirun hand-off) before it starts anything.
 */
#ifndef TNT_LAUNCHER_WHICH_H
#define TNT_LAUNCHER_WHICH_H

#include <stddef.h>

/* Is `name` executable, directly or through PATH? Writes the path found
 * (or the last one tried) to `path`. Returns 0, or -1; for a name with a
 * '/', errno then says why. */
int tnt_launch_find_executable(const char *name, char *path, size_t len);

#endif
