/*
 * Streaming copies (see shm_stream.h). The x86 kernels use only intrinsics
 * of their own target attribute, so the library builds for baseline x86-64
 * and runs AVX where the CPU has it.
 */
#include "transport/shm_stream.h"

#include "reduce/reduce.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define TNT_STREAM_X86 1
#endif

typedef void (*tnt_stream_body_fn)(char *dst, const char *src, size_t bytes);

#ifdef TNT_STREAM_X86
/* dst is 16-byte aligned, bytes a multiple of 64. */
static void tnt_stream_sse2(char *dst, const char *src, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
}

/* dst is 32-byte aligned, bytes a multiple of 64. */
__attribute__((target("avx"))) static void tnt_stream_avx(char *dst, const char *src, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        _mm256_stream_si256((__m256i *)(dst + i), a);
        _mm256_stream_si256((__m256i *)(dst + i + 32), b);
    }
}
#endif

static tnt_stream_body_fn tnt_stream_body;
static size_t tnt_stream_align = 1;
static const char *tnt_stream_name = "memcpy";
static pthread_once_t tnt_stream_once = PTHREAD_ONCE_INIT;

static void tnt_stream_pick(void)
{
#ifdef TNT_STREAM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx")) {
        tnt_stream_body = tnt_stream_avx;
        tnt_stream_align = 32;
        tnt_stream_name = "avx";
    } else {
        tnt_stream_body = tnt_stream_sse2;
        tnt_stream_align = 16;
        tnt_stream_name = "sse2";
    }
#endif
}

void tnt_shm_stream_init(void)
{
    pthread_once(&tnt_stream_once, tnt_stream_pick);
}

const char *tnt_shm_stream_isa(void)
{
    tnt_shm_stream_init();
    return tnt_stream_name;
}

void tnt_shm_stream_copy(void *dst, const void *src, size_t bytes)
{
    char *d = dst;
    const char *s = src;

    /* Set once by tnt_shm_stream_init (called by tnt_shm_create, before
     * any copy), so the plain reads below see the final values. */
    if (tnt_stream_body == NULL || bytes < 256) {
        memcpy(d, s, bytes);
        return;
    }
    size_t head =
        (tnt_stream_align - ((uintptr_t)d & (tnt_stream_align - 1))) & (tnt_stream_align - 1);
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t body = bytes & ~(size_t)63;
    tnt_stream_body(d, s, body);
    memcpy(d + body, s + body, bytes - body);
#ifdef TNT_STREAM_X86
    /* Streaming stores are not ordered by the release store that follows
     * (the phase counter): the fence makes them visible first. */
    _mm_sfence();
#endif
}

void tnt_shm_stream_copy_scaled(tnt_dtype_t dtype, void *dst, const void *src, size_t count,
                                double scale, void *bounce, size_t bounce_bytes)
{
    const size_t es = tnt_dtype_size(dtype);
    if (scale == 1.0) {
        tnt_shm_stream_copy(dst, src, count * es);
        return;
    }
    const size_t block = bounce_bytes / es;
    for (size_t i = 0; i < count; i += block) {
        size_t n = count - i < block ? count - i : block;
        tnt_reduce_copy_scaled(dtype, bounce, (const char *)src + i * es, n, scale);
        tnt_shm_stream_copy((char *)dst + i * es, bounce, n * es);
    }
}
