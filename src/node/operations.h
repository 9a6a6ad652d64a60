// Operations: asynchronous lifecycle work. Each operation is recorded in the store (pending ->
// running -> succeeded|failed) and executed by a small pool of worker threads; callers may
// wait for one to finish. Operations on the same target run one at a time, in submission
// order, so a destroy never races the create it follows. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace space::node {

class Operations {
 public:
  Operations(store::Store* store, int workers);
  ~Operations();

  // Records a pending operation and queues `work` to run it.
  Result<store::OperationRecord> Submit(const std::string& team, const std::string& kind, const std::string& target,
                                        std::function<Status()> work);
  // Records an operation that already ran to completion in the caller's thread (`result` is
  // how it ended), for work too short to be worth a queue hop.
  Result<store::OperationRecord> RecordDone(const std::string& team, const std::string& kind,
                                            const std::string& target, const Status& result);
  // The operation's record once finished, or its current record after `timeout_ms`.
  Result<store::OperationRecord> Wait(const std::string& id, int64_t timeout_ms);
  void Stop();

 private:
  struct Job {
    store::OperationRecord op;
    std::function<Status()> work;
  };
  void WorkerLoop();

  store::Store* const store_;
  std::mutex mu_;
  std::condition_variable cv_;       // jobs queued / stop
  std::condition_variable done_cv_;  // an operation finished
  std::deque<Job> queue_;            // GUARDED_BY(mu_)
  std::set<std::string> busy_;       // targets with a running job; GUARDED_BY(mu_)
  bool stopping_ = false;            // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;
};

}  // namespace space::node
