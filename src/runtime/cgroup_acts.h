// CgroupActs: the privileged writes to a runtime's sandbox cgroups, each one short act.
//
// ns::Cgroups (ns/cgroup.h) keeps the layout, the reads and the waiting (until frozen, until
// empty, until removable) and asks its CgroupActs for every write. The acts run either in this
// process (ns::Cgroups::Probe, for tests and hosts without a broker) or in the root broker
// (broker/broker_cgroup_acts.h), which derives every path from its own cgroup name and the
// sandbox id. No act waits: a slow sandbox never holds the broker. Making and removing the
// parent cgroups are acts too: the v1 hierarchy roots are 0555, so both need CAP_DAC_OVERRIDE,
// which only the broker holds.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"
#include "runtime/runtime.h"

namespace space::runtime {

class CgroupActs {
 public:
  virtual ~CgroupActs() = default;
  // Makes the sandbox's cgroups and writes its limits; removes what it made on failure.
  virtual Status Create(const std::string& id, const Limits& limits) = 0;
  // Rewrites the limits of an existing sandbox cgroup.
  virtual Status UpdateLimits(const std::string& id, const Limits& limits) = 0;
  // Moves `pid` into the sandbox's cgroups. `pidfd` (the same process, or -1 in-process) lets
  // the broker check that the process is a child of the node and still the one it checked.
  virtual Status Attach(const std::string& id, pid_t pid, int pidfd) = 0;
  // One write of the freezer state (v1 FROZEN retries stragglers when written again).
  virtual Status SetFrozen(const std::string& id, bool frozen) = 0;
  // v2 with cgroup.kill: kills the whole cgroup. Otherwise SIGKILLs the processes listed in
  // it now, once; the caller freezes first and repeats until it is empty.
  virtual Status Kill(const std::string& id) = 0;
  // One rmdir of each of the sandbox's cgroups; absent ones are fine. kUnavailable while one
  // is still busy with exiting tasks (the caller retries).
  virtual Status Remove(const std::string& id) = 0;
  // Makes the runtime's parent cgroups (<hierarchy>/<name>) and prepares them for children
  // (v1 cpuset copied from the root, use_hierarchy; v2 subtree_control). Existing ones are fine.
  virtual Status MakeParents() = 0;
  // Removes the parent cgroups where they are empty; one with children stays, without error.
  virtual Status RemoveParents() = 0;
};

}  // namespace space::runtime
