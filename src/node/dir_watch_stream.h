// DirWatchStream: the node's end of one directory watch in a sandbox (a kWatchStart stream):
// the guest's change events, validated and queued until a consumer takes them.
//
// Created by Node::WatchDirectory, registered with the sandbox's GuestClient (whose reader
// thread feeds it) and handed to one consumer (an E2B WatchDir stream), which must call
// Close() when done so the guest drops its inotify watches. Everything the guest sends is
// hostile: batches, names and types are checked, and the queue is capped (kMaxQueued; what
// does not fit is reported as overflow). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "node/guest_client.h"

namespace space::node {

struct DirChange {
  enum class Type { kCreate, kWrite, kRemove, kRename, kChmod };
  std::string name;  // relative to the watched directory
  Type type = Type::kCreate;
};

class DirWatchStream : public StreamSink {
 public:
  static constexpr size_t kMaxQueued = 4096;

  // `closer` is run once by Close(): it tells the guest to stop and unregisters the stream.
  explicit DirWatchStream(std::function<void()> closer) : closer_(std::move(closer)) {}

  // Blocks until the guest has the watch in place (later changes are seen) or refused it.
  Status WaitStarted(int64_t timeout_ms);
  // Moves queued changes into `out`, waiting up to `timeout_ms` for one; `*overflow` is set
  // when changes were lost since the last call. An error once the watch ended (the guest
  // ended it, or the sandbox went away) and nothing is left to take.
  Status Next(std::vector<DirChange>* out, bool* overflow, int64_t timeout_ms);
  // Stops the watch in the guest. Idempotent.
  void Close();

  void OnFrame(guest::Frame frame) override;
  void OnChannelClosed(const Status& why) override;

 private:
  void AcceptEvents(const std::string& payload);  // mu_ held

  std::function<void()> closer_;
  std::once_flag closed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;          // GUARDED_BY(mu_)
  Status ended_;                  // GUARDED_BY(mu_): not ok once the stream is over
  std::deque<DirChange> queue_;   // GUARDED_BY(mu_)
  bool overflow_ = false;         // GUARDED_BY(mu_)
};

}  // namespace space::node
