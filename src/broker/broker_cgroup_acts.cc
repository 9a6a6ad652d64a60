#include "broker/broker_cgroup_acts.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "common/syscall.h"

namespace space::broker {

Status BrokerCgroupActs::Act(Op op, const std::string& id, const runtime::Limits* limits, bool frozen, int pidfd) {
  Request r;
  r.op = op;
  r.runtime = runtime_;
  r.id = id;
  if (limits) r.limits = *limits;
  r.frozen = frozen;
  return client_->CgroupAct(r, pidfd);
}

Status BrokerCgroupActs::Create(const std::string& id, const runtime::Limits& limits) {
  return Act(Op::kCgroupCreate, id, &limits);
}

Status BrokerCgroupActs::UpdateLimits(const std::string& id, const runtime::Limits& limits) {
  return Act(Op::kCgroupUpdate, id, &limits);
}

Status BrokerCgroupActs::Attach(const std::string& id, pid_t pid, int pidfd) {
  // The broker checks the process behind a pidfd, never a bare pid.
  UniqueFd owned;
  if (pidfd < 0) {
    owned.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!owned.valid()) return ErrnoStatus("pidfd_open", std::to_string(pid), errno);
    pidfd = owned.get();
  }
  return Act(Op::kCgroupAttach, id, nullptr, false, pidfd);
}

Status BrokerCgroupActs::SetFrozen(const std::string& id, bool frozen) {
  return Act(Op::kCgroupFreeze, id, nullptr, frozen);
}

Status BrokerCgroupActs::Kill(const std::string& id) { return Act(Op::kCgroupKill, id); }

Status BrokerCgroupActs::Remove(const std::string& id) { return Act(Op::kCgroupRemove, id); }

Status BrokerCgroupActs::Parents(bool present) {
  Request r;
  r.op = Op::kCgroupParents;
  r.runtime = runtime_;
  r.present = present;
  return client_->CgroupAct(r, -1);
}

Status BrokerCgroupActs::MakeParents() { return Parents(true); }

Status BrokerCgroupActs::RemoveParents() { return Parents(false); }

}  // namespace space::broker
