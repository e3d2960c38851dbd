/*
 * The hang doctor's verdict rule (coll/doctor.c applies it), pure: from a
 * table of what every rank was last seen doing, who holds the job up, in
 * which collective, and the one line every rank prints. The rule:
 *   - "waiting": inside a collective with a fresh heartbeat (or given up);
 *   - every other rank with a known report is a suspect: between
 *     collectives (it has not entered the next one), or stopped inside one;
 *     the suspect with the lowest sequence number, then the lowest rank, is
 *     named;
 *   - with no known suspect, the lowest rank nobody ever reported on is
 *     named (its whole node is silent);
 *   - a suspect that declared a long wait (tnt_stall_pause) is not blamed;
 *   - when every rank waits, the line names where each group waits;
 *   - before all of that: when the rank applying the rule heard from none
 *     of at least two other nodes during this wait while its own node's
 *     ranks all wait, its own node is the one cut off (one broken link is
 *     likelier than all other nodes going silent at once), and the line
 *     names this node. The nodes still connected to each other find it
 *     silent and name it too. With two nodes either side sees the other
 *     go silent, so the usual rule applies.
 * The text carries only the table's values and the given threshold, so
 * every rank that applies the rule to the same table prints the same line.
 */
#ifndef TNT_COLL_VERDICT_H
#define TNT_COLL_VERDICT_H

#include <stddef.h>
#include <stdint.h>

/* A rank's info word (coll/doctor.c writes it on the board): bit 0 inside a
 * collective, bit 1 paused, bits 2-4 kind, bit 5 gave up (timed out),
 * bits 6-25 bucket + 1 (0: none), bits 26-63 fusion step + 1 (0: none). */
#define INFO_IN          1ull
#define INFO_PAUSED      2ull
#define INFO_GAVE_UP     32ull /* timed out: counts as waiting from then on */
#define INFO_KIND(i)     ((unsigned)(((i) >> 2) & 0x7))
#define INFO_BUCKET(i)   ((i) >> 6 & 0xfffffull)
#define INFO_STEP(i)     ((i) >> 26)
#define INFO_FUSION_MASK (~0ull << 6)

/* What is known of one rank. */
struct tnt_verdict_rank {
    int known;        /* some report of it arrived */
    int waiting;      /* inside a collective with a fresh heartbeat, or gave up */
    uint64_t seq;     /* its collective sequence number */
    uint64_t info;    /* INFO_* word */
    const char *host; /* for the text */
    int64_t pid;
    int node;  /* its node's index */
    int local; /* on the node of the rank applying the rule */
    int heard; /* a report of it arrived during the wait being judged (local: 1) */
};

/* Writes the verdict into verdict (len bytes) and the lowest waiting rank
 * (the one that states it; -1 if none) into *reporter_p; returns 0 when
 * nobody is to blame (the suspect paused), 1 otherwise. threshold_s and
 * what ("for", "within") go into the text. */
int tnt_verdict_rule(const struct tnt_verdict_rank *view, int size, double threshold_s,
                     const char *what, char *verdict, size_t len, int *reporter_p);
/* "allreduce #12 (step 3, bucket 1)" */
void tnt_verdict_describe(uint64_t seq, uint64_t info, char *buf, size_t len);
/* snprintf whose truncation is intended (long lists end in "..."). */
void tnt_verdict_format(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "allreduce", "broadcast", ...: the name of a tnt_doctor_kind_t. */
const char *tnt_doctor_kind_name(unsigned kind);

#endif
