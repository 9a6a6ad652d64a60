// WarmPools: per template, sandboxes kept pre-created (root cloned, namespaces and cgroups
// made, spaced up) and owned by nobody, handed out whole on create. This class keeps the
// pools: the counts, the refill thread and its pacing. Making and ending a pooled sandbox are
// the lifecycle's (SandboxFactory), so a unit test gives it a fake.
//
// A refill costs what a cold create does, so the refill thread (at nice 10) waits for a quiet
// moment: no create in flight and no create, destroy or exec for 20 ms; under sustained load it
// yields at most 200 ms, so a busy node still refills, one sandbox at a time. A failing refill
// backs off (100 ms doubling to 30 s) per template.
//
// Owned by the Node. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "node/live.h"
#include "node/warm_pool.h"

namespace space::node {

// A pooled sandbox: booted over its own root with the pool's default resources (kWarm*).
struct WarmSandbox {
  std::string pool;  // the pool's key (warm_pool.h WarmPoolKey): template and runtime
  std::string template_digest;
  std::shared_ptr<LiveSandbox> live;  // id, uid slot, guest, init pid
  int64_t ready_mono_ns = 0;
};

// How pooled sandboxes come to be and end.
struct SandboxFactory {
  std::function<Result<std::shared_ptr<WarmSandbox>>(const std::string& pool)> make;
  // Ends one entirely (runtime, root, uid slot).
  std::function<void(const std::shared_ptr<WarmSandbox>&)> destroy;
};

class WarmPools {
 public:
  // `targets`: template -> how many to keep ready (empty: no pools, no thread).
  WarmPools(const std::map<std::string, int>& targets, SandboxFactory factory);
  ~WarmPools() { Stop(); }
  void Start();
  // Ends the refill thread and every pooled sandbox.
  void Stop();

  // A live pooled sandbox of pool `pool` (WarmPoolKey) for a create asking for `memory_mb`, or null
  // (counted as a miss when the template has a pool). A dead one found on the way is ended.
  std::shared_ptr<WarmSandbox> Take(const std::string& pool, int64_t memory_mb);
  // A create the pool `pool` holds sandboxes for but could not serve for what it asked (a vm
  // create with egress profiles or other cpus): a miss, when that pool exists.
  void CountMiss(const std::string& pool);
  // A handed-out sandbox failed its hand-out.
  void CountDiscarded(const std::string& pool);
  // Pacing: creates in flight hold refills back; any create, destroy or exec delays them.
  void CreateStarted();
  void CreateFinished();
  void NoteActivity() { last_activity_mono_ns_ = MonoNowNs(); }
  // Prometheus text; "" when no pool is configured.
  std::string MetricsText();

 private:
  void RefillLoop();

  const SandboxFactory factory_;
  std::mutex mu_;
  std::condition_variable cv_;                                              // a pool shrank, a create finished, or stop
  std::map<std::string, WarmCounters> counters_;                            // GUARDED_BY(mu_)
  std::map<std::string, std::vector<std::shared_ptr<WarmSandbox>>> ready_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                                                   // GUARDED_BY(mu_)
  int creates_in_flight_ = 0;                                               // GUARDED_BY(mu_)
  std::atomic<int64_t> last_activity_mono_ns_{0};
  std::thread thread_;
};

}  // namespace space::node
