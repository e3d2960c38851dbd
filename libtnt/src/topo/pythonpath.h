/*
 * The task's PYTHONPATH, shared by the `tarantella` launcher and the SPANK
 * plugin: both put the tarantella package they were built with first on
 * the tasks' PYTHONPATH, so a package that is not installed system-wide
 * still imports (docs/launcher.md, docs/user-guide-slurm.md). Each finds
 * the package relative to its own file (the launcher binary, the plugin's
 * .so), from the relative directories CMake records for the build tree and
 * the install tree. Pure string and path code: no logging, no environment
 * writes, callers decide.
 */
#ifndef TNT_TOPO_PYTHONPATH_H
#define TNT_TOPO_PYTHONPATH_H

#include <stddef.h>

/*
 * The first of the ':'-separated directories in reldirs (relative to
 * base_dir, or absolute) that holds tarantella/__init__.py, resolved
 * (realpath). 0 with the path in out, or -1 when none does (a build without
 * the Python package, a binary copied elsewhere) or out is too small.
 */
int tnt_pythonpath_find_package(const char *base_dir, const char *reldirs, char *out, size_t len);

/* Is dir (resolved) one of the ':'-separated entries of list, once each is
 * resolved? Entries that do not exist are skipped. */
int tnt_pythonpath_in_list(const char *dir, const char *list);

/*
 * The new PYTHONPATH when pkg_dir must be on it: pkg_dir, then the current
 * value (NULL or "" when unset), so the user's entries stay and keep their
 * order. Returns NULL when pkg_dir is already one of current's entries
 * (nothing to change) or when out of memory (*oom set to 1); otherwise a
 * malloc'd string.
 */
char *tnt_pythonpath_prepend(const char *pkg_dir, const char *current, int *oom);

#endif
