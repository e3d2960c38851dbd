/*
 * The argument checks every public collective shares (core/api.c, and
 * core/api_composed.c for the composed ones). Each raises
 * TNT_ERR_INVALID_ARG (TNT_ERR_NOT_INITIALIZED for a NULL comm) with a
 * message that names fn and the argument.
 */
#ifndef TNT_CORE_API_H
#define TNT_CORE_API_H

#include "comm/comm.h"

tnt_status_t tnt_api_check_comm(const tnt_comm_t *comm, const char *fn);
tnt_status_t tnt_api_check_buffer(const void *buf, size_t bytes, const char *fn, const char *name);
/* dtype and op are valid and count elements fit the address space;
 * *bytes_p gets their size. */
tnt_status_t tnt_api_check_reduction(tnt_dtype_t dtype, tnt_op_t op, size_t count, size_t *bytes_p,
                                     const char *fn);
/* Distinct buffers must not overlap: the transports read one while writing
 * the other. (The same pointer means in place.) */
int tnt_api_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes);

/* tnt_test and tnt_wait of a point-to-point request (req->p2p set;
 * core/api_p2p.c): the same contracts, wait frees it. */
tnt_status_t tnt_api_p2p_test(struct tnt_request *req);
tnt_status_t tnt_api_p2p_wait(struct tnt_request *req);

#endif
