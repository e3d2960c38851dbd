/*
 * The collective set (tnt_reduce, tnt_reduce_scatter(v), tnt_gather,
 * tnt_scatter, tnt_allgatherv, tnt_alltoall(v)) checked against a serial
 * reference on any communicator: every rank computes every rank's input
 * itself, so it knows the exact answer. Inputs are small integers, whose
 * sums, products, minima and maxima are exact in every dtype (float16 and
 * bfloat16 included), so results are compared bit for bit; AVG is checked
 * on values whose mean is exact. Then the bad inputs: different counts,
 * a root out of range on one rank, alltoallv pairs that disagree, and
 * overlapping buffers, each an error on every rank, never a hang, and the
 * communicator still works afterwards.
 *
 * Used by comm_check (forked ranks over tnt_comm_create_oob) and
 * multinode_check (the launcher, simulated nodes). The includer defines
 * CHECK/CHECK_OK (tests/common/check.h).
 */
#ifndef TNT_TESTS_COLLECTIVE_SET_H
#define TNT_TESTS_COLLECTIVE_SET_H

#include <tnt/tnt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's element i: small, nonzero, and different per rank and element. */
static int set_input(int r, size_t i)
{
    return 1 + (int)((r * 7 + (int)(i % 13)) % 3);
}

static uint16_t set_f32_to_f16(float f)
{
    /* Exact for the small integers used here (<= 2048). */
    union {
        float f;
        uint32_t u;
    } v = { f };
    if (f == 0.0f) {
        return 0;
    }
    int exp = (int)((v.u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(((v.u >> 16) & 0x8000) | ((uint32_t)exp << 10) | ((v.u >> 13) & 0x3ff));
}

static void set_store(tnt_dtype_t dtype, void *buf, size_t i, double x)
{
    switch (dtype) {
    case TNT_FLOAT32:
        ((float *)buf)[i] = (float)x;
        break;
    case TNT_FLOAT64:
        ((double *)buf)[i] = x;
        break;
    case TNT_FLOAT16:
        ((uint16_t *)buf)[i] = set_f32_to_f16((float)x);
        break;
    case TNT_BFLOAT16: {
        union {
            float f;
            uint32_t u;
        } v = { (float)x };
        ((uint16_t *)buf)[i] = (uint16_t)(v.u >> 16);
        break;
    }
    case TNT_INT32:
        ((int32_t *)buf)[i] = (int32_t)x;
        break;
    case TNT_INT64:
        ((int64_t *)buf)[i] = (int64_t)x;
        break;
    default:
        break;
    }
}

/* The serial reduction of element i over ranks 0..size-1. */
static double set_reference(tnt_op_t op, int size, size_t i, tnt_dtype_t dtype)
{
    double acc = set_input(0, i);
    for (int r = 1; r < size; r++) {
        double x = set_input(r, i);
        switch (op) {
        case TNT_SUM:
        case TNT_AVG:
            acc += x;
            break;
        case TNT_PROD:
            acc *= x;
            break;
        case TNT_MIN:
            acc = x < acc ? x : acc;
            break;
        case TNT_MAX:
            acc = x > acc ? x : acc;
            break;
        default:
            break;
        }
    }
    if (op == TNT_AVG) {
        acc /= size;
        if (dtype == TNT_INT32 || dtype == TNT_INT64) {
            acc = (double)(long long)acc; /* integer division */
        }
    }
    return acc;
}

/* Products of up to size factors of 1..3 stay exact in float16 only for
 * few ranks; the others are exact anywhere. */
static int set_op_exact(tnt_op_t op, tnt_dtype_t dtype, int size)
{
    if (op == TNT_PROD && dtype == TNT_FLOAT16) {
        return size <= 6; /* 3^6 = 729: float16 holds integers to 2048 exactly */
    }
    if (op == TNT_PROD && dtype == TNT_BFLOAT16) {
        return size <= 5; /* 3^5 = 243: bfloat16 holds integers to 256 exactly */
    }
    if (op == TNT_AVG && dtype != TNT_INT32 && dtype != TNT_INT64) {
        return 0; /* a mean is rounded in float; checked below with exact values */
    }
    return 1;
}

static void set_check_equal(tnt_dtype_t dtype, const void *got, const void *want, size_t count,
                            const char *what, int op)
{
    size_t esize = tnt_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) {
        CHECK(memcmp((const char *)got + i * esize, (const char *)want + i * esize, esize) == 0,
              "%s: dtype %d op %d: element %zu differs from the serial reference", what, (int)dtype,
              op, i);
    }
}

static void check_collective_set(tnt_comm_t *comm)
{
    const int size = tnt_size(comm), me = tnt_rank(comm);
    const size_t block = 37; /* elements per rank: odd, not a multiple of anything */
    const size_t total = block * (size_t)size;
    const tnt_dtype_t dtypes[] = { TNT_FLOAT32,  TNT_FLOAT64, TNT_FLOAT16,
                                   TNT_BFLOAT16, TNT_INT32,   TNT_INT64 };
    const tnt_op_t ops[] = { TNT_SUM, TNT_PROD, TNT_MIN, TNT_MAX, TNT_AVG };
    char *send = malloc(total * 8), *recv = malloc(total * 8), *want = malloc(total * 8);
    CHECK(send != NULL && recv != NULL && want != NULL, "malloc");

    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        tnt_dtype_t dt = dtypes[d];
        size_t es = tnt_dtype_size(dt);
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            tnt_op_t op = ops[o];
            if (!set_op_exact(op, dt, size)) {
                continue;
            }
            for (size_t i = 0; i < total; i++) {
                set_store(dt, send, i, set_input(me, i));
                set_store(dt, want, i, set_reference(op, size, i, dt));
            }
            /* reduce, to every root in turn (out of place), then in place. */
            for (int root = 0; root < size; root++) {
                memset(recv, 0x5a, total * es);
                CHECK_OK(tnt_reduce(comm, send, me == root ? recv : NULL, total, dt, op, root));
                if (me == root) {
                    set_check_equal(dt, recv, want, total, "reduce", op);
                }
            }
            memcpy(recv, send, total * es);
            CHECK_OK(tnt_reduce(comm, recv, recv, total, dt, op, size - 1));
            if (me == size - 1) {
                set_check_equal(dt, recv, want, total, "reduce in place", op);
            }
            /* reduce_scatter: my block of the reference. */
            memset(recv, 0x5a, block * es);
            CHECK_OK(tnt_reduce_scatter(comm, send, recv, block, dt, op));
            set_check_equal(dt, recv, want + (size_t)me * block * es, block, "reduce_scatter", op);
            memcpy(recv, send, total * es);
            CHECK_OK(tnt_reduce_scatter(comm, recv, recv + (size_t)me * block * es, block, dt, op));
            set_check_equal(dt, recv + (size_t)me * block * es, want + (size_t)me * block * es,
                            block, "reduce_scatter in place", op);
            /* reduce_scatterv: rank r gets r + 1 elements (one rank 0 of them). */
            size_t counts[64], offset = 0, vtotal = 0;
            for (int r = 0; r < size; r++) {
                counts[r] = r == 1 ? 0 : (size_t)r + 1;
                offset += r < me ? counts[r] : 0;
                vtotal += counts[r];
            }
            CHECK(vtotal <= total, "reduce_scatterv sizes");
            CHECK_OK(tnt_reduce_scatterv(comm, send, recv, counts, dt, op));
            set_check_equal(dt, recv, want + offset * es, counts[me], "reduce_scatterv", op);
        }
    }
    /* AVG in float: every rank passes the same exact value, so the mean is
     * that value bit for bit. */
    for (size_t i = 0; i < total; i++) {
        ((float *)send)[i] = 0.75f * (float)(i % 5);
    }
    CHECK_OK(tnt_reduce_scatter(comm, send, recv, block, TNT_FLOAT32, TNT_AVG));
    set_check_equal(TNT_FLOAT32, recv, send + (size_t)me * block * 4, block, "reduce_scatter avg",
                    TNT_AVG);

    /* gather / scatter / allgatherv / alltoall(v): bytes tagged with who
     * sent them to whom. */
    const size_t bpr = 13;
    unsigned char mine[13];
    for (size_t i = 0; i < bpr; i++) {
        mine[i] = (unsigned char)(me * 16 + (int)i);
    }
    for (int root = 0; root < size; root++) {
        memset(recv, 0, total * 8);
        CHECK_OK(tnt_gather(comm, mine, me == root ? recv : NULL, bpr, root));
        for (int r = 0; me == root && r < size; r++) {
            for (size_t i = 0; i < bpr; i++) {
                CHECK((unsigned char)recv[(size_t)r * bpr + i] == (unsigned char)(r * 16 + (int)i),
                      "gather to %d: block %d byte %zu", root, r, i);
            }
        }
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < bpr; i++) {
                send[(size_t)r * bpr + i] = (char)(root * 64 + r * 4 + (int)i);
            }
        }
        memset(recv, 0, bpr);
        CHECK_OK(tnt_scatter(comm, me == root ? send : NULL, recv, bpr, root));
        for (size_t i = 0; i < bpr; i++) {
            CHECK(recv[i] == (char)(root * 64 + me * 4 + (int)i), "scatter from %d: byte %zu", root,
                  i);
        }
    }
    /* allgatherv: rank r gives (r % 3) * 5 bytes, so some give none. */
    size_t vbytes[64], vsum = 0;
    for (int r = 0; r < size; r++) {
        vbytes[r] = (size_t)(r % 3) * 5;
        vsum += vbytes[r];
    }
    memset(recv, 0, vsum + 1);
    CHECK_OK(tnt_allgatherv(comm, mine, recv, vbytes));
    for (int r = 0, at = 0; r < size; r++) {
        for (size_t i = 0; i < vbytes[r]; i++, at++) {
            CHECK((unsigned char)recv[at] == (unsigned char)(r * 16 + (int)i),
                  "allgatherv: rank %d byte %zu", r, i);
        }
    }
    /* alltoall: block j of rank r's send says (r, j). */
    for (int j = 0; j < size; j++) {
        for (size_t i = 0; i < bpr; i++) {
            send[(size_t)j * bpr + i] = (char)(me * 8 + j + (int)i * 64);
        }
    }
    CHECK_OK(tnt_alltoall(comm, send, recv, bpr));
    for (int r = 0; r < size; r++) {
        for (size_t i = 0; i < bpr; i++) {
            CHECK(recv[(size_t)r * bpr + i] == (char)(r * 8 + me + (int)i * 64),
                  "alltoall: from rank %d byte %zu", r, i);
        }
    }
    /* alltoallv: rank r sends (r + j) % 4 bytes to rank j. */
    size_t sb[64], rb[64], soff = 0;
    for (int j = 0; j < size; j++) {
        sb[j] = (size_t)((me + j) % 4);
        rb[j] = (size_t)((j + me) % 4);
        for (size_t i = 0; i < sb[j]; i++) {
            send[soff + i] = (char)(me * 8 + j + (int)i * 64);
        }
        soff += sb[j];
    }
    CHECK_OK(tnt_alltoallv(comm, send, sb, recv, rb));
    for (int r = 0, at = 0; r < size; r++) {
        for (size_t i = 0; i < rb[r]; i++, at++) {
            CHECK(recv[at] == (char)(r * 8 + me + (int)i * 64), "alltoallv: from rank %d byte %zu",
                  r, i);
        }
    }
    /* Nothing to move anywhere: every rank learns it from the others' sizes. */
    size_t none[64] = { 0 };
    CHECK_OK(tnt_alltoallv(comm, send, none, recv, none));

    /* Bulk: blocks far larger than a shared-memory slot's share per rank
     * (with TNT_SHM_STAGING_KB=64, 4 KiB per rank of 8), so every byte goes
     * through many phases; each byte names its sender, receiver and place. */
    {
        const size_t big = 50001;
        unsigned char *bs = malloc(big * (size_t)size), *br = malloc(big * (size_t)size);
        CHECK(bs != NULL && br != NULL, "malloc");
#define BULK_BYTE(src, dst, i) ((unsigned char)((src)*31 + (dst)*7 + (int)((i) % 251)))
        for (int root = 0; root<size; root += size> 2 ? size - 1 : 1) {
            for (size_t i = 0; i < big; i++) {
                bs[i] = BULK_BYTE(me, root, i);
            }
            memset(br, 0, big * (size_t)size);
            CHECK_OK(tnt_gather(comm, bs, me == root ? br : NULL, big, root));
            for (int r = 0; me == root && r < size; r++) {
                for (size_t i = 0; i < big; i++) {
                    CHECK(br[(size_t)r * big + i] == BULK_BYTE(r, root, i),
                          "bulk gather to %d: rank %d byte %zu", root, r, i);
                }
            }
            for (int j = 0; j < size; j++) {
                for (size_t i = 0; i < big; i++) {
                    bs[(size_t)j * big + i] = BULK_BYTE(root, j, i);
                }
            }
            memset(br, 0, big);
            CHECK_OK(tnt_scatter(comm, me == root ? bs : NULL, br, big, root));
            for (size_t i = 0; i < big; i++) {
                CHECK(br[i] == BULK_BYTE(root, me, i), "bulk scatter from %d: byte %zu", root, i);
            }
        }
        for (int j = 0; j < size; j++) {
            for (size_t i = 0; i < big; i++) {
                bs[(size_t)j * big + i] = BULK_BYTE(me, j, i);
            }
        }
        memset(br, 0, big * (size_t)size);
        CHECK_OK(tnt_alltoall(comm, bs, br, big));
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < big; i++) {
                CHECK(br[(size_t)r * big + i] == BULK_BYTE(r, me, i),
                      "bulk alltoall: from rank %d byte %zu", r, i);
            }
        }
        /* alltoallv: rank r sends big - 1000 * ((r + j) % 3) bytes to j. */
        size_t bsb[64], brb[64], off = 0;
        for (int j = 0; j < size; j++) {
            bsb[j] = big - 1000 * (size_t)((me + j) % 3);
            brb[j] = big - 1000 * (size_t)((j + me) % 3);
            for (size_t i = 0; i < bsb[j]; i++) {
                bs[off + i] = BULK_BYTE(me, j, i);
            }
            off += bsb[j];
        }
        memset(br, 0, big * (size_t)size);
        CHECK_OK(tnt_alltoallv(comm, bs, bsb, br, brb));
        off = 0;
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < brb[r]; i++) {
                CHECK(br[off + i] == BULK_BYTE(r, me, i), "bulk alltoallv: from rank %d byte %zu",
                      r, i);
            }
            off += brb[r];
        }
#undef BULK_BYTE
        free(bs);
        free(br);
    }

    /* In place at the root (gather: its block of recvbuf; scatter: its
     * block of sendbuf), and alltoall, with blocks above UCX's rendezvous
     * size over TCP (256 KiB) when the communicator spans nodes: a node's
     * blocks then cross as one large message. */
    {
        const size_t ib = tnt_num_nodes(comm) > 1 ? 300001 : 4099;
        unsigned char *whole = malloc(ib * (size_t)size), *own = malloc(ib);
        unsigned char *other = malloc(ib * (size_t)size);
        CHECK(whole != NULL && own != NULL && other != NULL, "malloc");
#define IP_BYTE(src, dst, i) ((unsigned char)((src)*37 + (dst)*11 + (int)((i) % 241)))
        for (int root = 0; root<size; root += size> 2 ? size - 1 : 1) {
            for (size_t i = 0; i < ib; i++) {
                own[i] = IP_BYTE(me, root, i);
            }
            if (me == root) {
                memset(whole, 0, ib * (size_t)size);
                memcpy(whole + (size_t)root * ib, own, ib);
                CHECK_OK(tnt_gather(comm, whole + (size_t)root * ib, whole, ib, root));
                for (int r = 0; r < size; r++) {
                    for (size_t i = 0; i < ib; i++) {
                        CHECK(whole[(size_t)r * ib + i] == IP_BYTE(r, root, i),
                              "in-place gather to %d: rank %d byte %zu", root, r, i);
                    }
                }
                for (int j = 0; j < size; j++) {
                    for (size_t i = 0; i < ib; i++) {
                        whole[(size_t)j * ib + i] = IP_BYTE(root, j, i);
                    }
                }
                CHECK_OK(tnt_scatter(comm, whole, whole + (size_t)root * ib, ib, root));
                for (int j = 0; j < size; j++) {
                    for (size_t i = 0; i < ib; i++) {
                        CHECK(whole[(size_t)j * ib + i] == IP_BYTE(root, j, i),
                              "in-place scatter from %d changed block %d byte %zu", root, j, i);
                    }
                }
            } else {
                CHECK_OK(tnt_gather(comm, own, NULL, ib, root));
                memset(own, 0, ib);
                CHECK_OK(tnt_scatter(comm, NULL, own, ib, root));
                for (size_t i = 0; i < ib; i++) {
                    CHECK(own[i] == IP_BYTE(root, me, i), "in-place scatter from %d: byte %zu",
                          root, i);
                }
            }
        }
        for (int j = 0; j < size; j++) {
            for (size_t i = 0; i < ib; i++) {
                whole[(size_t)j * ib + i] = IP_BYTE(me, j, i);
            }
        }
        memset(other, 0, ib * (size_t)size);
        CHECK_OK(tnt_alltoall(comm, whole, other, ib));
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < ib; i++) {
                CHECK(other[(size_t)r * ib + i] == IP_BYTE(r, me, i),
                      "large alltoall: from rank %d byte %zu", r, i);
            }
        }
#undef IP_BYTE
        free(whole);
        free(own);
        free(other);
    }

    /* Posted forms: four at once, waited for in reverse order; they run in
     * posting order whatever the waits do. */
    {
        float *rs_in = malloc(total * sizeof(float)), *rs_out = malloc(block * sizeof(float));
        unsigned char *g = malloc(bpr * (size_t)size), *a2a = malloc(bpr * (size_t)size),
                      *a2a_in = malloc(bpr * (size_t)size), *agv = malloc(vsum + 1);
        CHECK(rs_in && rs_out && g && a2a && a2a_in && agv, "malloc");
        for (size_t i = 0; i < total; i++) {
            rs_in[i] = (float)set_input(me, i);
        }
        for (int j = 0; j < size; j++) {
            memset(a2a_in + (size_t)j * bpr, me * 8 + j, bpr);
        }
        tnt_request_t *req[4];
        CHECK_OK(
            tnt_reduce_scatter_post(comm, rs_in, rs_out, block, TNT_FLOAT32, TNT_MAX, &req[0]));
        CHECK_OK(tnt_gather_post(comm, mine, me == 0 ? g : NULL, bpr, 0, &req[1]));
        CHECK_OK(tnt_alltoall_post(comm, a2a_in, a2a, bpr, &req[2]));
        CHECK_OK(tnt_allgatherv_post(comm, mine, agv, vbytes, &req[3]));
        for (int k = 3; k >= 0; k--) {
            CHECK_OK(tnt_wait(req[k]));
        }
        for (size_t i = 0; i < block; i++) {
            CHECK(rs_out[i] ==
                      (float)set_reference(TNT_MAX, size, (size_t)me * block + i, TNT_FLOAT32),
                  "reduce_scatter_post: element %zu", i);
        }
        for (int r = 0; me == 0 && r < size; r++) {
            CHECK(g[(size_t)r * bpr] == (unsigned char)(r * 16), "gather_post: block %d", r);
        }
        for (int r = 0; r < size; r++) {
            CHECK(a2a[(size_t)r * bpr] == (unsigned char)(r * 8 + me), "alltoall_post: block %d",
                  r);
        }
        for (int r = 0, at = 0; r < size; at += (int)vbytes[r], r++) {
            CHECK(vbytes[r] == 0 || agv[at] == (unsigned char)(r * 16), "allgatherv_post: rank %d",
                  r);
        }
        /* A bad argument in a posted call: its tnt_wait says so, on every
         * rank, naming it where it was passed. */
        if (size > 1) {
            tnt_request_t *bad;
            CHECK_OK(tnt_scatter_post(comm, NULL, rs_out, 4, 0, &bad));
            tnt_status_t st = tnt_wait(bad);
            CHECK(st == TNT_ERR_INVALID_ARG, "a posted NULL sendbuf on the root gave %s",
                  tnt_status_string(st));
            CHECK(strstr(tnt_last_error(), me == 0 ? "sendbuf" : "rank 0") != NULL,
                  "the posted bad argument is not named: %s", tnt_last_error());
        }
        free(rs_in);
        free(rs_out);
        free(g);
        free(a2a);
        free(a2a_in);
        free(agv);
    }

    /* Bad input: an error on every rank, and the communicator goes on. A
     * bad argument on a root while the others pass good ones uses blocks
     * above the eager size (8 KiB): a small gather's or reduce's non-roots
     * hand their bytes off and return, and learn of the error in their
     * next call, which leaves the communicator out of step
     * (docs/c-api.md, "Eager rooted calls"). */
    if (size > 1) {
        tnt_status_t st;
        const size_t big_block = 8192;
        char *big = calloc((size_t)size + 1, big_block);
        CHECK(big != NULL, "malloc");
        st = tnt_reduce_scatter(comm, send, recv, me == size - 1 ? 3 : 2, TNT_FLOAT32, TNT_SUM);
        CHECK(st == TNT_ERR_MISMATCH, "counts that differ gave %s", tnt_status_string(st));
        CHECK(strstr(tnt_last_error(), "count 3") != NULL &&
                  strstr(tnt_last_error(), "count") != NULL,
              "the mismatch is not named: %s", tnt_last_error());
        st = tnt_gather(comm, big, big + big_block, big_block, me == 0 ? size : 0);
        CHECK(st == TNT_ERR_INVALID_ARG, "a root out of range on rank 0 gave %s",
              tnt_status_string(st));
        CHECK(strstr(tnt_last_error(), me == 0 ? "root" : "rank 0") != NULL,
              "the bad root is not named: %s", tnt_last_error());
        st = tnt_scatter(comm, send, recv, bpr, me == 0 ? 1 : 0);
        CHECK(st == TNT_ERR_MISMATCH && strstr(tnt_last_error(), "root") != NULL,
              "roots that differ gave %s: %s", tnt_status_string(st), tnt_last_error());
        sb[0] += me == 0 ? 1 : 0; /* rank 0 sends one byte more to rank 0 than it expects */
        st = tnt_alltoallv(comm, send, sb, recv, rb);
        CHECK(st == TNT_ERR_MISMATCH, "alltoallv pairs that disagree gave %s",
              tnt_status_string(st));
        sb[0] -= me == 0 ? 1 : 0;
        /* Two different ranks disagree: the last rank expects one byte more
         * from rank 0 than rank 0 sends. Every rank fails alike, naming the
         * pair, and the communicator is still in step: the same call with
         * sizes that agree then moves the data. */
        rb[0] += me == size - 1 ? 1 : 0;
        st = tnt_alltoallv(comm, send, sb, recv, rb);
        CHECK(st == TNT_ERR_MISMATCH, "alltoallv pair 0 -> %d that disagrees gave %s", size - 1,
              tnt_status_string(st));
        char pair[64];
        snprintf(pair, sizeof pair, "rank 0 sends %zu bytes to rank %d, which expects %zu",
                 (size_t)((size - 1) % 4), size - 1, (size_t)((size - 1) % 4) + 1);
        CHECK(strstr(tnt_last_error(), pair) != NULL, "the pair is not named (%s): %s", pair,
              tnt_last_error());
        rb[0] -= me == size - 1 ? 1 : 0;
        soff = 0;
        for (int j = 0; j < size; j++) {
            for (size_t i = 0; i < sb[j]; i++) {
                send[soff + i] = (char)(me * 8 + j + (int)i * 64);
            }
            soff += sb[j];
        }
        memset(recv, 0, soff);
        CHECK_OK(tnt_alltoallv(comm, send, sb, recv, rb));
        for (int r = 0, at = 0; r < size; r++) {
            for (size_t i = 0; i < rb[r]; i++, at++) {
                CHECK(recv[at] == (char)(r * 8 + me + (int)i * 64),
                      "alltoallv after a mismatch: from rank %d byte %zu", r, i);
            }
        }
        st = tnt_reduce(comm, big, big + 4, big_block / 4, TNT_FLOAT32, TNT_SUM, 0);
        free(big);
        CHECK(st == TNT_ERR_INVALID_ARG, "overlapping buffers on the root gave %s",
              tnt_status_string(st));
        int64_t one = 1, sum = 0;
        CHECK_OK(tnt_allreduce(comm, &one, &sum, 1, TNT_INT64, TNT_SUM));
        CHECK(sum == size, "allreduce after the bad inputs gave %lld", (long long)sum);
    }
    free(send);
    free(recv);
    free(want);
}

#endif
