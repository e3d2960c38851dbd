/*
 * The hang doctor's verdict rule: see verdict.h. Pure: no clock, no
 * communication, no globals; tests/unit/test_verdict.c drives it.
 */
#include "coll/verdict.h"

#include "coll/doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tnt_verdict_format(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= len && len > 4) {
        memcpy(buf + len - 4, "...", 4);
    }
}

const char *tnt_doctor_kind_name(unsigned kind)
{
    switch (kind) {
    case TNT_DOCTOR_ALLREDUCE:
        return "allreduce";
    case TNT_DOCTOR_BROADCAST:
        return "broadcast";
    case TNT_DOCTOR_ALLGATHER:
        return "allgather";
    case TNT_DOCTOR_BARRIER:
        return "barrier";
    case TNT_DOCTOR_GATHER:
        return "gather";
    case TNT_DOCTOR_SCATTER:
        return "scatter";
    case TNT_DOCTOR_ALLTOALL:
        return "alltoall";
    default:
        return "collective";
    }
}

/* Appends "0,2-5,7" for the ranks with flag set (at most len bytes). */
static void format_ranks(const unsigned char *flag, int size, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < size; r++) {
        if (!flag[r]) {
            continue;
        }
        int end = r;
        while (end + 1 < size && flag[end + 1]) {
            end++;
        }
        int n = end == r ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", r)
                         : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", r, end);
        if (n < 0 || (size_t)n >= len - used) {
            if (len > 4) {
                snprintf(buf + len - 4, 4, "...");
            }
            return;
        }
        used += (size_t)n;
        r = end;
    }
}

void tnt_verdict_describe(uint64_t seq, uint64_t info, char *buf, size_t len)
{
    if (INFO_STEP(info) != 0) {
        snprintf(buf, len, "%s #%llu (step %llu, bucket %llu)",
                 tnt_doctor_kind_name(INFO_KIND(info)), (unsigned long long)seq,
                 (unsigned long long)(INFO_STEP(info) - 1),
                 (unsigned long long)(INFO_BUCKET(info) - 1));
    } else {
        snprintf(buf, len, "%s #%llu", tnt_doctor_kind_name(INFO_KIND(info)),
                 (unsigned long long)seq);
    }
}

/* Whether the applying rank's node heard from no other node during this
 * wait, with every one of its own ranks waiting, and at least two other
 * nodes exist (verdict.h says why). Writes that verdict if so. */
static int verdict_cut_off(const struct tnt_verdict_rank *view, int size, double threshold_s,
                           const char *what, char *verdict, size_t len, int *reporter_p)
{
    /* local, others: rank flags for the text; node_seen: per node index
     * (an index is below size). */
    unsigned char *local = calloc((size_t)size, 1), *others = calloc((size_t)size, 1);
    unsigned char *node_seen = calloc((size_t)size, 1);
    int reporter = -1, other_nodes = 0, cut_off = 1;
    const struct tnt_verdict_rank *mine = NULL;

    for (int r = 0; r < size && cut_off && local != NULL && others != NULL && node_seen != NULL;
         r++) {
        if (view[r].local) {
            local[r] = 1;
            cut_off = view[r].waiting;
            if (reporter < 0) {
                reporter = r;
                mine = &view[r];
            }
            continue;
        }
        others[r] = 1;
        /* A rank that declared a long wait keeps its node quiet on purpose
         * (and is never blamed): not evidence of a broken link. */
        cut_off = !view[r].heard && !(view[r].known && (view[r].info & INFO_PAUSED));
        if (view[r].node >= 0 && view[r].node < size && !node_seen[view[r].node]) {
            node_seen[view[r].node] = 1;
            other_nodes++;
        }
    }
    free(node_seen);
    if (!cut_off || mine == NULL || other_nodes < 2) {
        free(local);
        free(others);
        return 0;
    }
    char coll[160], ours[160], theirs[256];
    tnt_verdict_describe(mine->seq, mine->info, coll, sizeof coll);
    format_ranks(local, size, ours, sizeof ours);
    format_ranks(others, size, theirs, sizeof theirs);
    const char *host = mine->host != NULL ? mine->host : "?";
    tnt_verdict_format(verdict, len,
                       "node %s (ranks %s) hears from no other node: ranks %s on %d other nodes "
                       "sent nothing while it waited in %s %s %g s; is %s's network link down "
                       "(or are all %d other nodes down)?",
                       host, ours, theirs, other_nodes, coll, what, threshold_s, host, other_nodes);
    *reporter_p = reporter;
    free(local);
    free(others);
    return 1;
}

int tnt_verdict_rule(const struct tnt_verdict_rank *view, int size, double threshold_s,
                     const char *what, char *verdict, size_t len, int *reporter_p)
{
    if (verdict_cut_off(view, size, threshold_s, what, verdict, len, reporter_p)) {
        return 1;
    }
    unsigned char *waiting = calloc((size_t)size, 1);
    int suspect = -1, silent = -1, reporter = -1;

    if (waiting == NULL) {
        return 0;
    }
    for (int r = 0; r < size; r++) {
        if (!view[r].known) {
            if (silent < 0) {
                silent = r;
            }
            continue;
        }
        if (view[r].waiting) {
            waiting[r] = 1;
            if (reporter < 0) {
                reporter = r;
            }
            continue;
        }
        if (suspect < 0 || view[r].seq < view[suspect].seq) {
            suspect = r;
        }
    }
    int blamed = suspect >= 0 ? suspect : silent;
    if (suspect >= 0 && (view[suspect].info & INFO_PAUSED)) {
        free(waiting);
        return 0;
    }
    if (blamed < 0) {
        /* Every rank waits: they are in different collectives, or a
         * transport lost a message. Name where each group waits. */
        char groups[600];
        size_t used = 0;
        groups[0] = '\0';
        for (int r = 0; r < size && used < sizeof groups; r++) {
            int first = 1;
            for (int q = 0; q < r; q++) {
                first = first && view[q].seq != view[r].seq;
            }
            if (!first) {
                continue;
            }
            char coll[160], ranks[160];
            unsigned char *same = calloc((size_t)size, 1);
            if (same == NULL) {
                break;
            }
            for (int q = 0; q < size; q++) {
                same[q] = view[q].seq == view[r].seq;
            }
            format_ranks(same, size, ranks, sizeof ranks);
            free(same);
            tnt_verdict_describe(view[r].seq, view[r].info, coll, sizeof coll);
            int n = snprintf(groups + used, sizeof groups - used, "%sranks %s in %s",
                             used ? "; " : "", ranks, coll);
            used = n < 0 ? sizeof groups : used + (size_t)n;
        }
        tnt_verdict_format(verdict, len,
                           "no rank is behind, yet nothing moved %s %g s: %s; did the ranks call "
                           "different collectives?",
                           what, threshold_s, groups);
        *reporter_p = reporter;
        free(waiting);
        return 1;
    }
    /* The collective the blamed rank holds up: the one the waiting ranks
     * with the lowest sequence number are in. */
    int wait_ref = -1;
    for (int r = 0; r < size; r++) {
        if (waiting[r] && (wait_ref < 0 || view[r].seq < view[wait_ref].seq)) {
            wait_ref = r;
        }
    }
    char coll[160] = "a collective", ranks[256];
    uint64_t wseq = 0;
    if (wait_ref >= 0) {
        wseq = view[wait_ref].seq;
        tnt_verdict_describe(wseq, view[wait_ref].info, coll, sizeof coll);
        for (int r = 0; r < size; r++) {
            waiting[r] = waiting[r] && view[r].seq == wseq;
        }
    }
    format_ranks(waiting, size, ranks, sizeof ranks);
    char who[TNT_BOOT_HOSTNAME_MAX + 64];
    tnt_verdict_format(who, sizeof who, "rank %d (%s, pid %lld)", blamed,
                       view[blamed].host != NULL ? view[blamed].host : "?",
                       (long long)view[blamed].pid);
    const struct tnt_verdict_rank *b = &view[blamed];
    if (suspect < 0) {
        tnt_verdict_format(
            verdict, len,
            "%s does not answer, nor does any rank on its node, %s %g s; waiting in %s: "
            "ranks %s; is it stopped or its node down?",
            who, what, threshold_s, coll, ranks);
    } else if ((b->info & INFO_IN) && b->seq == wseq) {
        tnt_verdict_format(verdict, len,
                           "%s stopped making progress inside %s %s %g s; waiting in it: ranks %s; "
                           "is it stopped (SIGSTOP, a debugger) or starved of CPU?",
                           who, coll, what, threshold_s, ranks);
    } else {
        char last[160];
        tnt_verdict_describe(b->seq, b->info, last, sizeof last);
        tnt_verdict_format(
            verdict, len,
            "%s has not entered %s %s %g s (its last was %s); waiting in it: ranks %s; "
            "is it stuck in its own code or I/O? (kill -USR2 prints every rank's stack)",
            who, coll, what, threshold_s, last, ranks);
    }
    free(waiting);
    *reporter_p = reporter;
    return 1;
}
