// Node::Live: what the node holds for one booted sandbox. Internal to src/node.
#pragma once

#include <netinet/in.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "node/guest_client.h"
#include "node/node.h"
#include "node/process.h"

namespace space::node {

struct Node::Live {
  std::string id;
  std::string team;
  int64_t uid_slot = -1;
  std::atomic<int64_t> expires_at_ms{0};
  std::atomic<int64_t> last_rolling_ms{0};  // when the rolling policy last took a snapshot
  int64_t rolling_every_ms = 0;             // from the sandbox's snapshot_policy; 0 = none
  std::unique_ptr<GuestClient> guest;
  bool egress = false;           // joined to the gateway (has a veth)
  in_addr egress_address{};      // its address, as the gateway knows it

  std::mutex mu;
  std::map<std::string, std::shared_ptr<Process>> processes;  // GUARDED_BY(mu)
};

}  // namespace space::node
