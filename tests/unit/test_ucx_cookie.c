/*
 * The UCX transport's cookie against a stranger: two ranks (threads of this
 * process, on two "nodes" of the in-process bootstrap) create the transport
 * while a third UCX worker in the process, which never got the cookie,
 * plays someone on the network who learnt rank 1's worker address. Between
 * the address exchange and rank 0's wire-up hello (the test's bootstrap
 * runs the stranger there, on rank 0's thread, and holds rank 0 back for
 * half a second) the stranger sends rank 1:
 *   - a wire-up hello claiming to be rank 0, with a wrong cookie;
 *   - a short hello (a bare rank number, what hellos were before cookies);
 *   - a collective's message with a tag built by tnt_ucx_tag, as any
 *     program linking libtnt could build it, holding a value of its own;
 *   - a goodbye claiming to be rank 0, with a wrong cookie.
 * They all reach rank 1 before rank 0's real messages. Rank 1 must refuse
 * both hellos (counted, one log line naming rank 0) and still complete the
 * wire-up with rank 0's real hello; receive rank 0's value, not the
 * stranger's, in the collective's message; and drop the forged goodbye in
 * tnt_ucx_destroy (or in the wire-up's wait for rank 0, which checks
 * whether rank 0 left) with a log line. The ranks must share one cookie, and a
 * second transport made over the same bootstrap must draw another.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot/boot_threads.h"
#include "transport/ucx/ucx_impl.h"
#include "util/wait.h"

#define TIMEOUT_S   20
#define REAL_VALUE  0xA0A0A0A0A0A0A0A0ull
#define FORGED      0x6666666666666666ull
#define DATA_SEQ    1
#define HOLD_BACK_S 0.5

/* ---- the stranger: a UCX worker of its own, without the cookie ---------- */

struct stranger {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h ep;
    int ep_failed;
    char failure[256];
};

static void stranger_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    (void)status;
    ((struct stranger *)arg)->ep_failed = 1;
}

static int stranger_create(struct stranger *s)
{
    ucp_config_t *config;
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG };
    ucp_worker_params_t worker_params = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                          .thread_mode = UCS_THREAD_MODE_SINGLE };

    memset(s, 0, sizeof(*s));
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        return -1;
    }
    ucs_status_t us = ucp_init(&params, config, &s->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        return -1;
    }
    if (ucp_worker_create(s->context, &worker_params, &s->worker) != UCS_OK) {
        ucp_cleanup(s->context);
        return -1;
    }
    return 0;
}

static void stranger_destroy(struct stranger *s)
{
    if (s->ep != NULL) {
        ucp_request_param_t param = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                      .flags = UCP_EP_CLOSE_FLAG_FORCE };
        ucs_status_ptr_t req = ucp_ep_close_nbx(s->ep, &param);
        if (UCS_PTR_IS_PTR(req)) {
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                ucp_worker_progress(s->worker);
            }
            ucp_request_free(req);
        }
    }
    ucp_worker_destroy(s->worker);
    ucp_cleanup(s->context);
}

/* Sends one message and progresses until UCX is done with it (bounded). */
static int stranger_send(struct stranger *s, uint64_t tag, const void *buf, size_t bytes)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    ucs_status_ptr_t req = ucp_tag_send_nbx(s->ep, buf, bytes, tag, &param);
    uint64_t deadline = tnt_time_ns() + 5000000000ull;

    if (UCS_PTR_IS_ERR(req)) {
        return -1;
    }
    if (req == NULL) {
        return 0;
    }
    while (ucp_request_check_status(req) == UCS_INPROGRESS && tnt_time_ns() < deadline) {
        ucp_worker_progress(s->worker);
    }
    ucs_status_t st = ucp_request_check_status(req);
    if (st == UCS_INPROGRESS) {
        ucp_request_cancel(s->worker, req);
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(s->worker);
        }
    }
    ucp_request_free(req);
    return st == UCS_OK ? 0 : -1;
}

/* Connects to the worker at address and sends the four forgeries. */
static void stranger_attack(struct stranger *s, const void *address)
{
    /* Static: UCX may still read them after a send returns. */
    static const struct tnt_ucx_ctl_header hello = { .cookie = { 0x0123456789abcdefull,
                                                                 0xfedcba9876543210ull },
                                                     .rank = 0,
                                                     .seq = TNT_UCX_SEQ_WIREUP };
    static const struct tnt_ucx_ctl_header goodbye = { .cookie = { 0x0123456789abcdefull,
                                                                   0xfedcba9876543210ull },
                                                       .rank = 0,
                                                       .seq = TNT_UCX_SEQ_GOODBYE };
    static const int32_t bare_rank = 0;
    static const uint64_t forged_value = FORGED;
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = address,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = stranger_ep_error, .arg = s },
    };

    if (ucp_ep_create(s->worker, &ep_params, &s->ep) != UCS_OK) {
        s->ep = NULL;
        snprintf(s->failure, sizeof(s->failure), "stranger: ucp_ep_create failed");
        return;
    }
    if (stranger_send(s, TNT_UCX_CTL_TAG(TNT_UCX_SEQ_WIREUP, 0), &hello, sizeof(hello)) != 0 ||
        stranger_send(s, TNT_UCX_CTL_TAG(TNT_UCX_SEQ_WIREUP, 0), &bare_rank, sizeof(bare_rank)) !=
            0 ||
        stranger_send(s, tnt_ucx_tag(DATA_SEQ, 0, 0), &forged_value, sizeof(forged_value)) != 0 ||
        stranger_send(s, TNT_UCX_CTL_TAG(TNT_UCX_SEQ_GOODBYE, 0), &goodbye, sizeof(goodbye)) != 0) {
        snprintf(s->failure, sizeof(s->failure), "stranger: a send failed");
    }
    /* Rank 1 is in its own wire-up meanwhile, progressing its worker, so
     * the forgeries are in its queue before rank 0 says hello. */
    uint64_t until = tnt_time_ns() + (uint64_t)(HOLD_BACK_S * 1e9);
    while (tnt_time_ns() < until) {
        ucp_worker_progress(s->worker);
        usleep(1000);
    }
}

/* ---- a bootstrap that lets the stranger in after the address exchange -- */

struct spy_boot {
    struct tnt_boot base;
    tnt_boot_t *inner;
    int calls;
    struct stranger *stranger; /* rank 0's only */
};

static tnt_status_t spy_allgather(tnt_boot_t *boot, const void *in, void *out, size_t bytes)
{
    struct spy_boot *b = (struct spy_boot *)boot;
    tnt_status_t status = tnt_boot_allgather(b->inner, in, out, bytes);

    /* tnt_ucx_create's second allgather carries the worker addresses,
     * rank 1's in the second block. */
    if (status == TNT_OK && ++b->calls == 2 && b->stranger != NULL) {
        stranger_attack(b->stranger, (const unsigned char *)out + bytes);
    }
    return status;
}

static void spy_abort(tnt_boot_t *boot, int exit_code, const char *message)
{
    struct spy_boot *b = (struct spy_boot *)boot;
    b->inner->ops->abort(b->inner, exit_code, message);
}

static void spy_finalize(tnt_boot_t *boot)
{
    struct spy_boot *b = (struct spy_boot *)boot;
    tnt_boot_finalize(b->inner);
    free(b);
}

static const struct tnt_boot_ops spy_ops = {
    .name = "spy",
    .allgather = spy_allgather,
    .abort = spy_abort,
    .finalize = spy_finalize,
};

/* ---- the ranks ----------------------------------------------------------- */

struct rank_ctx {
    tnt_boot_threads_group_t *group;
    struct stranger *stranger;
    int rank;
    pthread_t thread;
    uint64_t cookie[2];      /* of the attacked transport */
    uint64_t cookie2[2];     /* of a second one */
    uint64_t dropped_hellos; /* after the wire-up */
    uint64_t dropped;        /* all kinds, after the wire-up */
    uint64_t received;       /* rank 1: the collective's message */
    char failure[1024];
};

static tnt_ucx_t *create(struct rank_ctx *ctx, tnt_boot_t *boot)
{
    unsigned char connect[2] = { 0, 0 };
    tnt_ucx_t *ucx = NULL;

    connect[1 - ctx->rank] = 1;
    tnt_ucx_params_t params = {
        .boot = boot,
        .rank = ctx->rank,
        .size = 2,
        .connect = connect,
        .estimated_peers = 1,
        .timeout_s = TIMEOUT_S,
    };
    if (tnt_ucx_create(&params, &ucx) != TNT_OK) {
        snprintf(ctx->failure, sizeof(ctx->failure), "rank %d: tnt_ucx_create: %s", ctx->rank,
                 tnt_last_error());
        return NULL;
    }
    return ucx;
}

static void *rank_main(void *arg)
{
    struct rank_ctx *ctx = arg;
    struct spy_boot *boot = calloc(1, sizeof(*boot));
    tnt_ucx_t *ucx;

    if (boot == NULL || tnt_boot_threads_create(ctx->group, ctx->rank, &boot->inner) != TNT_OK) {
        snprintf(ctx->failure, sizeof(ctx->failure), "rank %d: boot", ctx->rank);
        free(boot);
        return NULL;
    }
    boot->base.ops = &spy_ops;
    boot->base.info = boot->inner->info;
    boot->stranger = ctx->rank == 0 ? ctx->stranger : NULL;

    ucx = create(ctx, &boot->base);
    if (ucx == NULL) {
        tnt_boot_finalize(&boot->base);
        return NULL;
    }
    ctx->cookie[0] = ucx->cookie[0];
    ctx->cookie[1] = ucx->cookie[1];
    ctx->dropped_hellos = ucx->dropped_of_kind[TNT_UCX_SEQ_WIREUP - TNT_UCX_DATA_SEQS];
    ctx->dropped = tnt_ucx_num_dropped(ucx);

    /* A collective's message from rank 0 to rank 1, under the tag the
     * stranger used too. */
    uint64_t value = ctx->rank == 0 ? REAL_VALUE : 0;
    tnt_status_t st = ctx->rank == 0
                          ? tnt_ucx_sendrecv(ucx, 1, tnt_ucx_tag(DATA_SEQ, 0, 0), &value,
                                             sizeof(value), -1, 0, NULL, 0, "test send")
                          : tnt_ucx_sendrecv(ucx, -1, 0, NULL, 0, 0, tnt_ucx_tag(DATA_SEQ, 0, 0),
                                             &value, sizeof(value), "test receive");
    if (st != TNT_OK) {
        snprintf(ctx->failure, sizeof(ctx->failure), "rank %d: exchange: %s", ctx->rank,
                 tnt_last_error());
    }
    ctx->received = value;
    tnt_ucx_destroy(ucx);

    /* A second transport over the same bootstrap draws its own cookie. */
    ucx = create(ctx, &boot->base);
    if (ucx != NULL) {
        ctx->cookie2[0] = ucx->cookie[0];
        ctx->cookie2[1] = ucx->cookie[1];
        tnt_ucx_destroy(ucx);
    }
    tnt_boot_finalize(&boot->base);
    return NULL;
}

/* Reads what the ranks logged (stderr went to fd) and echoes it. */
static char *read_log(int fd)
{
    static char text[1 << 16];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "---- logged by the ranks ----\n%s----\n", text);
    return text;
}

static void test_stranger_is_refused(void **state)
{
    (void)state;
    static const char *hosts[2] = { "node-a", "node-b" };
    tnt_boot_threads_group_t *group;
    struct stranger stranger;
    struct rank_ctx ctx[2];
    char log_path[] = "/tmp/test_ucx_cookie.XXXXXX";
    int log_fd = mkstemp(log_path);
    int saved_stderr = dup(STDERR_FILENO);

    assert_true(log_fd >= 0 && saved_stderr >= 0);
    unlink(log_path);
    assert_int_equal(stranger_create(&stranger), 0);
    assert_int_equal(tnt_boot_threads_group_create(2, hosts, TIMEOUT_S, &group), TNT_OK);
    memset(ctx, 0, sizeof(ctx));
    fflush(stderr);
    dup2(log_fd, STDERR_FILENO);
    for (int r = 0; r < 2; r++) {
        ctx[r].group = group;
        ctx[r].stranger = &stranger;
        ctx[r].rank = r;
        assert_int_equal(pthread_create(&ctx[r].thread, NULL, rank_main, &ctx[r]), 0);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(ctx[r].thread, NULL);
    }
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    const char *log = read_log(log_fd);
    close(log_fd);
    stranger_destroy(&stranger);
    tnt_boot_threads_group_destroy(group);

    assert_string_equal(stranger.failure, "");
    assert_string_equal(ctx[0].failure, "");
    assert_string_equal(ctx[1].failure, "");
    /* Both forged hellos refused by rank 1, nothing by rank 0. The forged
     * goodbye is dropped either during the wire-up (rank 1's wait for rank
     * 0, held back, checks whether rank 0 left) or by tnt_ucx_destroy's
     * goodbye handshake; the log line is checked below. */
    assert_int_equal(ctx[1].dropped_hellos, 2);
    assert_int_equal(ctx[0].dropped, 0);
    assert_non_null(strstr(log, "dropped a wire-up hello that claims to come from rank 0: it "
                                "does not carry this communicator's cookie"));
    assert_non_null(strstr(log, "dropped a goodbye that claims to come from rank 0: it does not "
                                "carry this communicator's cookie"));
    /* The stranger's collective message matched nothing. */
    assert_true(ctx[1].received == REAL_VALUE);
    /* One cookie per transport, the same on both ranks, and not zero. */
    assert_memory_equal(ctx[0].cookie, ctx[1].cookie, sizeof(ctx[0].cookie));
    assert_memory_equal(ctx[0].cookie2, ctx[1].cookie2, sizeof(ctx[0].cookie2));
    assert_true((ctx[0].cookie[0] | ctx[0].cookie[1]) != 0);
    assert_memory_not_equal(ctx[0].cookie, ctx[0].cookie2, sizeof(ctx[0].cookie));
}

/* The tag mapping is a bijection on collectives' tags that stays in their
 * range, and leaves control tags alone. */
static void test_wire_tags(void **state)
{
    (void)state;
    tnt_ucx_t ucx;
    memset(&ucx, 0, sizeof(ucx));
    ucx.seq_key = TNT_UCX_DATA_SEQS - 2;
    ucx.low_key = 0x123456789aull;

    for (uint32_t seq = TNT_UCX_DATA_SEQS - 3; seq < TNT_UCX_DATA_SEQS; seq++) {
        uint64_t tag = tnt_ucx_tag(seq, 5, 7);
        uint64_t wire = tnt_ucx_wire_tag(&ucx, tag);
        assert_true(wire >> TNT_UCX_TAG_SEQ_SHIFT < TNT_UCX_DATA_SEQS);
        assert_true(wire != tag);
    }
    /* Sequence numbers 0 and DATA_SEQS - 1 wrap to distinct wire values. */
    assert_true(tnt_ucx_wire_tag(&ucx, tnt_ucx_tag(0, 1, 1)) !=
                tnt_ucx_wire_tag(&ucx, tnt_ucx_tag(TNT_UCX_DATA_SEQS - 1, 1, 1)));
    assert_true(tnt_ucx_wire_tag(&ucx, tnt_ucx_tag(TNT_UCX_DATA_SEQS, 1, 1)) ==
                tnt_ucx_wire_tag(&ucx, tnt_ucx_tag(0, 1, 1)));
    for (uint32_t seq = TNT_UCX_SEQ_WIREUP; seq <= TNT_UCX_SEQ_SIDE; seq++) {
        uint64_t tag = TNT_UCX_CTL_TAG(seq, 3);
        assert_true(tnt_ucx_wire_tag(&ucx, tag) == tag);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_tags),
        cmocka_unit_test(test_stranger_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
