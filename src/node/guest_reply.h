// GuestReply: a stream sink that waits for the one frame a guest answers a request with (a
// net config, a limits query). Frames after the first are dropped; a closed channel is an
// answer too. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "node/guest_client.h"

namespace space::node {

class GuestReply : public StreamSink {
 public:
  // The first frame, or why none came within `timeout_ms` (DeadlineExceeded naming `what`).
  Result<guest::Frame> Wait(int64_t timeout_ms, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; })) {
      return DeadlineExceeded("the guest did not answer " + what + " in time");
    }
    if (!closed_.ok()) return closed_;
    return frame_;
  }
  void OnFrame(guest::Frame frame) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    frame_ = std::move(frame);
    done_ = true;
    cv_.notify_all();
  }
  void OnChannelClosed(const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    closed_ = why.ok() ? Unavailable("the guest channel closed") : why;
    done_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;   // GUARDED_BY(mu_)
  guest::Frame frame_;  // GUARDED_BY(mu_)
  Status closed_;       // GUARDED_BY(mu_)
};

}  // namespace space::node
