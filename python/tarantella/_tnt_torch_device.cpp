/*
 * CUDA tensors in the tnt backend: which stream a device collective goes
 * on, and the GPU test double's tensors (docs/torch-distributed.md, "CUDA
 * tensors").
 *
 * The extension links no CUDA library (libtnt loads its CUDA plugin itself
 * at the first device call), and Debian's torch has no CUDA either, so
 * torch's CUDA stream API (libc10_cuda) is not something to link. What is
 * available everywhere is c10's device-generic interface:
 * c10::impl::getDeviceGuardImpl(kCUDA), registered by torch's CUDA library
 * when this torch has one. With it the calling thread's current stream is
 * captured as a c10::Stream, and the worker makes the tensor's device and
 * that stream current while it runs the op, so torch's own kernels there
 * (staging copies, dtype widening) are ordered with the collective. The
 * stream's cudaStream_t, which libtnt wants, is NULL for torch's default
 * stream (its id is 0: the legacy default stream); for any other stream it
 * comes from torch.cuda.current_stream(device).cuda_stream, asked through a
 * Python function that tarantella.torch_backend registers (the only place
 * that takes the GIL, and only off the default stream).
 *
 * Without CUDA in torch, the only "CUDA" tensors are those of the GPU test
 * double (gpu_double_tensor below): host memory that the double's cudart
 * calls device memory. Their stream is the one the test sets
 * (gpu_double_set_stream), else the legacy default stream.
 */
#include "_tnt_torch.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>

namespace tnt_torch
{

/* Set by the first call (from Python, with the GIL, as each group is
 * created) and never replaced: collectives of groups that exist read it
 * from other threads without a lock. Leaked on purpose: a Python object
 * must not be destroyed at exit without the GIL. */
static std::atomic<pybind11::object *> g_stream_getter{ nullptr };
static std::atomic<uintptr_t> g_double_stream{ 0 };

void set_cuda_stream_getter(pybind11::object getter)
{
    if (g_stream_getter.load(std::memory_order_acquire) == nullptr) {
        g_stream_getter.store(new pybind11::object(std::move(getter)), std::memory_order_release);
    }
}

void gpu_double_set_stream(uintptr_t stream)
{
    g_double_stream.store(stream, std::memory_order_relaxed);
}

bool torch_has_cuda()
{
    return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
}

static void *stream_handle_from_python(const char *op, c10::DeviceIndex index)
{
    pybind11::object *getter = g_stream_getter.load(std::memory_order_acquire);
    TORCH_CHECK(getter != nullptr, "tnt: ", op,
                ": cannot find the handle of the current CUDA stream (import tarantella before "
                "creating the process group)");
    pybind11::gil_scoped_acquire gil;
    uintptr_t handle = (*getter)(static_cast<int>(index)).cast<uintptr_t>();
    return reinterpret_cast<void *>(handle);
}

DeviceStream device_stream(const char *op, const at::Tensor &t)
{
    DeviceStream ds;
    if (!t.is_cuda()) {
        return ds;
    }
    ds.cuda = true;
    ds.device = t.device();
    if (!torch_has_cuda()) {
        ds.handle = reinterpret_cast<void *>(g_double_stream.load(std::memory_order_relaxed));
        return ds;
    }
    const auto *impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    ds.stream = impl->getStream(t.device());
    ds.handle = ds.stream->id() == 0 ? nullptr : stream_handle_from_python(op, t.device().index());
    return ds;
}

DeviceScope::DeviceScope(const DeviceStream &ds)
{
    if (ds.cuda && ds.stream.has_value()) {
        device_.reset_device(ds.device);
        stream_.reset_stream(*ds.stream);
    }
}

/* A tensor that says it lives on cuda:<device> over @p ptr, memory of the
 * GPU test double's cudaMalloc (host memory the double calls device
 * memory). CPU-only torch has no CUDA allocator and no CUDA kernels, but a
 * tensor's device, dtype, sizes and data pointer are all the backend
 * reads, so the backend's CUDA branch runs on it unchanged. The memory
 * stays the caller's (no deleter frees it). Tests only. */
at::Tensor gpu_double_tensor(uintptr_t ptr, const std::vector<int64_t> &sizes,
                             at::ScalarType dtype, int device)
{
    TORCH_CHECK(!torch_has_cuda(),
                "tnt: gpu_double_tensor is a test double for torch builds without CUDA; this "
                "torch has CUDA, use real CUDA tensors");
    c10::Device dev(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
    return at::for_blob(reinterpret_cast<void *>(ptr), sizes)
        .deleter([](void *) {})
        .options(at::TensorOptions().dtype(dtype).device(dev))
        .target_device(dev)
        .make_tensor();
}

} // namespace tnt_torch
