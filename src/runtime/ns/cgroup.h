// Cgroups: one cgroup per sandbox, <hierarchy>/<cgroup_name>/<sandbox id>, in every
// mounted hierarchy (cgroup v1) or in the single unified hierarchy (pure v2 host).
// Limits (memory, pids, cpu), process placement, freeze/thaw and kill-all go through it.
//
// Owned by the runtime. Thread-safe: holds only immutable configuration after Probe;
// concurrent calls for different ids touch different directories.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "runtime/runtime.h"

namespace space::runtime::ns {

class Cgroups {
 public:
  // Detects the layout under `root` (normally /sys/fs/cgroup): pure v2 when
  // <root>/cgroup.controllers exists, otherwise v1 hierarchies. Creates the parent
  // cgroups (<hierarchy>/<name>) and prepares them for children.
  static Result<Cgroups> Probe(const std::string& root, const std::string& name);

  bool v2() const { return v2_; }

  // Creates the sandbox's cgroups and writes its limits. On failure removes what it made.
  Status Create(const std::string& id, const Limits& limits) const;
  // Rewrites the limits of an existing sandbox cgroup (raising or lowering memory).
  Status UpdateLimits(const std::string& id, const Limits& limits) const;
  // Moves `pid` into the sandbox's cgroups.
  Status Attach(const std::string& id, pid_t pid) const;
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
  // sandboxes are gone). One that still has children stays: it is not an error.
  Status RemoveParents() const;
  // What the sandbox uses now (cgroup_usage.cc).
  Result<ResourceUsage> Usage(const std::string& id) const;
  // Ids with a cgroup directory in any hierarchy.
  Result<std::set<std::string>> List() const;

  // The directory of `id` in the hierarchy that holds `file` (e.g. "memory.max",
  // "pids.max"); for tests and diagnostics.
  std::string PathFor(const std::string& id, const std::string& controller) const;

 private:
  struct Hierarchy {
    std::string controller;  // "memory", "cpu", ... ("" for the v2 unified hierarchy)
    std::string parent;      // <mount>/<name>
    bool cpuset = false;     // children need cpuset.cpus/mems before tasks may join
  };

  Status WriteLimits(const std::string& id, const Limits& limits) const;
  std::string Dir(const Hierarchy& h, const std::string& id) const { return h.parent + "/" + id; }
  const Hierarchy* Find(const std::string& controller) const;
  Result<std::vector<pid_t>> Procs(const std::string& id) const;

  bool v2_ = false;
  std::vector<Hierarchy> hierarchies_;
};

}  // namespace space::runtime::ns
