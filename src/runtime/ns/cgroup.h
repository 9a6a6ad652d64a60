// Cgroups: one cgroup per sandbox, <hierarchy>/<cgroup_name>/<sandbox id>, in every
// mounted hierarchy (cgroup v1) or in the single unified hierarchy (pure v2 host).
// Limits (memory, pids, cpu), process placement, freeze/thaw and kill-all go through it.
// Every write is one act of its CgroupActs (runtime/cgroup_acts.h): in this process after
// Probe, or the root broker's after Open. What waits (for a freeze, for tasks to die, for a
// cgroup to become removable) and every read stay here.
//
// Owned by the runtime. Thread-safe: holds only immutable configuration after Probe;
// concurrent calls for different ids touch different directories.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "runtime/cgroup_acts.h"
#include "runtime/runtime.h"

namespace space::runtime::ns {

class Cgroups {
 public:
  // Detects the layout under `root` (normally /sys/fs/cgroup): pure v2 when
  // <root>/cgroup.controllers exists, otherwise v1 hierarchies. Has its acts create the parent
  // cgroups (<hierarchy>/<name>) and prepare them for children.
  // Every write to a sandbox's cgroups goes through `acts` (the root broker's), or is done
  // in this process when `acts` is null.
  static Result<Cgroups> Probe(const std::string& root, const std::string& name,
                               std::shared_ptr<CgroupActs> acts = nullptr);
  // The in-process acts on the sandbox cgroups under the parents Probe made for `name`
  // elsewhere (the root broker's side); writes nothing itself.
  static Result<std::shared_ptr<CgroupActs>> ActsOn(const std::string& root, const std::string& name);

  bool v2() const { return v2_; }

  // Creates the sandbox's cgroups and writes its limits. On failure removes what it made.
  Status Create(const std::string& id, const Limits& limits) const;
  // Rewrites the limits of an existing sandbox cgroup (raising or lowering memory).
  Status UpdateLimits(const std::string& id, const Limits& limits) const;
  // Moves `pid` into the sandbox's cgroups; `pidfd` is the same process (or -1).
  Status Attach(const std::string& id, pid_t pid, int pidfd = -1) const;
  // Freezes / thaws every process, waiting until the kernel reports the new state.
  Status Freeze(const std::string& id) const;
  Status Thaw(const std::string& id) const;
  // SIGKILLs every process in the sandbox's cgroups and waits until they are empty.
  // Succeeds when the cgroups do not exist.
  Status KillAll(const std::string& id) const;
  // Removes the sandbox's cgroup directories (retrying briefly while the kernel still
  // counts exiting tasks). Succeeds when they do not exist.
  Status Remove(const std::string& id) const;
  // Removes the parent cgroups Probe made, where they are empty (a stopping node, after its
  // sandboxes are gone), through its acts. One that still has children stays: not an error.
  Status RemoveParents() const;
  // What the sandbox uses now (cgroup_usage.cc).
  Result<ResourceUsage> Usage(const std::string& id) const;
  // Ids with a cgroup directory in any hierarchy.
  Result<std::set<std::string>> List() const;

  // The directory of `id` in the hierarchy that holds `file` (e.g. "memory.max",
  // "pids.max"); for tests and diagnostics.
  std::string PathFor(const std::string& id, const std::string& controller) const;

 private:
  class LocalActs;
  struct Hierarchy {
    std::string controller;  // "memory", "cpu", ... ("" for the v2 unified hierarchy)
    std::string parent;      // <mount>/<name>
    bool cpuset = false;     // children need cpuset.cpus/mems before tasks may join
  };

  static Result<Cgroups> Layout(const std::string& root, const std::string& name, bool make);
  Status RemoveParentsHere() const;
  std::string Dir(const Hierarchy& h, const std::string& id) const { return h.parent + "/" + id; }
  const Hierarchy* Find(const std::string& controller) const;
  Result<std::vector<pid_t>> Procs(const std::string& id) const;

  bool v2_ = false;
  std::string root_, name_;
  std::vector<Hierarchy> hierarchies_;
  std::shared_ptr<CgroupActs> acts_;
};

}  // namespace space::runtime::ns
