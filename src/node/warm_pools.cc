#include "node/warm_pools.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/log.h"
#include "common/nice.h"

namespace space::node {
namespace {

constexpr int kRefillNice = 10;
constexpr int64_t kMaxYieldMs = 200;
constexpr int64_t kQuietMs = 20;
constexpr int64_t kMinBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 30000;

}  // namespace

WarmPools::WarmPools(const std::map<std::string, int>& targets, SandboxFactory factory) : factory_(std::move(factory)) {
  for (const auto& [name, target] : targets) counters_[name].target = target;
}

void WarmPools::Start() {
  if (counters_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { RefillLoop(); });
}

void WarmPools::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::map<std::string, std::vector<std::shared_ptr<WarmSandbox>>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready.swap(ready_);
    for (auto& [name, c] : counters_) c.ready = 0;
  }
  size_t n = 0;
  for (auto& [name, v] : ready) {
    for (auto& w : v) {
      factory_.destroy(w);
      ++n;
    }
  }
  if (n > 0) LogInfo("warm", "destroyed " + std::to_string(n) + " pooled sandboxes");
}

std::string WarmPools::MetricsText() {
  std::lock_guard<std::mutex> lock(mu_);
  return WarmPoolMetricsText(counters_);
}

void WarmPools::CreateStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++creates_in_flight_;
}

void WarmPools::CreateFinished() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --creates_in_flight_;
  }
  NoteActivity();
  cv_.notify_all();
}

void WarmPools::CountDiscarded(const std::string& pool) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_[pool].discarded;
}

void WarmPools::CountMiss(const std::string& pool) {
  std::lock_guard<std::mutex> lock(mu_);
  auto c = counters_.find(pool);
  if (c != counters_.end() && c->second.target > 0) ++c->second.misses;
}

std::shared_ptr<WarmSandbox> WarmPools::Take(const std::string& pool, int64_t memory_mb) {
  std::shared_ptr<WarmSandbox> out;
  std::vector<std::shared_ptr<WarmSandbox>> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto c = counters_.find(pool);
    if (c == counters_.end() || c->second.target == 0) return nullptr;
    auto& ready = ready_[pool];
    // /dev/shm was sized from the pool's memory when the sandbox was made.
    if (memory_mb != kWarmMemoryMb) {
      ++c->second.misses;
      return nullptr;
    }
    while (!ready.empty()) {
      // Newest first: its pages are the likeliest to be still cached.
      std::shared_ptr<WarmSandbox> w = std::move(ready.back());
      ready.pop_back();
      --c->second.ready;
      if (w->live->guest && !w->live->guest->alive()) {
        ++c->second.discarded;
        dead.push_back(std::move(w));
        continue;
      }
      out = std::move(w);
      ++c->second.hits;
      break;
    }
    if (!out) ++c->second.misses;
  }
  cv_.notify_all();
  for (auto& w : dead) factory_.destroy(w);
  return out;
}

void WarmPools::RefillLoop() {
  // Per-thread on Linux: only refills run at the lower priority.
  if (Status st = SetThreadNice(nullptr, kRefillNice); !st.ok()) LogWarn("warm", st.ToString());
  std::map<std::string, int64_t> backoff_ms, retry_at_ms;
  for (;;) {
    std::string pick;
    {
      std::unique_lock<std::mutex> lock(mu_);
      int64_t yield_since = -1;
      for (;;) {
        if (stopping_) return;
        const int64_t now = MonoNowNs() / 1'000'000;
        // The pool furthest below its target (by fraction) whose retry time has come.
        pick.clear();
        double best = 2;
        int64_t next_retry = -1;
        for (const auto& [name, c] : counters_) {
          if (c.target == 0 || c.ready + c.filling >= c.target) continue;
          if (retry_at_ms[name] > now) {
            if (next_retry < 0 || retry_at_ms[name] < next_retry) next_retry = retry_at_ms[name];
            continue;
          }
          double fill = static_cast<double>(c.ready + c.filling) / c.target;
          if (fill < best) {
            best = fill;
            pick = name;
          }
        }
        if (!pick.empty()) {
          const int64_t quiet_ms = now - last_activity_mono_ns_.load() / 1'000'000;
          if (creates_in_flight_ == 0 && quiet_ms >= kQuietMs) break;
          if (yield_since < 0) yield_since = now;
          if (now - yield_since >= kMaxYieldMs) break;  // under sustained load, one at a time
          cv_.wait_for(lock, std::chrono::milliseconds(5));
          continue;
        }
        yield_since = -1;
        int64_t wait_ms = next_retry < 0 ? 1000 : std::clamp<int64_t>(next_retry - now, 1, 1000);
        cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      }
      ++counters_[pick].filling;
    }
    Result<std::shared_ptr<WarmSandbox>> made = factory_.make(pick);
    {
      std::lock_guard<std::mutex> lock(mu_);
      WarmCounters& c = counters_[pick];
      --c.filling;
      if (made.ok()) {
        (*made)->ready_mono_ns = MonoNowNs();
        ready_[pick].push_back(*made);
        ++c.ready;
        ++c.refills;
        backoff_ms[pick] = 0;
        continue;
      }
      ++c.refill_failures;
      int64_t& b = backoff_ms[pick];
      b = b == 0 ? kMinBackoffMs : std::min(kMaxBackoffMs, b * 2);
      retry_at_ms[pick] = MonoNowNs() / 1'000'000 + b;
    }
    LogWarn("warm", "refill of " + pick + " failed (retry in " + std::to_string(backoff_ms[pick]) +
                        " ms): " + made.status().ToString());
  }
}

}  // namespace space::node
