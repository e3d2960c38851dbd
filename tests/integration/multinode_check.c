/*
 * Multi-node check: run by every rank of a job that spans (simulated or real)
 * nodes. It exercises the collectives across nodes, checks every result
 * exactly and checks that all ranks got the same bits, and proves that the
 * inter-node traffic took UCX (bytes counted by the transport, transport
 * names reported by UCX for the endpoints).
 *
 *   multinode_check [--expect-nodes K] [--expect-size N] [--transport NAME]
 *                   [--rndv-from MIN:MAX] [--arrival yes|no]
 *                   [--mode MODE]... [--big-mib M] [--kill-rank R] [--kill-mib M]
 *                   [--forge stranger|insider]
 *
 * Modes: matrix (every dtype x op x sizes, in place and out of place),
 * big (float32 SUM and float16 AVG over >= --big-mib MiB), half (16-bit
 * floats reduced in float32 and rounded once), bcast, allgather,
 * barrier, fusion (the fusion engine with scale factors), kill (rank R dies
 * mid-collective; the others must fail fast; with --kill-mib the
 * allreduces are M MiB and rank R dies 10 ms into the 3rd, while large
 * messages are in flight), hang (rank R stops taking
 * part; the others must fail after TNT_TIMEOUT), leave (rank R calls
 * tnt_finalize and exits 0 while the others go on; they must fail fast,
 * naming it), forge (rank R sends the others forged hang-doctor boards that
 * call every rank paused, and hangs like hang; with --forge stranger from a
 * UCX worker of its own without the communicator's cookie, adding forged
 * goodbyes; with --forge insider through the job's own transport, cookie
 * and all, reporting on ranks of other nodes: the others must still fail
 * after TNT_TIMEOUT with the usual verdict, and log what they dropped),
 * expect-error (tnt_init must fail with TNT_ERR_UNSUPPORTED: a build
 * without UCX).
 *
 * --rndv-from: with --transport, the range of bytes in which must lie the
 * size from which UCX sends to the checked peer with its rendezvous
 * protocol (over TCP the segment size, TNT_UCX_TCP_SEG_KB, caps it; below
 * that UCX picks it from its performance estimates).
 *
 * --arrival: with --transport, whether reducing receives went through
 * reduce on arrival anywhere in the job (bytes of consuming receives summed
 * over the ranks > 0) or nowhere (0).
 *
 * Links the static library to read the transport's counters (internal).
 */
#include <tnt/tnt.h>

#include "collectives_values.h"
#ifdef TNT_WITH_UCX
#include "coll/doctor.h"
#include "coll/multinode/multinode_impl.h"
#include "coll/verdict.h"
#include "comm/comm.h"
#include "transport/ucx/ucx_impl.h"
#endif

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>
#include <unistd.h>

static int g_rank = -1;

#define CHECK_PROGRAM "multinode_check"
#define CHECK_RANK    g_rank
#include "check.h"
#include "collective_set.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every rank must hold the same hash. */
static void check_same_everywhere(tnt_comm_t *comm, uint64_t hash, const char *what)
{
    int size = tnt_size(comm);
    uint64_t *all = calloc((size_t)size, sizeof(*all));
    CHECK(all != NULL, "calloc");
    CHECK_OK(tnt_allgather(comm, &hash, all, sizeof(hash)));
    for (int r = 0; r < size; r++) {
        CHECK(all[r] == hash, "%s: rank %d has result hash %016llx, rank %d has %016llx", what, r,
              (unsigned long long)all[r], g_rank, (unsigned long long)hash);
    }
    free(all);
}

static const char *dtype_name(tnt_dtype_t d)
{
    static const char *names[] = { "f32", "f64", "f16", "bf16", "i32", "i64" };
    return names[d];
}

static const char *op_name(tnt_op_t o)
{
    static const char *names[] = { "sum", "prod", "min", "max", "avg" };
    return names[o];
}

static void mode_matrix(tnt_comm_t *comm)
{
    /* Not multiples of the rank counts used (2, 5, 8); 0 included. */
    static const size_t sizes[] = { 0, 1, 3, 7, 61, 1000, 4099, 65537 };
    size_t max = 65537;
    int size = tnt_size(comm);
    void *send = malloc(max * 8), *recv = malloc(max * 8);
    uint64_t seed = 1;

    CHECK(send && recv, "malloc");
    for (int d = 0; d < TNT_DTYPE_LAST; d++) {
        for (int o = 0; o < TNT_OP_LAST; o++) {
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                size_t n = sizes[k];
                size_t es = tnt_dtype_size((tnt_dtype_t)d);
                int in_place = (k + (size_t)o) % 2 == 0;
                void *out = in_place ? send : recv;
                seed++;
                cv_fill((tnt_dtype_t)d, (tnt_op_t)o, size, seed, g_rank, send, n);
                CHECK_OK(tnt_allreduce(comm, send, out, n, (tnt_dtype_t)d, (tnt_op_t)o));
                size_t bad = cv_check((tnt_dtype_t)d, (tnt_op_t)o, size, seed, out, n);
                CHECK(bad == n, "allreduce %s %s count %zu %s: element %zu is %g, expected %g",
                      dtype_name((tnt_dtype_t)d), op_name((tnt_op_t)o), n,
                      in_place ? "in place" : "out of place", bad,
                      cv_load((tnt_dtype_t)d, out, bad),
                      cv_expected((tnt_dtype_t)d, (tnt_op_t)o, size, seed, bad));
                check_same_everywhere(comm, cv_hash(out, n * es), "allreduce matrix");
            }
        }
    }
    free(send);
    free(recv);
    if (g_rank == 0) {
        printf("matrix: %d dtypes x %d ops x %zu sizes OK\n", TNT_DTYPE_LAST, TNT_OP_LAST,
               sizeof(sizes) / sizeof(sizes[0]));
    }
}

/* Large vectors with cheap, exact values: rank r element i = (i % 7) - 3 + r
 * (float32 SUM), and 2 * size * ((i % 5) - 2) (float16 AVG, exact halves). */
static void mode_big(tnt_comm_t *comm, size_t mib)
{
    int size = tnt_size(comm);
    /* + 13 so the count is not a multiple of any rank count or slice. */
    size_t n = (mib << 20) / 4 + 13;
    float *buf = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    double t0, t;

    CHECK(buf && h, "malloc %zu MiB", mib);
    for (size_t i = 0; i < n; i++) {
        buf[i] = (float)((int)(i % 7) - 3 + g_rank);
    }
    t0 = now_s();
    CHECK_OK(tnt_allreduce(comm, buf, buf, n, TNT_FLOAT32, TNT_SUM));
    t = now_s() - t0;
    for (size_t i = 0; i < n; i++) {
        float want = (float)(size * ((int)(i % 7) - 3) + size * (size - 1) / 2);
        CHECK(buf[i] == want, "big f32 sum: element %zu of %zu is %g, expected %g", i, n, buf[i],
              want);
    }
    check_same_everywhere(comm, cv_hash(buf, n * sizeof(float)), "big f32 sum");

    for (size_t i = 0; i < n; i++) {
        h[i] = cv_f16_from_exact((double)(size * ((int)(i % 5) - 2)));
    }
    CHECK_OK(tnt_allreduce(comm, h, h, n, TNT_FLOAT16, TNT_AVG));
    for (size_t i = 0; i < n; i++) {
        double want = (double)(size * ((int)(i % 5) - 2));
        CHECK(cv_f16_to_double(h[i]) == want, "big f16 avg: element %zu is %g, expected %g", i,
              cv_f16_to_double(h[i]), want);
    }
    check_same_everywhere(comm, cv_hash(h, n * 2), "big f16 avg");
    if (g_rank == 0) {
        printf("big: %zu floats (%.1f MiB) f32 sum in %.3f s, f16 avg OK\n", n, n * 4.0 / (1 << 20),
               t);
    }
    free(h);
    free(buf);
}

/* float16/bfloat16 across nodes must be reduced in float32 and rounded
 * once, as on one node: (1) AVG of 30000 on every rank is 30000, although
 * a node's partial sum (3 x 30000) is not a float16; (2) SUM of B (rank 0)
 * and 0.25 on every other rank, B = 2048 (float16) or 256 (bfloat16) where
 * the spacing is 2: rounded once it is 2 * rne((B + (size-1)/4) / 2);
 * partial sums rounded at each hop lose the quarters. Two counts: one
 * element (the small-message path) and 300001 (the bandwidth path). */
static void mode_half(tnt_comm_t *comm)
{
    static const size_t counts[] = { 1, 300001 };
    int size = tnt_size(comm);
    uint16_t *h = malloc(counts[1] * sizeof(uint16_t));

    CHECK(h != NULL, "malloc");
    for (size_t k = 0; k < 2; k++) {
        size_t n = counts[k];
        for (int d = 0; d < 2; d++) {
            tnt_dtype_t dtype = d == 0 ? TNT_FLOAT16 : TNT_BFLOAT16;
            double base = d == 0 ? 2048.0 : 256.0;
            double sum = base + 0.25 * (size - 1);
            double want = 2.0 * nearbyint(sum / 2.0);

            if (d == 0) { /* AVG near the top of float16's range */
                for (size_t i = 0; i < n; i++) {
                    cv_store(dtype, h, i, 30000.0);
                }
                CHECK_OK(tnt_allreduce(comm, h, h, n, dtype, TNT_AVG));
                for (size_t i = 0; i < n; i++) {
                    CHECK(cv_load(dtype, h, i) == 30000.0,
                          "half: float16 AVG of 30000 on %d ranks, count %zu: element %zu is %g",
                          size, n, i, cv_load(dtype, h, i));
                }
                check_same_everywhere(comm, cv_hash(h, n * 2), "half avg");
            }
            CHECK(sum < 2 * base, "half: the sum %g left the range with spacing 2", sum);
            for (size_t i = 0; i < n; i++) {
                cv_store(dtype, h, i, g_rank == 0 ? base : 0.25);
            }
            CHECK_OK(tnt_allreduce(comm, h, h, n, dtype, TNT_SUM));
            for (size_t i = 0; i < n; i++) {
                CHECK(cv_load(dtype, h, i) == want,
                      "half: %s SUM of %g + %d x 0.25, count %zu: element %zu is %g, expected %g "
                      "(rounded once)",
                      dtype_name(dtype), base, size - 1, n, i, cv_load(dtype, h, i), want);
            }
            check_same_everywhere(comm, cv_hash(h, n * 2), "half sum");
        }
    }
    free(h);
    if (g_rank == 0) {
        printf("half: float16 AVG 30000 and 16-bit sums rounded once OK\n");
    }
}

static void mode_bcast(tnt_comm_t *comm)
{
    static const size_t sizes[] = { 0, 1, 13, 4097, 300007, (size_t)3 << 20 };
    int size = tnt_size(comm);
    unsigned char *buf = malloc((size_t)3 << 20);

    CHECK(buf != NULL, "malloc");
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int root = 0; root < size; root += (size > 3 ? size / 3 : 1)) {
            size_t n = sizes[k];
            for (size_t i = 0; i < n; i++) {
                buf[i] = g_rank == root ? (unsigned char)(cv_mix(i + (size_t)root) & 0xff) : 0xEE;
            }
            CHECK_OK(tnt_broadcast(comm, buf, n, root));
            for (size_t i = 0; i < n; i++) {
                CHECK(buf[i] == (unsigned char)(cv_mix(i + (size_t)root) & 0xff),
                      "broadcast %zu B from root %d: byte %zu wrong", n, root, i);
            }
        }
    }
    free(buf);
    if (g_rank == 0) {
        printf("bcast: OK\n");
    }
}

static void mode_allgather(tnt_comm_t *comm)
{
    static const size_t sizes[] = { 0, 1, 3, 1000, 65539 };
    int size = tnt_size(comm);

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        unsigned char *mine = malloc(n + 1);
        unsigned char *all = malloc(n * (size_t)size + 1);
        CHECK(mine && all, "malloc");
        for (size_t i = 0; i < n; i++) {
            mine[i] = (unsigned char)(cv_mix(i * 31 + (size_t)g_rank) & 0xff);
        }
        memset(all, 0xEE, n * (size_t)size);
        CHECK_OK(tnt_allgather(comm, mine, all, n));
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < n; i++) {
                CHECK(all[(size_t)r * n + i] == (unsigned char)(cv_mix(i * 31 + (size_t)r) & 0xff),
                      "allgather %zu B per rank: rank %d's byte %zu wrong", n, r, i);
            }
        }
        free(mine);
        free(all);
    }
    if (g_rank == 0) {
        printf("allgather: OK\n");
    }
}

/* Rank size-1 arrives at a barrier 2.5 s late: the stall doctor on every
 * other node sends its board to every rank off its node (after 1 s), which
 * makes endpoints to ranks no algorithm talks to. The endpoint check after
 * it must tell those apart from the algorithms' own. */
static void mode_stall(tnt_comm_t *comm)
{
    if (g_rank == tnt_size(comm) - 1) {
        usleep(2500000);
    }
    CHECK_OK(tnt_barrier(comm));
    if (g_rank == 0) {
        printf("stall: OK\n");
    }
}

static void mode_barrier(tnt_comm_t *comm)
{
    /* Rank size-1 (last node) arrives late; nobody may leave before it. */
    int size = tnt_size(comm);
    int64_t arrival = 0, *all = calloc((size_t)size, sizeof(*all));
    CHECK(all != NULL, "calloc");
    for (int it = 0; it < 3; it++) {
        struct timespec ts;
        if (g_rank == size - 1) {
            usleep(200000);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        arrival = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        CHECK_OK(tnt_barrier(comm));
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t left = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        CHECK_OK(tnt_allgather(comm, &arrival, all, sizeof(arrival)));
        for (int r = 0; r < size; r++) {
            CHECK(all[r] <= left, "barrier: rank %d left at %lld us before rank %d arrived (%lld)",
                  g_rank, (long long)left, r, (long long)all[r]);
        }
    }
    free(all);
    if (g_rank == 0) {
        printf("barrier: OK\n");
    }
}

/* The fusion engine across nodes: 5 tensors of mixed sizes, small threshold
 * so there are several buckets; rank r scales its contribution by (r+1)/2.
 * Values are small integers, so every weighted sum is exact in f32/f64. */
static void mode_fusion(tnt_comm_t *comm)
{
    static const size_t counts[] = { 1000, 7, 65537, 3, 20011 };
    enum { T = 5 };
    int size = tnt_size(comm);
    for (int d = 0; d < 2; d++) {
        tnt_dtype_t dtype = d == 0 ? TNT_FLOAT32 : TNT_FLOAT64;
        tnt_tensor_desc_t desc[T];
        void *data[T];
        tnt_fusion_t *fusion = NULL;
        for (int t = 0; t < T; t++) {
            desc[t].count = counts[t];
            desc[t].dtype = dtype;
            data[t] = malloc(counts[t] * 8);
            CHECK(data[t] != NULL, "malloc");
        }
        CHECK_OK(tnt_fusion_create(comm, desc, T, 64 << 10, TNT_SUM, &fusion));
        for (int step = 0; step < 3; step++) {
            for (int t = T - 1; t >= 0; t--) { /* any order works */
                for (size_t i = 0; i < counts[t]; i++) {
                    double v = (double)((int)((i + (size_t)t + (size_t)step) % 9) - 4 + 2 * g_rank);
                    cv_store(dtype, data[t], i, v);
                }
                CHECK_OK(tnt_fusion_mark_ready(fusion, (size_t)t, data[t], (g_rank + 1) * 0.5));
            }
            CHECK_OK(tnt_fusion_wait(fusion));
            uint64_t hash = 0;
            for (int t = 0; t < T; t++) {
                for (size_t i = 0; i < counts[t]; i++) {
                    double want = 0;
                    for (int r = 0; r < size; r++) {
                        want += (r + 1) * 0.5 *
                                (double)((int)((i + (size_t)t + (size_t)step) % 9) - 4 + 2 * r);
                    }
                    CHECK(cv_load(dtype, data[t], i) == want,
                          "fusion %s step %d tensor %d element %zu: %g, expected %g",
                          dtype_name(dtype), step, t, i, cv_load(dtype, data[t], i), want);
                }
                hash ^= cv_hash(data[t], counts[t] * tnt_dtype_size(dtype)) + (uint64_t)t;
            }
            check_same_everywhere(comm, hash, "fusion");
        }
        tnt_fusion_destroy(fusion);
        for (int t = 0; t < T; t++) {
            free(data[t]);
        }
    }
    if (g_rank == 0) {
        printf("fusion: OK\n");
    }
}

#ifdef TNT_WITH_UCX
enum forge_how { FORGE_STRANGER, FORGE_INSIDER };

/* A board that would keep every rank from timing out if believed: every
 * rank it names is paused, outside any collective, at sequence 0 (behind
 * everyone, so the verdict's suspect is one of them, and a paused suspect
 * is never blamed). insider: only ranks off the sender's node (its own it
 * may report); stranger: every rank. */
static size_t forge_board(const tnt_comm_t *comm, enum forge_how how, struct tnt_doctor_msg *msg)
{
    uint32_t n = 0;
    memset(msg, 0, sizeof(*msg));
    for (int r = 0; r < comm->size && n < TNT_DOCTOR_MSG_MAX; r++) {
        if (how == FORGE_INSIDER && comm->node_of_rank[r] == comm->node_id) {
            continue;
        }
        msg->entries[n++] =
            (struct tnt_doctor_entry){ .rank = r, .beat_age_ms = 0, .seq = 0, .info = INFO_PAUSED };
    }
    msg->magic = TNT_DOCTOR_MSG_MAGIC;
    msg->count = n;
    return offsetof(struct tnt_doctor_msg, entries) + n * sizeof(struct tnt_doctor_entry);
}

/* The stranger: a UCX worker of this process that is not the job's, so it
 * has no cookie. It learnt the victims' worker addresses from this rank's
 * transport (a stranger on the network would find them by scanning the
 * node's TCP ports). */
struct stranger {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h *eps; /* size entries, NULL for this rank */
    int failed;
};

static void stranger_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    (void)status;
    ((struct stranger *)arg)->failed = 1;
}

static void stranger_create(tnt_comm_t *comm, struct stranger *s)
{
    ucp_config_t *config;
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG };
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                               .thread_mode = UCS_THREAD_MODE_SINGLE };
    tnt_ucx_t *victim_side = comm->net->ucx;

    memset(s, 0, sizeof(*s));
    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK, "stranger: ucp_config_read");
    CHECK(ucp_init(&params, config, &s->context) == UCS_OK, "stranger: ucp_init");
    ucp_config_release(config);
    CHECK(ucp_worker_create(s->context, &wp, &s->worker) == UCS_OK, "stranger: worker");
    s->eps = calloc((size_t)comm->size, sizeof(*s->eps));
    CHECK(s->eps != NULL, "calloc");
    for (int r = 0; r < comm->size; r++) {
        if (r == comm->rank) {
            continue;
        }
        ucp_ep_params_t ep = {
            .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .address = (const ucp_address_t *)(victim_side->addresses +
                                               (size_t)r * victim_side->address_stride),
            .err_mode = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = { .cb = stranger_ep_error, .arg = s },
        };
        CHECK(ucp_ep_create(s->worker, &ep, &s->eps[r]) == UCS_OK, "stranger: ep to rank %d", r);
    }
}

/* Sends and progresses until UCX is done with it (bounded: a victim that
 * exited leaves the send failed, which is fine here). */
static void stranger_send(struct stranger *s, int r, uint64_t tag, const void *buf, size_t bytes)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    ucs_status_ptr_t req = ucp_tag_send_nbx(s->eps[r], buf, bytes, tag, &param);
    double t0 = now_s();
    if (!UCS_PTR_IS_PTR(req)) {
        return;
    }
    while (ucp_request_check_status(req) == UCS_INPROGRESS && now_s() - t0 < 1.0) {
        ucp_worker_progress(s->worker);
    }
    if (ucp_request_check_status(req) == UCS_INPROGRESS) {
        ucp_request_cancel(s->worker, req);
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(s->worker);
        }
    }
    ucp_request_free(req);
}

/* Rank kill_rank's part in --mode forge: instead of its 3rd allreduce it
 * sends forged boards to every other rank every 20 ms for 60 s (the others
 * give up long before and the launcher then ends this rank). Its node-mates
 * too: one rank left unfooled would time out, leave, and end the others'
 * waits with a broken connection, hiding whether they were fooled.
 * stranger: the board once as the doctor's payload after a header with a
 * wrong cookie, once bare (as side messages were before cookies), and at
 * the start forged goodbyes claiming every other rank, which a victim
 * waiting on that rank would take as the rank having left. insider: the
 * board through this rank's own transport, with the real cookie. */
static void forge_and_hang(tnt_comm_t *comm, enum forge_how how)
{
    static struct tnt_doctor_msg board;
    static unsigned char with_header[sizeof(struct tnt_ucx_ctl_header) + sizeof(board)];
    static struct tnt_ucx_ctl_header goodbye;
    size_t bytes = forge_board(comm, how, &board);
    struct stranger s;
    unsigned char drain[TNT_UCX_SIDE_MAX];
    int sender;

    if (how == FORGE_STRANGER) {
        struct tnt_ucx_ctl_header header = { .cookie = { 0x5eed5eed5eed5eedull, 42 },
                                             .rank = comm->rank,
                                             .seq = TNT_UCX_SEQ_SIDE };
        memcpy(with_header, &header, sizeof(header));
        memcpy(with_header + sizeof(header), &board, bytes);
        stranger_create(comm, &s);
        for (int v = 0; v < comm->size; v++) {
            for (int claimed = 0; s.eps[v] != NULL && claimed < comm->size; claimed++) {
                if (claimed == v) {
                    continue;
                }
                goodbye = (struct tnt_ucx_ctl_header){ .cookie = { 1, 2 },
                                                       .rank = claimed,
                                                       .seq = TNT_UCX_SEQ_GOODBYE };
                stranger_send(&s, v, TNT_UCX_CTL_TAG(TNT_UCX_SEQ_GOODBYE, claimed), &goodbye,
                              sizeof(goodbye));
            }
        }
    }
    for (double t0 = now_s(); now_s() - t0 < 60;) {
        for (int v = 0; v < comm->size; v++) {
            if (v == comm->rank) {
                continue;
            }
            if (how == FORGE_STRANGER) {
                uint64_t tag = TNT_UCX_CTL_TAG(TNT_UCX_SEQ_SIDE, comm->rank);
                stranger_send(&s, v, tag, with_header, sizeof(struct tnt_ucx_ctl_header) + bytes);
                stranger_send(&s, v, tag, &board, bytes);
            } else {
                (void)tnt_ucx_side_send(comm->net->ucx, v, &board, bytes);
            }
        }
        /* Progresses this rank's own worker (the insider's sends need
         * their connections wired up) and drains what the doctors send. */
        (void)tnt_ucx_side_recv(comm->net->ucx, drain, sizeof(drain), &sender);
        usleep(20000);
    }
    _exit(4);
}
#endif

static void die_now(int sig)
{
    (void)sig;
    raise(SIGKILL);
}

enum kill_how { KILL, HANG, LEAVE, FORGE_STRANGER_HANG, FORGE_INSIDER_HANG };

/* Rank kill_rank dies (SIGKILL) just before the 3rd allreduce, or with
 * kill_mib 10 ms into it (hang: stops taking part, alive, instead; leave:
 * finalizes and exits 0, as a program that ends early does); every other
 * rank must get an error from it, quickly (hang: after TNT_TIMEOUT).
 * Survivors ignore SIGTERM so that a launcher stopping the job does not
 * hide the result. */
static int mode_kill(tnt_comm_t *comm, int kill_rank, enum kill_how how, int kill_mib)
{
    size_t count = kill_mib > 0 ? (size_t)kill_mib << 18 : 4096;
    float *buf = malloc(count * sizeof(float));
    if (buf == NULL) {
        return 1;
    }
    if (g_rank != kill_rank) {
        signal(SIGTERM, SIG_IGN);
    }
    for (int it = 0; it < 20; it++) {
        double t0;
        tnt_status_t s;
        if (it == 2 && g_rank == kill_rank) {
            switch (how) {
            case HANG:
                fprintf(stdout, "rank %d: hanging\n", g_rank);
                fflush(stdout);
                /* Alive but silent; the launcher ends it when the rest exit. */
                sleep(120);
                _exit(4);
            case FORGE_STRANGER_HANG:
            case FORGE_INSIDER_HANG:
#ifdef TNT_WITH_UCX
                fprintf(stdout, "rank %d: forging boards (%s) and hanging\n", g_rank,
                        how == FORGE_STRANGER_HANG ? "stranger" : "insider");
                fflush(stdout);
                forge_and_hang(comm, how == FORGE_STRANGER_HANG ? FORGE_STRANGER : FORGE_INSIDER);
#endif
                _exit(4);
            case LEAVE:
                fprintf(stdout, "rank %d: finalizing and exiting early\n", g_rank);
                fflush(stdout);
                tnt_finalize(comm);
                _exit(0);
            case KILL:
                if (kill_mib > 0) {
                    struct itimerval in_10ms = { { 0, 0 }, { 0, 10000 } };
                    fprintf(stdout, "rank %d: killing myself 10 ms into allreduce #3\n", g_rank);
                    fflush(stdout);
                    signal(SIGALRM, die_now);
                    setitimer(ITIMER_REAL, &in_10ms, NULL);
                    break; /* into the allreduce */
                }
                fprintf(stdout, "rank %d: killing myself\n", g_rank);
                fflush(stdout);
                raise(SIGKILL);
            }
        }
        for (size_t i = 0; i < count; i++) {
            buf[i] = 1.0f;
        }
        t0 = now_s();
        s = tnt_allreduce(comm, buf, buf, count, TNT_FLOAT32, TNT_SUM);
        if (s != TNT_OK) {
            printf("rank %d (node %d): allreduce failed after %.2f s with %s: %s\n", g_rank,
                   tnt_node_id(comm), now_s() - t0, tnt_status_string(s), tnt_last_error());
            fflush(stdout);
            /* No tnt_finalize: the job is broken; exit like a training
             * script that got an exception. */
            _exit(3);
        }
    }
    printf("rank %d: no error although rank %d died\n", g_rank, kill_rank);
    fflush(stdout);
    free(buf);
    return 1;
}

static void check_transport(tnt_comm_t *comm, const char *want, long long rndv_min,
                            long long rndv_max, const char *arrival)
{
#ifdef TNT_WITH_UCX
    tnt_net_t *net = comm->net;
    int peer = -1;
    CHECK(net != NULL, "no inter-node transport although there are %d nodes", tnt_num_nodes(comm));
    /* Endpoints are made for the peers the algorithms use: take the first
     * one that exists. */
    for (int r = 0; r < comm->size && peer < 0; r++) {
        if (comm->node_of_rank[r] != comm->node_id &&
            tnt_ucx_peer_transport(net->ucx, r)[0] != '\0') {
            peer = r;
        }
    }
    CHECK(peer >= 0, "no UCX endpoint to any rank on another node");
    const char *tl = tnt_ucx_peer_transport(net->ucx, peer);
    uint64_t sent = tnt_ucx_bytes_sent(net->ucx), received = tnt_ucx_bytes_received(net->ucx);
    int eps = tnt_ucx_num_endpoints(net->ucx), side_eps = tnt_ucx_num_side_endpoints(net->ucx);
    size_t estimate = tnt_ucx_estimated_endpoints(net->ucx);
    size_t rndv_from = tnt_ucx_peer_rndv_from(net->ucx, peer);
    uint64_t consumed = tnt_ucx_bytes_consumed(net->ucx);
    printf("rank %d (node %d, %s): inter-node UCX transport to rank %d: %s, rendezvous from "
           "%zu B; sent %llu B, received %llu B (%llu B reduced on arrival); %d endpoints, %d of "
           "them made by the stall doctor (UCX told %zu)\n",
           g_rank, tnt_node_id(comm), tnt_hostname(comm), peer, tl, rndv_from,
           (unsigned long long)sent, (unsigned long long)received, (unsigned long long)consumed,
           eps, side_eps, estimate);
    fflush(stdout);
    CHECK(strstr(tl, want) != NULL, "UCX uses '%s' to rank %d, expected %s", tl, peer, want);
    CHECK(rndv_min < 0 || ((long long)rndv_from >= rndv_min && (long long)rndv_from <= rndv_max),
          "UCX sends to rank %d with rendezvous from %zu B, expected %lld to %lld B", peer,
          rndv_from, rndv_min, rndv_max);
    /* Equal node sizes: every peer is a ring neighbour, a halving/doubling
     * partner or a barrier/broadcast partner, so the estimate holds for
     * the endpoints the algorithms made. */
    if (net->num_sizes == 1) {
        CHECK((size_t)(eps - side_eps) <= estimate,
              "%d UCX endpoints made by the algorithms, but UCX was told to expect %zu",
              eps - side_eps, estimate);
    }
    CHECK(sent > 0 && received > 0, "no bytes went through UCX (sent %llu, received %llu)",
          (unsigned long long)sent, (unsigned long long)received);
    if (arrival != NULL) {
        /* Over the job: a rank may have received no reducing message at
         * all (a leaf of the tree). */
        int64_t mine = (int64_t)consumed, all = 0;
        CHECK(tnt_allreduce(comm, &mine, &all, 1, TNT_INT64, TNT_SUM) == TNT_OK,
              "allreduce of the arrival counters failed: %s", tnt_last_error());
        CHECK((strcmp(arrival, "yes") == 0) == (all > 0),
              "%lld B were reduced on arrival over the job, expected %s", (long long)all,
              strcmp(arrival, "yes") == 0 ? "some" : "none");
    }
#else
    (void)comm;
    (void)rndv_min;
    (void)rndv_max;
    (void)arrival;
    CHECK(0, "built without UCX; cannot check transport %s", want);
#endif
}

int main(int argc, char **argv)
{
    int expect_nodes = -1, expect_size = -1, kill_rank = -1, kill_mib = 0, expect_error = 0;
    size_t big_mib = 64;
    const char *transport = NULL, *arrival = NULL, *forge = "stranger";
    long long rndv_min = -1, rndv_max = -1;
    const char *modes[16];
    int num_modes = 0;
    tnt_comm_t *comm = NULL;
    tnt_status_t status;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-nodes") == 0 && i + 1 < argc) {
            expect_nodes = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--expect-size") == 0 && i + 1 < argc) {
            expect_size = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc) {
            transport = argv[++i];
        } else if (strcmp(argv[i], "--rndv-from") == 0 && i + 1 < argc &&
                   sscanf(argv[i + 1], "%lld:%lld", &rndv_min, &rndv_max) == 2) {
            i++;
        } else if (strcmp(argv[i], "--arrival") == 0 && i + 1 < argc) {
            arrival = argv[++i];
        } else if (strcmp(argv[i], "--big-mib") == 0 && i + 1 < argc) {
            big_mib = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--kill-rank") == 0 && i + 1 < argc) {
            kill_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--forge") == 0 && i + 1 < argc) {
            forge = argv[++i];
        } else if (strcmp(argv[i], "--kill-mib") == 0 && i + 1 < argc) {
            kill_mib = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && num_modes < 16) {
            modes[num_modes++] = argv[++i];
            expect_error |= strcmp(modes[num_modes - 1], "expect-error") == 0;
        } else {
            fprintf(stderr, "multinode_check: unknown argument %s\n", argv[i]);
            return 2;
        }
    }

    status = tnt_init(&comm);
    if (expect_error) {
        /* A build without UCX must refuse a multi-node job with a message
         * that names the build option. */
        CHECK(status == TNT_ERR_UNSUPPORTED, "tnt_init returned %s, expected %s",
              tnt_status_string(status), tnt_status_string(TNT_ERR_UNSUPPORTED));
        CHECK(strstr(tnt_last_error(), "TNT_WITH_UCX") != NULL,
              "the error does not name TNT_WITH_UCX: %s", tnt_last_error());
        printf("expected error: %s\n", tnt_last_error());
        return 0;
    }
    CHECK(status == TNT_OK, "tnt_init: %s: %s", tnt_status_string(status), tnt_last_error());
    g_rank = tnt_rank(comm);
    if (expect_size > 0) {
        CHECK(tnt_size(comm) == expect_size, "size %d, expected %d", tnt_size(comm), expect_size);
    }
    if (expect_nodes > 0) {
        CHECK(tnt_num_nodes(comm) == expect_nodes, "%d nodes, expected %d (host %s)",
              tnt_num_nodes(comm), expect_nodes, tnt_hostname(comm));
    }
    for (int m = 0; m < num_modes; m++) {
        double t0 = now_s();
        if (strcmp(modes[m], "matrix") == 0) {
            mode_matrix(comm);
        } else if (strcmp(modes[m], "big") == 0) {
            mode_big(comm, big_mib);
        } else if (strcmp(modes[m], "half") == 0) {
            mode_half(comm);
        } else if (strcmp(modes[m], "bcast") == 0) {
            mode_bcast(comm);
        } else if (strcmp(modes[m], "allgather") == 0) {
            mode_allgather(comm);
        } else if (strcmp(modes[m], "barrier") == 0) {
            mode_barrier(comm);
        } else if (strcmp(modes[m], "fusion") == 0) {
            mode_fusion(comm);
        } else if (strcmp(modes[m], "stall") == 0) {
            mode_stall(comm);
        } else if (strcmp(modes[m], "set") == 0) {
            check_collective_set(comm);
            if (g_rank == 0) {
                printf("set: OK\n");
            }
        } else if (strcmp(modes[m], "kill") == 0 || strcmp(modes[m], "hang") == 0 ||
                   strcmp(modes[m], "leave") == 0 || strcmp(modes[m], "forge") == 0) {
            enum kill_how how = strcmp(modes[m], "hang") == 0    ? HANG
                                : strcmp(modes[m], "leave") == 0 ? LEAVE
                                : strcmp(modes[m], "kill") == 0  ? KILL
                                : strcmp(forge, "insider") == 0  ? FORGE_INSIDER_HANG
                                                                 : FORGE_STRANGER_HANG;
            return mode_kill(comm, kill_rank, how, kill_mib);
        } else {
            CHECK(0, "unknown mode %s", modes[m]);
        }
        if (g_rank == 0) {
            printf("  (%s: %.2f s)\n", modes[m], now_s() - t0);
            fflush(stdout);
        }
    }
    if (transport != NULL) {
        check_transport(comm, transport, rndv_min, rndv_max, arrival);
    }
    CHECK_OK(tnt_barrier(comm));
    int size = tnt_size(comm), nodes = tnt_num_nodes(comm);
    tnt_finalize(comm);
    if (g_rank == 0) {
        printf("multinode_check: OK (%d ranks on %d nodes)\n", size, nodes);
    }
    return 0;
}
