/*
 * The tnt backend's bootstrap: libtnt's out-of-band allgather (tnt_oob_t)
 * over the c10d Store torch hands the backend, so env://, file://, store=
 * and torchrun starts work as well as our launchers.
 */
#include "_tnt_torch.hpp"

#include <cstring>
#include <stdexcept>

namespace tnt_torch
{

namespace
{

/* Every round r of the exchange, rank i sets "<prefix>/<r>/<i>" and then
 * waits for all ranks' keys of that round. The prefix names the creation
 * ("tnt/<n>"), so that two communicators made from one store (a user who
 * calls the creation function twice on the same store) never read each
 * other's keys; torch's PrefixStore already separates groups. */
class StoreOob
{
  public:
    StoreOob(c10::intrusive_ptr<c10d::Store> store, int rank, int size, Millis timeout,
             std::string name)
        : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout),
          name_(std::move(name))
    {
    }

    tnt_comm_t *create()
    {
        /* Every rank adds 1 once per creation; all adds of creation n
         * happen before any rank finishes it (its first round needs every
         * rank's key, set after that rank's add), so (value - 1) / size is
         * the same n on every rank. */
        int64_t ticket = store_->add("tnt/creations", 1);
        prefix_ = "tnt/" + std::to_string((ticket - 1) / size_);

        tnt_oob_t oob;
        std::memset(&oob, 0, sizeof(oob));
        oob.allgather = &StoreOob::allgather_cb;
        oob.ctx = this;
        oob.rank = rank_;
        oob.size = size_;
        oob.job_id = "torch.distributed";
        oob.name = name_.c_str();
        tnt_comm_t *comm = nullptr;
        tnt_status_t s = tnt_comm_create_oob(&oob, &comm);
        if (s != TNT_OK) {
            std::string why = error_.empty() ? std::string(tnt_last_error()) : error_;
            throw std::runtime_error("tnt: creating the process group (rank " +
                                     std::to_string(rank_) + " of " + std::to_string(size_) +
                                     ") through torch's store failed: " + tnt_status_string(s) +
                                     ": " + why);
        }
        return comm;
    }

  private:
    std::string key(int round, int rank) const
    {
        return prefix_ + "/" + std::to_string(round) + "/" + std::to_string(rank);
    }

    static int allgather_cb(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes, void **req)
    {
        (void)req; /* blocking: libtnt ignores *req when test is NULL */
        auto *self = static_cast<StoreOob *>(ctx);
        try {
            self->allgather(sendbuf, recvbuf, bytes);
            return 0;
        } catch (const std::exception &e) {
            self->error_ = e.what();
            return -1;
        }
    }

    void allgather(const void *sendbuf, void *recvbuf, size_t bytes)
    {
        const auto *in = static_cast<const uint8_t *>(sendbuf);
        store_->set(key(round_, rank_), std::vector<uint8_t>(in, in + bytes));
        std::vector<std::string> keys;
        for (int r = 0; r < size_; r++) {
            keys.push_back(key(round_, r));
        }
        try {
            store_->wait(keys, timeout_);
        } catch (const std::exception &e) {
            throw std::runtime_error(missing_message(keys, e.what()));
        }
        for (int r = 0; r < size_; r++) {
            std::vector<uint8_t> v = store_->get(keys[r]);
            if (v.size() != bytes) {
                throw std::runtime_error(
                    "rank " + std::to_string(r) + " sent " + std::to_string(v.size()) +
                    " bytes in bootstrap round " + std::to_string(round_) + ", this rank " +
                    std::to_string(bytes) + "; do all ranks run the same Tarantella?");
            }
            std::memcpy(static_cast<uint8_t *>(recvbuf) + r * bytes, v.data(), bytes);
        }
        /* Everybody who set a key of this round has read all keys of the
         * previous one, so this rank's previous key is garbage now. Stores
         * that cannot delete keep it; that costs a few bytes. */
        if (round_ > 0) {
            try {
                store_->deleteKey(key(round_ - 1, rank_));
            } catch (const std::exception &) {
            }
        }
        round_++;
    }

    std::string missing_message(const std::vector<std::string> &keys, const char *what)
    {
        std::string missing;
        for (int r = 0; r < size_; r++) {
            bool there = false;
            try {
                there = store_->check({ keys[r] });
            } catch (const std::exception &) {
            }
            if (!there) {
                missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            }
        }
        return "rank " + std::to_string(rank_) + " waited " + seconds(timeout_) +
               " s (init_process_group's timeout) for rank(s) " +
               (missing.empty() ? std::string("?") : missing) +
               " of the group in bootstrap round " + std::to_string(round_) +
               "; did every rank call init_process_group/new_group? (" + what + ")";
    }

    c10::intrusive_ptr<c10d::Store> store_;
    int rank_, size_;
    Millis timeout_;
    std::string prefix_;
    int round_ = 0;
    std::string name_;
    std::string error_;
};

} // namespace

tnt_comm_t *comm_create_from_store(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                                   Millis timeout, const std::string &name)
{
    StoreOob oob(store, rank, size, timeout, name);
    return oob.create();
}

} // namespace tnt_torch
