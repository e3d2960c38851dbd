/*
 * Shared by the tnt backend's files (_tnt_torch.cpp, the process group and
 * the module; _tnt_torch_store.cpp, libtnt's bootstrap over a c10d Store;
 * _tnt_torch_args.cpp, argument checks and conversions;
 * _tnt_torch_monitored.cpp, monitored_barrier over the store;
 * _tnt_torch_device.cpp, the stream of CUDA tensors and the GPU test
 * double's tensors).
 */
#pragma once

#include <tnt/tnt.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
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

/* monitored_barrier's call number @p seq (every rank counts its calls) for
 * rank @p rank of @p size, over @p store: returns when every rank arrived
 * within @p timeout; otherwise throws with gloo's message, rank 0 naming the
 * first rank that did not arrive (all of them with @p wait_all_ranks). */
void monitored_barrier(c10d::Store &store, int rank, int size, uint64_t seq, Millis timeout,
                       bool wait_all_ranks);

/* Argument checks (on the calling thread, raising at once) and conversions;
 * @p op is the op's name as messages show it. */
extern const char *const kSupportedReduce;
std::string dtype_name(at::ScalarType t);
const char *op_name(c10d::ReduceOp rop);
/* A dense contiguous tensor on the CPU or on a CUDA device. */
void check_tensor(const char *op, const at::Tensor &t);
void check_tensors(const char *op, const std::vector<at::Tensor> &ts);
/* Every tensor of @p ts on the device of @p ref. */
void check_device(const char *op, const std::vector<at::Tensor> &ts, const at::Tensor &ref);
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

/* CUDA tensors (_tnt_torch_device.cpp). Captured on the calling thread:
 * the tensor's device, torch's current stream there (where this torch has
 * CUDA) and its cudaStream_t for libtnt (NULL: the legacy default stream,
 * which is torch's default stream). cuda is false for CPU tensors. */
struct DeviceStream {
    bool cuda = false;
    c10::Device device{ c10::DeviceType::CPU };
    c10::optional<c10::Stream> stream;
    void *handle = nullptr;
};

DeviceStream device_stream(const char *op, const at::Tensor &t);
bool torch_has_cuda();

/* On the worker: the captured device and stream are current while it
 * lives, so torch's kernels there (staging copies) are stream-ordered with
 * the collective. Does nothing for CPU tensors and the GPU test double. */
class DeviceScope
{
  public:
    explicit DeviceScope(const DeviceStream &ds);

  private:
    c10::OptionalDeviceGuard device_;
    c10::OptionalStreamGuard stream_;
};

/* torch.cuda.current_stream(index).cuda_stream, registered from Python. */
void set_cuda_stream_getter(pybind11::object getter);
/* The GPU test double (torch without CUDA): a cuda-device tensor over the
 * double's memory at @p ptr, and the stream its collectives go on. */
at::Tensor gpu_double_tensor(uintptr_t ptr, const std::vector<int64_t> &sizes,
                             at::ScalarType dtype, int device);
void gpu_double_set_stream(uintptr_t stream);

/* The point-to-point worker of a process group (_tnt_torch_p2p.cpp): posts
 * libtnt sends and receives in call order on its own thread and calls each
 * one's done(status, error, source, bytes) from that thread when it ends
 * (error: tnt_last_error() of a failure). The destructor waits for what is
 * in flight (each ends within TNT_TIMEOUT) and joins. */
class P2pWorker
{
  public:
    using Done = std::function<void(tnt_status_t status, const std::string &error, int source,
                                    size_t bytes)>;
    struct Op {
        bool is_recv;
        void *buf;
        size_t bytes;
        int peer;
        int tag;
        Done done;
        tnt_request_t *req = nullptr;
        tnt_recv_info_t info{};
    };

    explicit P2pWorker(tnt_comm_t *comm);
    ~P2pWorker();
    void post(bool is_recv, void *buf, size_t bytes, int peer, int tag, Done done);

  private:
    void run();

    tnt_comm_t *comm_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Op> incoming_;
    bool stop_ = false;
    std::thread thread_;
};

} // namespace tnt_torch
