// Process: the node's record of one command running in a sandbox (buffered exec, streamed
// exec, or background process): its output as an ordered event log that followers replay
// and tail, and how it ended.
//
// Output retained per process is capped (kMaxRetainedBytes); beyond it output is counted
// but dropped and `truncated` is set. Shared between the guest reader thread (producer) and
// HTTP threads (consumers). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "node/guest_client.h"

namespace space::node {

struct ProcessEvent {
  enum class Kind { kStart, kStdout, kStderr, kExit };
  Kind kind;
  std::string data;  // output bytes for kStdout/kStderr
};

struct ExitInfo {
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  int64_t duration_ms = 0;
};

struct ProcessSpec {
  std::vector<std::string> cmd;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;   // empty: the user's home
  std::string user = "root";
  int64_t timeout_s = 300;
  bool keep_stdin_open = false;      // background processes take stdin later
  std::string stdin_data;            // written then closed for buffered execs
  bool snapshot_before = false;      // the API takes a snapshot before starting it
  bool tty = false;                  // on a pty: one output stream (stdout), resizable
  int tty_cols = 80;                 // the pty's initial size, 1..guest::kMaxTtySize
  int tty_rows = 24;
  // Keep only the latest kRingBytes of output, dropping the oldest (a terminal: a long session
  // must never stop printing, and a reattach replays the screen's recent past, not all of it).
  bool output_ring = false;
};

class Process : public StreamSink {
 public:
  static constexpr size_t kMaxRetainedBytes = 16u << 20;
  static constexpr size_t kRingBytes = 1u << 20;
  // Bound on the dropped-output count a guest may report per stream (1 PiB).
  static constexpr uint64_t kMaxDroppedBytes = 1ull << 50;

  Process(std::string id, ProcessSpec spec, int64_t started_at_ms);

  const std::string& id() const { return id_; }
  const ProcessSpec& spec() const { return spec_; }
  int64_t started_at_ms() const { return started_at_ms_; }
  void set_stream(uint32_t stream) { stream_.store(stream); }
  uint32_t stream() const { return stream_.load(); }

  // Blocks until the guest accepted or refused the command, or `timeout_ms`.
  Status WaitStarted(int64_t timeout_ms);
  // Blocks until the process ended (or the channel closed), or `timeout_ms`; false on timeout.
  bool WaitExited(int64_t timeout_ms);

  // Copies events from index `*next` on, waiting up to `timeout_ms` for at least one.
  // Returns false once the log is complete and fully read. With output_ring, events older
  // than the ring are gone: `*next` skips forward to the oldest one kept.
  bool Follow(size_t* next, std::vector<ProcessEvent>* out, int64_t timeout_ms);

  bool exited() const;
  // The process's pid inside the sandbox as the guest reported it; 0 until started.
  uint32_t guest_pid() const;
  std::optional<ExitInfo> exit_info() const;
  Status failure() const;  // why the process could not start or lost its channel
  int64_t finished_at_ms() const;
  int64_t stdout_bytes() const;
  int64_t stderr_bytes() const;
  bool truncated() const;
  // All retained stdout / stderr bytes concatenated.
  std::string Collected(ProcessEvent::Kind kind) const;

  // Called once, on the guest reader thread, right after the process ended.
  void set_on_exit(std::function<void(const Process&)> fn) { on_exit_ = std::move(fn); }
  // Called once, on the guest reader thread (no lock held), when the retained output first
  // overflows: the caller tells the guest to stop sending output (guest kDropOutput), since
  // nothing past the cap is kept. The guest still counts it, so the byte totals stay true.
  void set_on_truncated(std::function<void()> fn) { on_truncated_ = std::move(fn); }

  void OnFrame(guest::Frame frame) override;
  void OnChannelClosed(const Status& why) override;

 private:
  void HandleFrameLocked(guest::Frame frame);              // mu_ held
  void Append(ProcessEvent::Kind kind, std::string data);  // mu_ held
  void Finish(ExitInfo info);                              // mu_ held

  const std::string id_;
  const ProcessSpec spec_;
  const int64_t started_at_ms_;
  std::atomic<uint32_t> stream_{0};  // set once the stream opens; read by the reader thread

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;                 // GUARDED_BY(mu_)
  uint32_t guest_pid_ = 0;               // GUARDED_BY(mu_)
  Status failure_;                       // GUARDED_BY(mu_)
  std::deque<ProcessEvent> events_;      // GUARDED_BY(mu_)
  size_t first_event_ = 0;               // absolute index of events_.front(); GUARDED_BY(mu_)
  size_t retained_bytes_ = 0;            // GUARDED_BY(mu_)
  bool truncated_ = false;               // GUARDED_BY(mu_)
  int64_t stdout_bytes_ = 0;             // GUARDED_BY(mu_)
  int64_t stderr_bytes_ = 0;             // GUARDED_BY(mu_)
  std::optional<ExitInfo> exit_;         // GUARDED_BY(mu_)
  int64_t finished_at_ms_ = 0;           // GUARDED_BY(mu_)
  int64_t start_mono_ns_;
  std::function<void(const Process&)> on_exit_;  // set before the stream opens
  std::function<void()> on_truncated_;           // set before the stream opens
  bool truncation_reported_ = false;             // GUARDED_BY(mu_)
};

// "SIGKILL" for 9, "SIG<n>" for unknown numbers; and back (accepts "TERM", "SIGTERM", "15").
std::string SignalName(int sig);
std::optional<int> SignalNumber(const std::string& name);

}  // namespace space::node
