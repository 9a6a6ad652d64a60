// Controllers: the reconcile loops every `space server` replica runs. Each unit of work is
// claimed through the store, so replicas never do the same work twice and a replica killed
// mid-work has it finished by another:
// - lost nodes: a node whose heartbeat is older than `lost_after_ms` is marked lost by one
//   atomic update (store.h ClaimLostNodes); the replica that got it fails the node's
//   sandboxes. Suspended ones stay suspended: the shared snapshot store holds them, and a
//   resume brings them back on any node.
// - jobs: leased one at a time (ClaimJob; FOR UPDATE SKIP LOCKED on PostgreSQL). `migrate`
//   (queued by a drain) suspends a sandbox on its node and resumes it on another. Each step
//   re-reads the sandbox's state, so a job taken over after a lease ran out resumes where the
//   dead replica stopped.
//
// Owned by `space server`; Start once, Stop once.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"

namespace space::controlplane {

struct ControllersConfig {
  std::string replica;            // this replica's name in leases
  std::string fleet_token;        // presented to nodes when acting for a team
  int64_t lost_after_ms = 15000;  // heartbeats missing this long: the node is lost
  int64_t stale_ms = 15000;       // scheduler.h
  int64_t lease_ms = 300000;      // a job's lease; renewed between steps, each bounded by half of it
  int64_t tick_ms = 500;
};

class Controllers {
 public:
  Controllers(store::Store* store, ControllersConfig config);
  ~Controllers();
  void Start();
  void Stop();

  // One pass of every loop (tests call it directly).
  void Tick();

 private:
  void Loop();
  void FailLostNodes();
  // Runs a claimed job to its end and records the outcome.
  void RunJob(store::JobRecord job);
  // `*taken_over`: the lease was lost to another replica, which records the outcome.
  Status Migrate(store::JobRecord* job, bool* taken_over);
  // POST /v1/sandboxes/{id}/{action}?wait=true on `node_name`, as the sandbox's team.
  Status Act(const std::string& node_name, const store::JobRecord& job, const std::string& action);

  store::Store* const store_;
  const ControllersConfig config_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace space::controlplane
