/*
 * The hang doctor: when a collective stops making progress, every rank
 * reaches the same verdict about which rank is to blame, warns after
 * TNT_STALL_WARN seconds and fails the collective after TNT_TIMEOUT.
 *
 * Each rank publishes a small progress slot (collective sequence number and
 * kind, fusion step and bucket, whether it is inside the collective, a
 * heartbeat that only its wait loops advance, a pause flag) in a per-node
 * board: a shared-memory segment of its own (/tnt-<hash>-doctor-<pid>), so
 * node-mates can read the slot of a rank that is stopped or stuck in user
 * code. Waiting ranks exchange their node's board across nodes over a UCX
 * tag range no collective uses (coll/multinode.h side messages), so every
 * waiting rank ends up with the same table and computes the same verdict:
 * the rank that is not waiting and is furthest behind (lowest sequence
 * number, then lowest rank), else the lowest rank nobody reports on.
 *
 * Entering and leaving a collective costs two relaxed stores; nothing else
 * happens until a wait has lasted half a second.
 */
#ifndef TNT_COLL_DOCTOR_H
#define TNT_COLL_DOCTOR_H

#include "comm/comm.h"

#include <stdint.h>

typedef struct tnt_doctor tnt_doctor_t;

/* The side message a node's reporter sends to every rank off its node: the
 * node's board, one entry per local rank (the lowest waiting local rank
 * sends it, once a second). The transport adds the communicator's cookie
 * and tells the receiver which rank sent it; the receiver takes only the
 * entries for ranks on the sender's node. Here, not in doctor.c, because
 * the integration test forges such messages. */
#define TNT_DOCTOR_MSG_MAGIC 0x54444f43u
#define TNT_DOCTOR_MSG_MAX   128 /* local ranks per message */
struct tnt_doctor_entry {
    int32_t rank;
    uint32_t beat_age_ms; /* UINT32_MAX: never beat */
    uint64_t seq;         /* last collective entered */
    uint64_t info;        /* INFO_* of coll/verdict.h */
};
struct tnt_doctor_msg {
    uint32_t magic;
    uint32_t count;
    struct tnt_doctor_entry entries[TNT_DOCTOR_MSG_MAX];
};

/* What a receiver does with one entry of a board message. */
typedef enum {
    TNT_DOCTOR_ENTRY_TAKE,      /* a rank on the sender's node, not on mine: believed */
    TNT_DOCTOR_ENTRY_SKIP,      /* no such rank, or one on my node (my board is fresher) */
    TNT_DOCTOR_ENTRY_OVERREACH, /* a rank on another node than the sender's: a lie, logged */
} tnt_doctor_entry_use_t;

/* Checks a board message of bytes bytes (what follows the transport's
 * header) that rank sender sent to a rank on node my_node of a communicator
 * of size ranks (node_of_rank: size entries). Returns -1 for a malformed
 * message (shorter than its count says, wrong magic, count above
 * TNT_DOCTOR_MSG_MAX, sender not a rank), else its count, with use[k]
 * saying what to do with entries[k]. Reads only the bytes it was given.
 * Pure (coll/doctor_msg.c): the doctor calls it on every message it
 * receives, tests/fuzz/fuzz_doctor_msg.c on arbitrary bytes. */
int tnt_doctor_decode(const struct tnt_doctor_msg *msg, size_t bytes, int sender, int size,
                      const int *node_of_rank, int my_node,
                      tnt_doctor_entry_use_t use[TNT_DOCTOR_MSG_MAX]);

typedef enum {
    TNT_DOCTOR_ALLREDUCE = 1,
    TNT_DOCTOR_BROADCAST,
    TNT_DOCTOR_ALLGATHER,
    TNT_DOCTOR_BARRIER,
    TNT_DOCTOR_GATHER,
    TNT_DOCTOR_SCATTER,
    TNT_DOCTOR_ALLTOALL, /* 7: the info word's three kind bits are full */
} tnt_doctor_kind_t;

/* Not collective. pids and hosts: size entries (every rank's pid and host
 * name, from tnt_init's exchange), copied. Sets comm->doctor and
 * comm->watch; the board is private until tnt_doctor_attach_board. */
tnt_status_t tnt_doctor_create(tnt_comm_t *comm, const int64_t *pids, const char *const *hosts);
/* The bytes the node's board needs: what tnt_init reserves at the end of
 * the shm segment (tnt_shm_params_t.extra_bytes). */
size_t tnt_doctor_board_bytes(int local_size);
/* After the shm transport is up: the board moves into the segment's
 * reserved bytes (tnt_shm_extra), which every local rank attached to only
 * after checking the segment, so the board needs no name of its own. The
 * segment must outlive the doctor's use of it (tnt_finalize destroys the
 * doctor after the transport, but the doctor no longer reads the board
 * once the progress thread has stopped). */
void tnt_doctor_attach_board(tnt_doctor_t *doctor, void *shared);
/* Drains side messages still queued (before the network goes away). */
void tnt_doctor_quiesce(tnt_doctor_t *doctor);
void tnt_doctor_destroy(tnt_doctor_t *doctor);

/* Collective bookkeeping (coll/coll.c), on the thread running collectives. */
void tnt_doctor_enter(tnt_doctor_t *doctor, uint64_t seq, tnt_doctor_kind_t kind);
void tnt_doctor_leave(tnt_doctor_t *doctor);
/* Waiting again in the last collective entered (tnt_finalize settling an
 * eager call that already returned): peers and verdicts count this rank as
 * waiting in it, as they did while it ran. */
void tnt_doctor_reenter(tnt_doctor_t *doctor);
/* The fusion engine names the step and bucket of its next allreduce. */
void tnt_doctor_note_fusion(tnt_doctor_t *doctor, uint64_t step, uint32_t bucket);

/* A long wait on purpose (any thread; nests): while paused, this rank
 * neither warns nor times out, and peers do not blame it. */
void tnt_doctor_pause(tnt_doctor_t *doctor);
void tnt_doctor_resume(tnt_doctor_t *doctor);

/* Installs a handler for signo that writes one line about where this rank
 * is (async-signal-safe); a handler already installed is chained. */
tnt_status_t tnt_doctor_report_on_signal(tnt_doctor_t *doctor, int signo);
/* The same line into buf (for tests and the Python API). */
void tnt_doctor_where(tnt_doctor_t *doctor, char *buf, size_t len);

#endif
