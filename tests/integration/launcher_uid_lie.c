/*
 * LD_PRELOAD shim for the launcher's admission tests: the process claims to
 * be root (uid and gid 0) to everything that asks through libc, which is
 * what libpmix's psec/native module writes into its TCP handshake. The
 * kernel still knows better, and that is what the launcher checks.
 */
#include <sys/types.h>
#include <unistd.h>

/* The tree builds with hidden visibility; these must interpose libc's. */
#define EXPORT __attribute__((visibility("default")))

EXPORT uid_t getuid(void)
{
    return 0;
}

EXPORT uid_t geteuid(void)
{
    return 0;
}

EXPORT gid_t getgid(void)
{
    return 0;
}

EXPORT gid_t getegid(void)
{
    return 0;
}
