/*
 * Who is at the other end of a PMIx connection, as the kernel sees it.
 *
 * libpmix 4.2 serves its clients over TCP on 127.0.0.1, and its psec/native
 * module believes the uid a client writes into its handshake, so any local
 * user who finds the port can pose as a rank. The kernel, however, knows
 * which process holds the client's end of every loopback connection:
 * /proc/net/tcp names the socket's inode and /proc/<pid>/fd names its holders.
 * The server's upcalls (server.c) use these functions to admit only the
 * processes this launcher started.
 *
 * Everything here reads /proc and this process's own sockets; nothing
 * touches libpmix's data structures.
 */
#ifndef TNT_LAUNCHER_ADMIT_H
#define TNT_LAUNCHER_ADMIT_H

#include <stddef.h>
#include <sys/types.h>

/*
 * The connection libpmix is handshaking with now, for use from inside its
 * connection handler (the client_connected and tool_connected upcalls): the
 * one TCP socket of this process that is connected to the port of one of
 * its own listening sockets, is not one of the nknown inodes in known (the
 * connections admitted before), and from which this process has already read
 * (libpmix reads the whole handshake before the upcall; connections queued
 * behind it have had nothing read). Returns 0 with its fd and socket inode,
 * or -1 with the reason in why.
 */
int tnt_admit_handshaking_socket(const unsigned long *known, size_t nknown, int *fd_out,
                                 unsigned long *inode_out, char *why, size_t len);

/*
 * The client's end of fd, a TCP connection within this host: the inode of
 * the client's socket and the uid that owns it, both from the kernel's
 * /proc/net/tcp (or tcp6). Returns 0, or -1 with the reason in why (the
 * client already closed its end, or it is not on this host).
 */
int tnt_admit_client_socket(int fd, unsigned long *inode_out, unsigned *uid_out, char *why,
                            size_t len);

/* 1 when process root or one of its descendants holds socket inode open,
 * 0 otherwise (also when /proc cannot tell). */
int tnt_admit_tree_holds(pid_t root, unsigned long inode);

/* A process that holds socket inode open, for messages; -1 when none is
 * visible (another user's processes are visible only to root). */
pid_t tnt_admit_holder(unsigned long inode);

#endif
