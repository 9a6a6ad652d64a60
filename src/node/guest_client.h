// GuestClient: the node's end of one sandbox's guest channel.
//
// Owns the channel socket. A reader thread parses frames (bounded by the protocol's limits)
// and hands each to the sink registered for its stream; frames for unknown streams are
// dropped, since the guest is untrusted. Senders are serialized by a mutex and time out, so
// a guest that stops reading cannot hang a node thread. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "protocol/protocol.h"

namespace space::node {

// Receives the frames of one stream. Called on the reader thread; must not block long.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void OnFrame(guest::Frame frame) = 0;
  // The channel closed (the sandbox died or was destroyed); no more frames will come.
  virtual void OnChannelClosed(const Status& why) = 0;
};

class GuestClient {
 public:
  GuestClient(UniqueFd channel, std::string sandbox_id);
  ~GuestClient();
  GuestClient(const GuestClient&) = delete;
  GuestClient& operator=(const GuestClient&) = delete;

  // Reads the guest's hello (within `timeout_ms`), then starts the reader thread.
  Status Start(int timeout_ms);
  // For a guest restored from a full checkpoint, which said hello long ago to another node
  // connection: pings until the matching pong (within `timeout_ms`; older frames are
  // dropped), then starts the reader. Stream ids start at a random high value so they never
  // meet the streams the guest still has open from before the checkpoint. A `disk_bytes`
  // above zero has the guest grow its root filesystem to that disk size first (the runtime
  // resized the disk under the restored guest).
  Status Resume(int timeout_ms, uint64_t disk_bytes = 0);

  // Registers `sink` on a fresh stream id.
  uint32_t OpenStream(std::shared_ptr<StreamSink> sink);
  void CloseStream(uint32_t stream);

  Status Send(guest::FrameType type, uint32_t stream, std::string_view payload);

  // Closes the channel and joins the reader. Idempotent.
  void Shutdown();
  bool alive() const { return alive_.load(); }
  // Why a started channel ended on its own (the guest closed it, died, or broke the
  // protocol), as opposed to by Shutdown; nullopt while it runs or after Shutdown.
  std::optional<Status> lost() const;

 private:
  void ReadLoop();
  void FailAll(const Status& why);

  const std::string sandbox_id_;
  UniqueFd channel_;
  std::atomic<bool> alive_{false};
  std::thread reader_;
  std::mutex write_mu_;  // serializes frames on the socket
  mutable std::mutex mu_;
  uint32_t next_stream_ = 1;                                   // GUARDED_BY(mu_)
  std::map<uint32_t, std::shared_ptr<StreamSink>> streams_;    // GUARDED_BY(mu_)
  bool closed_ = false;                                        // GUARDED_BY(mu_)
  bool shutting_down_ = false;                                 // GUARDED_BY(mu_)
  std::optional<Status> lost_;                                 // GUARDED_BY(mu_)
};

}  // namespace space::node
