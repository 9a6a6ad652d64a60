// PgPool: a bounded set of connections to one PostgreSQL database, shared by every thread that
// calls the store. Connections open lazily, up to max_size; a caller that finds them all busy
// waits up to acquire_timeout. A connection comes back to the pool when its Lease ends, unless
// it broke or was left inside a transaction, in which case it is closed instead.
//
// Owned by the PostgresStore; it must outlive every Lease. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "store/pg_connection.h"

namespace space::store::pg {

class PgPool {
 public:
  PgPool(std::string url, size_t max_size, std::chrono::milliseconds acquire_timeout)
      : url_(std::move(url)), max_size_(max_size), acquire_timeout_(acquire_timeout) {}
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Exclusive use of one connection until destruction.
  class Lease {
   public:
    Lease(PgPool* pool, std::unique_ptr<PgConnection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->Release(std::move(conn_));
    }
    PgConnection* operator->() { return conn_.get(); }
    PgConnection& operator*() { return *conn_; }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // A connection for `op` (named in errors): an idle one, a new one, or one freed in time.
  Result<Lease> Acquire(std::string_view op);
  // Closes every idle connection. Called when one turned out broken: after a server restart
  // the others are dead too, and a retry must not pick one of them.
  void DropIdle();

  const std::string& url() const { return url_; }

 private:
  void Release(std::unique_ptr<PgConnection> conn);

  const std::string url_;
  const size_t max_size_;
  const std::chrono::milliseconds acquire_timeout_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // GUARDED_BY(mu_)
  size_t open_ = 0;  // idle + leased + being opened; GUARDED_BY(mu_)
};

}  // namespace space::store::pg
