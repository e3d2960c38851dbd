/* Kernel-reported peers of PMIx connections; see admit.h. */
#include "admit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/sockios.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (glibc's lacks it) */
#include <netinet/in.h>

enum { MAX_LISTENERS = 8 };

static int is_tcp_socket(int fd)
{
    int value = 0;
    socklen_t len = sizeof value;

    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &value, &len) != 0 || value != IPPROTO_TCP) {
        return 0;
    }
    len = sizeof value;
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) == 0 &&
           (value == AF_INET || value == AF_INET6);
}

static int is_listening(int fd)
{
    int value = 0;
    socklen_t len = sizeof value;

    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) == 0 && value != 0;
}

static int local_port(int fd)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;

    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        return -1;
    }
    if (addr.ss_family == AF_INET) {
        return ntohs(((struct sockaddr_in *)&addr)->sin_port);
    }
    if (addr.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
    }
    return -1;
}

/*
 * Bytes this process has read from a connected TCP socket: what the kernel
 * received in order (tcpi_bytes_received) less what is still queued unread
 * (SIOCINQ). A FIN counts in the first and not in the second, so a peer that
 * sent data and closed shows 1 before anything is read: "read" means > 1.
 */
static long long bytes_read(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int unread = 0;

    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received ||
        ioctl(fd, SIOCINQ, &unread) != 0) {
        return -1;
    }
    return (long long)ti.tcpi_bytes_received - unread;
}

int tnt_admit_handshaking_socket(const unsigned long *known, size_t nknown, int *fd_out,
                                 unsigned long *inode_out, char *why, size_t len)
{
    int ports[MAX_LISTENERS], nports = 0, found_fd = -1, nfound = 0;
    unsigned long found_inode = 0;
    struct dirent *entry;
    DIR *dir;

    /* Pass 1: the ports this process listens on (libpmix's listener). */
    dir = opendir("/proc/self/fd");
    if (dir == NULL) {
        snprintf(why, len, "cannot read /proc/self/fd: %s", strerror(errno));
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        int fd = atoi(entry->d_name), port;

        if (entry->d_name[0] == '.' || fd == dirfd(dir) || !is_tcp_socket(fd) ||
            !is_listening(fd)) {
            continue;
        }
        port = local_port(fd);
        if (port > 0 && nports < MAX_LISTENERS) {
            ports[nports++] = port;
        }
    }
    /* Pass 2: connections accepted on those ports, not admitted before,
     * already read from. */
    rewinddir(dir);
    while ((entry = readdir(dir)) != NULL) {
        int fd = atoi(entry->d_name), port, ours = 0, admitted = 0;
        struct stat st;

        if (entry->d_name[0] == '.' || fd == dirfd(dir) || !is_tcp_socket(fd) || is_listening(fd) ||
            fstat(fd, &st) != 0) {
            continue;
        }
        port = local_port(fd);
        for (int i = 0; i < nports; i++) {
            ours |= port == ports[i];
        }
        for (size_t i = 0; i < nknown; i++) {
            admitted |= known[i] == (unsigned long)st.st_ino;
        }
        if (!ours || admitted || bytes_read(fd) <= 1) {
            continue;
        }
        found_fd = fd;
        found_inode = (unsigned long)st.st_ino;
        nfound++;
    }
    closedir(dir);
    if (nports == 0) {
        snprintf(why, len, "this process has no listening TCP socket");
        return -1;
    }
    if (nfound != 1) {
        snprintf(why, len, "%d connections on the PMIx port are mid-handshake, expected 1", nfound);
        return -1;
    }
    *fd_out = found_fd;
    *inode_out = found_inode;
    return 0;
}

/* One address of /proc/net/tcp{,6} ("0100007F" or 32 hex digits: the
 * address's 32-bit words as the kernel stores them) against addr. */
static int same_address(const char *hex, const struct sockaddr_storage *addr)
{
    uint32_t words[4];
    size_t n = strlen(hex);

    if (n != 8 && n != 32) {
        return 0;
    }
    for (size_t w = 0; w < n / 8; w++) {
        char part[9];

        memcpy(part, hex + 8 * w, 8);
        part[8] = '\0';
        words[w] = (uint32_t)strtoul(part, NULL, 16);
    }
    if (addr->ss_family == AF_INET && n == 8) {
        return words[0] == ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
    }
    if (addr->ss_family == AF_INET6 && n == 32) {
        return memcmp(words, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16) == 0;
    }
    return 0;
}

static int port_of(const struct sockaddr_storage *addr)
{
    return ntohs(addr->ss_family == AF_INET ? ((const struct sockaddr_in *)addr)->sin_port
                                            : ((const struct sockaddr_in6 *)addr)->sin6_port);
}

int tnt_admit_client_socket(int fd, unsigned long *inode_out, unsigned *uid_out, char *why,
                            size_t len)
{
    struct sockaddr_storage self, peer;
    socklen_t self_len = sizeof self, peer_len = sizeof peer;
    char line[512];
    FILE *table;
    int ret = -1;

    if (getsockname(fd, (struct sockaddr *)&self, &self_len) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0) {
        snprintf(why, len, "the connection is gone (%s)", strerror(errno));
        return -1;
    }
    /* The client's socket is the entry whose local end is our peer and
     * whose remote end is us. */
    table = fopen(self.ss_family == AF_INET ? "/proc/self/net/tcp" : "/proc/self/net/tcp6", "r");
    if (table == NULL) {
        snprintf(why, len, "cannot read the kernel's TCP table: %s", strerror(errno));
        return -1;
    }
    snprintf(why, len, "the client's end of the connection is not on this host");
    while (fgets(line, sizeof line, table) != NULL) {
        char local[40], remote[40];
        unsigned lport, rport, uid;
        unsigned long inode;

        if (sscanf(line,
                   " %*d: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %*x %*x:%*x %*x:%*x %*x %u %*d %lu",
                   local, &lport, remote, &rport, &uid, &inode) != 6) {
            continue;
        }
        if ((int)lport != port_of(&peer) || (int)rport != port_of(&self) ||
            !same_address(local, &peer) || !same_address(remote, &self)) {
            continue;
        }
        if (inode == 0) {
            /* No process holds it any more (closed, lingering). */
            snprintf(why, len, "the client closed its end of the connection");
            break;
        }
        *inode_out = inode;
        *uid_out = uid;
        ret = 0;
        break;
    }
    fclose(table);
    return ret;
}

/* Does /proc/<pid>/fd hold socket:[inode]? */
static int process_holds(const char *pid, unsigned long inode)
{
    char path[64], target[64], want[64];
    struct dirent *entry;
    int found = 0;
    DIR *dir;

    snprintf(path, sizeof path, "/proc/%s/fd", pid);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    dir = opendir(path);
    if (dir == NULL) {
        return 0; /* gone, or another user's process */
    }
    while (!found && (entry = readdir(dir)) != NULL) {
        ssize_t n;

        if (entry->d_name[0] == '.') {
            continue;
        }
        n = readlinkat(dirfd(dir), entry->d_name, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strcmp(target, want) == 0;
        }
    }
    closedir(dir);
    return found;
}

/* The parent of process pid (a /proc entry name), or -1. */
static pid_t parent_of(const char *pid)
{
    char path[64], buf[1024], *paren;
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
    paren = strrchr(buf, ')');
    if (paren == NULL) {
        return -1;
    }
    return (pid_t)strtol(paren + 3, NULL, 10);
}

struct proc_entry {
    pid_t pid, parent;
};

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc_entry *)a)->pid, y = ((const struct proc_entry *)b)->pid;

    return (x > y) - (x < y);
}

/* Is the process at procs[i] root or a descendant of it? Walks up the
 * parent chain in the sorted snapshot (bounded, in case of a cycle made of
 * pids reused between reads). */
static int descends_from(const struct proc_entry *procs, size_t n, size_t i, pid_t root)
{
    const struct proc_entry *cur = &procs[i];

    for (int depth = 0; cur != NULL && depth < 1024; depth++) {
        struct proc_entry key = { .pid = cur->parent };

        if (cur->pid == root) {
            return 1;
        }
        if (cur->parent <= 1) {
            return 0;
        }
        cur = bsearch(&key, procs, n, sizeof *procs, by_pid);
    }
    return 0;
}

int tnt_admit_tree_holds(pid_t root, unsigned long inode)
{
    struct proc_entry *procs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *entry;
    int found = 0;
    DIR *proc;

    if (root <= 0) {
        return 0;
    }
    /* One snapshot of the process table, then the holders among root and
     * its descendants. */
    proc = opendir("/proc");
    if (proc == NULL) {
        return 0;
    }
    while ((entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
            continue;
        }
        if (n == cap) {
            size_t more = cap == 0 ? 512 : 2 * cap;
            struct proc_entry *p = realloc(procs, more * sizeof *p);

            if (p == NULL) {
                goto out;
            }
            procs = p;
            cap = more;
        }
        procs[n].pid = (pid_t)atol(entry->d_name);
        procs[n].parent = parent_of(entry->d_name);
        n++;
    }
    qsort(procs, n, sizeof *procs, by_pid);
    for (size_t i = 0; i < n && !found; i++) {
        char name[24];

        if (descends_from(procs, n, i, root)) {
            snprintf(name, sizeof name, "%ld", (long)procs[i].pid);
            found = process_holds(name, inode);
        }
    }
out:
    closedir(proc);
    free(procs);
    return found;
}

pid_t tnt_admit_holder(unsigned long inode)
{
    struct dirent *entry;
    pid_t holder = -1;
    DIR *proc = opendir("/proc");

    if (proc == NULL) {
        return -1;
    }
    while (holder < 0 && (entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' &&
            process_holds(entry->d_name, inode)) {
            holder = (pid_t)atol(entry->d_name);
        }
    }
    closedir(proc);
    return holder;
}
