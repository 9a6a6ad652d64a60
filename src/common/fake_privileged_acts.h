// FakePrivilegedActs: a PrivilegedActs for unit tests, each act a settable function. An act
// left unset answers internal, so a test sees any act it did not expect.
#pragma once

#include <functional>
#include <string>

#include "common/privileged_acts.h"

namespace space {

struct FakePrivilegedActs final : PrivilegedActs {
  std::function<Status(int pidfd)> kill_child;
  std::function<Status(int pidfd, int nice)> child_nice;
  std::function<Status(pid_t tid, int nice)> thread_nice;
  std::function<Status(const IdMapRequest&)> map_userns;

  Status KillChild(int pidfd) override { return kill_child ? kill_child(pidfd) : Unset("kill_child"); }
  Status SetChildNice(int pidfd, int nice) override {
    return child_nice ? child_nice(pidfd, nice) : Unset("child_nice");
  }
  Status SetThreadNice(pid_t tid, int nice) override {
    return thread_nice ? thread_nice(tid, nice) : Unset("thread_nice");
  }
  Status MapUserns(const IdMapRequest& r) override { return map_userns ? map_userns(r) : Unset("map_userns"); }
  Result<UniqueFd> IdmapTree(int, int, uint32_t, bool) override { return Unset("idmap_tree"); }
  Status DeleteSubvolume(const std::string&) override { return Unset("delete_subvolume"); }
  Status SnapshotSubvolume(const std::string&, const std::string&, bool) override { return Unset("snapshot"); }
  Status CreateSubvolume(const std::string&) override { return Unset("create_subvolume"); }
  Status SetExclusiveLimit(const std::string&, uint64_t) override { return Unset("set_exclusive_limit"); }
  Result<bool> RescanQuotaIfInconsistent() override { return Unset("rescan"); }
  Status MakeVmStateDir(const std::string&) override { return Unset("vm_state_dir"); }

 private:
  static Status Unset(const char* act) { return Internal(std::string(act) + ": not expected by this test"); }
};

}  // namespace space
