// TcpTunnel: the node's end of one connection to a port inside a sandbox (protocol.h, "tcp"),
// carried over the sandbox's guest channel, so reaching a sandbox's server needs no route
// into its network at all. Flow-controlled both ways by kTcpWindow: the guest may have that
// many bytes in flight towards us (more ends the stream), and Write waits for the guest's
// acks before sending beyond it.
//
// Registered with the sandbox's GuestClient (its reader thread calls OnFrame); used by one
// reader thread and one writer thread at once. Everything the guest sends is hostile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "common/result.h"
#include "node/guest_client.h"

namespace space::node {

class TcpTunnel : public StreamSink {
 public:
  // `send` sends one frame on this tunnel's stream; `closer` (run once by Close) unregisters it.
  TcpTunnel(std::function<Status(guest::FrameType, std::string_view)> send, std::function<void()> closer)
      : send_(std::move(send)), closer_(std::move(closer)) {}

  // Blocks until the guest connected to the port, or refused (nothing listens there).
  Status WaitOpened(int64_t timeout_ms);
  // Sends all of `data`, waiting for window; fails when the tunnel ended or no window opened
  // for `stall_ms`.
  Status Write(std::string_view data, int64_t stall_ms);
  // Our end of data (the client half-closed).
  Status ShutdownWrite();
  // Up to `max` bytes into `buf`: 0 at the server's end of data; deadline_exceeded after
  // `timeout_ms` with nothing; an error once the stream ended otherwise.
  Result<size_t> Read(char* buf, size_t max, int64_t timeout_ms);
  // Ends the stream (tells the guest, unregisters) and wakes any waiter. Idempotent.
  void Close();

  void OnFrame(guest::Frame frame) override;
  void OnChannelClosed(const Status& why) override;

 private:
  void EndLocked(Status why);  // mu_ held

  const std::function<Status(guest::FrameType, std::string_view)> send_;
  const std::function<void()> closer_;
  std::once_flag closed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool opened_ = false;         // GUARDED_BY(mu_)
  Status ended_;                // GUARDED_BY(mu_): not ok once the stream is over
  bool eof_ = false;            // GUARDED_BY(mu_): the server's end of data
  std::deque<std::string> in_;  // GUARDED_BY(mu_)
  size_t in_offset_ = 0;        // GUARDED_BY(mu_): bytes of in_.front() already read
  uint64_t in_bytes_ = 0;       // GUARDED_BY(mu_): unread, not yet acknowledged
  uint32_t unacked_read_ = 0;   // GUARDED_BY(mu_): read but not yet acknowledged
  uint32_t in_flight_ = 0;      // GUARDED_BY(mu_): sent to the guest, not yet acknowledged
};

}  // namespace space::node
