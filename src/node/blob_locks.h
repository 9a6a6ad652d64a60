// BlobLocks: the readers-writer lock over one snapshot object store that every node using it
// honours. Exports, restores and template publishes hold it shared; garbage collection and
// manifest deletion hold it exclusive, so GC never sees an export's objects before the
// export's manifest names them (snapshot/gc.h).
//
// Two implementations, chosen by where the store lives:
//   flock   a local or shared directory: flock(2) on <dir>/.lock (snapshot/store_lock.h).
//   lease   an object store (S3): no file lock reaches across nodes, so the locks are rows in
//           the store database (store::BlobLeaseRecord), stamped on the database's clock:
//           - exclusive: compare-and-set the one gate row to this holder, then wait until no
//             live shared row is left. The gate stays claimed while it waits, so no new
//             shared holder starts: writers do not starve.
//           - shared: insert an own row, then read the gate; if someone holds it, delete the
//             row, back off and try again.
//           Each side writes before it reads the other's rows, and every statement sees what
//           committed before it, so the two can never both go ahead. A lease lives `ttl_ms`
//           and a thread renews every held one each ttl/3: a node killed while holding one
//           blocks the others for at most `ttl_ms`, and its restart drops its rows at once.
// Not re-entrant: a thread must not take one while it holds another.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/result.h"
#include "store/store.h"

namespace space::node {

class BlobLocks {
 public:
  // Held until destroyed (or moved from).
  class Hold {
   public:
    Hold() = default;
    explicit Hold(std::function<void()> release) : release_(std::move(release)) {}
    Hold(Hold&& o) noexcept : release_(std::move(o.release_)) { o.release_ = nullptr; }
    Hold& operator=(Hold&&) = delete;
    Hold(const Hold&) = delete;
    ~Hold() {
      if (release_) release_();
    }

   private:
    std::function<void()> release_;
  };

  virtual ~BlobLocks() = default;
  virtual Result<Hold> Shared() = 0;
  virtual Result<Hold> Exclusive() = 0;
};

std::unique_ptr<BlobLocks> FlockBlobLocks(std::string dir);

struct LeaseOptions {
  int64_t ttl_ms = 30 * 1000;
  int64_t wait_ms = 10 * 60 * 1000;  // give up (kUnavailable) after waiting this long
  int backoff_ms = 100;              // a refused shared attempt waits this, up to 3x, then retries
};

// `holder` names this node; rows an earlier process of the same node left (it crashed) are
// dropped before this returns. `store` must outlive the result.
Result<std::unique_ptr<BlobLocks>> LeaseBlobLocks(store::Store* store, const std::string& holder,
                                                  const LeaseOptions& options = {});

}  // namespace space::node
