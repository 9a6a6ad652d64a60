#include "store/pg_pool.h"

namespace space::store::pg {

Result<PgPool::Lease> PgPool::Acquire(std::string_view op) {
  std::unique_lock<std::mutex> lock(mu_);
  bool ready = freed_.wait_for(lock, acquire_timeout_, [this] { return !idle_.empty() || open_ < max_size_; });
  if (!ready) {
    return Unavailable("postgres " + std::string(op) + ": all " + std::to_string(max_size_) +
                       " connections busy for " + std::to_string(acquire_timeout_.count()) + " ms");
  }
  if (!idle_.empty()) {
    std::unique_ptr<PgConnection> conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(conn));
  }
  // Connecting takes a round trip or more; others may use idle connections meanwhile.
  ++open_;
  lock.unlock();
  auto conn = PgConnection::Connect(url_, op);
  if (!conn.ok()) {
    lock.lock();
    --open_;
    freed_.notify_one();
    return conn.status();
  }
  return Lease(this, std::move(conn).value());
}

void PgPool::Release(std::unique_ptr<PgConnection> conn) {
  bool reusable = !conn->broken() && !conn->in_transaction();
  if (!reusable) conn.reset();  // closed before taking the lock: PQfinish may send a Terminate
  std::lock_guard<std::mutex> lock(mu_);
  if (reusable) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
  freed_.notify_one();
}

void PgPool::DropIdle() {
  std::vector<std::unique_ptr<PgConnection>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(idle_);
    open_ -= dropped.size();
  }
  freed_.notify_all();
  // `dropped` closes its connections here, outside the lock.
}

}  // namespace space::store::pg
