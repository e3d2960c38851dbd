/*
 * Shared by the tnt backend's files (_tnt_torch.cpp, the process group and
 * the module; _tnt_torch_store.cpp, libtnt's bootstrap over a c10d Store;
 * _tnt_torch_args.cpp, argument checks and conversions).
 */
#pragma once

#include <tnt/tnt.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace tnt_torch
{

using Millis = std::chrono::milliseconds;

/* Seconds for messages: "0.5", "1800". */
inline std::string seconds(Millis ms)
{
    return c10::str(static_cast<double>(ms.count()) / 1000.0);
}

/* A libtnt communicator for rank @p rank of @p size, bootstrapped through
 * @p store (tnt_comm_create_oob with an allgather over the store); waits at
 * most @p timeout for the other ranks. Throws std::runtime_error naming the
 * ranks that did not come. */
tnt_comm_t *comm_create_from_store(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                                   Millis timeout, const std::string &name);

/* Argument checks (on the calling thread, raising at once) and conversions;
 * @p op is the op's name as messages show it. */
extern const char *const kSupportedReduce;
std::string dtype_name(at::ScalarType t);
const char *op_name(c10d::ReduceOp rop);
void check_tensor(const char *op, const at::Tensor &t);
void check_tensors(const char *op, const std::vector<at::Tensor> &ts);
void check_one(const char *op, const std::vector<at::Tensor> &ts, const char *what);
void check_same(const char *op, const at::Tensor &t, const at::Tensor &ref, const std::string &what,
                const char *ref_what);

/* A reduction's element type: a libtnt dtype, or int32 for the narrow
 * integer types and bool, which the worker widens into a staging copy
 * (exact: a sum or product of int8s wraps to the same low bits in int32,
 * min and max are unchanged). */
struct ReduceType {
    tnt_dtype_t dtype;
    bool widen;
};

ReduceType reduce_type(const char *op, at::ScalarType t, c10d::ReduceOp rop);
tnt_op_t reduce_op(const char *op, c10d::ReduceOp rop);
void check_root(const char *op, int64_t root, int size);
size_t nbytes(const at::Tensor &t);
/* One flat contiguous tensor holding @p ts one after another. */
at::Tensor flatten(const std::vector<at::Tensor> &ts);
void unflatten_into(const at::Tensor &flat, std::vector<at::Tensor> &ts);

} // namespace tnt_torch
