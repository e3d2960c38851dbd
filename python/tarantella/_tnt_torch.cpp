/*
 * tarantella._tnt_torch: the "tnt" torch.distributed backend, a
 * c10d::ProcessGroup over libtnt's public C API (docs/torch-distributed.md,
 * "Backend tnt").
 *
 * Who owns what:
 * - Each process group owns one libtnt communicator, made from the c10d
 *   Store that torch hands the backend (_tnt_torch_store.cpp), so env://,
 *   file:// and torchrun starts work as well as our launchers. new_group
 *   gets its own store prefix from torch and therefore its own
 *   communicator.
 * - Each process group owns one FIFO worker thread, the only thread that
 *   calls libtnt on its communicator (libtnt wants one thread per
 *   communicator at a time, and torch wants collectives in call order).
 *   The worker completes each Work and its future, so DDP's autograd
 *   threads, which wait on futures and never call Work::wait, see every
 *   collective finish.
 * - The ProcessGroup methods only check arguments (raising at once, on the
 *   calling thread) and queue a closure; errors that only the collective
 *   finds (a peer's sizes differ, a timeout) travel on the future and are
 *   raised by wait().
 * - Nothing here calls into Python, except through torch's future
 *   callbacks, which take the GIL themselves (the worker runs them after
 *   libtnt has returned, so no libtnt lock is held then), and, on the
 *   calling thread, to ask torch for the handle of a CUDA stream other
 *   than the default one (_tnt_torch_device.cpp).
 * - CUDA tensors take libtnt's device calls on the caller's current
 *   stream (every op; a CUDA send or receive runs on the FIFO worker,
 *   device_point_to_point says why); the worker waits for that stream
 *   before it completes the Work (device_done), so a completed Work means
 *   the result is in device memory.
 * - A collective that a future's callback issues runs at once on the
 *   worker (enqueue), so a callback that waits for it (PowerSGD) cannot
 *   deadlock.
 */
#include "_tnt_torch.hpp"

#include <tnt/tnt_cuda.h>

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/sequence_num.hpp>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/chrono.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tnt_torch
{

using c10d::OpType;

/* ------------------------------------------------------------------------ */
/* Work                                                                      */
/* ------------------------------------------------------------------------ */

class WorkTnt : public c10d::Work
{
  public:
    WorkTnt(OpType type, const char *name, uint64_t seq, std::string group, Millis timeout,
            std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs)
        : c10d::Work(-1, type, name, inputs), name_(name), seq_(seq), group_(std::move(group)),
          timeout_(timeout), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors()))
    {
    }

    /* Called by the worker only, exactly once, with no lock held. */
    void complete()
    {
        future_->markCompleted(c10::IValue(outputs_));
        finish();
    }

    void fail(std::exception_ptr e)
    {
        future_->setError(e);
        finish(e);
    }

    /* A timeout of 0 (kNoTimeout) means the op's or the group's timeout:
     * torch's default is 30 minutes, so a hang that libtnt's own
     * TNT_TIMEOUT did not end still ends here. The message says "Timed
     * out" as gloo's does: torch's own suite (and code written against
     * gloo) recognise a timeout by those words. */
    bool wait(Millis timeout) override
    {
        Millis limit = timeout == kNoTimeout ? timeout_ : timeout;
        std::unique_lock<std::mutex> lock(mutex_);
        if (!cv_.wait_for(lock, limit, [this] { return completed_; })) {
            throw std::runtime_error(
                "tnt: " + name_ + " #" + std::to_string(seq_) + " on process group '" + group_ +
                "' did not complete within " + seconds(limit) +
                " s: Timed out (the process group's timeout, or wait()'s); is every rank of "
                "the group still running and calling the same collectives?");
        }
        if (exception_) {
            std::rethrow_exception(exception_);
        }
        return true;
    }

    std::vector<at::Tensor> result() override
    {
        return outputs_;
    }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        return future_;
    }

    /* The sender of a receive from any source (dist.recv with src=None):
     * set by the point-to-point worker before complete(). */
    void set_source(int rank)
    {
        source_ = rank;
    }

    int sourceRank() const override
    {
        TORCH_CHECK(source_ >= 0, "tnt: ", name_,
                    ": only a receive that completed has a source rank");
        return source_;
    }

  private:
    int source_ = -1;
    std::string name_;
    uint64_t seq_;
    std::string group_;
    Millis timeout_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/* ------------------------------------------------------------------------ */
/* The process group                                                         */
/* ------------------------------------------------------------------------ */

class ProcessGroupTnt : public c10d::ProcessGroup
{
  public:
    ProcessGroupTnt(tnt_comm_t *comm, c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                    Millis timeout)
        : c10d::ProcessGroup(rank, size), comm_(comm), store_(std::move(store)), timeout_(timeout),
          name_(tnt_comm_name(comm))
    {
        worker_ = std::thread(&ProcessGroupTnt::run_worker, this);
        p2p_ = std::make_unique<P2pWorker>(comm_);
    }

    ~ProcessGroupTnt() override
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        /* The worker finishes what is queued and may run future callbacks
         * that take the GIL (Python hooks); the last reference may be
         * dropped from Python (destroy_process_group), so let go of the
         * GIL while joining. */
        if (Py_IsInitialized() && PyGILState_Check()) {
            pybind11::gil_scoped_release no_gil;
            worker_.join();
            p2p_.reset();
        } else {
            worker_.join();
            p2p_.reset();
        }
        tnt_finalize(comm_);
    }

    const std::string getBackendName() const override
    {
        return "tnt";
    }

    const std::string &comm_name() const
    {
        return name_;
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override
    {
        const char *op = "broadcast";
        check_one(op, tensors, "");
        check_tensors(op, tensors);
        check_root(op, opts.rootRank, size_);
        at::Tensor t = tensors[0];
        int root = static_cast<int>(opts.rootRank);
        DeviceStream ds = stream_for(op, t);
        return enqueue(OpType::BROADCAST, op, opts.timeout, tensors, tensors,
                       [this, op, t, root, ds] {
                           if (ds.cuda) {
                               check(op, tnt_broadcast_device(comm_, t.data_ptr(), nbytes(t), root,
                                                              ds.handle));
                               device_done(op, ds);
                               return;
                           }
                           check(op, tnt_broadcast(comm_, t.data_ptr(), nbytes(t), root));
                       });
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override
    {
        const char *op = "allreduce";
        check_one(op, tensors, "");
        check_tensors(op, tensors);
        at::Tensor t = tensors[0];
        ReduceType rt = reduce_type(op, t.scalar_type(), opts.reduceOp);
        tnt_op_t top = reduce_op(op, opts.reduceOp);
        DeviceStream ds = stream_for(op, t);
        return enqueue(OpType::ALLREDUCE, op, opts.timeout, tensors, tensors,
                       [this, op, t, rt, top, ds] {
                           DeviceScope scope(ds);
                           allreduce_flat(op, t, rt, top, ds);
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override
    {
        const char *op = "allreduce_coalesced";
        TORCH_CHECK(!tensors.empty(), "tnt: ", op, ": got no tensors");
        check_tensors(op, tensors);
        for (const auto &t : tensors) {
            TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "tnt: ", op,
                        ": all tensors must have one dtype (got ",
                        dtype_name(tensors[0].scalar_type()), " and ", dtype_name(t.scalar_type()),
                        "); make one call per dtype");
        }
        ReduceType rt = reduce_type(op, tensors[0].scalar_type(), opts.reduceOp);
        tnt_op_t top = reduce_op(op, opts.reduceOp);
        std::vector<at::Tensor> ts = tensors;
        DeviceStream ds = stream_for(op, tensors[0], tensors);
        return enqueue(OpType::ALLREDUCE_COALESCED, op, opts.timeout, tensors, tensors,
                       [this, op, ts, rt, top, ds]() mutable {
                           /* One libtnt call for all: fewer collectives,
                            * one sequence number. */
                           DeviceScope scope(ds);
                           at::Tensor flat = flatten(ts);
                           allreduce_flat(op, flat, rt, top, ds);
                           unflatten_into(flat, ts);
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override
    {
        const char *op = "reduce";
        check_one(op, tensors, "");
        check_tensors(op, tensors);
        check_root(op, opts.rootRank, size_);
        at::Tensor t = tensors[0];
        ReduceType rt = reduce_type(op, t.scalar_type(), opts.reduceOp);
        tnt_op_t top = reduce_op(op, opts.reduceOp);
        int root = static_cast<int>(opts.rootRank);
        bool is_root = root == rank_;
        DeviceStream ds = stream_for(op, t);
        return enqueue(
            OpType::REDUCE, op, opts.timeout, tensors, tensors,
            [this, op, t, rt, top, root, is_root, ds]() mutable {
                /* In place on the root; the others' tensors are
                 * left as they were (libtnt takes NULL there). */
                DeviceScope scope(ds);
                at::Tensor buf = rt.widen ? t.to(at::kInt) : t;
                void *recv = is_root ? buf.data_ptr() : nullptr;
                size_t n = static_cast<size_t>(buf.numel());
                if (ds.cuda) {
                    check(op, tnt_reduce_device(comm_, buf.data_ptr(), recv, n, rt.dtype, top,
                                                root, ds.handle));
                } else {
                    check(op, tnt_reduce(comm_, buf.data_ptr(), recv, n, rt.dtype, top, root));
                }
                if (rt.widen && is_root) {
                    t.copy_(buf);
                }
                device_done(op, ds);
            });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override
    {
        const char *op = "allgather";
        check_one(op, inputs, "input");
        TORCH_CHECK(outputs.size() == 1, "tnt: ", op, ": takes one output list per rank, got ",
                    outputs.size());
        check_tensors(op, inputs);
        std::vector<at::Tensor> outs = outputs[0];
        TORCH_CHECK(static_cast<int>(outs.size()) == size_, "tnt: ", op, ": the output list has ",
                    outs.size(), " tensors; it needs one per rank of the group (", size_, ")");
        check_tensors(op, outs);
        at::Tensor in = inputs[0];
        for (size_t r = 0; r < outs.size(); r++) {
            check_same(op, outs[r], in, "output tensor " + std::to_string(r), "input");
        }
        DeviceStream ds = stream_for(op, in, outs);
        return enqueue(
            OpType::ALLGATHER, op, opts.timeout, outs, inputs, [this, op, in, outs, ds]() mutable {
                DeviceScope scope(ds);
                if (ds.cuda) {
                    /* Outputs that are one buffer in rank order (as
                     * list(flat.chunk(size)) makes them) take the data
                     * directly; otherwise a staging buffer on the device. */
                    bool direct = adjacent(outs) && !overlaps(in, outs);
                    at::Tensor flat =
                        direct ? at::Tensor() : at::empty({ size_ * in.numel() }, in.options());
                    check(op, tnt_allgather_device(comm_, in.data_ptr(),
                                                   direct ? outs[0].data_ptr() : flat.data_ptr(),
                                                   nbytes(in), ds.handle));
                    if (!direct) {
                        unflatten_into(flat, outs);
                    }
                    device_done(op, ds);
                    return;
                }
                at::Tensor flat = at::empty({ size_ * in.numel() }, in.options());
                check(op, tnt_allgather(comm_, in.data_ptr(), flat.data_ptr(), nbytes(in)));
                unflatten_into(flat, outs);
            });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override
    {
        const char *op = "_allgather_base";
        check_tensor(op, output);
        check_tensor(op, input);
        TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                        output.numel() == size_ * input.numel(),
                    "tnt: ", op, ": the output has ", output.numel(), " elements of ",
                    dtype_name(output.scalar_type()), "; it needs the group size (", size_,
                    ") times the input's ", input.numel(), " of ", dtype_name(input.scalar_type()));
        at::Tensor out = output, in = input;
        DeviceStream ds = stream_for(op, in, { out });
        return enqueue(OpType::_ALLGATHER_BASE, op, opts.timeout, { output }, { input },
                       [this, op, in, out, ds] {
                           if (ds.cuda) {
                               DeviceScope scope(ds);
                               /* An input inside the output (FSDP's in-place
                                * form) is copied out first. */
                               at::Tensor send = overlaps(in, { out }) ? in.clone() : in;
                               check(op, tnt_allgather_device(comm_, send.data_ptr(),
                                                              out.data_ptr(), nbytes(in),
                                                              ds.handle));
                               device_done(op, ds);
                               return;
                           }
                           check(op, tnt_allgather(comm_, in.data_ptr(), out.data_ptr(),
                                                   nbytes(in)));
                       });
    }

    /* outputs[r][i] receives rank r's inputs[i]; the tensors may differ in
     * dtype and size, and each rank's are sent as one block of bytes, in one
     * libtnt allgather. */
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &opts) override
    {
        const char *op = "allgather_coalesced";
        TORCH_CHECK(!inputs.empty(), "tnt: ", op, ": got no input tensors");
        check_tensors(op, inputs);
        TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "tnt: ", op,
                    ": takes one output list per rank of the group (", size_, "), got ",
                    outputs.size());
        std::vector<at::Tensor> outs; /* rank r's tensor i at r * inputs.size() + i */
        for (int r = 0; r < size_; r++) {
            TORCH_CHECK(outputs[r].size() == inputs.size(), "tnt: ", op, ": output list ", r,
                        " has ", outputs[r].size(), " tensors; it needs one per input tensor (",
                        inputs.size(), ")");
            check_tensors(op, outputs[r]);
            for (size_t i = 0; i < inputs.size(); i++) {
                check_same(op, outputs[r][i], inputs[i],
                           "output tensor " + std::to_string(i) + " of rank " + std::to_string(r),
                           "input");
                outs.push_back(outputs[r][i]);
            }
        }
        std::vector<at::Tensor> ins = inputs, every = outs;
        every.insert(every.end(), inputs.begin() + 1, inputs.end());
        DeviceStream ds = stream_for(op, inputs[0], every);
        return enqueue(OpType::ALLGATHER_COALESCED, op, opts.timeout, outs, inputs,
                       [this, op, ins, outs, ds]() mutable {
                           DeviceScope scope(ds);
                           /* Inputs that already lie one after the other
                            * are sent where they are, and outputs that
                            * form one buffer in rank order (meeting no
                            * input) are received where they are; the rest
                            * go through a byte buffer on the tensors'
                            * device. */
                           size_t block = 0;
                           for (const auto &t : ins) {
                               block += nbytes(t);
                           }
                           at::Tensor send_block, flat;
                           const void *send = adjacent(ins) ? ins[0].data_ptr() : nullptr;
                           if (send == nullptr) {
                               std::vector<at::Tensor> bytes;
                               for (const auto &t : ins) {
                                   bytes.push_back(t.reshape({ -1 }).view(at::kByte));
                               }
                               send_block = at::cat(bytes);
                               send = send_block.data_ptr();
                           }
                           void *recv = adjacent(outs) && !overlaps(ins, outs)
                                            ? outs[0].data_ptr()
                                            : nullptr;
                           if (recv == nullptr) {
                               flat = at::empty({ static_cast<int64_t>(size_ * block) },
                                                ins[0].options().dtype(at::kByte));
                               recv = flat.data_ptr();
                           }
                           if (ds.cuda) {
                               check(op, tnt_allgather_device(comm_, send, recv, block, ds.handle));
                           } else {
                               check(op, tnt_allgather(comm_, send, recv, block));
                           }
                           if (flat.defined()) {
                               int64_t off = 0;
                               for (auto &t : outs) {
                                   int64_t n = static_cast<int64_t>(nbytes(t));
                                   t.reshape({ -1 }).view(at::kByte).copy_(flat.narrow(0, off, n));
                                   off += n;
                               }
                           }
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override
    {
        const char *op = "gather";
        check_one(op, inputs, "input");
        check_tensors(op, inputs);
        check_root(op, opts.rootRank, size_);
        int root = static_cast<int>(opts.rootRank);
        at::Tensor in = inputs[0];
        std::vector<at::Tensor> outs;
        if (rank_ == root) {
            TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                        "tnt: ", op, ": the root needs one output list with one tensor per rank (",
                        size_, ")");
            outs = outputs[0];
            check_tensors(op, outs);
            for (size_t r = 0; r < outs.size(); r++) {
                check_same(op, outs[r], in, "output tensor " + std::to_string(r), "input");
            }
        } else {
            TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "tnt: ", op,
                        ": only the root (rank ", root, ") passes output tensors");
        }
        DeviceStream ds = stream_for(op, in, outs);
        return enqueue(OpType::GATHER, op, opts.timeout, outs, inputs,
                       [this, op, in, outs, root, ds]() mutable {
                           DeviceScope scope(ds);
                           bool is_root = rank_ == root;
                           void *recv = is_root ? as_one_buffer(ds, outs, { in }, &outs[rank_])
                                                : nullptr;
                           at::Tensor flat;
                           if (is_root && recv == nullptr) {
                               flat = at::empty({ size_ * in.numel() }, in.options());
                               recv = flat.data_ptr();
                           }
                           if (ds.cuda) {
                               check(op, tnt_gather_device(comm_, in.data_ptr(), recv, nbytes(in),
                                                           root, ds.handle));
                           } else {
                               check(op, tnt_gather(comm_, in.data_ptr(), recv, nbytes(in), root));
                           }
                           if (flat.defined()) {
                               unflatten_into(flat, outs);
                           }
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override
    {
        const char *op = "scatter";
        check_one(op, outputs, "output");
        check_tensors(op, outputs);
        check_root(op, opts.rootRank, size_);
        int root = static_cast<int>(opts.rootRank);
        at::Tensor out = outputs[0];
        std::vector<at::Tensor> ins;
        if (rank_ == root) {
            TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                        "tnt: ", op, ": the root needs one input list with one tensor per rank (",
                        size_, ")");
            ins = inputs[0];
            check_tensors(op, ins);
            for (size_t r = 0; r < ins.size(); r++) {
                check_same(op, ins[r], out, "input tensor " + std::to_string(r), "output");
            }
        } else {
            TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "tnt: ", op,
                        ": only the root (rank ", root, ") passes input tensors");
        }
        DeviceStream ds = stream_for(op, out, ins);
        return enqueue(OpType::SCATTER, op, opts.timeout, outputs, ins,
                       [this, op, out, ins, root, ds] {
                           DeviceScope scope(ds);
                           bool is_root = rank_ == root;
                           void *send = is_root ? as_one_buffer(ds, ins, { out }, &ins[rank_])
                                                : nullptr;
                           at::Tensor flat;
                           if (is_root && send == nullptr) {
                               flat = flatten(ins);
                               send = flat.data_ptr();
                           }
                           if (ds.cuda) {
                               check(op, tnt_scatter_device(comm_, send, out.data_ptr(),
                                                            nbytes(out), root, ds.handle));
                           } else {
                               check(op, tnt_scatter(comm_, send, out.data_ptr(), nbytes(out),
                                                     root));
                           }
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override
    {
        const char *op = "reduce_scatter";
        check_one(op, outputs, "output");
        TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "tnt: ", op,
                    ": takes one input list with one tensor per rank of the group (", size_, ")");
        check_tensors(op, outputs);
        check_tensors(op, inputs[0]);
        at::Tensor out = outputs[0];
        std::vector<at::Tensor> ins = inputs[0];
        for (size_t r = 0; r < ins.size(); r++) {
            check_same(op, ins[r], out, "input tensor " + std::to_string(r), "output");
        }
        ReduceType rt = reduce_type(op, out.scalar_type(), opts.reduceOp);
        tnt_op_t top = reduce_op(op, opts.reduceOp);
        DeviceStream ds = stream_for(op, out, ins);
        return enqueue(OpType::REDUCE_SCATTER, op, opts.timeout, outputs, ins,
                       [this, op, out, ins, rt, top, ds]() mutable {
                           DeviceScope scope(ds);
                           /* CUDA inputs that are one buffer in rank order
                            * are reduced where they are (no staging copy);
                            * an output among them is libtnt's in-place
                            * form only where it is this rank's block. */
                           bool direct = ds.cuda && adjacent(ins) &&
                                         (!overlaps(out, ins) ||
                                          out.data_ptr() == ins[rank_].data_ptr());
                           at::Tensor in = direct ? ins[0] : flatten(ins);
                           reduce_scatter_flat(op, in, out, rt, top, ds);
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override
    {
        const char *op = "_reduce_scatter_base";
        check_tensor(op, output);
        check_tensor(op, input);
        TORCH_CHECK(
            output.scalar_type() == input.scalar_type() && input.numel() == size_ * output.numel(),
            "tnt: ", op, ": the input has ", input.numel(), " elements of ",
            dtype_name(input.scalar_type()), "; it needs the group size (", size_,
            ") times the output's ", output.numel(), " of ", dtype_name(output.scalar_type()));
        ReduceType rt = reduce_type(op, output.scalar_type(), opts.reduceOp);
        tnt_op_t top = reduce_op(op, opts.reduceOp);
        at::Tensor out = output, in = input;
        DeviceStream ds = stream_for(op, in, { out });
        return enqueue(OpType::_REDUCE_SCATTER_BASE, op, opts.timeout, { output }, { input },
                       [this, op, in, out, rt, top, ds]() mutable {
                           DeviceScope scope(ds);
                           /* An output inside the input other than this
                            * rank's block (libtnt's in-place form) reads
                            * from a copy. */
                           bool in_place = static_cast<char *>(out.data_ptr()) ==
                                           static_cast<char *>(in.data_ptr()) +
                                               static_cast<size_t>(rank_) * nbytes(out);
                           at::Tensor send =
                               ds.cuda && !in_place && overlaps(out, { in }) ? in.clone() : in;
                           reduce_scatter_flat(op, send, out, rt, top, ds);
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_splits,
                                                 std::vector<int64_t> &input_splits,
                                                 const c10d::AllToAllOptions &opts) override
    {
        const char *op = "alltoall_base";
        check_tensor(op, output);
        check_tensor(op, input);
        TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tnt: ", op,
                    ": input and output dtypes differ (", dtype_name(input.scalar_type()), ", ",
                    dtype_name(output.scalar_type()), ")");
        /* Splits count rows of dim 0, as torch's all_to_all_single says. */
        std::vector<size_t> send = split_bytes(op, "input", input, input_splits);
        std::vector<size_t> recv = split_bytes(op, "output", output, output_splits);
        at::Tensor out = output, in = input;
        DeviceStream ds = stream_for(op, in, { out });
        return enqueue(OpType::ALLTOALL_BASE, op, opts.timeout, { output }, { input },
                       [this, op, in, out, send, recv, ds] {
                           if (ds.cuda) {
                               DeviceScope scope(ds);
                               /* libtnt's device alltoallv has no in-place
                                * form: an input that meets the output is
                                * read from a copy. */
                               at::Tensor src = overlaps(in, { out }) ? in.clone() : in;
                               check(op, tnt_alltoallv_device(comm_, src.data_ptr(), send.data(),
                                                              out.data_ptr(), recv.data(),
                                                              ds.handle));
                               device_done(op, ds);
                               return;
                           }
                           check(op, tnt_alltoallv(comm_, in.data_ptr(), send.data(),
                                                   out.data_ptr(), recv.data()));
                       });
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override
    {
        const char *op = "alltoall";
        TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                        static_cast<int>(outputs.size()) == size_,
                    "tnt: ", op, ": takes one input and one output tensor per rank of the group (",
                    size_, "), got ", inputs.size(), " and ", outputs.size());
        check_tensors(op, inputs);
        check_tensors(op, outputs);
        std::vector<size_t> send, recv;
        for (int r = 0; r < size_; r++) {
            TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                            outputs[r].scalar_type() == inputs[0].scalar_type(),
                        "tnt: ", op, ": all tensors must have one dtype (",
                        dtype_name(inputs[0].scalar_type()), "); tensor ", r, " differs");
            send.push_back(nbytes(inputs[r]));
            recv.push_back(nbytes(outputs[r]));
        }
        std::vector<at::Tensor> ins = inputs, outs = outputs;
        std::vector<at::Tensor> all = inputs;
        all.insert(all.end(), outputs.begin(), outputs.end());
        DeviceStream ds = stream_for(op, inputs[0], all);
        return enqueue(OpType::ALLTOALL, op, opts.timeout, outputs, inputs,
                       [this, op, ins, outs, send, recv, ds]() mutable {
                           DeviceScope scope(ds);
                           /* CUDA inputs (outputs) that are one buffer in
                            * rank order are sent from (received into)
                            * where they are; a staged input meets no
                            * output. */
                           void *in = as_one_buffer(ds, ins, outs, nullptr);
                           at::Tensor in_flat = in == nullptr ? flatten(ins) : at::Tensor();
                           void *out = as_one_buffer(ds, outs, {}, nullptr);
                           at::Tensor flat;
                           if (out == nullptr) {
                               int64_t total = 0;
                               for (const auto &t : outs) {
                                   total += t.numel();
                               }
                               flat = at::empty({ total }, ins[0].options());
                               out = flat.data_ptr();
                           }
                           in = in == nullptr ? in_flat.data_ptr() : in;
                           if (ds.cuda) {
                               check(op, tnt_alltoallv_device(comm_, in, send.data(), out,
                                                              recv.data(), ds.handle));
                           } else {
                               check(op, tnt_alltoallv(comm_, in, send.data(), out, recv.data()));
                           }
                           if (flat.defined()) {
                               unflatten_into(flat, outs);
                           }
                           device_done(op, ds);
                       });
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override
    {
        const char *op = "barrier";
        return enqueue(OpType::BARRIER, op, opts.timeout, {}, {},
                       [this, op] { check(op, tnt_barrier(comm_)); });
    }

    /* torch's collective sequence number (_get_sequence_number_for_group),
     * with gloo's meaning: rank 0 draws a start and hands it to the others
     * through the group's store, and every collective (barrier included;
     * point-to-point and monitored_barrier not) adds one as it is queued,
     * so ranks that issued the same collectives read the same number.
     * torch 1.13 calls this for gloo and NCCL only; create_process_group
     * calls it for tnt. A later call agrees on a new start, under a key of
     * its own, so no rank can read the previous one's. */
    void setSequenceNumberForGroup() override
    {
        std::string key = "tnt/sequence_number/" + std::to_string(seq_agreements_++);
        if (rank_ == 0) {
            std::random_device rd;
            uint64_t start = 1 + (static_cast<uint64_t>(rd()) & 0x3fffffff);
            store_->set(key, c10d::toVec<uint8_t>(start, sizeof(start)));
            sequence_num_ = c10d::SequenceNum(start);
        } else {
            store_->wait({ key }, timeout_);
            sequence_num_ = c10d::SequenceNum(c10d::fromVec<uint8_t>(store_->get(key)));
        }
    }

    uint64_t getSequenceNumberForGroup() override
    {
        return sequence_num_.has_value() ? sequence_num_->get() : 0;
    }

    /* Through torch's store, not libtnt, and on the calling thread, as
     * gloo's: _tnt_torch_monitored.cpp says why. Not ordered with the
     * group's queued collectives (gloo's is not either). */
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks) override
    {
        Millis timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
        monitored_barrier(*store_, rank_, size_, monitored_seq_++, timeout, wait_all_ranks);
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst_rank,
                                        int tag) override
    {
        return point_to_point(OpType::SEND, "send", tensors, dst_rank, tag);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src_rank,
                                        int tag) override
    {
        return point_to_point(OpType::RECV, "recv", tensors, src_rank, tag);
    }

    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override
    {
        return point_to_point(OpType::RECVANYSOURCE, "recv (from any source)", tensors,
                              TNT_ANY_SOURCE, tag);
    }

  private:
    /* Checks here, on the caller's thread. CPU tensors move on the
     * point-to-point worker (_tnt_torch_p2p.cpp), never on the FIFO
     * collective worker, so a receive that waits holds up nothing else;
     * CUDA tensors as device_point_to_point says. */
    c10::intrusive_ptr<c10d::Work>
    point_to_point(OpType type, const char *op, std::vector<at::Tensor> &tensors, int peer, int tag)
    {
        check_one(op, tensors, "");
        check_tensors(op, tensors);
        TORCH_CHECK(peer == TNT_ANY_SOURCE || (peer >= 0 && peer < size_), "tnt: ", op, ": rank ",
                    peer, " is not in the process group (ranks 0 .. ", size_ - 1, ")");
        TORCH_CHECK(tag >= 0, "tnt: ", op, ": tag ", tag,
                    " is negative; the tnt backend takes tags 0 .. ", TNT_TAG_MAX);
        at::Tensor t = tensors[0];
        bool is_recv = type != OpType::SEND;
        std::vector<at::Tensor> outputs = is_recv ? tensors : std::vector<at::Tensor>{};
        std::vector<at::Tensor> inputs = is_recv ? std::vector<at::Tensor>{} : tensors;
        if (t.is_cuda()) {
            return device_point_to_point(type, op, t, peer, tag, outputs, inputs);
        }
        auto work = c10::make_intrusive<WorkTnt>(type, op, next_seq(), name_, timeout_, outputs,
                                                 inputs);
        size_t bytes = nbytes(t);
        std::string group = name_;
        /* The closure holds the tensor, so its memory outlives the request. */
        p2p_->post(is_recv, t.data_ptr(), bytes, peer, tag,
                   [work, t, op, bytes, group, peer, tag](tnt_status_t s, const std::string &error,
                                                          int source, size_t got) {
                       std::string why = p2p_failure(op, group, peer, tag, s, error, source, got,
                                                     bytes);
                       if (!why.empty()) {
                           work->fail(std::make_exception_ptr(std::runtime_error(why)));
                           return;
                       }
                       work->set_source(source);
                       work->complete();
                   });
        return work;
    }

    /* CUDA tensors: libtnt's device messages (tnt_send_device,
     * tnt_recv_device) block until the other side has matched them, and a
     * process's device calls take turns (one device lock per
     * communicator). Run on the point-to-point worker, one waiting receive
     * would hold up every other message; run beside the FIFO worker, a
     * message and a CUDA collective would race for that lock and could
     * deadlock against a peer that took them in the other order. So they
     * run on the FIFO worker, in call order with the group's collectives,
     * as blocking calls: the Work completes once the message is through
     * and the stream has finished it (device_done). Not counted in the
     * sequence number (as the CPU messages). */
    c10::intrusive_ptr<c10d::Work> device_point_to_point(OpType type, const char *op,
                                                         const at::Tensor &t, int peer, int tag,
                                                         std::vector<at::Tensor> outputs,
                                                         const std::vector<at::Tensor> &inputs)
    {
        TORCH_CHECK(peer != rank_, "tnt: ", op, ": rank ", rank_,
                    " cannot send a CUDA tensor to itself through the tnt backend (its device "
                    "messages block until received); copy the tensor instead");
        {
            std::lock_guard<std::mutex> lock(mutex_);
            TORCH_CHECK(cuda_device_.has_value(), "tnt: ", op, ": process group '", name_,
                        "' has run no collective on CUDA tensors yet; its first operation on "
                        "CUDA tensors must be a collective, which sets up the device path on "
                        "every rank together (a message cannot): call one first, e.g. "
                        "dist.all_reduce of a CUDA tensor, or dist.barrier() after one");
        }
        DeviceStream ds = stream_for(op, t);
        bool is_recv = type != OpType::SEND;
        return enqueue_work(
            type, op, c10d::kUnsetTimeout, std::move(outputs), inputs, false,
            [this, op, t, peer, tag, is_recv, ds](WorkTnt &work) {
                DeviceScope scope(ds);
                size_t bytes = nbytes(t);
                tnt_recv_info_t info{};
                tnt_status_t s = is_recv ? tnt_recv_device(comm_, t.data_ptr(), bytes, peer, tag,
                                                           &info, ds.handle)
                                         : tnt_send_device(comm_, t.data_ptr(), bytes, peer, tag,
                                                           ds.handle);
                if (s == TNT_OK) {
                    s = tnt_device_synchronize(comm_, ds.handle);
                }
                std::string error = s == TNT_OK ? std::string() : tnt_last_error();
                int source = is_recv && s == TNT_OK ? info.source : -1;
                std::string why =
                    p2p_failure(op, name_, peer, tag, s, error, source, info.bytes, bytes);
                if (!why.empty()) {
                    throw std::runtime_error(why);
                }
                work.set_source(source);
            });
    }

    /* A message's error, "" when it went through: a libtnt failure, or a
     * received message (from @p source; -1: a send) of @p got bytes into a
     * tensor of @p bytes. */
    static std::string p2p_failure(const char *op, const std::string &group, int peer, int tag,
                                   tnt_status_t s, const std::string &error, int source, size_t got,
                                   size_t bytes)
    {
        std::string why;
        if (s != TNT_OK) {
            why = std::string(tnt_status_string(s)) + ": " + error;
        } else if (got != bytes && source >= 0) {
            why = "a message of " + std::to_string(got) + " B arrived from rank " +
                  std::to_string(source) + " with tag " + std::to_string(tag) +
                  "; the tensor holds " + std::to_string(bytes) +
                  " B (send and receive tensors must have the same size)";
        }
        if (why.empty()) {
            return why;
        }
        return std::string("tnt: ") + op + " (rank " + std::to_string(peer) + ", tag " +
               std::to_string(tag) + ") on process group '" + group + "' failed: " + why;
    }

    uint64_t next_seq()
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return ++seq_;
    }

    struct Entry {
        c10::intrusive_ptr<WorkTnt> work;
        std::function<void(WorkTnt &)> run;
    };

    /* Only on the worker, right after the libtnt call: tnt_last_error is
     * per thread. */
    void check(const char *op, tnt_status_t s)
    {
        if (s != TNT_OK) {
            throw std::runtime_error(std::string("tnt: ") + op + " on process group '" + name_ +
                                     "' failed: " + tnt_status_string(s) + ": " + tnt_last_error());
        }
    }

    /* A CUDA op's last step, on the worker: wait until its stream has
     * done everything queued so far (bounded by TNT_TIMEOUT; an NCCL error
     * aborts NCCL and raises). The Work then completes with the result in
     * device memory, so whoever reads it, on any stream or thread (a
     * future's callback runs on the worker, on another stream), sees it. */
    void device_done(const char *op, const DeviceStream &ds)
    {
        if (ds.cuda) {
            check(op, tnt_device_synchronize(comm_, ds.handle));
        }
    }

    /* Every op's CUDA preamble, on the calling thread, after its other
     * checks: @p ref and @p others (every tensor the op reads or writes)
     * are on one device, a CUDA one is this group's (the device of its
     * first CUDA call: libtnt's device path of a communicator serves one
     * GPU, set up on the device current at its first device call), and the
     * caller's current stream there is captured. CPU tensors give a
     * DeviceStream with cuda false. */
    DeviceStream stream_for(const char *op, const at::Tensor &ref,
                            const std::vector<at::Tensor> &others = {})
    {
        check_device(op, others, ref);
        if (ref.is_cuda()) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!cuda_device_.has_value()) {
                cuda_device_ = ref.device();
            }
            TORCH_CHECK(*cuda_device_ == ref.device(), "tnt: ", op, ": process group '", name_,
                        "' runs its CUDA operations on ", cuda_device_->str(),
                        " (the device of its first one), this call's tensors are on ",
                        ref.device().str(),
                        "; move them to that device, or use a process group of their own for "
                        "this device (dist.new_group)");
        }
        return device_stream(op, ref);
    }

    /* @p ts are one run of memory, in order (each is contiguous). */
    static bool adjacent(const std::vector<at::Tensor> &ts)
    {
        const char *next = static_cast<const char *>(ts[0].data_ptr());
        for (const auto &t : ts) {
            if (static_cast<const char *>(t.data_ptr()) != next) {
                return false;
            }
            next += nbytes(t);
        }
        return true;
    }

    /* @p t's bytes meet those of any of @p ts. */
    static bool overlaps(const at::Tensor &t, const std::vector<at::Tensor> &ts)
    {
        const char *a = static_cast<const char *>(t.data_ptr());
        for (const auto &u : ts) {
            const char *b = static_cast<const char *>(u.data_ptr());
            if (a < b + nbytes(u) && b < a + nbytes(t)) {
                return true;
            }
        }
        return false;
    }

    /* Any of @p ts meets any of @p us. */
    static bool overlaps(const std::vector<at::Tensor> &ts, const std::vector<at::Tensor> &us)
    {
        for (const auto &t : ts) {
            if (overlaps(t, us)) {
                return true;
            }
        }
        return false;
    }

    /* Where a CUDA op's @p ts, one block per rank, are read or written:
     * where they are, when they are one buffer in rank order that meets
     * none of @p away (the op's other side, which libtnt's device calls do
     * not let overlap) or only as @p own (this rank's block as libtnt's
     * in-place form, where the call has one); otherwise NULL, and the op
     * stages through one buffer of its own on the device. */
    static void *as_one_buffer(const DeviceStream &ds, const std::vector<at::Tensor> &ts,
                               const std::vector<at::Tensor> &away, const at::Tensor *own)
    {
        if (!ds.cuda || ts.empty() || !adjacent(ts)) {
            return nullptr;
        }
        bool in_place = own != nullptr && away.size() == 1 && away[0].data_ptr() == own->data_ptr();
        return in_place || !overlaps(away, ts) ? ts[0].data_ptr() : nullptr;
    }

    void allreduce_flat(const char *op, at::Tensor t, ReduceType rt, tnt_op_t top,
                        const DeviceStream &ds)
    {
        at::Tensor buf = rt.widen ? t.to(at::kInt) : t;
        size_t n = static_cast<size_t>(buf.numel());
        if (ds.cuda) {
            check(op, tnt_allreduce_device(comm_, buf.data_ptr(), buf.data_ptr(), n, rt.dtype, top,
                                           ds.handle));
        } else {
            check(op, tnt_allreduce(comm_, buf.data_ptr(), buf.data_ptr(), n, rt.dtype, top));
        }
        if (rt.widen) {
            t.copy_(buf);
        }
    }

    void reduce_scatter_flat(const char *op, const at::Tensor &in, at::Tensor out, ReduceType rt,
                             tnt_op_t top, const DeviceStream &ds)
    {
        at::Tensor send = rt.widen ? in.to(at::kInt) : in;
        at::Tensor recv = rt.widen ? at::empty({ out.numel() }, send.options()) : out;
        size_t n = static_cast<size_t>(out.numel());
        if (ds.cuda) {
            check(op, tnt_reduce_scatter_device(comm_, send.data_ptr(), recv.data_ptr(), n,
                                                rt.dtype, top, ds.handle));
        } else {
            check(op, tnt_reduce_scatter(comm_, send.data_ptr(), recv.data_ptr(), n, rt.dtype,
                                         top));
        }
        if (rt.widen) {
            out.copy_(recv.view(out.sizes()));
        }
    }

    std::vector<size_t> split_bytes(const char *op, const char *what, const at::Tensor &t,
                                    const std::vector<int64_t> &splits)
    {
        int64_t rows = t.dim() == 0 ? 1 : t.size(0);
        size_t row_bytes = rows == 0 ? 0 : nbytes(t) / static_cast<size_t>(rows);
        std::vector<size_t> bytes(size_);
        if (splits.empty()) {
            TORCH_CHECK(rows % size_ == 0, "tnt: ", op, ": the ", what, "'s first dimension (",
                        rows, ") does not divide by the group size (", size_,
                        "); pass split sizes");
            std::fill(bytes.begin(), bytes.end(), static_cast<size_t>(rows / size_) * row_bytes);
            return bytes;
        }
        TORCH_CHECK(static_cast<int>(splits.size()) == size_, "tnt: ", op, ": ", what,
                    " split sizes have ", splits.size(), " entries; they need one per rank (",
                    size_, ")");
        int64_t sum = 0;
        for (int r = 0; r < size_; r++) {
            TORCH_CHECK(splits[r] >= 0, "tnt: ", op, ": negative ", what, " split size ",
                        splits[r]);
            sum += splits[r];
            bytes[r] = static_cast<size_t>(splits[r]) * row_bytes;
        }
        TORCH_CHECK(sum == rows, "tnt: ", op, ": the ", what, " split sizes add up to ", sum,
                    ", the ", what, "'s first dimension is ", rows);
        return bytes;
    }

    c10::intrusive_ptr<c10d::Work> enqueue(OpType type, const char *op, Millis op_timeout,
                                           std::vector<at::Tensor> outputs,
                                           const std::vector<at::Tensor> &inputs,
                                           std::function<void()> run)
    {
        return enqueue_work(type, op, op_timeout, std::move(outputs), inputs, true,
                            [run = std::move(run)](WorkTnt &) { run(); });
    }

    /* Queues @p run on the worker; it gets the op's Work (to set a
     * receive's source). @p counted: the op adds one to the sequence
     * number (collectives do, messages do not). */
    c10::intrusive_ptr<c10d::Work> enqueue_work(OpType type, const char *op, Millis op_timeout,
                                                std::vector<at::Tensor> outputs,
                                                const std::vector<at::Tensor> &inputs, bool counted,
                                                std::function<void(WorkTnt &)> run)
    {
        Millis timeout = op_timeout == c10d::kUnsetTimeout ? timeout_ : op_timeout;
        std::unique_lock<std::mutex> lock(mutex_);
        /* The profiler's title is a static string, as torch's own backends
         * keep them. */
        auto work = c10::make_intrusive<WorkTnt>(type, op, ++seq_, name_, timeout,
                                                 std::move(outputs), inputs);
        if (counted && sequence_num_.has_value()) {
            sequence_num_->increment();
        }
        if (std::this_thread::get_id() == worker_.get_id()) {
            /* A future's callback, run by the worker as it completed a
             * collective, issues another one (PowerSGD's hook does, then
             * waits for it inside the callback). Queued, it would wait for
             * the worker that is waiting for it. It runs now instead: on
             * every rank right after the collective whose callback issued
             * it, which is also where a callback that runs on the issuing
             * thread (attached after completion) puts it. */
            lock.unlock();
            execute(Entry{ work, std::move(run) });
            return work;
        }
        queue_.push_back(Entry{ work, std::move(run) });
        lock.unlock();
        cv_.notify_one();
        return work;
    }

    /* Runs one collective and completes its work (and with it the
     * future's callbacks), on the worker. */
    static void execute(Entry e)
    {
        /* Staging copies must not become part of anyone's graph. */
        at::NoGradGuard no_grad;
        std::exception_ptr err;
        try {
            e.run(*e.work);
        } catch (...) {
            err = std::current_exception();
        }
        if (err) {
            e.work->fail(err);
        } else {
            e.work->complete();
        }
    }

    void run_worker()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) {
                return; /* stopping, and everything queued is done */
            }
            Entry e = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            /* execute owns the tensors and the closure, and drops them
             * before the lock is taken again. */
            execute(std::move(e));
            lock.lock();
        }
    }

    tnt_comm_t *comm_;
    c10::intrusive_ptr<c10d::Store> store_;
    uint64_t monitored_seq_ = 0;
    uint64_t seq_agreements_ = 0;
    /* Our own, not the base class's: torch 2.x's ProcessGroup no longer
     * has the protected sequenceNum_ that 1.13's backends set. */
    std::optional<c10d::SequenceNum> sequence_num_;
    Millis timeout_;
    std::string name_;
    std::thread worker_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Entry> queue_;
    bool stop_ = false;
    uint64_t seq_ = 0;
    /* The device of the group's CUDA operations (stream_for); under
     * mutex_. */
    c10::optional<c10::Device> cuda_device_;
    /* Declared last: made after the worker, destroyed (joined) first. */
    std::unique_ptr<P2pWorker> p2p_;
};

static c10::intrusive_ptr<c10d::ProcessGroup>
create_process_group(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     Millis timeout, const std::string &name)
{
    TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "tnt: bad rank ", rank, " of ", size);
    tnt_comm_t *comm = comm_create_from_store(store, rank, size, timeout, name);
    auto pg = c10::make_intrusive<ProcessGroupTnt>(comm, store, rank, size, timeout);
    pg->setSequenceNumberForGroup();
    return pg;
}

} // namespace tnt_torch

PYBIND11_MODULE(_tnt_torch, m)
{
    m.doc() = "The tnt torch.distributed backend (private; see tarantella.torch_backend)";
    /* torch's ProcessGroup and Store types must be registered before ours
     * refers to them. */
    pybind11::module::import("torch.distributed");
    pybind11::class_<tnt_torch::ProcessGroupTnt, c10d::ProcessGroup,
                     c10::intrusive_ptr<tnt_torch::ProcessGroupTnt>>(m, "ProcessGroupTnt")
        .def_property_readonly("comm_name", &tnt_torch::ProcessGroupTnt::comm_name);
    /* The store waits can be long: no GIL while bootstrapping (a Python
     * store's methods take it back themselves). */
    m.def("create_process_group", &tnt_torch::create_process_group, pybind11::arg("store"),
          pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
          pybind11::arg("name") = std::string("torch"),
          pybind11::call_guard<pybind11::gil_scoped_release>());
    m.def("set_cuda_stream_getter", &tnt_torch::set_cuda_stream_getter, pybind11::arg("getter"),
          "getter(device_index) -> the cudaStream_t of torch's current stream there, as int");
    /* The GPU TEST DOUBLE's entry points (tests only; refused where torch
     * has CUDA): see _tnt_torch_device.cpp. */
    m.def(
        "_gpu_double_tensor",
        [](uintptr_t ptr, std::vector<int64_t> sizes, pybind11::object dtype, int device) {
            TORCH_CHECK(THPDtype_Check(dtype.ptr()), "tnt: _gpu_double_tensor: dtype must be a "
                        "torch.dtype");
            auto st = reinterpret_cast<THPDtype *>(dtype.ptr())->scalar_type;
            return tnt_torch::gpu_double_tensor(ptr, sizes, st, device);
        },
        pybind11::arg("ptr"), pybind11::arg("sizes"), pybind11::arg("dtype"),
        pybind11::arg("device") = 0,
        "TEST DOUBLE: a tensor on cuda:<device> over memory of the GPU test double's cudaMalloc");
    m.def("_gpu_double_set_stream", &tnt_torch::gpu_double_set_stream, pybind11::arg("stream"),
          "TEST DOUBLE: the cudaStream_t (of the GPU test double) that collectives of "
          "gpu_double tensors go on; 0: the legacy default stream");
}
