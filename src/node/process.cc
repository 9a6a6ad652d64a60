#include "node/process.h"

#include <algorithm>
#include <csignal>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "node/guest_error.h"

namespace space::node {

Process::Process(std::string id, ProcessSpec spec, int64_t started_at_ms)
    : id_(std::move(id)), spec_(std::move(spec)), started_at_ms_(started_at_ms), start_mono_ns_(MonoNowNs()) {}

Status Process::WaitStarted(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return started_ || !failure_.ok() || exit_.has_value(); });
  if (!done) return Unavailable("process " + id_ + ": the guest did not answer the start request in time");
  if (!started_ && !failure_.ok()) return failure_;
  return Status::Ok();
}

bool Process::WaitExited(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return exit_.has_value(); });
}

bool Process::Follow(size_t* next, std::vector<ProcessEvent>* out, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return *next < first_event_ + events_.size() || exit_.has_value() || !failure_.ok(); });
  if (*next < first_event_) *next = first_event_;
  const size_t end = first_event_ + events_.size();
  while (*next < end) out->push_back(events_[(*next)++ - first_event_]);
  bool complete = exit_.has_value() || (!started_ && !failure_.ok());
  return !(complete && *next >= end);
}

bool Process::exited() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exit_.has_value();
}
uint32_t Process::guest_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return guest_pid_;
}
std::optional<ExitInfo> Process::exit_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exit_;
}
Status Process::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}
int64_t Process::finished_at_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_at_ms_;
}
int64_t Process::stdout_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stdout_bytes_;
}
int64_t Process::stderr_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stderr_bytes_;
}
bool Process::truncated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return truncated_;
}

std::string Process::Collected(ProcessEvent::Kind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& e : events_) {
    if (e.kind == kind) out += e.data;
  }
  return out;
}

void Process::Append(ProcessEvent::Kind kind, std::string data) {
  if (kind == ProcessEvent::Kind::kStdout) stdout_bytes_ += static_cast<int64_t>(data.size());
  if (kind == ProcessEvent::Kind::kStderr) stderr_bytes_ += static_cast<int64_t>(data.size());
  if (spec_.output_ring) {
    retained_bytes_ += data.size();
    events_.push_back({kind, std::move(data)});
    while (retained_bytes_ > kRingBytes && events_.size() > 1) {
      retained_bytes_ -= events_.front().data.size();
      events_.pop_front();
      ++first_event_;
    }
    return;
  }
  if (retained_bytes_ + data.size() > kMaxRetainedBytes) {
    truncated_ = true;
    return;
  }
  retained_bytes_ += data.size();
  events_.push_back({kind, std::move(data)});
}

void Process::Finish(ExitInfo info) {
  if (exit_) return;
  info.duration_ms = (MonoNowNs() - start_mono_ns_) / 1000000;
  exit_ = info;
  finished_at_ms_ = WallNowMs();
  events_.push_back({ProcessEvent::Kind::kExit, ""});
}

void Process::OnFrame(guest::Frame frame) {
  bool ended = false;
  bool report_truncation = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (exit_) return;
    HandleFrameLocked(std::move(frame));
    ended = exit_.has_value();
    if (truncated_ && !truncation_reported_ && !ended) report_truncation = truncation_reported_ = true;
    cv_.notify_all();
  }
  if (report_truncation && on_truncated_) on_truncated_();
  if (ended && on_exit_) on_exit_(*this);
}

void Process::HandleFrameLocked(guest::Frame frame) {
  switch (frame.type) {
    case guest::FrameType::kExecStarted:
      if (!started_) {
        // Hostile input: only a plausible pid is kept (the E2B surface shows it to clients).
        auto j = nlohmann::json::parse(frame.payload, nullptr, false);
        if (j.is_object() && j.contains("pid") && j["pid"].is_number_unsigned() && j["pid"].get<uint64_t>() > 0 &&
            j["pid"].get<uint64_t>() <= (1u << 22)) {
          guest_pid_ = static_cast<uint32_t>(j["pid"].get<uint64_t>());
        }
        started_ = true;
        events_.push_back({ProcessEvent::Kind::kStart, ""});
      }
      break;
    case guest::FrameType::kStdout:
      if (started_) Append(ProcessEvent::Kind::kStdout, std::move(frame.payload));
      break;
    case guest::FrameType::kStderr:
      if (started_) Append(ProcessEvent::Kind::kStderr, std::move(frame.payload));
      break;
    case guest::FrameType::kExit: {
      // Hostile input: every field is checked for type and range.
      ExitInfo info;
      auto j = nlohmann::json::parse(frame.payload, nullptr, false);
      if (j.is_object()) {
        if (j.contains("exit_code") && j["exit_code"].is_number_integer()) {
          int64_t c = j["exit_code"].get<int64_t>();
          if (c >= 0 && c <= 255) info.exit_code = static_cast<int>(c);
        }
        if (j.contains("signal") && j["signal"].is_number_integer()) {
          int64_t s = j["signal"].get<int64_t>();
          if (s > 0 && s < 65) info.signal = static_cast<int>(s);
        }
        if (j.contains("timed_out") && j["timed_out"].is_boolean()) info.timed_out = j["timed_out"].get<bool>();
        // What the guest read but did not send after kDropOutput; only honoured once asked,
        // and bounded, so a guest cannot make the totals absurd.
        if (truncation_reported_) {
          for (auto [key, total] : {std::pair{"dropped_stdout", &stdout_bytes_}, std::pair{"dropped_stderr", &stderr_bytes_}}) {
            if (j.contains(key) && j[key].is_number_unsigned()) {
              *total += static_cast<int64_t>(std::min<uint64_t>(j[key].get<uint64_t>(), kMaxDroppedBytes));
            }
          }
        }
      }
      if (!started_) {
        started_ = true;
        events_.push_back({ProcessEvent::Kind::kStart, ""});
      }
      Finish(info);
      break;
    }
    case guest::FrameType::kError: {
      // A command the guest cannot start (missing binary, bad cwd, unknown user) is a bad
      // request, whatever word the guest chose; its message says why. The one exception is a
      // sandbox with no room left to start it (its task or memory limit): that is
      // resource_exhausted, which a client may retry once the sandbox has room again.
      Status s = GuestErrorStatus(frame.payload, "the guest refused the command", {StatusCode::kResourceExhausted});
      failure_ = s.code() == StatusCode::kResourceExhausted ? s : InvalidArgument(s.message());
      if (started_) Finish(ExitInfo{});
      break;
    }
    default:
      break;  // not part of an exec stream: ignore
  }
}

void Process::OnChannelClosed(const Status& why) {
  bool ended = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (exit_) return;
    if (failure_.ok()) failure_ = why;
    if (started_) {
      ExitInfo info;
      info.signal = SIGKILL;  // the sandbox went away under it
      Finish(info);
      ended = true;
    }
    cv_.notify_all();
  }
  if (ended && on_exit_) on_exit_(*this);
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev) return std::string("SIG") + abbrev;
  return "SIG" + std::to_string(sig);
}

std::optional<int> SignalNumber(const std::string& name) {
  if (name.empty() || name.size() > 16) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) {
    int n = 0;
    for (char c : name) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      n = n * 10 + (c - '0');
      if (n > 64) return std::nullopt;
    }
    return n >= 1 ? std::optional<int>(n) : std::nullopt;
  }
  std::string bare = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  for (int s = 1; s < 32; ++s) {
    const char* abbrev = sigabbrev_np(s);
    if (abbrev && bare == abbrev) return s;
  }
  return std::nullopt;
}

}  // namespace space::node
