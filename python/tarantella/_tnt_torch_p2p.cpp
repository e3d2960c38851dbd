/*
 * The tnt backend's point-to-point worker: one thread per process group,
 * beside the group's FIFO collective worker (_tnt_torch.cpp), that drives
 * libtnt's posted sends and receives (tnt_send_post / tnt_recv_post) on
 * the group's communicator.
 *
 * Why a thread of its own, and posted requests: a receive may wait for as
 * long as its sender takes. Run as a blocking call on the FIFO worker, it
 * would hold up every later operation of the group, including this rank's
 * own later send that its peer's receive waits for: two ranks that each
 * irecv and then isend would deadlock. Here every operation is posted at
 * once, in call order (so messages between a pair with one tag keep their
 * order), and all of them are tested together; each completes its Work as
 * soon as libtnt says it is done, whether or not anyone waits for it.
 * libtnt's point-to-point transport is apart from its collectives, so this
 * thread and the collective worker may use the communicator at once.
 * Every request ends within TNT_TIMEOUT of no progress (libtnt's tnt_test
 * fails it), so nothing here waits forever.
 */
#include "_tnt_torch.hpp"

#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tnt_torch
{

P2pWorker::P2pWorker(tnt_comm_t *comm) : comm_(comm)
{
    thread_ = std::thread(&P2pWorker::run, this);
}

P2pWorker::~P2pWorker()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void P2pWorker::post(bool is_recv, void *buf, size_t bytes, int peer, int tag, Done done)
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        incoming_.push_back(Op{ is_recv, buf, bytes, peer, tag, std::move(done), nullptr, {} });
    }
    cv_.notify_one();
}

/* Posts one operation; a post that fails completes it at once. */
static bool start(tnt_comm_t *comm, P2pWorker::Op &op)
{
    tnt_status_t s = op.is_recv
                         ? tnt_recv_post(comm, op.buf, op.bytes, op.peer, op.tag, &op.info, &op.req)
                         : tnt_send_post(comm, op.buf, op.bytes, op.peer, op.tag, &op.req);
    if (s != TNT_OK) {
        op.done(s, tnt_last_error(), -1, 0);
        return false;
    }
    return true;
}

void P2pWorker::run()
{
    /* A list: libtnt keeps a pointer to each op's info until it ends. */
    std::list<Op> in_flight;
    /* Idle back-off while requests are in flight: yield a few rounds (the
     * peer may only need a core), then sleep up to 1 ms; a new operation
     * or a completion starts over. */
    int idle_rounds = 0;
    for (;;) {
        std::deque<Op> fresh;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (in_flight.empty()) {
                cv_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
                if (incoming_.empty()) {
                    return; /* stopping, and nothing is in flight */
                }
            } else if (incoming_.empty() && idle_rounds > 16) {
                auto nap = std::chrono::microseconds(std::min(1000, 20 * (idle_rounds - 16)));
                cv_.wait_for(lock, nap, [this] { return !incoming_.empty(); });
            }
            fresh.swap(incoming_);
        }
        if (!fresh.empty()) {
            idle_rounds = 0;
        }
        for (auto &op : fresh) {
            in_flight.push_back(std::move(op));
            if (!start(comm_, in_flight.back())) {
                in_flight.pop_back();
            }
        }
        bool any_done = false;
        for (auto it = in_flight.begin(); it != in_flight.end();) {
            tnt_status_t s = tnt_test(it->req);
            if (s == TNT_IN_PROGRESS) {
                ++it;
                continue;
            }
            std::string error = s == TNT_OK ? std::string() : tnt_last_error();
            (void)tnt_wait(it->req); /* frees it; returns the same status */
            Op finished = std::move(*it);
            it = in_flight.erase(it);
            if (finished.is_recv) {
                finished.done(s, error, finished.info.source, finished.info.bytes);
            } else {
                finished.done(s, error, -1, 0);
            }
            any_done = true;
        }
        if (any_done) {
            idle_rounds = 0;
        } else if (!in_flight.empty()) {
            if (++idle_rounds <= 16) {
                sched_yield();
            }
        }
    }
}

} // namespace tnt_torch
