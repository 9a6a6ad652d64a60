// BrokerCgroupActs: the node's runtimes write their sandbox cgroups through the root broker.
// Each act is one request (protocol.h, cgroup_*); the broker derives every path from its own
// cgroup name, the runtime and the sandbox id, and attaches only children of the node.
#pragma once

#include <sys/types.h>

#include <string>

#include "broker/broker_client.h"
#include "broker/protocol.h"
#include "runtime/cgroup_acts.h"

namespace space::broker {

class BrokerCgroupActs final : public runtime::CgroupActs {
 public:
  // `client` must outlive this.
  BrokerCgroupActs(BrokerClient* client, CgroupRuntime runtime) : client_(client), runtime_(runtime) {}

  Status Create(const std::string& id, const runtime::Limits& limits) override;
  Status UpdateLimits(const std::string& id, const runtime::Limits& limits) override;
  Status Attach(const std::string& id, pid_t pid, int pidfd) override;
  Status SetFrozen(const std::string& id, bool frozen) override;
  Status Kill(const std::string& id) override;
  Status Remove(const std::string& id) override;
  Status MakeParents() override;
  Status RemoveParents() override;

 private:
  Status Act(Op op, const std::string& id, const runtime::Limits* limits = nullptr, bool frozen = false,
             int pidfd = -1);
  Status Parents(bool present);

  BrokerClient* const client_;
  const CgroupRuntime runtime_;
};

}  // namespace space::broker
