#include "node/blob_locks.h"

#include <chrono>

#include "common/log.h"
#include "common/random.h"
#include "snapshot/store_lock.h"

namespace space::node {
namespace {

class FlockLocks final : public BlobLocks {
 public:
  explicit FlockLocks(std::string dir) : dir_(std::move(dir)) {}

  Result<Hold> Shared() override { return Wrap(snapshot::StoreLock::Shared(dir_)); }
  Result<Hold> Exclusive() override { return Wrap(snapshot::StoreLock::Exclusive(dir_)); }

 private:
  static Result<Hold> Wrap(Result<snapshot::StoreLock> lock) {
    if (!lock.ok()) return lock.status();
    auto held = std::make_shared<snapshot::StoreLock>(std::move(lock).value());
    return Hold([held]() mutable { held.reset(); });
  }

  std::string dir_;
};

bool Live(const store::BlobLeaseRecord& r, int64_t now_ms) { return !r.holder.empty() && r.until_ms >= now_ms; }

class LeaseLocks final : public BlobLocks {
 public:
  LeaseLocks(store::Store* store, std::string holder, LeaseOptions options)
      : store_(store), holder_(std::move(holder)), options_(options) {
    renewer_ = std::thread([this] { RenewLoop(); });
  }

  ~LeaseLocks() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    renewer_.join();
  }

  Result<Hold> Shared() override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.wait_ms);
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(int64_t now, store_->NowMs());
      const std::string id = "lease-" + RandomHex(8);
      RETURN_IF_ERROR(store_->PutBlobLease({id, holder_, now + options_.ttl_ms}));
      {
        std::lock_guard<std::mutex> lock(mu_);
        shared_.insert(id);  // renewed from now on, even while we look at the gate
      }
      Result<std::vector<store::BlobLeaseRecord>> rows = store_->ListBlobLeases();
      bool gate_held = false;
      if (rows.ok()) {
        for (const auto& r : *rows) {
          if (r.id == store::kBlobGateId) gate_held = Live(r, now);
        }
      }
      if (rows.ok() && !gate_held) {
        return Hold([this, id] { ReleaseShared(id); });
      }
      ReleaseShared(id);
      if (!rows.ok()) return rows.status().Annotate("object store lease");
      if (std::chrono::steady_clock::now() > deadline) {
        return Unavailable("object store: garbage collection held it for longer than " +
                           std::to_string(options_.wait_ms / 1000) + " s");
      }
      const int wait = options_.backoff_ms +
                       static_cast<int>(std::stoul(RandomHex(2), nullptr, 16) % 256) * options_.backoff_ms * 2 / 255;
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    }
  }

  Result<Hold> Exclusive() override {
    // One exclusive holder per process: the gate row knows holders, not threads.
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !gate_local_; });
      gate_local_ = true;
    }
    Status st = ClaimGateAndDrain();
    if (!st.ok()) {
      ReleaseGate();
      return st;
    }
    return Hold([this] { ReleaseGate(); });
  }

 private:
  Status ClaimGateAndDrain() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.wait_ms);
    for (;;) {
      ASSIGN_OR_RETURN(int64_t now, store_->NowMs());
      ASSIGN_OR_RETURN(bool claimed, store_->ClaimBlobGate(holder_, now, now + options_.ttl_ms));
      if (claimed) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return Unavailable("object store: another node held it exclusively for longer than " +
                           std::to_string(options_.wait_ms / 1000) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.backoff_ms));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      gate_claimed_ = true;  // renewed from now on
    }
    for (;;) {
      ASSIGN_OR_RETURN(int64_t now, store_->NowMs());
      ASSIGN_OR_RETURN(std::vector<store::BlobLeaseRecord> rows, store_->ListBlobLeases());
      size_t live = 0;
      for (const auto& r : rows) {
        if (r.id != store::kBlobGateId && Live(r, now)) ++live;
      }
      if (live == 0) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) {
        return Unavailable("object store: " + std::to_string(live) + " export(s) or restore(s) still running after " +
                           std::to_string(options_.wait_ms / 1000) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.backoff_ms));
    }
  }

  void ReleaseShared(const std::string& id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shared_.erase(id);
    }
    // A row left behind (the database is away) lives only until its ttl runs out.
    if (Status st = store_->DeleteBlobLease(id); !st.ok())
      LogWarn("store", "release lease " + id + ": " + st.ToString());
  }

  void ReleaseGate() {
    bool claimed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      claimed = gate_claimed_;
      gate_claimed_ = false;
    }
    if (claimed) {
      if (Status st = store_->ReleaseBlobGate(holder_); !st.ok()) LogWarn("store", "release gate: " + st.ToString());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      gate_local_ = false;
    }
    cv_.notify_all();
  }

  void RenewLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.ttl_ms / 3), [this] { return stopping_; });
      if (stopping_) break;
      const std::set<std::string> shared = shared_;
      const bool gate = gate_claimed_;
      lock.unlock();
      Result<int64_t> now = store_->NowMs();
      if (now.ok()) {
        for (const auto& id : shared) {
          if (Status st = store_->PutBlobLease({id, holder_, *now + options_.ttl_ms}); !st.ok()) {
            LogWarn("store", "renew lease " + id + ": " + st.ToString());
          }
        }
        if (gate) {
          Result<bool> kept = store_->ClaimBlobGate(holder_, *now, *now + options_.ttl_ms);
          if (!kept.ok() || !*kept) LogError("store", "object store gate lost while held (lease ran out)");
        }
      }
      lock.lock();
    }
  }

  store::Store* store_;
  const std::string holder_;
  const LeaseOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> shared_;  // GUARDED_BY(mu_): our live shared rows
  bool gate_local_ = false;       // GUARDED_BY(mu_): a thread of ours holds or waits for the gate
  bool gate_claimed_ = false;     // GUARDED_BY(mu_): the gate row is ours
  bool stopping_ = false;         // GUARDED_BY(mu_)
  std::thread renewer_;
};

}  // namespace

std::unique_ptr<BlobLocks> FlockBlobLocks(std::string dir) { return std::make_unique<FlockLocks>(std::move(dir)); }

Result<std::unique_ptr<BlobLocks>> LeaseBlobLocks(store::Store* store, const std::string& holder,
                                                  const LeaseOptions& options) {
  // This node's earlier process is gone (one node name runs once): what it held, it holds no more.
  ASSIGN_OR_RETURN(std::vector<store::BlobLeaseRecord> rows, store->ListBlobLeases());
  for (const auto& r : rows) {
    if (r.holder != holder) continue;
    if (r.id == store::kBlobGateId) {
      RETURN_IF_ERROR(store->ReleaseBlobGate(holder));
    } else {
      RETURN_IF_ERROR(store->DeleteBlobLease(r.id));
    }
  }
  return std::unique_ptr<BlobLocks>(std::make_unique<LeaseLocks>(store, holder, options));
}

}  // namespace space::node
