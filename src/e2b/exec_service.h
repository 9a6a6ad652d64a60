// ExecService: the node's handle on one sandbox's code-interpreter service (exec_service.py),
// a Python process started through the guest that keeps runCode's contexts. Requests and
// replies are JSON lines over the process's stdin and stdout; one request runs at a time.
//
// Owned by E2b (one per sandbox, shared with in-flight requests). Thread-safe: Call
// serializes callers.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "node/node.h"

namespace space::e2b {

class ExecService {
 public:
  // Starts the service in the sandbox as `user`.
  static Result<std::shared_ptr<ExecService>> Start(node::Node* node, const std::string& team, const std::string& id,
                                                    const std::string& user);

  // False once the process ended or its output log overflowed; E2b then starts a new one
  // (whose contexts start empty).
  bool usable() const;

  // Sends `request` (an object; "id" is set here). `on_msg` gets each output message and
  // returns false when its client has gone (the running code is then interrupted). Returns
  // the final reply {"result"?, "error"?: {"status", "message"}}.
  Result<nlohmann::json> Call(nlohmann::json request, const std::function<bool(const nlohmann::json&)>& on_msg,
                              int64_t timeout_ms);

 private:
  ExecService(node::Node* node, std::string team, std::string id, std::shared_ptr<node::Process> proc)
      : node_(node), team_(std::move(team)), id_(std::move(id)), proc_(std::move(proc)) {}

  node::Node* const node_;
  const std::string team_;
  const std::string id_;
  const std::shared_ptr<node::Process> proc_;

  std::mutex mu_;            // one call at a time
  size_t next_event_ = 0;    // GUARDED_BY(mu_): read position in the process's output log
  std::string pending_;      // GUARDED_BY(mu_): stdout bytes after the last newline
  uint64_t next_id_ = 1;     // GUARDED_BY(mu_)
};

}  // namespace space::e2b
