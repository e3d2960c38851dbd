/*
 * The tnt backend's monitored_barrier: a barrier that, instead of hanging,
 * tells rank 0 which ranks did not arrive within the timeout. It has
 * gloo's meaning and messages (torch offers it for gloo only), so a script
 * that greps its logs for "failed to pass monitoredBarrier" works the same.
 *
 * Why over torch's store and not over libtnt: monitored_barrier is the tool
 * for finding the rank that is stuck when collectives hang, so it must not
 * travel on the transport that may be the one stuck, nor leave a libtnt
 * request in flight when it gives up (a point-to-point receive that nothing
 * matches breaks the communicator's point-to-point transport when it times
 * out). Polling the store ends at the deadline and leaves nothing behind.
 *
 * Each call has a sequence number, counted by every rank. Rank r > 0 sets
 * "<seq>/arrived/<r>", then waits for "<seq>/released". Rank 0 waits for
 * every arrival in rank order, each with what is left of the timeout (gloo
 * reports the first missing rank in rank order; with wait_all_ranks, all of
 * them), then deletes the arrivals and the previous call's release (every
 * rank has arrived here, so every rank is past it) and sets its own
 * release. So the store holds at most one call's keys.
 */
#include "_tnt_torch.hpp"

#include <c10/util/StringUtil.h>

namespace tnt_torch
{

static std::string key(uint64_t seq, const std::string &what)
{
    return c10::str("tnt/monitored_barrier/", seq, "/", what);
}

/* True when @p k appears in @p store within @p left (zero: just look).
 * Polls with check(), backing off from 1 ms to 50 ms: the store's own
 * wait(keys, timeout) leaves the wait registered in TCPStore's server when
 * it times out, and the server's late answer then desynchronises the
 * client's socket, so that the group's next use of the store (new_group)
 * fails with "Socket Timeout". */
static bool arrives(c10d::Store &store, const std::string &k, Millis left)
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + left;
    Millis nap(1);
    for (;;) {
        if (store.check({ k })) {
            return true;
        }
        auto now = Clock::now();
        if (now >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::min<Clock::duration>(nap, deadline - now));
        nap = std::min(nap * 2, Millis(50));
    }
}

void monitored_barrier(c10d::Store &store, int rank, int size, uint64_t seq, Millis timeout,
                       bool wait_all_ranks)
{
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    if (rank != 0) {
        store.set(key(seq, c10::str("arrived/", rank)), std::vector<uint8_t>{ 1 });
        if (!arrives(store, key(seq, "released"), timeout)) {
            TORCH_CHECK(false, "Rank ", rank,
                        " successfully reached monitoredBarrier, but received errors while waiting "
                        "for send/recv from rank 0 (no release within ",
                        timeout.count(), " ms). Please check rank 0 logs for faulty rank.");
        }
        return;
    }
    std::vector<int> missing;
    std::vector<int> passed;
    for (int r = 1; r < size; r++) {
        auto left = timeout - std::chrono::duration_cast<Millis>(Clock::now() - start);
        if (!wait_all_ranks && (left <= Millis(0))) {
            /* gloo's verdict when rank 0 itself has no time left. */
            TORCH_CHECK(false, "[Rank 0]: Rank 0 timed out in monitoredBarrier after ",
                        timeout.count(), " ms. ",
                        passed.empty() ? std::string("No ranks successfully processed")
                                       : "Successfully processed ranks: " + c10::Join(", ", passed),
                        "; ranks from ", r, " on were not waited for.");
        }
        if (arrives(store, key(seq, c10::str("arrived/", r)), left)) {
            passed.push_back(r);
            continue;
        }
        if (!wait_all_ranks) {
            TORCH_CHECK(false, "[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ",
                        timeout.count(), " ms");
        }
        missing.push_back(r);
    }
    if (!missing.empty()) {
        TORCH_CHECK(false, "[Rank 0]: Ranks ", c10::Join(", ", missing),
                    " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
    for (int r = 1; r < size; r++) {
        store.deleteKey(key(seq, c10::str("arrived/", r)));
    }
    if (seq > 0) {
        store.deleteKey(key(seq - 1, "released"));
    }
    store.set(key(seq, "released"), std::vector<uint8_t>{ 1 });
}

} // namespace tnt_torch
