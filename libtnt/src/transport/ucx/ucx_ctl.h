/*
 * The UCX transport's control messages (wire-up hello, goodbye, the hang
 * doctor's side messages): their kinds, the header each starts with, and
 * the check a received one passes before it is believed. Kept apart from
 * ucx_impl.h and free of UCX so that the check is pure: ucx_wait.c calls it
 * on every control message, and tests/fuzz/fuzz_ucx_ctl.c on arbitrary
 * bytes.
 */
#ifndef TNT_TRANSPORT_UCX_UCX_CTL_H
#define TNT_TRANSPORT_UCX_UCX_CTL_H

#include <stddef.h>
#include <stdint.h>

/* The values of a tag's 24-bit sequence field (ucx_impl.h has the layout):
 * collectives use 0 .. TNT_UCX_DATA_SEQS - 1, the control kinds the rest. */
#define TNT_UCX_DATA_SEQS   0xFFFFFDu /* collectives' sequence field: 0 .. this - 1 */
#define TNT_UCX_SEQ_WIREUP  0xFFFFFDu
#define TNT_UCX_SEQ_GOODBYE 0xFFFFFEu
#define TNT_UCX_SEQ_SIDE    0xFFFFFFu

/* What every control message starts with (the whole of a wire-up hello or
 * a goodbye; a side message's payload follows it). cookie is the
 * communicator's: 128 bits that rank 0 draws and the bootstrap carries,
 * so only the communicator's own ranks know it. rank must equal the rank in
 * the tag and seq the tag's kind, so a valid message cannot be replayed as
 * another kind or on behalf of another rank. */
struct tnt_ucx_ctl_header {
    uint64_t cookie[2];
    int32_t rank;
    uint32_t seq;
};

/* 1 when a received control message of kind seq, bytes long (SIZE_MAX: it
 * was longer than the receive buffer or broke off), is acceptable to rank
 * my_rank of a communicator of size ranks whose cookie is cookie: at least
 * a header, exactly expected bytes unless expected is 0, the cookie, the
 * kind, the rank its tag claims (sender) in the header, and sender a peer.
 * Otherwise 0, with the reason (what names the kind: "goodbye") in why. */
int tnt_ucx_ctl_check(const uint64_t cookie[2], int my_rank, int size, uint32_t seq,
                      const void *buf, size_t bytes, size_t expected, int sender, const char *what,
                      char *why, size_t whylen);

#endif
