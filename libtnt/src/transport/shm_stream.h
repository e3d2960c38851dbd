/*
 * Streaming (non-temporal) copies for the shared-memory transport's large
 * messages. A copy written with ordinary stores leaves the data in the
 * writer's cache, from where a reader on a core that shares no cache with
 * it (another core of a VM, another socket of a real node) pulls it line by
 * line, several times slower than from memory; non-temporal stores send the
 * data to memory instead, where the reader gets it at memory speed in every
 * placement, and they do not evict the writer's working set (figures:
 * docs/benchmarks.md, "Figures behind the copy choices"). Small messages
 * stay cache-resident (shm_allreduce.c decides).
 *
 * The kernel is chosen once at run time: AVX (32-byte stores) where the CPU
 * has it, else SSE2 (baseline x86-64), else (aarch64 and others) plain
 * memcpy. Nothing here needs -march flags.
 */
#ifndef TNT_TRANSPORT_SHM_STREAM_H
#define TNT_TRANSPORT_SHM_STREAM_H

#include <tnt/tnt.h>
#include <stddef.h>

/* Picks the kernel (idempotent, thread-safe). */
void tnt_shm_stream_init(void);
/* "avx", "sse2" or "memcpy": what tnt_shm_stream_copy uses. */
const char *tnt_shm_stream_isa(void);

/* memcpy with streaming stores, for buffers that do not overlap. It ends
 * with a store fence, so the data is ordered before a following release
 * store (streaming stores are weakly ordered even on x86). */
void tnt_shm_stream_copy(void *dst, const void *src, size_t bytes);

/* dst[i] = src[i] * scale with streaming stores (tnt_reduce_copy_scaled's
 * arithmetic, so results are bitwise the same): scaled block by block into
 * bounce (TNT_SHM_BOUNCE_BYTES, private, stays in L1) and streamed from
 * there. scale 1 is a plain streaming copy. */
void tnt_shm_stream_copy_scaled(tnt_dtype_t dtype, void *dst, const void *src, size_t count,
                                double scale, void *bounce, size_t bounce_bytes);

#endif
