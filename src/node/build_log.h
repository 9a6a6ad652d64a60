// BuildLog: what one template build printed, as an ordered list of events that readers
// replay and follow (GET /v1/templates/{name}/builds/{op}/logs). BuildLogs keeps the logs of
// the latest builds on this node, in memory: a restart forgets them.
//
// Retained output is capped per build (kMaxRetainedBytes); beyond it output lines are counted
// and dropped, while step events are always kept. Written by the build's operation thread,
// read by HTTP threads. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::node {

struct BuildEvent {
  std::string name;     // "step", "log", "done" or "error" (the SSE event name)
  nlohmann::json data;  // step: {"step","of","kind","state",...}; log: {"step","data"}
};

class BuildLog {
 public:
  static constexpr size_t kMaxRetainedBytes = 8u << 20;

  explicit BuildLog(std::string template_name) : template_name_(std::move(template_name)) {}
  const std::string& template_name() const { return template_name_; }

  void Append(BuildEvent event);
  // The last event: "done" or "error". Later appends are ignored.
  void Finish(BuildEvent last);
  // Copies events from index `*next` on, waiting up to `timeout_ms` for at least one.
  // Returns false once the log is finished and fully read.
  bool Follow(size_t* next, std::vector<BuildEvent>* out, int64_t timeout_ms);

 private:
  const std::string template_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<BuildEvent> events_;  // GUARDED_BY(mu_)
  size_t retained_bytes_ = 0;       // GUARDED_BY(mu_)
  bool truncated_ = false;          // GUARDED_BY(mu_)
  bool finished_ = false;           // GUARDED_BY(mu_)
};

class BuildLogs {
 public:
  static constexpr size_t kMaxKept = 64;

  void Register(const std::string& op_id, std::shared_ptr<BuildLog> log);
  // not_found for an unknown operation or one of another template.
  Result<std::shared_ptr<BuildLog>> Find(const std::string& op_id, const std::string& template_name);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<BuildLog>> logs_;  // GUARDED_BY(mu_)
  std::deque<std::string> order_;                          // oldest first; GUARDED_BY(mu_)
};

}  // namespace space::node
