/*
 * The tnt backend's argument checks and conversions: they run on the
 * calling thread, so a bad argument raises at once, before anything is
 * queued (see _tnt_torch.cpp).
 */
#include "_tnt_torch.hpp"

namespace tnt_torch
{

const char *const kSupportedReduce = "float16, bfloat16, float32, float64, int32 and int64 "
                                     "natively; int8, uint8, int16 and bool through int32";

/* Names as Python spells them ("torch.float32"), not c10's ("Float"). */
std::string dtype_name(at::ScalarType t)
{
    switch (t) {
    case at::kFloat:
        return "torch.float32";
    case at::kDouble:
        return "torch.float64";
    case at::kHalf:
        return "torch.float16";
    case at::kBFloat16:
        return "torch.bfloat16";
    case at::kInt:
        return "torch.int32";
    case at::kLong:
        return "torch.int64";
    case at::kShort:
        return "torch.int16";
    case at::kChar:
        return "torch.int8";
    case at::kByte:
        return "torch.uint8";
    case at::kBool:
        return "torch.bool";
    case at::kComplexHalf:
        return "torch.complex32";
    case at::kComplexFloat:
        return "torch.complex64";
    case at::kComplexDouble:
        return "torch.complex128";
    default:
        return std::string("torch.") + c10::toString(t);
    }
}

const char *op_name(c10d::ReduceOp rop)
{
    switch (rop.op_) {
    case c10d::ReduceOp::SUM:
        return "SUM";
    case c10d::ReduceOp::AVG:
        return "AVG";
    case c10d::ReduceOp::PRODUCT:
        return "PRODUCT";
    case c10d::ReduceOp::MIN:
        return "MIN";
    case c10d::ReduceOp::MAX:
        return "MAX";
    case c10d::ReduceOp::BAND:
        return "BAND";
    case c10d::ReduceOp::BOR:
        return "BOR";
    case c10d::ReduceOp::BXOR:
        return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
        return "PREMUL_SUM";
    default:
        return "(unknown)";
    }
}

void check_tensor(const char *op, const at::Tensor &t)
{
    TORCH_CHECK(t.defined(), "tnt: ", op, ": got an undefined tensor");
    TORCH_CHECK(!t.is_sparse(), "tnt: ", op,
                ": sparse tensors are not supported by the tnt backend; pass "
                "tensor.to_dense(), or use backend 'gloo' for sparse collectives");
    TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "tnt: ", op, ": ",
                t.device().str(),
                " tensors are not supported by the tnt backend (CPU and CUDA tensors only); "
                "move the tensor to the CPU");
    TORCH_CHECK(t.layout() == at::kStrided, "tnt: ", op, ": tensors with layout ", t.layout(),
                " are not supported by the tnt backend; pass a dense (strided) tensor");
    TORCH_CHECK(t.is_contiguous(), "tnt: ", op,
                ": the tensor is not contiguous (the tnt backend reads and writes tensor "
                "memory in place); pass tensor.contiguous()");
}

void check_tensors(const char *op, const std::vector<at::Tensor> &ts)
{
    for (const auto &t : ts) {
        check_tensor(op, t);
    }
}

void check_device(const char *op, const std::vector<at::Tensor> &ts, const at::Tensor &ref)
{
    for (const auto &t : ts) {
        TORCH_CHECK(t.device() == ref.device(), "tnt: ", op, ": tensors on ", ref.device().str(),
                    " and ", t.device().str(),
                    " in one call; put every tensor of the call on one device");
    }
}

void check_one(const char *op, const std::vector<at::Tensor> &ts, const char *what)
{
    TORCH_CHECK(ts.size() == 1, "tnt: ", op, ": takes one ", what, " tensor per rank, got ",
                ts.size());
}

void check_same(const char *op, const at::Tensor &t, const at::Tensor &ref, const std::string &what,
                const char *ref_what)
{
    TORCH_CHECK(t.scalar_type() == ref.scalar_type() && t.numel() == ref.numel(), "tnt: ", op, ": ",
                what, " has ", t.numel(), " elements of ", dtype_name(t.scalar_type()), ", the ",
                ref_what, " ", ref.numel(), " of ", dtype_name(ref.scalar_type()),
                "; they must match");
}

ReduceType reduce_type(const char *op, at::ScalarType t, c10d::ReduceOp rop)
{
    switch (t) {
    case at::kFloat:
        return { TNT_FLOAT32, false };
    case at::kDouble:
        return { TNT_FLOAT64, false };
    case at::kHalf:
        return { TNT_FLOAT16, false };
    case at::kBFloat16:
        return { TNT_BFLOAT16, false };
    case at::kInt:
        return { TNT_INT32, false };
    case at::kLong:
        return { TNT_INT64, false };
    case at::kChar:
    case at::kByte:
    case at::kShort:
        return { TNT_INT32, true };
    case at::kBool:
        TORCH_CHECK(rop.op_ != c10d::ReduceOp::AVG, "tnt: ", op,
                    ": ReduceOp.AVG of a bool tensor has no meaning; use MIN (and), MAX or "
                    "SUM (or) or convert the tensor");
        return { TNT_INT32, true };
    default:
        TORCH_CHECK(false, "tnt: ", op, ": dtype ", dtype_name(t),
                    " is not supported in reductions by the tnt backend (supported: ",
                    kSupportedReduce, "); convert the tensor first");
    }
}

tnt_op_t reduce_op(const char *op, c10d::ReduceOp rop)
{
    switch (rop.op_) {
    case c10d::ReduceOp::SUM:
        return TNT_SUM;
    case c10d::ReduceOp::AVG:
        return TNT_AVG;
    case c10d::ReduceOp::PRODUCT:
        return TNT_PROD;
    case c10d::ReduceOp::MIN:
        return TNT_MIN;
    case c10d::ReduceOp::MAX:
        return TNT_MAX;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
    case c10d::ReduceOp::PREMUL_SUM:
    default:
        TORCH_CHECK(false, "tnt: ", op, ": ReduceOp.", op_name(rop),
                    " is not supported by the tnt backend; "
                    "supported: SUM, AVG, PRODUCT, MIN, MAX");
    }
}

void check_root(const char *op, int64_t root, int size)
{
    TORCH_CHECK(root >= 0 && root < size, "tnt: ", op, ": root rank ", root,
                " is not in the group (0 .. ", size - 1, ")");
}

size_t nbytes(const at::Tensor &t)
{
    return static_cast<size_t>(t.numel()) * t.element_size();
}

at::Tensor flatten(const std::vector<at::Tensor> &ts)
{
    std::vector<at::Tensor> flat;
    flat.reserve(ts.size());
    for (const auto &t : ts) {
        flat.push_back(t.reshape({ -1 }));
    }
    return at::cat(flat);
}

void unflatten_into(const at::Tensor &flat, std::vector<at::Tensor> &ts)
{
    int64_t off = 0;
    for (auto &t : ts) {
        t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
        off += t.numel();
    }
}

} // namespace tnt_torch
