#include "node/live_sandboxes.h"

#include <utility>

namespace space::node {

std::shared_ptr<LiveSandbox> LiveSandboxes::Find(const std::string& id) const {
  MutexLock lock(&mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

void LiveSandboxes::Insert(std::shared_ptr<LiveSandbox> live) {
  MutexLock lock(&mu_);
  const std::string id = live->id;
  live_[id] = std::move(live);
}

std::shared_ptr<LiveSandbox> LiveSandboxes::Remove(const std::string& id) {
  MutexLock lock(&mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return nullptr;
  auto live = std::move(it->second);
  live_.erase(it);
  return live;
}

std::vector<std::shared_ptr<LiveSandbox>> LiveSandboxes::All() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<LiveSandbox>> out;
  out.reserve(live_.size());
  for (const auto& [id, l] : live_) out.push_back(l);
  return out;
}

std::vector<std::string> LiveSandboxes::Ids() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(live_.size());
  for (const auto& [id, l] : live_) out.push_back(id);
  return out;
}

std::map<std::string, std::shared_ptr<LiveSandbox>> LiveSandboxes::TakeAll() {
  MutexLock lock(&mu_);
  std::map<std::string, std::shared_ptr<LiveSandbox>> out;
  out.swap(live_);
  return out;
}

size_t LiveSandboxes::size() const {
  MutexLock lock(&mu_);
  return live_.size();
}

void LiveSandboxes::MarkEnding(const std::string& id) {
  MutexLock lock(&mu_);
  ending_.insert(id);
}

void LiveSandboxes::UnmarkEnding(const std::string& id) {
  MutexLock lock(&mu_);
  ending_.erase(id);
}

bool LiveSandboxes::IsEnding(const std::string& id) const {
  MutexLock lock(&mu_);
  return ending_.count(id) != 0;
}

std::vector<std::shared_ptr<LiveSandbox>> LiveSandboxes::ClaimEndingIf(
    const std::function<bool(const LiveSandbox&)>& pred) {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<LiveSandbox>> out;
  for (const auto& [id, l] : live_) {
    if (ending_.count(id) || !pred(*l)) continue;
    ending_.insert(id);
    out.push_back(l);
  }
  return out;
}

}  // namespace space::node
