/*
 * tnt_comm_split and tnt_comm_dup: new communicators from an existing one.
 *
 * A new communicator is built exactly as tnt_init builds one (core/init.c),
 * over a bootstrap whose allgather runs on the parent's collectives. The
 * ranks of different colors build theirs at the same time, and they need
 * different exchanges (a one-node child skips UCX's address exchange, a
 * one-rank child needs none), so the parent cannot simply run one
 * allgather per child exchange. Instead every exchange is one round over
 * the whole parent: an allgather of a small header (gathering for my child,
 * or done), then, if anyone is gathering, one of the payloads padded to the
 * largest. A rank whose child is made keeps joining rounds, saying "done",
 * until every rank is; the last round also tells everyone whether any rank
 * failed, so the call succeeds everywhere or nowhere.
 */
#include "comm/comm.h"
#include "core/init.h"

#include "util/log.h"
#include "util/settings.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SPLIT_DONE = 0, SPLIT_GATHERING = 1, SPLIT_FAILED = 2 };

struct split_header {
    int32_t state;
    int32_t color;
    uint64_t bytes; /* of this rank's payload while gathering */
};

/* What one rank knows while the children are made. */
struct split_ctx {
    tnt_comm_t *parent;
    int color;
    int *members;                 /* parent ranks of my child, in child rank order */
    int size;                     /* of my child; 0 with TNT_COLOR_NONE */
    struct split_header *headers; /* parent size entries, the last round's */
};

/* The child's bootstrap: rounds over the parent while it is being made,
 * the job's root bootstrap for an abort afterwards. */
struct split_boot {
    struct tnt_boot base;
    struct split_ctx *ctx; /* NULL once the child is made */
    tnt_boot_t *root;      /* a reference (tnt_boot_ref) */
};

/* One round over the parent. state: SPLIT_GATHERING with in (bytes) and out
 * (child size * bytes), or SPLIT_DONE/SPLIT_FAILED with none. *all_done:
 * no rank gathered this round. */
static tnt_status_t split_round(struct split_ctx *x, int32_t state, const void *in, size_t bytes,
                                void *out, int *all_done)
{
    tnt_comm_t *parent = x->parent;
    struct split_header mine = { state, x->color, bytes };
    tnt_status_t status;

    status = tnt_allgather(parent, &mine, x->headers, sizeof(mine));
    if (status != TNT_OK) {
        return status;
    }
    size_t max = 0;
    int gathering = 0;
    for (int r = 0; r < parent->size; r++) {
        if (x->headers[r].state == SPLIT_GATHERING) {
            gathering = 1;
            max = x->headers[r].bytes > max ? (size_t)x->headers[r].bytes : max;
        }
    }
    *all_done = !gathering;
    if (!gathering) {
        return TNT_OK;
    }
    /* Every rank joins the payload allgather, whatever it finds wrong in
     * the headers, so that the rounds stay in step. (Without the memory
     * for it, the peers' wait ends at TNT_TIMEOUT.) */
    unsigned char *padded = calloc(1, max > 0 ? max : 1);
    unsigned char *all = malloc((size_t)parent->size * (max > 0 ? max : 1));
    if (padded == NULL || all == NULL) {
        free(padded);
        free(all);
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "tnt_comm_split: out of memory for %d x %zu bytes", parent->size,
                               max);
    }
    if (state == SPLIT_GATHERING && bytes > 0) {
        memcpy(padded, in, bytes);
    }
    if (max > 0) {
        status = tnt_allgather(parent, padded, all, max);
    }
    if (status == TNT_OK && state == SPLIT_GATHERING) {
        for (int i = 0; i < x->size && status == TNT_OK; i++) {
            const struct split_header *h = &x->headers[x->members[i]];
            if (h->state != SPLIT_GATHERING) {
                status = tnt_error_raise(TNT_ERR_BOOTSTRAP,
                                         "tnt_comm_split: rank %d of communicator %s (rank %d of "
                                         "the new one) stopped making it; see its error",
                                         x->members[i], parent->name, i);
            } else if (h->bytes != bytes) {
                status = tnt_error_raise(TNT_ERR_MISMATCH,
                                         "tnt_comm_split: rank %d of communicator %s exchanges "
                                         "%llu bytes, this rank %zu",
                                         x->members[i], parent->name, (unsigned long long)h->bytes,
                                         bytes);
            } else if (bytes > 0) {
                memcpy((unsigned char *)out + (size_t)i * bytes, all + (size_t)x->members[i] * max,
                       bytes);
            }
        }
    }
    free(padded);
    free(all);
    return status;
}

static tnt_status_t split_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes)
{
    struct split_boot *b = (struct split_boot *)boot;
    int all_done;

    if (b->ctx == NULL) {
        return tnt_error_raise(TNT_ERR_BOOTSTRAP,
                               "bootstrap: a communicator made by tnt_comm_split exchanges "
                               "through its parent only while it is being made");
    }
    return split_round(b->ctx, SPLIT_GATHERING, in, bytes, out, &all_done);
}

static void split_abort(tnt_boot_t *boot, int exit_code, const char *message)
{
    struct split_boot *b = (struct split_boot *)boot;
    b->root->ops->abort(b->root, exit_code, message);
}

static void split_finalize(tnt_boot_t *boot)
{
    struct split_boot *b = (struct split_boot *)boot;
    tnt_boot_finalize(b->root);
    free(b);
}

static const struct tnt_boot_ops split_ops = {
    .name = "split",
    .allgather = split_allgather,
    .abort = split_abort,
    .finalize = split_finalize,
};

/* The bootstrap every abort of the job goes through: a split's root's. */
static tnt_boot_t *root_boot(tnt_comm_t *comm)
{
    return comm->boot->ops == &split_ops ? ((struct split_boot *)comm->boot)->root : comm->boot;
}

struct split_entry {
    int key;
    int rank;
};

static int compare_entries(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Every rank's (color, key) once, checked the same way everywhere; then
 * my child's members in child rank order. */
static tnt_status_t split_members(struct split_ctx *x, int key)
{
    tnt_comm_t *parent = x->parent;
    int32_t mine[2] = { x->color, key }, *all;
    tnt_status_t status;

    all = malloc((size_t)parent->size * sizeof(mine));
    x->members = malloc((size_t)parent->size * sizeof(int));
    struct split_entry *entries = malloc((size_t)parent->size * sizeof(*entries));
    if (all == NULL || x->members == NULL || entries == NULL) {
        /* The peers' wait for this rank ends at TNT_TIMEOUT. */
        free(all);
        free(entries);
        free(x->members);
        x->members = NULL;
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_comm_split: out of memory for %d ranks",
                               parent->size);
    }
    status = tnt_allgather(parent, mine, all, sizeof(mine));
    for (int r = 0; r < parent->size && status == TNT_OK; r++) {
        if (all[2 * r] < 0 && all[2 * r] != TNT_COLOR_NONE) {
            status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                     "tnt_comm_split: rank %d of communicator %s passed color %d; "
                                     "colors are >= 0, or TNT_COLOR_NONE (%d) for no communicator",
                                     r, parent->name, (int)all[2 * r], TNT_COLOR_NONE);
        }
    }
    if (status == TNT_OK && x->color != TNT_COLOR_NONE) {
        for (int r = 0; r < parent->size; r++) {
            if (all[2 * r] == x->color) {
                entries[x->size].key = all[2 * r + 1];
                entries[x->size].rank = r;
                x->size++;
            }
        }
        qsort(entries, (size_t)x->size, sizeof(*entries), compare_entries);
        for (int i = 0; i < x->size; i++) {
            x->members[i] = entries[i].rank;
        }
    }
    free(all);
    free(entries);
    return status;
}

/* Makes my child over split rounds (none with TNT_COLOR_NONE). */
static tnt_status_t split_create_child(struct split_ctx *x, const char *name, tnt_comm_t **child_p)
{
    tnt_comm_t *parent = x->parent;
    int my_rank = 0;

    while (x->members[my_rank] != parent->rank) {
        my_rank++;
    }
    struct split_boot *b = calloc(1, sizeof(*b));
    tnt_settings_t *settings = malloc(sizeof(*settings));
    if (b == NULL || settings == NULL) {
        free(b);
        free(settings);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_comm_split: out of memory");
    }
    /* A snapshot: the child keeps the parent's values even if they are
     * meant to differ later (they cannot today: settings are read once). */
    memcpy(settings, parent->settings, sizeof(*settings));
    b->base.ops = &split_ops;
    b->ctx = x;
    b->root = root_boot(parent);
    tnt_boot_ref(b->root);
    const struct tnt_boot_info *pinfo = tnt_boot_info(parent->boot);
    b->base.info = *pinfo;
    b->base.info.rank = my_rank;
    b->base.info.size = x->size;
    b->base.info.local_rank = -1;
    b->base.info.local_size = -1;

    /* Takes b and settings, also on failure. */
    tnt_status_t status = tnt_comm_create(&b->base, settings, name, child_p);
    if (status == TNT_OK) {
        b->ctx = NULL;
    }
    return status;
}

static tnt_status_t comm_split(tnt_comm_t *comm, int color, int key, const char *name,
                               tnt_comm_t **newcomm_p)
{
    struct split_ctx x = { .parent = comm, .color = color };
    tnt_comm_t *child = NULL;
    tnt_status_t status;

    x.headers = calloc((size_t)comm->size, sizeof(*x.headers));
    if (x.headers == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_comm_split: out of memory for %d ranks",
                               comm->size);
    }
    status = split_members(&x, key);
    if (status == TNT_ERR_INVALID_ARG || x.members == NULL) {
        /* A bad color, found the same way on every rank before any round
         * (or no memory to take part at all). */
        goto out;
    }
    if (status == TNT_OK && color != TNT_COLOR_NONE) {
        status = split_create_child(&x, name, &child);
    }
    /* Done here: join rounds until every rank is. A failed parent
     * collective ends the rounds for everyone (the parent is broken). */
    /* The rounds may raise nothing, but keep this rank's own cause anyway. */
    char my_error[TNT_REQUEST_ERROR_MAX];
    int my_error_printed = tnt_error_printed();
    snprintf(my_error, sizeof(my_error), "%s", status != TNT_OK ? tnt_error_message() : "");
    int all_done = 0;
    while (!all_done) {
        tnt_status_t st =
            split_round(&x, status == TNT_OK ? SPLIT_DONE : SPLIT_FAILED, NULL, 0, NULL, &all_done);
        if (st != TNT_OK) {
            status = status == TNT_OK ? st : status;
            goto out;
        }
    }
    if (status != TNT_OK) {
        tnt_error_restore(my_error, my_error_printed);
        goto out;
    }
    for (int r = 0; r < comm->size; r++) {
        if (x.headers[r].state == SPLIT_FAILED) {
            status = tnt_error_raise(TNT_ERR_PEER_FAILED,
                                     "tnt_comm_split: rank %d of communicator %s could not make "
                                     "its new communicator (see its error); no rank keeps one",
                                     r, comm->name);
            break;
        }
    }
out:
    if (status != TNT_OK && child != NULL) {
        tnt_finalize(child);
        child = NULL;
    }
    free(x.headers);
    free(x.members);
    *newcomm_p = child;
    return status;
}

TNT_API tnt_status_t tnt_comm_split(tnt_comm_t *comm, int color, int key, tnt_comm_t **newcomm_p)
{
    if (comm == NULL || newcomm_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_comm_split: %s is NULL",
                               comm == NULL ? "comm" : "newcomm_p");
    }
    *newcomm_p = NULL;
    char name[TNT_COMM_NAME_MAX + 24]; /* cut to TNT_COMM_NAME_MAX by tnt_comm_create */
    snprintf(name, sizeof(name), "%s.%d", comm->name, color);
    return comm_split(comm, color, key, name, newcomm_p);
}

TNT_API tnt_status_t tnt_comm_dup(tnt_comm_t *comm, tnt_comm_t **newcomm_p)
{
    if (comm == NULL || newcomm_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_comm_dup: %s is NULL",
                               comm == NULL ? "comm" : "newcomm_p");
    }
    *newcomm_p = NULL;
    char name[TNT_COMM_NAME_MAX + 24]; /* cut to TNT_COMM_NAME_MAX by tnt_comm_create */
    snprintf(name, sizeof(name), "%s.dup%u", comm->name, comm->num_dups++);
    return comm_split(comm, 0, comm->rank, name, newcomm_p);
}
