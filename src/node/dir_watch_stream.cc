#include "node/dir_watch_stream.h"

#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "node/guest_error.h"

namespace space::node {
namespace {

constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxBatch = 1024;  // generous over guest::kMaxWatchBatch; beyond it: hostile

std::optional<DirChange::Type> ParseType(const std::string& t) {
  if (t == "create") return DirChange::Type::kCreate;
  if (t == "write") return DirChange::Type::kWrite;
  if (t == "remove") return DirChange::Type::kRemove;
  if (t == "rename") return DirChange::Type::kRename;
  if (t == "chmod") return DirChange::Type::kChmod;
  return std::nullopt;
}

// The guest's kError as a Status; only the words a watch may end with are honoured.
Status GuestError(const std::string& payload) {
  return GuestErrorStatus(payload, "the directory watch failed in the guest",
                          {StatusCode::kNotFound, StatusCode::kInvalidArgument, StatusCode::kResourceExhausted});
}

}  // namespace

Status DirWatchStream::WaitStarted(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return started_ || !ended_.ok(); });
  if (!done) return Unavailable("the guest did not answer the watch request in time");
  return started_ ? Status::Ok() : ended_;
}

Status DirWatchStream::Next(std::vector<DirChange>* out, bool* overflow, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return !queue_.empty() || overflow_ || !ended_.ok(); });
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  *overflow = overflow_;
  overflow_ = false;
  if (out->empty() && !*overflow && !ended_.ok()) return ended_;
  return Status::Ok();
}

void DirWatchStream::Close() {
  std::call_once(closed_, [&] {
    if (closer_) closer_();
  });
}

void DirWatchStream::AcceptEvents(const std::string& payload) {
  auto j = nlohmann::json::parse(payload, nullptr, false);
  if (!j.is_object() || !j.contains("events") || !j["events"].is_array() || j["events"].size() > kMaxBatch) {
    overflow_ = true;  // an unreadable batch: changes were lost
    return;
  }
  if (j.contains("overflow") && j["overflow"].is_boolean() && j["overflow"].get<bool>()) overflow_ = true;
  for (const auto& e : j["events"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("type") ||
        !e["type"].is_string()) {
      overflow_ = true;
      continue;
    }
    const std::string& name = e["name"].get_ref<const std::string&>();
    auto type = ParseType(e["type"].get<std::string>());
    if (!type || name.empty() || name.size() > kMaxNameBytes || name.find('\0') != std::string::npos) {
      overflow_ = true;
      continue;
    }
    if (queue_.size() >= kMaxQueued) {
      overflow_ = true;
      return;
    }
    queue_.push_back({name, *type});
  }
}

void DirWatchStream::OnFrame(guest::Frame frame) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ended_.ok()) return;
  switch (frame.type) {
    case guest::FrameType::kWatchStarted:
      started_ = true;
      break;
    case guest::FrameType::kWatchEvents:
      if (started_) AcceptEvents(frame.payload);
      break;
    case guest::FrameType::kError:
      ended_ = GuestError(frame.payload);
      break;
    default:
      return;  // not part of a watch stream
  }
  cv_.notify_all();
}

void DirWatchStream::OnChannelClosed(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ended_.ok()) return;
  ended_ = why.ok() ? Unavailable("the sandbox's guest channel closed") : why;
  cv_.notify_all();
}

}  // namespace space::node
