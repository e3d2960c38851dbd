/*
 * Reduction kernels, one per dtype x op, written so that GCC vectorises them
 * at -O2/-O3 (restrict pointers, simple counted loops). float16 and bfloat16
 * are widened to float32, combined across all sources, and rounded once.
 *
 * The kernels are the lowest layer beside util (like UCC's ec/ component):
 * both transports (the shared-memory reduce-scatter) and the collectives use
 * them, so they include nothing of libtnt but the public header.
 */
#ifndef TNT_REDUCE_REDUCE_H
#define TNT_REDUCE_REDUCE_H

#include <tnt/tnt.h>
#include <stddef.h>

/* dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], combined in that
 * order (the order is what makes results reproducible). dst may alias
 * srcs[0]. TNT_AVG is treated as TNT_SUM here; see tnt_reduce_divide. */
void tnt_reduce_n(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *const *srcs, int num_srcs,
                  size_t count);
/* tnt_reduce_n followed by buf[i] /= divisor (divisor <= 1: none). For
 * float16/bfloat16 the division happens in float32 before the single rounding,
 * so an average is rounded once. dst may alias any source. */
void tnt_reduce_n_div(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *const *srcs,
                      int num_srcs, size_t count, int divisor);
/* dst[i] = in[i] op dst[i] (in_first) or dst[i] op in[i], then divided by
 * divisor: bitwise what tnt_reduce_n_div gives for those two sources, but in
 * may sit at any address, not only one aligned for the type (a fragment
 * where a transport received it), and must not overlap dst. */
void tnt_reduce_into(tnt_dtype_t dtype, tnt_op_t op, void *dst, const void *in, int in_first,
                     size_t count, int divisor);
/* buf[i] /= divisor (integer division for integer types). */
void tnt_reduce_divide(tnt_dtype_t dtype, void *buf, size_t count, int divisor);
/* float16/bfloat16 <-> float32 for count elements, with the kernels' own
 * conversions (exact widening; narrowing rounds to nearest even, keeps NaN
 * and Inf). Other dtypes are ignored. */
void tnt_reduce_widen(tnt_dtype_t dtype, const void *src, float *dst, size_t count);
void tnt_reduce_narrow(tnt_dtype_t dtype, const float *src, void *dst, size_t count);
/* dst[i] = src[i] * scale rounded to float16/bfloat16 (the product in
 * float32, as tnt_reduce_copy_scaled computes it, then rounded like
 * tnt_reduce_narrow): one pass from float32 gradients to 16-bit wire data. */
void tnt_reduce_narrow_scaled(tnt_dtype_t dtype, const float *src, void *dst, size_t count,
                              double scale);
/* buf[i] *= scale, in the dtype's arithmetic (via float32 for 16-bit types). */
void tnt_reduce_scale(tnt_dtype_t dtype, void *buf, size_t count, double scale);
/* dst[i] = src[i] * scale (dst and src do not overlap): one pass for
 * float32/float64, copy then tnt_reduce_scale for the others; a plain memcpy
 * when scale is 1. Used wherever data is copied anyway (fusion staging, the
 * shared-memory copy-in), so that weighting costs no extra pass. */
void tnt_reduce_copy_scaled(tnt_dtype_t dtype, void *restrict dst, const void *restrict src,
                            size_t count, double scale);

#endif
