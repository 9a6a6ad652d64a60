// What the build jail (build_jail.h) and the tree jail (tree_jail.h) share: a uid slot held for
// one run, and their helper spawned as root of a user namespace the root broker maps to that
// slot (a sandbox's shape), so its capabilities reach only that namespace and those ids.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/helper_spawn.h"
#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace space::node {

// A uid slot leased for one run; released when this goes.
class SlotLease {
 public:
  SlotLease(int64_t slot, std::function<void(int64_t)> release) : slot_(slot), release_(std::move(release)) {}
  ~SlotLease() {
    if (release_) release_(slot_);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

  int64_t slot() const { return slot_; }
  uint32_t uid_base() const;

 private:
  int64_t slot_;
  std::function<void(int64_t)> release_;
};

// A spawned jail helper, a child of this process not yet reaped.
struct JailChild {
  pid_t pid = -1;
  UniqueFd pidfd;
  PrivilegedActs* acts = nullptr;  // who kills it when this process may not

  // Kills and reaps it, then returns `st`: for giving up once it runs.
  Status GiveUp(Status st);
};

// Spawns `spec` (its user fields are set here) as root of a user namespace mapped to the slot
// starting at `uid_base` (its id maps written by `acts` when set); `what` names the jail in
// errors.
Result<JailChild> SpawnJailChild(HelperSpec spec, uint32_t uid_base, const std::string& what, PrivilegedActs* acts);

}  // namespace space::node
