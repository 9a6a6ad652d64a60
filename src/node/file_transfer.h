// FileTransfer: collects the guest's answer to one file operation (a JSON result, and for
// reads a body of data chunks), bounded in size. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "node/guest_client.h"

namespace space::node {

class FileTransfer : public StreamSink {
 public:
  explicit FileTransfer(size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}

  // The guest's JSON result (an object) or its error, within `timeout_ms`.
  Result<nlohmann::json> WaitResult(int64_t timeout_ms);
  // The whole body of a read, after WaitResult succeeded.
  Result<std::string> WaitBody(int64_t timeout_ms);

  void OnFrame(guest::Frame frame) override;
  void OnChannelClosed(const Status& why) override;

 private:
  const size_t max_body_bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<nlohmann::json> result_;  // GUARDED_BY(mu_)
  Status error_;                          // GUARDED_BY(mu_)
  std::string body_;                      // GUARDED_BY(mu_)
  bool body_done_ = false;                // GUARDED_BY(mu_)
};

}  // namespace space::node
