/*
 * Point-to-point messages (tnt_send, tnt_recv and their posted forms) on
 * real ranks: forked here and bootstrapped over a file store (as
 * comm_check does; --nodes K gives them K hostnames), or started by a
 * launcher (--launcher: tnt_init over PMIx).
 *
 *   p2p_check --ranks N [--nodes K] --mode M
 *   tarantella -n N -- p2p_check --launcher --mode M
 *
 * Modes:
 *   all         ring exchange (blocking and posted), any-source receives
 *               from every rank, tags matched out of order, the order of
 *               messages with one tag (non-overtaking), sends to self,
 *               short messages into long buffers, messages of several
 *               MiB, and the same on a split communicator whose messages
 *               must not meet the parent's
 *   bad-args    one check per bad argument: each fails with
 *               TNT_ERR_INVALID_ARG naming the value, and the transport
 *               still works afterwards
 *   truncate    a message longer than the receive buffer: TNT_ERR_MISMATCH
 *               on the receiver, and later messages still arrive
 *   unmatched-send  rank 0 sends, rank 1 never receives: rank 0 fails with
 *               TNT_ERR_TIMEOUT within TNT_TIMEOUT naming rank 1
 *   unmatched-recv  rank 0 receives from rank 1 and from any rank, nobody
 *               sends: TNT_ERR_TIMEOUT naming the ranks; a posted receive
 *               fails the same way through tnt_test
 *   self        on one-rank splits (and on a world of one): creating one
 *               opens no file descriptor (no UCX worker), and messages to
 *               itself keep their meaning: any-source receives, tags out
 *               of order, one tag's order, posted forms completed by
 *               tnt_test, truncation, and the unmatched-send, -receive and
 *               any-source timeouts with the UCX transport's words
 *               (TNT_TIMEOUT is short here)
 *   off         under TNT_P2P=off: every point-to-point call fails with
 *               TNT_ERR_UNSUPPORTED naming TNT_P2P, on the communicator,
 *               a one-rank split and a dup, whose collectives still work;
 *               on one node a dup opens no file descriptor
 *   off-rank1   TNT_P2P=off on rank 1 only: the ranks agree on off, and the
 *               errors name rank 1 (forked ranks only)
 *   peer-dies-send  rank 1 posts a receive for 64 MiB from rank 0 and is
 *               killed (SIGKILL) as the message starts to move: rank 0's
 *               send ends with TNT_OK (all of it arrived first) or
 *               TNT_ERR_PEER_FAILED, and its next receive from rank 1 fails
 *               with TNT_ERR_PEER_FAILED naming rank 1, both within seconds,
 *               never waiting out TNT_TIMEOUT; later calls fail at once
 *   peer-dies-recv  rank 0 waits in tnt_recv (by rank, then a posted
 *               any-source receive) for rank 1, which is killed instead of
 *               sending: the same verdicts, within seconds
 *               (both: forked ranks only; no /dev/shm segment is left)
 *   coll-mix    user messages in flight (posted by rank and any-source
 *               receives, tags 0 and 1, one of them as long as the
 *               collectives' blocks) while gather, scatter, alltoall and
 *               alltoallv run, across nodes with --nodes: every message
 *               and every collective result is exact, so neither took the
 *               other's bytes; then messages sent before the collectives
 *               and received only after them
 *   reads       messages from 256 KiB (TNT_P2P_CMA_KB) between ranks 0 and 1,
 *               which on one host the receiver reads from the sender's
 *               buffer: sizes at and just below the threshold; a receive
 *               whose message comes only after the sender's large one,
 *               waited for first (the large one must move on meanwhile);
 *               two messages of one tag received in order and waited for
 *               out of order, the sender reusing the first buffer as soon
 *               as its send is done; any-source; a buffer of 512 KiB and
 *               one of 8 B for a 1 MiB message (TNT_ERR_MISMATCH naming
 *               the buffer, while the send succeeds at once); the
 *               transport works afterwards. The same checks pass across
 *               nodes and with TNT_P2P_CMA_KB=0 (UCX carries them)
 *   reads-rank1-off  the same with TNT_P2P_CMA_KB=0 on rank 1 only: the
 *               setting is the sender's, and rank 1 still reads what rank
 *               0 sends (forked ranks only)
 *   peer-dies-read  rank 1 says hello, posts a 64 MiB send to rank 0 and
 *               is killed before rank 0 receives it: rank 0's receive fails with
 *               TNT_ERR_PEER_FAILED naming rank 1 within seconds
 *   peer-dies-first  rank 1 is killed before it exchanged any message
 *               with rank 0: rank 0's first receive from it (which makes
 *               the endpoint) fails with TNT_ERR_PEER_FAILED naming rank 1,
 *               not with a transport error
 *   pingpong    (a measurement, not a check) ranks 0 and 1: round-trip
 *               latency and bandwidth for 8 B .. 16 MiB, printed as a table
 */
#include <tnt/tnt.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;
#define CHECK_PROGRAM "p2p_check"
#define CHECK_RANK    g_rank
#include "check.h"
#include "file_store.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The byte at offset i of the message that rank `from` sends to `to` with
 * `tag`: every message is told apart by its content. */
static unsigned char pattern(int from, int to, int tag, size_t i)
{
    return (unsigned char)(from * 31 + to * 7 + tag * 13 + (int)(i % 251));
}

static void fill(unsigned char *buf, size_t bytes, int from, int to, int tag)
{
    for (size_t i = 0; i < bytes; i++) {
        buf[i] = pattern(from, to, tag, i);
    }
}

static void expect_pattern(const unsigned char *buf, size_t bytes, int from, int to, int tag,
                           const char *what)
{
    for (size_t i = 0; i < bytes; i++) {
        if (buf[i] != pattern(from, to, tag, i)) {
            CHECK(0, "%s: byte %zu of %zu from rank %d tag %d is %u, expected %u", what, i, bytes,
                  from, tag, buf[i], pattern(from, to, tag, i));
        }
    }
}

/* Every rank sends `bytes` to the next and receives from the previous. */
static void ring(tnt_comm_t *comm, size_t bytes, int posted)
{
    int me = tnt_rank(comm), n = tnt_size(comm);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    unsigned char *out = malloc(bytes + 1), *in = malloc(bytes + 1);
    tnt_recv_info_t info;
    CHECK(out != NULL && in != NULL, "out of memory");
    fill(out, bytes, me, next, 3);
    memset(in, 0, bytes);
    /* Blocking: sends finish only when matched, so even ranks send first
     * and odd ones receive first; in an odd ring rank n-1 sends to rank 0,
     * which receives once its own send to rank 1 is done. One rank sends
     * to itself, which only a posted receive allows. */
    if (posted || n == 1) {
        tnt_request_t *rreq, *sreq;
        CHECK_OK(tnt_recv_post(comm, in, bytes, prev, 3, &info, &rreq));
        CHECK_OK(tnt_send_post(comm, out, bytes, next, 3, &sreq));
        CHECK_OK(tnt_wait(sreq));
        CHECK_OK(tnt_wait(rreq));
    } else if (me % 2 == 0) {
        /* Synchronous sends: half the ring sends first, half receives first. */
        CHECK_OK(tnt_send(comm, out, bytes, next, 3));
        CHECK_OK(tnt_recv(comm, in, bytes, prev, 3, &info));
    } else {
        CHECK_OK(tnt_recv(comm, in, bytes, prev, 3, &info));
        CHECK_OK(tnt_send(comm, out, bytes, next, 3));
    }
    CHECK(info.source == prev && info.tag == 3 && info.bytes == bytes,
          "ring of %zu B: info says source %d tag %d %zu B", bytes, info.source, info.tag,
          info.bytes);
    expect_pattern(in, bytes, prev, me, 3, "ring");
    free(out);
    free(in);
}

/* Rank 0 receives one message from every rank (itself included) with
 * TNT_ANY_SOURCE, and learns who sent which from the info. */
static void any_source(tnt_comm_t *comm)
{
    int me = tnt_rank(comm), n = tnt_size(comm);
    const size_t bytes = 1000;
    unsigned char out[1000], in[1000];
    fill(out, bytes, me, 0, 11);
    if (me == 0) {
        int *seen = calloc((size_t)n, sizeof(int));
        tnt_request_t *self_send;
        CHECK(seen != NULL, "out of memory");
        CHECK_OK(tnt_send_post(comm, out, bytes, 0, 11, &self_send));
        for (int i = 0; i < n; i++) {
            tnt_recv_info_t info = { -1, -1, 0 };
            CHECK_OK(tnt_recv(comm, in, sizeof(in), TNT_ANY_SOURCE, 11, &info));
            CHECK(info.source >= 0 && info.source < n && !seen[info.source],
                  "any-source receive %d: source %d (seen before: %d)", i, info.source,
                  info.source >= 0 && info.source < n ? seen[info.source] : -1);
            CHECK(info.bytes == bytes && info.tag == 11, "any-source: %zu B, tag %d", info.bytes,
                  info.tag);
            seen[info.source] = 1;
            expect_pattern(in, bytes, info.source, 0, 11, "any-source");
        }
        CHECK_OK(tnt_wait(self_send));
        free(seen);
    } else {
        CHECK_OK(tnt_send(comm, out, bytes, 0, 11));
    }
}

/* Rank 1 sends tags 100, 101, 102 (posted, in that order); rank 0 receives
 * them in the order 102, 100, 101: each receive takes its own tag. Then
 * five messages with one tag: they arrive in the order sent. */
static void tags_and_order(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    enum { N = 5 };
    unsigned char buf[3][64];
    if (me == 1) {
        tnt_request_t *reqs[3 + N];
        int seq[N];
        for (int t = 0; t < 3; t++) {
            fill(buf[t], sizeof(buf[t]), 1, 0, 100 + t);
            CHECK_OK(tnt_send_post(comm, buf[t], sizeof(buf[t]), 0, 100 + t, &reqs[t]));
        }
        for (int i = 0; i < N; i++) {
            seq[i] = i;
            CHECK_OK(tnt_send_post(comm, &seq[i], sizeof(int), 0, 7, &reqs[3 + i]));
        }
        for (int i = 0; i < 3 + N; i++) {
            CHECK_OK(tnt_wait(reqs[i]));
        }
    } else if (me == 0) {
        static const int order[3] = { 102, 100, 101 };
        tnt_request_t *reqs[3];
        for (int i = 0; i < 3; i++) {
            CHECK_OK(tnt_recv_post(comm, buf[i], sizeof(buf[i]), 1, order[i], NULL, &reqs[i]));
        }
        /* Complete them last posted first. */
        for (int i = 2; i >= 0; i--) {
            CHECK_OK(tnt_wait(reqs[i]));
            expect_pattern(buf[i], sizeof(buf[i]), 1, 0, order[i], "tags out of order");
        }
        for (int i = 0; i < N; i++) {
            int got = -1;
            tnt_recv_info_t info;
            CHECK_OK(tnt_recv(comm, &got, sizeof(got), i % 2 ? 1 : TNT_ANY_SOURCE, 7, &info));
            CHECK(got == i && info.source == 1, "message %d of one tag arrived as %d (from %d)", i,
                  got, info.source);
        }
    }
}

/* A send to itself: posted receive first, then the blocking send; and the
 * other way round. A message shorter than the buffer reports its length. */
static void self_and_short(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    unsigned char out[300], in[4096];
    tnt_request_t *req;
    tnt_recv_info_t info;
    fill(out, sizeof(out), me, me, 5);
    CHECK_OK(tnt_recv_post(comm, in, sizeof(in), me, 5, &info, &req));
    CHECK_OK(tnt_send(comm, out, sizeof(out), me, 5));
    CHECK_OK(tnt_wait(req));
    CHECK(info.source == me && info.bytes == sizeof(out), "self: source %d, %zu B", info.source,
          info.bytes);
    expect_pattern(in, sizeof(out), me, me, 5, "self");
    CHECK_OK(tnt_send_post(comm, out, 0, me, 6, &req));
    CHECK_OK(tnt_recv(comm, NULL, 0, TNT_ANY_SOURCE, 6, &info));
    CHECK_OK(tnt_wait(req));
    CHECK(info.source == me && info.bytes == 0, "empty self message: source %d, %zu B", info.source,
          info.bytes);
}

/* Several MiB each way between rank pairs (0,1), (2,3), ... and a test()
 * loop instead of wait on one side. */
static void large(tnt_comm_t *comm)
{
    int me = tnt_rank(comm), n = tnt_size(comm);
    int peer = me ^ 1;
    const size_t bytes = (size_t)6 << 20;
    if (peer >= n) {
        return;
    }
    unsigned char *out = malloc(bytes), *in = malloc(bytes);
    CHECK(out != NULL && in != NULL, "out of memory");
    fill(out, bytes, me, peer, 9);
    memset(in, 0, bytes);
    tnt_request_t *rreq, *sreq;
    tnt_recv_info_t info;
    CHECK_OK(tnt_recv_post(comm, in, bytes, peer, 9, &info, &rreq));
    CHECK_OK(tnt_send_post(comm, out, bytes, peer, 9, &sreq));
    tnt_status_t st;
    double t0 = now_s();
    while ((st = tnt_test(rreq)) == TNT_IN_PROGRESS) {
        CHECK(tnt_test(sreq) >= 0, "send: %s", tnt_last_error());
        CHECK(now_s() - t0 < 60, "6 MiB did not arrive within 60 s of tests");
        struct timespec ts = { 0, 50000 }; /* back off: ranks share cores */
        nanosleep(&ts, NULL);
    }
    CHECK(st == TNT_OK, "large receive: %s: %s", tnt_status_string(st), tnt_last_error());
    CHECK_OK(tnt_wait(rreq));
    CHECK_OK(tnt_wait(sreq));
    CHECK(info.bytes == bytes && info.source == peer, "large: %zu B from %d", info.bytes,
          info.source);
    expect_pattern(in, bytes, peer, me, 9, "large");
    free(out);
    free(in);
}

static void all_checks(tnt_comm_t *comm)
{
    ring(comm, 64, 0);
    ring(comm, 64, 1);
    ring(comm, (size_t)1 << 20, 1);
    any_source(comm);
    if (tnt_size(comm) >= 2) {
        tags_and_order(comm);
    }
    self_and_short(comm);
    large(comm);
}

static void mode_all(tnt_comm_t *world)
{
    int me = tnt_rank(world);
    all_checks(world);
    /* A split by parity: the child's ranks are renumbered, and a message
     * on the child with the same tag and the same peer numbers as one on
     * the parent must not match the parent's receive (nor the reverse). */
    tnt_comm_t *half = NULL;
    CHECK_OK(tnt_comm_split(world, me % 2, me, &half));
    all_checks(half);
    if (tnt_size(world) >= 2 && me < 2) {
        /* World ranks 0 and 1 are rank 0 of their halves. Rank 1 sends tag
         * 42 to world rank 0 on world, and to itself on its half; rank 0
         * posts a receive on its half first, which must stay unmatched. */
        int v = 0;
        tnt_recv_info_t info;
        if (me == 1) {
            int a = 1001, b = 2002;
            tnt_request_t *req;
            CHECK_OK(tnt_recv_post(half, &v, sizeof(v), 0, 42, &info, &req));
            CHECK_OK(tnt_send(world, &a, sizeof(a), 0, 42));
            CHECK_OK(tnt_send(half, &b, sizeof(b), 0, 42));
            CHECK_OK(tnt_wait(req));
            CHECK(v == 2002, "the half's message to itself is %d", v);
        } else {
            tnt_request_t *req;
            CHECK_OK(tnt_recv_post(half, &v, sizeof(v), TNT_ANY_SOURCE, 42, &info, &req));
            int w = 0;
            CHECK_OK(tnt_recv(world, &w, sizeof(w), 1, 42, &info));
            CHECK(w == 1001 && info.source == 1, "world got %d from %d", w, info.source);
            CHECK(tnt_test(req) == TNT_IN_PROGRESS, "the half's receive matched a world message");
            CHECK_OK(tnt_send(half, &w, sizeof(w), 0, 42)); /* to itself, on the half */
            CHECK_OK(tnt_wait(req));
            CHECK(v == 1001 && info.source == 0, "half got %d from %d", v, info.source);
        }
    }
    CHECK_OK(tnt_barrier(world));
    tnt_finalize(half);
}

/* The collectives of coll-mix, each result checked: gather and scatter
 * rooted at `root`, alltoall and alltoallv, blocks of `bytes`. */
static void mix_collectives(tnt_comm_t *comm, size_t bytes, int root)
{
    int me = tnt_rank(comm), n = tnt_size(comm);
    unsigned char *whole = malloc(bytes * (size_t)n), *other = malloc(bytes * (size_t)n);
    unsigned char *mine = malloc(bytes);
    size_t sb[STORE_MAX_RANKS], rb[STORE_MAX_RANKS], at = 0;
    CHECK(whole != NULL && other != NULL && mine != NULL, "out of memory");
    /* The collectives' blocks use tags 200 + k in pattern(), which no user
     * message uses. */
    fill(mine, bytes, me, root, 200);
    CHECK_OK(tnt_gather(comm, mine, me == root ? whole : NULL, bytes, root));
    for (int r = 0; me == root && r < n; r++) {
        expect_pattern(whole + (size_t)r * bytes, bytes, r, root, 200, "coll-mix gather");
    }
    for (int j = 0; me == root && j < n; j++) {
        fill(whole + (size_t)j * bytes, bytes, root, j, 201);
    }
    CHECK_OK(tnt_scatter(comm, me == root ? whole : NULL, mine, bytes, root));
    expect_pattern(mine, bytes, root, me, 201, "coll-mix scatter");
    for (int j = 0; j < n; j++) {
        fill(whole + (size_t)j * bytes, bytes, me, j, 202);
    }
    CHECK_OK(tnt_alltoall(comm, whole, other, bytes));
    for (int r = 0; r < n; r++) {
        expect_pattern(other + (size_t)r * bytes, bytes, r, me, 202, "coll-mix alltoall");
    }
    /* alltoallv: rank r sends bytes - (r + j) % 3 to rank j. */
    for (int j = 0; j < n; j++) {
        sb[j] = bytes - (size_t)((me + j) % 3);
        rb[j] = bytes - (size_t)((j + me) % 3);
        fill(whole + at, sb[j], me, j, 203);
        at += sb[j];
    }
    CHECK_OK(tnt_alltoallv(comm, whole, sb, other, rb));
    at = 0;
    for (int r = 0; r < n; r++) {
        expect_pattern(other + at, rb[r], r, me, 203, "coll-mix alltoallv");
        at += rb[r];
    }
    free(whole);
    free(other);
    free(mine);
}

/* User messages with tags 0 and 1 in flight around the personalized
 * collectives: neither side may match the other's messages. */
static void mode_coll_mix(tnt_comm_t *comm)
{
    int me = tnt_rank(comm), n = tnt_size(comm);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t big = 300001, small = 777;
    unsigned char *in_any = malloc(big + 64), *in_prev = malloc(big), *out_big = malloc(big);
    unsigned char out_small[777];
    tnt_recv_info_t info_any, info_prev;
    tnt_request_t *r_any, *r_prev, *s_big, *s_small;
    CHECK(in_any != NULL && in_prev != NULL && out_big != NULL, "out of memory");
    CHECK(n >= 2, "coll-mix wants 2 ranks or more");

    /* Round 1: receives posted (an any-source one for tag 0, one from the
     * previous rank for tag 1), the sends posted, then the collectives,
     * then the waits. The tag-1 message is as long as the collectives'
     * blocks. */
    fill(out_small, small, me, next, 0);
    fill(out_big, big, me, next, 1);
    CHECK_OK(tnt_recv_post(comm, in_any, big + 64, TNT_ANY_SOURCE, 0, &info_any, &r_any));
    CHECK_OK(tnt_recv_post(comm, in_prev, big, prev, 1, &info_prev, &r_prev));
    CHECK_OK(tnt_barrier(comm)); /* every receive is posted */
    CHECK_OK(tnt_send_post(comm, out_small, small, next, 0, &s_small));
    CHECK_OK(tnt_send_post(comm, out_big, big, next, 1, &s_big));
    mix_collectives(comm, big, 0);
    mix_collectives(comm, 64, n - 1);
    CHECK_OK(tnt_wait(r_any));
    CHECK_OK(tnt_wait(r_prev));
    CHECK_OK(tnt_wait(s_small));
    CHECK_OK(tnt_wait(s_big));
    CHECK(info_any.source == prev && info_any.tag == 0 && info_any.bytes == small,
          "the any-source receive got %zu B from rank %d tag %d", info_any.bytes, info_any.source,
          info_any.tag);
    expect_pattern(in_any, small, prev, me, 0, "coll-mix any-source");
    CHECK(info_prev.source == prev && info_prev.tag == 1 && info_prev.bytes == big,
          "the receive from rank %d got %zu B tag %d", prev, info_prev.bytes, info_prev.tag);
    expect_pattern(in_prev, big, prev, me, 1, "coll-mix by rank");

    /* Round 2: the sends first, received only after the collectives ran
     * (the messages wait unexpected on the point-to-point transport). */
    CHECK_OK(tnt_send_post(comm, out_small, small, next, 0, &s_small));
    CHECK_OK(tnt_send_post(comm, out_big, big, next, 1, &s_big));
    mix_collectives(comm, 64, 0);
    mix_collectives(comm, big, n - 1);
    CHECK_OK(tnt_recv(comm, in_any, big + 64, TNT_ANY_SOURCE, 0, &info_any));
    CHECK_OK(tnt_recv(comm, in_prev, big, prev, 1, &info_prev));
    CHECK_OK(tnt_wait(s_small));
    CHECK_OK(tnt_wait(s_big));
    CHECK(info_any.source == prev && info_any.bytes == small, "round 2 any-source: %zu B from %d",
          info_any.bytes, info_any.source);
    expect_pattern(in_any, small, prev, me, 0, "coll-mix round 2 any-source");
    expect_pattern(in_prev, big, prev, me, 1, "coll-mix round 2 by rank");
    CHECK_OK(tnt_barrier(comm));
    free(in_any);
    free(in_prev);
    free(out_big);
}

static void expect_invalid(tnt_status_t st, const char *needle, const char *what)
{
    CHECK(st == TNT_ERR_INVALID_ARG, "%s gave %s, not TNT_ERR_INVALID_ARG: %s", what,
          tnt_status_string(st), tnt_last_error());
    CHECK(strstr(tnt_last_error(), needle) != NULL, "%s: the error does not name '%s': %s", what,
          needle, tnt_last_error());
}

static void mode_bad_args(tnt_comm_t *comm)
{
    int n = tnt_size(comm), me = tnt_rank(comm);
    char buf[16] = { 0 }, name[32];
    tnt_request_t *req = NULL;
    snprintf(name, sizeof(name), "peer %d", n);
    expect_invalid(tnt_send(comm, buf, 1, n, 0), name, "tnt_send to rank size");
    expect_invalid(tnt_recv(comm, buf, 1, n + 3, 0, NULL), "peer", "tnt_recv from size + 3");
    expect_invalid(tnt_send(comm, buf, 1, TNT_ANY_SOURCE, 0), "peer -1",
                   "tnt_send to TNT_ANY_SOURCE");
    expect_invalid(tnt_recv(comm, buf, 1, -2, 0, NULL), "peer -2", "tnt_recv from -2");
    expect_invalid(tnt_send(comm, buf, 1, 0, -1), "tag -1", "tnt_send with tag -1");
    expect_invalid(tnt_recv(comm, buf, 1, 0, -7, NULL), "tag -7", "tnt_recv with tag -7");
    expect_invalid(tnt_send(comm, NULL, 4, 0, 0), "buf", "tnt_send of a NULL buffer");
    expect_invalid(tnt_recv(comm, NULL, 4, 0, 0, NULL), "buf", "tnt_recv into a NULL buffer");
    expect_invalid(tnt_send_post(comm, buf, 1, 0, 0, NULL), "req_p", "tnt_send_post, NULL req_p");
    expect_invalid(tnt_recv_post(comm, buf, 1, n, 0, NULL, &req), name, "tnt_recv_post to size");
    CHECK(req == NULL, "a failed post set *req_p");
    CHECK(tnt_send(NULL, buf, 1, 0, 0) == TNT_ERR_NOT_INITIALIZED, "tnt_send on NULL comm");
    /* Nothing broke: a ring still runs. */
    ring(comm, 16, 1);
    (void)me;
}

static void mode_truncate(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    char big[256], small[64];
    memset(big, 'x', sizeof(big));
    if (me == 1) {
        tnt_status_t st = tnt_send(comm, big, sizeof(big), 0, 1);
        CHECK(st == TNT_OK, "the long send: %s: %s", tnt_status_string(st), tnt_last_error());
        CHECK_OK(tnt_send(comm, big, sizeof(small), 0, 2));
    } else if (me == 0) {
        tnt_status_t st = tnt_recv(comm, small, sizeof(small), 1, 1, NULL);
        CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), "64 B") != NULL,
              "a 256 B message into 64 B gave %s: %s", tnt_status_string(st), tnt_last_error());
        tnt_recv_info_t info;
        CHECK_OK(tnt_recv(comm, small, sizeof(small), 1, 2, &info));
        CHECK(info.bytes == sizeof(small), "after the truncation: %zu B", info.bytes);
    }
    CHECK_OK(tnt_barrier(comm));
}

/* TNT_TIMEOUT is short here (the test sets it); the deadline allows for
 * a loaded machine. */
static double timeout_setting(void)
{
    const char *t = getenv("TNT_TIMEOUT");
    return t != NULL ? atof(t) : 300;
}

static void expect_timeout(tnt_status_t st, double t0, const char *needle, const char *what)
{
    double took = now_s() - t0, limit = timeout_setting();
    CHECK(st == TNT_ERR_TIMEOUT, "%s gave %s: %s", what, tnt_status_string(st), tnt_last_error());
    CHECK(strstr(tnt_last_error(), needle) != NULL && strstr(tnt_last_error(), "TNT_TIMEOUT"),
          "%s: the error does not name '%s' and TNT_TIMEOUT: %s", what, needle, tnt_last_error());
    CHECK(took >= limit * 0.9 && took < limit + 10, "%s took %.1f s with TNT_TIMEOUT %g", what,
          took, limit);
}

/* The ranks that did not wait out a timeout reach the barrier TNT_TIMEOUT
 * early: they declare that wait on purpose, so the collectives' own
 * timeout does not end it. */
static void barrier_after_timeouts(tnt_comm_t *comm, int waited)
{
    if (!waited) {
        tnt_stall_pause(comm);
    }
    CHECK_OK(tnt_barrier(comm));
    if (!waited) {
        tnt_stall_resume(comm);
    }
}

static void mode_unmatched_send(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    char buf[8] = { 0 };
    if (me == 0) {
        double t0 = now_s();
        tnt_status_t st = tnt_send(comm, buf, sizeof(buf), 1, 77);
        expect_timeout(st, t0, "rank 1 posted no matching receive", "an unmatched send");
        CHECK(strstr(tnt_last_error(), "tag 77") != NULL, "the error names no tag: %s",
              tnt_last_error());
        /* The point-to-point transport is broken now; the next call says so
         * at once, and the collectives still work. */
        t0 = now_s();
        st = tnt_send(comm, buf, sizeof(buf), 1, 78);
        CHECK(st != TNT_OK && now_s() - t0 < 2, "a send after the failure: %s after %.1f s",
              tnt_status_string(st), now_s() - t0);
    }
    barrier_after_timeouts(comm, me == 0);
}

static void mode_unmatched_recv(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    char buf[8];
    if (me == 0) {
        double t0 = now_s();
        tnt_status_t st = tnt_recv(comm, buf, sizeof(buf), 1, 5, NULL);
        expect_timeout(st, t0, "rank 1 sent no matching message", "an unmatched receive");
    } else if (me == 1) {
        /* Any source, posted, completed by tnt_test alone. */
        tnt_request_t *req;
        tnt_status_t st;
        CHECK_OK(tnt_recv_post(comm, buf, sizeof(buf), TNT_ANY_SOURCE, 5, NULL, &req));
        double t0 = now_s();
        while ((st = tnt_test(req)) == TNT_IN_PROGRESS) {
            CHECK(now_s() - t0 < timeout_setting() + 10, "tnt_test never gave up");
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
        expect_timeout(st, t0, "no rank sent a matching message", "an unmatched any-source test");
        CHECK(tnt_wait(req) == TNT_ERR_TIMEOUT, "tnt_wait after the failed test: %s",
              tnt_last_error());
    }
    barrier_after_timeouts(comm, me <= 1);
}

/* A wait that ends because its peer died: TNT_ERR_PEER_FAILED in seconds
 * rather than after TNT_TIMEOUT (which these tests set long, so that a
 * missed death shows as a slow failure). The first failure names the dead
 * rank; later calls fail at once, pointing back to it. */
static void expect_peer_failed(tnt_status_t st, double t0, int *first, const char *what)
{
    double took = now_s() - t0;
    CHECK(st == TNT_ERR_PEER_FAILED, "%s after rank 1 died gave %s: %s", what,
          tnt_status_string(st), tnt_last_error());
    if (*first) {
        CHECK(strstr(tnt_last_error(), "rank 1") != NULL,
              "%s: the first failure does not name rank 1: %s", what, tnt_last_error());
        CHECK(took < 10 && took < timeout_setting() / 2, "%s took %.1f s to see rank 1 die", what,
              took);
        *first = 0;
    } else {
        CHECK(took < 2, "%s after the first failure took %.1f s", what, took);
    }
}

/* Rank 1 ends as a crash would: no tnt_finalize, no exit handlers. */
static void die_now(void)
{
    raise(SIGKILL);
    _exit(3);
}

/* The message starts to move, then its receiver dies. */
static void mode_peer_dies_send(tnt_comm_t *comm)
{
    const size_t big = 64u << 20;
    int me = tnt_rank(comm);
    char hello = 'h';
    unsigned char *buf = malloc(big);
    CHECK(buf != NULL, "out of memory");
    memset(buf, me + 1, big);
    if (me == 1) {
        tnt_request_t *req;
        CHECK_OK(tnt_recv_post(comm, buf, big, 0, 21, NULL, &req));
        CHECK_OK(tnt_send(comm, &hello, 1, 0, 20));
        /* Progress the receive a little, so that rank 0's send is under
         * way when this rank dies. */
        for (int i = 0; i < 3 && tnt_test(req) == TNT_IN_PROGRESS; i++) {
        }
        die_now();
    } else if (me == 0) {
        CHECK_OK(tnt_recv(comm, &hello, 1, 1, 20, NULL));
        int first = 1;
        double t0 = now_s();
        tnt_status_t st = tnt_send(comm, buf, big, 1, 21);
        if (st != TNT_OK) {
            expect_peer_failed(st, t0, &first, "a 64 MiB send");
        }
        t0 = now_s();
        expect_peer_failed(tnt_recv(comm, &hello, 1, 1, 22, NULL), t0, &first,
                           "a receive from rank 1");
        t0 = now_s();
        expect_peer_failed(tnt_recv(comm, &hello, 1, TNT_ANY_SOURCE, 23, NULL), t0, &first,
                           "an any-source receive");
    }
    free(buf);
}

/* Rank 0 waits for a message that its dead peer will never send. */
static void mode_peer_dies_recv(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    char hello = 'h', buf[8];
    if (me == 1) {
        CHECK_OK(tnt_send(comm, &hello, 1, 0, 20));
        struct timespec ts = { 0, 300 * 1000000 };
        nanosleep(&ts, NULL);
        die_now();
    } else if (me == 0) {
        int first = 1;
        CHECK_OK(tnt_recv(comm, &hello, 1, 1, 20, NULL));
        double t0 = now_s();
        expect_peer_failed(tnt_recv(comm, buf, sizeof(buf), 1, 24, NULL), t0, &first,
                           "a receive from rank 1");
        tnt_request_t *req;
        t0 = now_s();
        tnt_status_t st = tnt_recv_post(comm, buf, sizeof(buf), TNT_ANY_SOURCE, 25, NULL, &req);
        if (st == TNT_OK) {
            st = tnt_wait(req);
        }
        expect_peer_failed(st, t0, &first, "a posted any-source receive");
    }
}

/* The send of a message that the receiver cannot take whole: it succeeds,
 * and at once (the receiver answers even when it does not read). */
static void expect_quick_send(tnt_status_t st, double t0, const char *what)
{
    CHECK(st == TNT_OK, "%s: %s: %s", what, tnt_status_string(st), tnt_last_error());
    CHECK(now_s() - t0 < 5, "%s took %.1f s", what, now_s() - t0);
}

static void mode_reads(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    const size_t mib = (size_t)1 << 20, at = (size_t)256 << 10;
    const size_t sizes[] = { at - 1, at, mib + 3 };
    unsigned char *a = malloc(mib + 3), *b = malloc(mib + 3), small[8];
    tnt_recv_info_t info;
    tnt_request_t *ra, *rb;
    CHECK(a != NULL && b != NULL, "out of memory");
    if (me == 0) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            fill(a, sizes[i], 0, 1, 30);
            CHECK_OK(tnt_send(comm, a, sizes[i], 1, 30));
        }
        /* Rank 1 waits for the small one first; it can only come after. */
        fill(a, mib, 0, 1, 31);
        CHECK_OK(tnt_send(comm, a, mib, 1, 31));
        CHECK_OK(tnt_send(comm, small, sizeof(small), 1, 32));
        /* Two of one tag: the first buffer is refilled as soon as its send
         * is done, which must mean that rank 1 has read it. */
        fill(a, mib, 0, 1, 33);
        fill(b, mib, 0, 1, 34);
        CHECK_OK(tnt_send_post(comm, a, mib, 1, 33, &ra));
        CHECK_OK(tnt_send_post(comm, b, mib, 1, 33, &rb));
        CHECK_OK(tnt_wait(ra));
        memset(a, 0xEE, mib);
        CHECK_OK(tnt_wait(rb));
        fill(a, mib, 0, 1, 35);
        CHECK_OK(tnt_send(comm, a, mib, 1, 35));
        double t0 = now_s();
        expect_quick_send(tnt_send(comm, a, mib, 1, 36), t0, "a 1 MiB send into 512 KiB");
        t0 = now_s();
        expect_quick_send(tnt_send(comm, a, mib, 1, 37), t0, "a 1 MiB send into 8 B");
        fill(a, mib + 3, 0, 1, 38);
        CHECK_OK(tnt_send(comm, a, mib + 3, 1, 38));
    } else if (me == 1) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            memset(a, 0, sizes[i]);
            CHECK_OK(tnt_recv(comm, a, sizes[i], 0, 30, &info));
            CHECK(info.bytes == sizes[i] && info.source == 0, "%zu B message: info %zu B from %d",
                  sizes[i], info.bytes, info.source);
            expect_pattern(a, sizes[i], 0, 1, 30, "at the read threshold");
        }
        CHECK_OK(tnt_recv_post(comm, a, mib, 0, 31, &info, &ra));
        CHECK_OK(tnt_recv(comm, small, sizeof(small), 0, 32, NULL));
        CHECK_OK(tnt_wait(ra));
        CHECK(info.bytes == mib, "the large message waited for second: %zu B", info.bytes);
        expect_pattern(a, mib, 0, 1, 31, "the large message waited for second");
        tnt_recv_info_t info_b;
        CHECK_OK(tnt_recv_post(comm, a, mib, 0, 33, &info, &ra));
        CHECK_OK(tnt_recv_post(comm, b, mib, 0, 33, &info_b, &rb));
        CHECK_OK(tnt_wait(rb));
        CHECK_OK(tnt_wait(ra));
        expect_pattern(a, mib, 0, 1, 33, "the first of one tag");
        expect_pattern(b, mib, 0, 1, 34, "the second of one tag");
        CHECK_OK(tnt_recv(comm, a, mib, TNT_ANY_SOURCE, 35, &info));
        CHECK(info.source == 0 && info.bytes == mib, "any-source: %zu B from %d", info.bytes,
              info.source);
        expect_pattern(a, mib, 0, 1, 35, "any-source");
        tnt_status_t st = tnt_recv(comm, a, mib / 2, 0, 36, NULL);
        CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), "524288 B") != NULL,
              "1 MiB into 512 KiB gave %s: %s", tnt_status_string(st), tnt_last_error());
        st = tnt_recv(comm, small, sizeof(small), 0, 37, NULL);
        CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), " 8 B") != NULL,
              "1 MiB into 8 B gave %s: %s", tnt_status_string(st), tnt_last_error());
        CHECK_OK(tnt_recv(comm, a, mib + 3, 0, 38, &info));
        expect_pattern(a, mib + 3, 0, 1, 38, "after the short buffers");
    }
    CHECK_OK(tnt_barrier(comm));
    free(a);
    free(b);
}

/* Rank 1 is killed before the two ever exchanged a message, so rank 0
 * has no endpoint to it yet: its first receive from rank 1 must still say
 * that rank 1 died, not blame the transport. */
static void mode_peer_dies_first(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    char buf[8];
    if (me == 1) {
        die_now();
    } else if (me == 0) {
        struct timespec ts = { 0, 300 * 1000000 };
        nanosleep(&ts, NULL);
        int first = 1;
        double t0 = now_s();
        expect_peer_failed(tnt_recv(comm, buf, sizeof(buf), 1, 27, NULL), t0, &first,
                           "a first receive from rank 1, dead before it");
        t0 = now_s();
        expect_peer_failed(tnt_send(comm, buf, sizeof(buf), 1, 28), t0, &first,
                           "a send to rank 1 after that");
    }
}

/* The sender is gone before its message is received. */
static void mode_peer_dies_read(tnt_comm_t *comm)
{
    const size_t big = 64u << 20;
    int me = tnt_rank(comm);
    unsigned char *buf = malloc(big);
    CHECK(buf != NULL, "out of memory");
    memset(buf, me + 1, big);
    char hello = 'h';
    if (me == 1) {
        tnt_request_t *req;
        CHECK_OK(tnt_send(comm, &hello, 1, 0, 20));
        CHECK_OK(tnt_send_post(comm, buf, big, 0, 26, &req));
        for (int i = 0; i < 3; i++) {
            (void)tnt_test(req);
        }
        die_now();
    } else if (me == 0) {
        CHECK_OK(tnt_recv(comm, &hello, 1, 1, 20, NULL));
        struct timespec ts = { 0, 300 * 1000000 };
        nanosleep(&ts, NULL);
        int first = 1;
        double t0 = now_s();
        expect_peer_failed(tnt_recv(comm, buf, big, 1, 26, NULL), t0, &first,
                           "a receive from rank 1, gone since it sent");
    }
    free(buf);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Messages of a one-rank communicator to itself, as the UCX transport
 * gives them between ranks. */
static void self_checks(tnt_comm_t *one)
{
    enum { N = 5 };
    static const int order[3] = { 102, 100, 101 };
    unsigned char out[3][64], in[64];
    tnt_request_t *sends[3 + N], *req;
    tnt_recv_info_t info;
    int seq[N];

    CHECK(tnt_size(one) == 1 && tnt_rank(one) == 0, "not a one-rank communicator: rank %d of %d",
          tnt_rank(one), tnt_size(one));
    /* Sends first (posted: a send is done only once received), then the
     * receives, tags out of order, by rank and by any source. */
    for (int t = 0; t < 3; t++) {
        fill(out[t], sizeof(out[t]), 0, 0, 100 + t);
        CHECK_OK(tnt_send_post(one, out[t], sizeof(out[t]), 0, 100 + t, &sends[t]));
    }
    for (int i = 0; i < N; i++) {
        seq[i] = i;
        CHECK_OK(tnt_send_post(one, &seq[i], sizeof(int), 0, 7, &sends[3 + i]));
    }
    CHECK(tnt_test(sends[0]) == TNT_IN_PROGRESS, "a send to itself finished before any receive");
    for (int i = 0; i < 3; i++) {
        info.source = -1;
        CHECK_OK(tnt_recv(one, in, sizeof(in), i % 2 ? 0 : TNT_ANY_SOURCE, order[i], &info));
        CHECK(info.source == 0 && info.tag == order[i] && info.bytes == sizeof(in),
              "tag %d: info says source %d tag %d %zu B", order[i], info.source, info.tag,
              info.bytes);
        expect_pattern(in, sizeof(in), 0, 0, order[i], "self, tags out of order");
    }
    for (int i = 0; i < N; i++) {
        int got = -1;
        CHECK_OK(tnt_recv(one, &got, sizeof(got), i % 2 ? 0 : TNT_ANY_SOURCE, 7, &info));
        CHECK(got == i && info.bytes == sizeof(int), "self: message %d of one tag arrived as %d",
              i, got);
    }
    for (int i = 0; i < 3 + N; i++) {
        CHECK_OK(tnt_test(sends[i]));
        CHECK_OK(tnt_wait(sends[i]));
    }
    /* A posted receive first, completed by tnt_test alone; a short message
     * reports its length. */
    memset(in, 0, sizeof(in));
    CHECK_OK(tnt_recv_post(one, in, sizeof(in), TNT_ANY_SOURCE, 9, &info, &req));
    CHECK(tnt_test(req) == TNT_IN_PROGRESS, "a receive finished before any send");
    CHECK_OK(tnt_send(one, out[1], 10, 0, 9));
    tnt_status_t st;
    while ((st = tnt_test(req)) == TNT_IN_PROGRESS) {
    }
    CHECK(st == TNT_OK && info.source == 0 && info.bytes == 10, "posted self receive: %s, %d, %zu B",
          tnt_status_string(st), info.source, info.bytes);
    expect_pattern(in, 10, 0, 0, 101, "posted self receive");
    CHECK_OK(tnt_wait(req));
    /* Truncation: the receive fails, the send is done, the next message
     * arrives; an empty one too. */
    CHECK_OK(tnt_send_post(one, out[0], sizeof(out[0]), 0, 1, &req));
    st = tnt_recv(one, in, 16, 0, 1, &info);
    CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), "16 B") != NULL,
          "64 B into 16 B gave %s: %s", tnt_status_string(st), tnt_last_error());
    CHECK_OK(tnt_wait(req));
    CHECK_OK(tnt_send_post(one, NULL, 0, 0, 1, &req));
    CHECK_OK(tnt_recv(one, in, 16, TNT_ANY_SOURCE, 1, &info));
    CHECK(info.bytes == 0 && info.source == 0, "empty self message: %zu B from %d", info.bytes,
          info.source);
    CHECK_OK(tnt_wait(req));
    /* A receive posted on the one-rank communicator does not take a
     * message of another one-rank communicator. */
    tnt_comm_t *other = NULL;
    int a = 0, b = 5;
    CHECK_OK(tnt_comm_split(one, 0, 0, &other));
    CHECK_OK(tnt_recv_post(one, &a, sizeof(a), 0, 3, &info, &req));
    CHECK_OK(tnt_send_post(other, &b, sizeof(b), 0, 3, &sends[0]));
    CHECK(tnt_test(req) == TNT_IN_PROGRESS, "a receive took another communicator's message");
    CHECK_OK(tnt_recv(other, &a, sizeof(a), 0, 3, NULL));
    CHECK_OK(tnt_wait(sends[0]));
    CHECK_OK(tnt_send(one, &b, sizeof(b), 0, 3));
    CHECK_OK(tnt_wait(req));
    CHECK(a == 5, "self message after another communicator's: %d", a);
    tnt_finalize(other);
}

static void mode_self(tnt_comm_t *world)
{
    int me = tnt_rank(world);
    char buf[8] = { 0 };
    tnt_comm_t *one = NULL;
    int fds = count_fds();
    CHECK_OK(tnt_comm_split(world, me, 0, &one));
    CHECK(count_fds() == fds,
          "a one-rank communicator opened %d file descriptors (a point-to-point worker?)",
          count_fds() - fds);
    self_checks(one);
    CHECK(count_fds() == fds, "messages on a one-rank communicator opened %d file descriptors",
          count_fds() - fds);
    if (tnt_size(world) == 1) {
        self_checks(world);
    }

    /* A blocking send nobody receives: TNT_TIMEOUT, then the next call
     * fails at once and the collectives go on. */
    double t0 = now_s();
    tnt_status_t st = tnt_send(one, buf, sizeof(buf), 0, 77);
    expect_timeout(st, t0, "rank 0 posted no matching receive", "an unmatched send to itself");
    CHECK(strstr(tnt_last_error(), "tag 77") != NULL, "the error names no tag: %s",
          tnt_last_error());
    t0 = now_s();
    st = tnt_recv(one, buf, sizeof(buf), 0, 78, NULL);
    CHECK(st != TNT_OK && now_s() - t0 < 2, "a receive after the failure: %s after %.1f s",
          tnt_status_string(st), now_s() - t0);
    int64_t x = 1;
    CHECK_OK(tnt_allreduce(one, &x, &x, 1, TNT_INT64, TNT_SUM));
    tnt_finalize(one);

    /* A receive from rank 0 nobody sends to, and a posted any-source one
     * that only tnt_test drives (each breaks its communicator). */
    CHECK_OK(tnt_comm_split(world, me, 0, &one));
    t0 = now_s();
    st = tnt_recv(one, buf, sizeof(buf), 0, 5, NULL);
    expect_timeout(st, t0, "rank 0 sent no matching message", "an unmatched receive from itself");
    tnt_finalize(one);
    CHECK_OK(tnt_comm_split(world, me, 0, &one));
    tnt_request_t *req;
    CHECK_OK(tnt_recv_post(one, buf, sizeof(buf), TNT_ANY_SOURCE, 5, NULL, &req));
    t0 = now_s();
    while ((st = tnt_test(req)) == TNT_IN_PROGRESS) {
        CHECK(now_s() - t0 < timeout_setting() + 10, "tnt_test never gave up");
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    expect_timeout(st, t0, "no rank sent a matching message", "an unmatched any-source test");
    CHECK(tnt_wait(req) == TNT_ERR_TIMEOUT, "tnt_wait after the failed test: %s",
          tnt_last_error());
    tnt_finalize(one);
    /* Every rank waited out the same timeouts. */
    CHECK_OK(tnt_barrier(world));
}

/* The rank whose TNT_P2P=off the errors name ("its rank 0 had"). */
static const char *g_off_rank = "its rank 0 ";

static void expect_unsupported(tnt_status_t st, const char *what)
{
    CHECK(st == TNT_ERR_UNSUPPORTED, "%s under TNT_P2P=off gave %s: %s", what,
          tnt_status_string(st), tnt_last_error());
    CHECK(strstr(tnt_last_error(), "TNT_P2P") != NULL, "%s: the error does not name TNT_P2P: %s",
          what, tnt_last_error());
    CHECK(strstr(tnt_last_error(), g_off_rank) != NULL, "%s: the error does not say '%s': %s",
          what, g_off_rank, tnt_last_error());
}

static void mode_off(tnt_comm_t *world)
{
    int me = tnt_rank(world), n = tnt_size(world);
    char buf[8] = { 0 };
    tnt_request_t *req = NULL;
    tnt_comm_t *one = NULL, *dup = NULL;
    expect_unsupported(tnt_send(world, buf, sizeof(buf), (me + 1) % n, 0), "tnt_send");
    expect_unsupported(tnt_recv_post(world, buf, sizeof(buf), TNT_ANY_SOURCE, 0, NULL, &req),
                       "tnt_recv_post");
    CHECK(req == NULL, "a failed post set *req_p");
    CHECK_OK(tnt_comm_split(world, me, 0, &one));
    if (strcmp(g_off_rank, "its rank 0 ") == 0) {
        /* (With off on rank 1 only, the others' one-rank splits have
         * point-to-point: the agreement is per communicator.) */
        expect_unsupported(tnt_send_post(one, buf, sizeof(buf), 0, 0, &req),
                           "tnt_send_post to itself");
    }
    int fds = count_fds();
    CHECK_OK(tnt_comm_dup(world, &dup));
    int64_t x = 1;
    CHECK_OK(tnt_allreduce(dup, &x, &x, 1, TNT_INT64, TNT_SUM));
    CHECK(x == n, "allreduce on the dup: %lld", (long long)x);
    if (tnt_num_nodes(world) == 1) {
        CHECK(count_fds() == fds, "a dup on one node opened %d file descriptors under TNT_P2P=off",
              count_fds() - fds);
    }
    expect_unsupported(tnt_recv(dup, buf, sizeof(buf), 0, 0, NULL), "tnt_recv on a dup");
    tnt_finalize(dup);
    tnt_finalize(one);
    CHECK_OK(tnt_barrier(world));
}

static void mode_pingpong(tnt_comm_t *comm)
{
    int me = tnt_rank(comm);
    const size_t max = (size_t)16 << 20;
    unsigned char *buf = malloc(max);
    CHECK(buf != NULL, "out of memory");
    memset(buf, 1, max);
    if (me == 0) {
        printf("%10s %8s %12s %12s\n", "bytes", "iters", "half-RTT us", "MB/s");
    }
    for (size_t bytes = 8; bytes <= max && me < 2; bytes *= 2) {
        int iters = bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 200 : 20;
        int warm = iters / 10;
        double t0 = 0;
        for (int i = 0; i < warm + iters; i++) {
            if (i == warm) {
                t0 = now_s();
            }
            if (me == 0) {
                CHECK_OK(tnt_send(comm, buf, bytes, 1, 0));
                CHECK_OK(tnt_recv(comm, buf, bytes, 1, 0, NULL));
            } else {
                CHECK_OK(tnt_recv(comm, buf, bytes, 0, 0, NULL));
                CHECK_OK(tnt_send(comm, buf, bytes, 0, 0));
            }
        }
        double half_rtt = (now_s() - t0) / iters / 2;
        if (me == 0) {
            printf("%10zu %8d %12.2f %12.1f\n", bytes, iters, half_rtt * 1e6,
                   (double)bytes / half_rtt / 1e6);
        }
    }
    fflush(stdout);
    free(buf);
    CHECK_OK(tnt_barrier(comm));
}

static int run(tnt_comm_t *comm, const char *mode)
{
    g_rank = tnt_rank(comm);
    if (strcmp(mode, "all") == 0) {
        mode_all(comm);
    } else if (strcmp(mode, "bad-args") == 0) {
        mode_bad_args(comm);
    } else if (strcmp(mode, "truncate") == 0) {
        mode_truncate(comm);
    } else if (strcmp(mode, "unmatched-send") == 0) {
        mode_unmatched_send(comm);
    } else if (strcmp(mode, "unmatched-recv") == 0) {
        mode_unmatched_recv(comm);
    } else if (strcmp(mode, "self") == 0) {
        mode_self(comm);
    } else if (strcmp(mode, "off") == 0) {
        mode_off(comm);
    } else if (strcmp(mode, "off-rank1") == 0) {
        g_off_rank = "its rank 1 ";
        mode_off(comm);
    } else if (strcmp(mode, "peer-dies-send") == 0) {
        mode_peer_dies_send(comm);
    } else if (strcmp(mode, "peer-dies-recv") == 0) {
        mode_peer_dies_recv(comm);
    } else if (strcmp(mode, "reads") == 0 || strcmp(mode, "reads-rank1-off") == 0) {
        mode_reads(comm);
    } else if (strcmp(mode, "peer-dies-first") == 0) {
        mode_peer_dies_first(comm);
    } else if (strcmp(mode, "peer-dies-read") == 0) {
        mode_peer_dies_read(comm);
    } else if (strcmp(mode, "coll-mix") == 0) {
        mode_coll_mix(comm);
    } else if (strcmp(mode, "pingpong") == 0) {
        mode_pingpong(comm);
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    /* After a peer died, nobody is left to wait for. */
    double t0 = now_s();
    tnt_finalize(comm);
    CHECK(strncmp(mode, "peer-dies", 9) != 0 || now_s() - t0 < 10,
          "tnt_finalize after rank 1 died took %.1f s", now_s() - t0);
    return 0;
}

struct forked_args {
    int size, nodes;
    const char *mode;
};

static int run_forked_rank(const char *dir, int rank, void *arg)
{
    const struct forked_args *a = arg;
    int size = a->size, nodes = a->nodes;
    const char *mode = a->mode;

    struct file_store store = { dir, rank, size, 0 };
    char host[64];
    g_rank = rank;
    snprintf(host, sizeof(host), "p2p-node%d", rank * nodes / size);
    if (strcmp(mode, "off-rank1") == 0 && rank == 1) {
        setenv("TNT_P2P", "off", 1);
    }
    if (strcmp(mode, "reads-rank1-off") == 0 && rank == 1) {
        setenv("TNT_P2P_CMA_KB", "0", 1); /* its sends go through UCX; it still reads */
    }
    tnt_oob_t oob = {
        .allgather = store_allgather,
        .ctx = &store,
        .rank = rank,
        .size = size,
        .job_id = "p2p_check",
        .hostname = host,
    };
    tnt_comm_t *comm = NULL;
    CHECK_OK(tnt_comm_create_oob(&oob, &comm));
    return run(comm, mode);
}

/* Forks the ranks of a peer-dies mode: rank 1 must die by SIGKILL, and no
 * /dev/shm segment of the job (named after a rank's pid, "tnt-<pid>-...")
 * may be left behind. */
static int run_peer_dies(int ranks, int (*rank_main)(const char *, int, void *), void *arg)
{
    pid_t pids[STORE_MAX_RANKS];
    int failed = store_fork_ranks_killing("p2p_check", ranks, 1, rank_main, arg, pids);
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        for (int r = 0; r < ranks; r++) {
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "tnt-%ld-", (long)pids[r]);
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
                fprintf(stderr, "p2p_check: /dev/shm/%s was left behind\n", e->d_name);
                failed = 1;
            }
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return failed;
}

int main(int argc, char **argv)
{
    int ranks = 2, nodes = 1, launcher = 0;
    const char *mode = "all";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            ranks = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
            nodes = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--launcher") == 0) {
            launcher = 1;
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            mode = argv[++i];
        } else {
            fprintf(stderr, "p2p_check: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (launcher) {
        tnt_comm_t *comm = NULL;
        CHECK_OK(tnt_init(&comm));
        return run(comm, mode);
    }
    CHECK(ranks >= 1 && ranks <= STORE_MAX_RANKS && nodes >= 1 && nodes <= ranks,
          "bad --ranks/--nodes");
    struct forked_args args = { .size = ranks, .nodes = nodes, .mode = mode };
    int failed = strncmp(mode, "peer-dies", 9) == 0
                     ? run_peer_dies(ranks, run_forked_rank, &args)
                     : store_fork_ranks("p2p_check", ranks, run_forked_rank, &args);
    if (!failed) {
        printf("p2p_check: %s on %d ranks, %d node(s): OK\n", mode, ranks, nodes);
    }
    return failed;
}
