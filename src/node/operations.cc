#include "node/operations.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"

namespace space::node {

Operations::Operations(store::Store* store, int workers) : store_(store) {
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

Operations::~Operations() { Stop(); }

void Operations::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
}

Result<store::OperationRecord> Operations::Submit(const std::string& team, const std::string& kind,
                                                  const std::string& target, std::function<Status()> work) {
  store::OperationRecord op;
  op.id = NewId("op");
  op.team = team;
  op.kind = kind;
  op.target = target;
  op.state = store::OperationState::kPending;
  op.created_at_ms = WallNowMs();
  RETURN_IF_ERROR(store_->PutOperation(op));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the node is shutting down");
    queue_.push_back({op, std::move(work)});
  }
  cv_.notify_one();
  return op;
}

Result<store::OperationRecord> Operations::RecordDone(const std::string& team, const std::string& kind,
                                                      const std::string& target, const Status& result) {
  store::OperationRecord op;
  op.id = NewId("op");
  op.team = team;
  op.kind = kind;
  op.target = target;
  op.state = result.ok() ? store::OperationState::kSucceeded : store::OperationState::kFailed;
  op.error = result.ok() ? "" : result.message();
  op.created_at_ms = WallNowMs();
  op.finished_at_ms = op.created_at_ms;
  RETURN_IF_ERROR(store_->PutOperation(op));
  done_cv_.notify_all();
  return op;
}

Result<store::OperationRecord> Operations::Wait(const std::string& id, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ASSIGN_OR_RETURN(store::OperationRecord op, store_->GetOperation(id));
    if (op.state == store::OperationState::kSucceeded || op.state == store::OperationState::kFailed) return op;
    if (done_cv_.wait_until(lock, deadline) == std::cv_status::timeout) return store_->GetOperation(id);
  }
}

void Operations::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      std::deque<Job>::iterator next;
      cv_.wait(lock, [&] {
        if (stopping_) return true;
        // The oldest job whose target is idle; later jobs of a busy target wait their turn.
        std::set<std::string> seen;
        for (next = queue_.begin(); next != queue_.end(); ++next) {
          if (!busy_.count(next->op.target) && !seen.count(next->op.target)) return true;
          seen.insert(next->op.target);
        }
        return false;
      });
      if (stopping_) return;
      job = std::move(*next);
      queue_.erase(next);
      busy_.insert(job.op.target);
    }
    job.op.state = store::OperationState::kRunning;
    if (Status st = store_->PutOperation(job.op); !st.ok()) LogError("operations", st.ToString());
    Status result = job.work();
    job.op.state = result.ok() ? store::OperationState::kSucceeded : store::OperationState::kFailed;
    job.op.error = result.ok() ? "" : result.message();
    job.op.finished_at_ms = WallNowMs();
    if (Status st = store_->PutOperation(job.op); !st.ok()) LogError("operations", st.ToString());
    if (!result.ok()) LogWarn("operations", job.op.kind + " " + job.op.target + " failed: " + result.ToString());
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_.erase(job.op.target);
    }
    done_cv_.notify_all();
    cv_.notify_all();  // a job of this target may now run
  }
}

}  // namespace space::node
