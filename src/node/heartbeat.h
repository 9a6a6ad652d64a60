// Heartbeat: a fleet node (`space node`) reports itself to the store every interval: its URL,
// capacity, how many sandboxes it runs and which templates its pool holds. Servers schedule
// from these rows and declare a node lost when they stop coming (controlplane/controllers.h).
//
// Owned by the `space node` command; Start once, Stop once.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "node/node.h"
#include "store/store.h"

namespace space::node {

struct HeartbeatConfig {
  std::string name;          // node name, as in sandbox records
  std::string url;           // where servers reach this node's API
  int64_t capacity = 256;    // sandboxes this node accepts in all
  int64_t interval_ms = 1000;
};

class Heartbeat {
 public:
  Heartbeat(HeartbeatConfig config, Node* node, store::Store* store);
  ~Heartbeat();
  // Sends the first heartbeat synchronously (so a failure to reach the store is reported at
  // startup), then one per interval on a thread.
  Status Start();
  void Stop();

 private:
  Status Beat();
  void Loop();
  void DisownedLoop();

  const HeartbeatConfig config_;
  Node* const node_;
  store::Store* const store_;
  const int64_t started_at_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  // Heartbeat intervals between two checks for sandboxes the fleet failed
  // (Node::EndDisowned): one store read per live sandbox each time.
  static constexpr int64_t kDisownedEvery = 5;
  std::thread thread_;
  std::thread disowned_thread_;
};

}  // namespace space::node
