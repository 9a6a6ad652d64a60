#include "node/build_log.h"

#include <chrono>

namespace space::node {

void BuildLog::Append(BuildEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (event.name == "log") {
      const size_t bytes = event.data.value("data", std::string()).size();
      if (retained_bytes_ + bytes > kMaxRetainedBytes) {
        if (truncated_) return;
        truncated_ = true;
        event.data["data"] = "[space: build output beyond 8 MiB is not kept]\n";
      }
      retained_bytes_ += bytes;
    }
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

void BuildLog::Finish(BuildEvent last) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    events_.push_back(std::move(last));
    finished_ = true;
  }
  cv_.notify_all();
}

bool BuildLog::Follow(size_t* next, std::vector<BuildEvent>* out, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return *next < events_.size() || finished_; });
  for (; *next < events_.size(); ++*next) out->push_back(events_[*next]);
  return !(finished_ && *next >= events_.size());
}

void BuildLogs::Register(const std::string& op_id, std::shared_ptr<BuildLog> log) {
  std::lock_guard<std::mutex> lock(mu_);
  logs_[op_id] = std::move(log);
  order_.push_back(op_id);
  while (order_.size() > kMaxKept) {
    logs_.erase(order_.front());
    order_.pop_front();
  }
}

Result<std::shared_ptr<BuildLog>> BuildLogs::Find(const std::string& op_id, const std::string& template_name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(op_id);
  if (it == logs_.end() || it->second->template_name() != template_name) {
    return NotFound("no build " + op_id.substr(0, 80) + " of template " + template_name.substr(0, 80) +
                    " on this node");
  }
  return it->second;
}

}  // namespace space::node
