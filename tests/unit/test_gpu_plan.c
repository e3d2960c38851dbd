/*
 * Device-path logic that needs no GPU (libtnt/src/gpu/plan.c, chunks.c):
 * TNT_GPU_TRANSPORT / TNT_GPU_STAGING_KB parsing, transport selection from
 * every rank's probe record (auto, nccl, host; NCCL missing; ranks sharing a
 * GPU; a rank without a GPU; ranks disagreeing), duplicate-GPU detection
 * from device UUIDs, and chunk planning of the host-staged path.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <tnt/tnt.h>
#include "gpu/gpu.h"
#include "util/settings.h"

static void set_uuid(struct tnt_gpu_peer *p, unsigned gpu)
{
    memset(p->uuid, 0xa5, sizeof(p->uuid));
    p->uuid[0] = (uint8_t)(gpu & 0xff);
    p->uuid[15] = (uint8_t)(gpu >> 8);
}

/* size ranks, rank r on GPU gpus[r] (NULL: each its own), all ok, NCCL
 * everywhere, the given request. */
static struct tnt_gpu_peer *peers_make(int size, const unsigned *gpus, tnt_gpu_request_t request)
{
    struct tnt_gpu_peer *p = calloc((size_t)size, sizeof(*p));
    assert_non_null(p);
    for (int r = 0; r < size; r++) {
        set_uuid(&p[r], gpus != NULL ? gpus[r] : (unsigned)r);
        p[r].ok = 1;
        p[r].nccl_ok = 1;
        p[r].request = (int32_t)request;
        p[r].device = gpus != NULL ? (int32_t)gpus[r] : 0;
    }
    return p;
}

/* ---- settings (util/settings.c parses them with every TNT_* variable) ---- */

static void test_request_parse(void **state)
{
    tnt_settings_t st;
    tnt_settings_set_defaults(&st);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_TRANSPORT", "nccl"), TNT_OK);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_NCCL);
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_TRANSPORT", "HOST"), TNT_OK);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_HOST);
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_TRANSPORT", ""), TNT_OK);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_AUTO);

    st.gpu_transport = TNT_GPU_REQUEST_HOST;
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_TRANSPORT", "ncl"), TNT_ERR_INVALID_ARG);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_HOST); /* untouched on error */
    const char *msg = tnt_last_error();
    assert_non_null(strstr(msg, "TNT_GPU_TRANSPORT='ncl'"));
    assert_non_null(strstr(msg, "auto"));
    assert_non_null(strstr(msg, "nccl"));
    assert_non_null(strstr(msg, "host"));
}

static void test_staging_parse(void **state)
{
    tnt_settings_t st;
    tnt_settings_set_defaults(&st);
    assert_int_equal(st.gpu_staging_bytes, (size_t)4096 << 10);
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_STAGING_KB", "64"), TNT_OK);
    assert_int_equal(st.gpu_staging_bytes, (size_t)64 << 10);
    assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_STAGING_KB", "16384"), TNT_OK);
    assert_int_equal(st.gpu_staging_bytes, (size_t)16384 << 10);

    const char *bad[] = { "63", "0", "-1", "4k", " 64", "abc", "99999999999999999999999" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        st.gpu_staging_bytes = 7;
        assert_int_equal(tnt_settings_parse(&st, "TNT_GPU_STAGING_KB", bad[i]),
                         TNT_ERR_INVALID_ARG);
        assert_int_equal(st.gpu_staging_bytes, 7);
        assert_non_null(strstr(tnt_last_error(), "TNT_GPU_STAGING_KB"));
        assert_non_null(strstr(tnt_last_error(), "from 64"));
    }
}

static void test_settings_read_env(void **state)
{
    tnt_settings_t st;
    setenv("TNT_GPU_TRANSPORT", "host", 1);
    setenv("TNT_GPU_STAGING_KB", "128", 1);
    assert_int_equal(tnt_settings_load(&st), TNT_OK);
    assert_int_equal(st.gpu_transport, TNT_GPU_REQUEST_HOST);
    assert_int_equal(st.gpu_staging_bytes, (size_t)128 << 10);
    setenv("TNT_GPU_TRANSPORT", "gloo", 1);
    assert_int_equal(tnt_settings_load(&st), TNT_ERR_INVALID_ARG);
    assert_non_null(strstr(tnt_last_error(), "'gloo'"));
    unsetenv("TNT_GPU_TRANSPORT");
    unsetenv("TNT_GPU_STAGING_KB");
}

/* ---- duplicate GPUs ----------------------------------------------------- */

static void test_duplicates(void **state)
{
    int a = -1, b = -1;
    struct tnt_gpu_peer *p = peers_make(8, NULL, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_find_duplicate(p, 8, &a, &b), 0);
    assert_int_equal(a, -1); /* untouched when none */
    assert_int_equal(tnt_gpu_find_duplicate(p, 1, &a, &b), 0);
    assert_int_equal(tnt_gpu_find_duplicate(p, 0, &a, &b), 0);
    free(p);

    /* Ranks 5 and 7 share one GPU, 2/3/6 another: the lowest pair wins. */
    const unsigned gpus[8] = { 0, 1, 9, 9, 4, 300, 9, 300 };
    p = peers_make(8, gpus, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_find_duplicate(p, 8, &a, &b), 1);
    assert_int_equal(a, 2);
    assert_int_equal(b, 3);
    free(p);

    const unsigned late[5] = { 7, 1, 2, 3, 7 };
    p = peers_make(5, late, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_find_duplicate(p, 5, &a, &b), 1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 4);
    free(p);

    /* UUIDs differing only in their last byte are different GPUs. */
    const unsigned far[2] = { 0x100, 0x200 };
    p = peers_make(2, far, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_find_duplicate(p, 2, &a, &b), 0);
    free(p);

    /* Many ranks, one shared pair at the end. */
    unsigned *many = malloc(4096 * sizeof(*many));
    for (unsigned r = 0; r < 4096; r++) {
        many[r] = r;
    }
    many[4095] = 4000;
    p = peers_make(4096, many, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_find_duplicate(p, 4096, &a, &b), 1);
    assert_int_equal(a, 4000);
    assert_int_equal(b, 4095);
    free(p);
    free(many);
}

/* ---- selection ---------------------------------------------------------- */

static void test_select_auto(void **state)
{
    tnt_gpu_transport_t t = TNT_GPU_TRANSPORT_NONE;
    struct tnt_gpu_peer *p = peers_make(4, NULL, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_NCCL);
    assert_int_equal(tnt_gpu_select(p, 1, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_NCCL);

    /* One rank without NCCL: everyone stages through the host. */
    p[2].nccl_ok = 0;
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_HOST);
    free(p);

    /* Two ranks on one GPU: NCCL would refuse, so host. */
    const unsigned shared[4] = { 0, 1, 1, 2 };
    p = peers_make(4, shared, TNT_GPU_REQUEST_AUTO);
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_HOST);
    free(p);
}

static void test_select_forced(void **state)
{
    tnt_gpu_transport_t t = TNT_GPU_TRANSPORT_NONE;
    const unsigned shared[3] = { 0, 0, 0 };
    struct tnt_gpu_peer *p = peers_make(3, shared, TNT_GPU_REQUEST_HOST);
    assert_int_equal(tnt_gpu_select(p, 3, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_HOST);
    free(p);

    p = peers_make(3, NULL, TNT_GPU_REQUEST_HOST);
    assert_int_equal(tnt_gpu_select(p, 3, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_HOST);
    free(p);

    p = peers_make(3, NULL, TNT_GPU_REQUEST_NCCL);
    assert_int_equal(tnt_gpu_select(p, 3, &t), TNT_OK);
    assert_int_equal(t, TNT_GPU_TRANSPORT_NCCL);

    /* nccl asked for, one rank cannot load it: an error naming the rank. */
    t = TNT_GPU_TRANSPORT_NONE;
    p[1].nccl_ok = 0;
    assert_int_equal(tnt_gpu_select(p, 3, &t), TNT_ERR_UNSUPPORTED);
    assert_int_equal(t, TNT_GPU_TRANSPORT_NONE);
    assert_non_null(strstr(tnt_last_error(), "rank 1 could not load NCCL"));
    assert_non_null(strstr(tnt_last_error(), "TNT_GPU_TRANSPORT=host"));
    free(p);

    /* nccl asked for, ranks share a GPU. */
    const unsigned pair[3] = { 4, 5, 4 };
    p = peers_make(3, pair, TNT_GPU_REQUEST_NCCL);
    assert_int_equal(tnt_gpu_select(p, 3, &t), TNT_ERR_UNSUPPORTED);
    assert_non_null(strstr(tnt_last_error(), "ranks 0 and 2 use the same GPU"));
    assert_non_null(strstr(tnt_last_error(), "--gpus-per-task"));
    free(p);
}

static void test_select_errors(void **state)
{
    tnt_gpu_transport_t t = TNT_GPU_TRANSPORT_NONE;
    struct tnt_gpu_peer *p = peers_make(4, NULL, TNT_GPU_REQUEST_AUTO);

    /* A rank that cannot do device collectives at all fails everyone, and
     * its reason is passed on. */
    p[3].ok = 0;
    snprintf(p[3].reason, sizeof(p[3].reason), "no usable GPU (cudaGetDeviceCount: no device)");
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_ERR_UNSUPPORTED);
    assert_non_null(strstr(tnt_last_error(), "rank 3: no usable GPU"));
    /* A rank with a bad setting passes its own status on. */
    p[3].error = TNT_ERR_INVALID_ARG;
    snprintf(p[3].reason, sizeof(p[3].reason), "TNT_GPU_TRANSPORT='x' is not a GPU transport");
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_ERR_INVALID_ARG);
    assert_non_null(strstr(tnt_last_error(), "rank 3: TNT_GPU_TRANSPORT='x'"));
    p[3].ok = 1;

    /* Ranks asking for different transports. */
    p[2].request = TNT_GPU_REQUEST_HOST;
    assert_int_equal(tnt_gpu_select(p, 4, &t), TNT_ERR_MISMATCH);
    assert_non_null(strstr(tnt_last_error(), "rank 0 has auto, rank 2 has host"));
    assert_int_equal(t, TNT_GPU_TRANSPORT_NONE);
    free(p);
}

/* ---- chunks ------------------------------------------------------------- */

static void check_cover(const tnt_gpu_chunks_t *plan, size_t esize, size_t chunk_bytes)
{
    size_t next = 0;
    for (size_t i = 0; i < plan->num_chunks; i++) {
        size_t off, n;
        tnt_gpu_chunk_at(plan, i, &off, &n);
        assert_int_equal(off, next);
        assert_true(n >= 1);
        assert_true(n * esize <= chunk_bytes || n == 1);
        next = off + n;
    }
    assert_int_equal(next, plan->count);
}

static void test_chunks(void **state)
{
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(0, 4, 4096);
    assert_int_equal(plan.num_chunks, 0);

    plan = tnt_gpu_chunks_plan(1024, 4, 4096); /* exactly one chunk */
    assert_int_equal(plan.num_chunks, 1);
    assert_int_equal(plan.chunk_elems, 1024);
    check_cover(&plan, 4, 4096);

    plan = tnt_gpu_chunks_plan(1025, 4, 4096); /* one element over */
    assert_int_equal(plan.num_chunks, 2);
    size_t off, n;
    tnt_gpu_chunk_at(&plan, 1, &off, &n);
    assert_int_equal(off, 1024);
    assert_int_equal(n, 1);
    check_cover(&plan, 4, 4096);

    /* Chunk sizes round down to whole elements: 8-byte elements, 100 B. */
    plan = tnt_gpu_chunks_plan(100, 8, 100);
    assert_int_equal(plan.chunk_elems, 12);
    assert_int_equal(plan.num_chunks, 9);
    check_cover(&plan, 8, 100);

    /* A chunk smaller than one element still moves one element. */
    plan = tnt_gpu_chunks_plan(5, 8, 3);
    assert_int_equal(plan.chunk_elems, 1);
    assert_int_equal(plan.num_chunks, 5);

    /* 256 MiB of float32 through 4 MiB chunks. */
    plan = tnt_gpu_chunks_plan((size_t)64 << 20, 4, (size_t)4 << 20);
    assert_int_equal(plan.num_chunks, 64);
    check_cover(&plan, 4, (size_t)4 << 20);

    /* No overflow near SIZE_MAX. */
    plan = tnt_gpu_chunks_plan(SIZE_MAX, 1, (size_t)1 << 20);
    assert_int_equal(plan.num_chunks, SIZE_MAX / ((size_t)1 << 20) + 1);
    tnt_gpu_chunk_at(&plan, plan.num_chunks - 1, &off, &n);
    assert_int_equal(off + n, SIZE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_parse),     cmocka_unit_test(test_staging_parse),
        cmocka_unit_test(test_settings_read_env), cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_select_auto),       cmocka_unit_test(test_select_forced),
        cmocka_unit_test(test_select_errors),     cmocka_unit_test(test_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
