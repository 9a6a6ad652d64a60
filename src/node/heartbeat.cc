#include "node/heartbeat.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"

namespace space::node {

Heartbeat::Heartbeat(HeartbeatConfig config, Node* node, store::Store* store)
    : config_(std::move(config)), node_(node), store_(store), started_at_ms_(WallNowMs()) {}

Heartbeat::~Heartbeat() { Stop(); }

Status Heartbeat::Start() {
  RETURN_IF_ERROR(Beat().Annotate("first heartbeat"));
  thread_ = std::thread([this] { Loop(); });
  disowned_thread_ = std::thread([this] { DisownedLoop(); });
  return Status::Ok();
}

void Heartbeat::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (disowned_thread_.joinable()) disowned_thread_.join();
}

Status Heartbeat::Beat() {
  std::vector<std::string> templates;
  if (auto list = node_->templates().List(); list.ok()) {
    for (const auto& t : *list) templates.push_back(t.name);
  }
  store::NodeRecord rec;
  rec.name = config_.name;
  rec.url = config_.url;
  rec.state = store::NodeState::kReady;
  rec.capacity = config_.capacity;
  rec.live = static_cast<int64_t>(node_->live_count());
  rec.templates = std::move(templates);
  ASSIGN_OR_RETURN(rec.heartbeat_at_ms, store_->NowMs());
  rec.started_at_ms = started_at_ms_;
  return store_->HeartbeatNode(rec);
}

void Heartbeat::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(config_.interval_ms), [this] { return stopping_; })) {
    lock.unlock();
    // A missed beat is only logged: the store may be restarting, and the servers tolerate
    // several missed beats before declaring this node lost.
    if (Status st = Beat(); !st.ok()) LogWarn("heartbeat", st.ToString());
    lock.lock();
  }
}

void Heartbeat::DisownedLoop() {
  // Its own thread: ending sandboxes takes seconds, and heartbeats must not wait for it.
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(config_.interval_ms * kDisownedEvery),
                       [this] { return stopping_; })) {
    lock.unlock();
    node_->lifecycle().EndDisowned();
    lock.lock();
  }
}

}  // namespace space::node
