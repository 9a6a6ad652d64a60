// Launcher: clone()s a sandbox's first process, which runs a precomputed ChildPlan and
// execs the guest; and the parent's half of the handshake with it.
//
// Handshake over a SOCK_SEQPACKET sync socket (both ends CLOEXEC):
//   child waits for "go" -> parent writes id maps, joins cgroups, builds the idmapped
//   root -> parent sends "go" + the root mount fd (SCM_RIGHTS) -> child runs its steps,
//   timing each -> child sends its ChildReports in one message, and exec closes its end
//   (EOF = success); or it sends them ending in a kFailed report and _exit()s.
// Stateless; callable from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/ns/child_plan.h"
#include "runtime/ns/steps.h"

namespace space::runtime::ns {

struct Spawned {
  pid_t pid = -1;
  UniqueFd pidfd;
};

// Clones the child in new user, pid, mount, net, uts and ipc namespaces, running `plan`
// (which must stay alive until clone returns; the child gets its own copy). Signals are
// blocked around clone so no handler of the node runs in the child.
Result<Spawned> CloneChild(const ChildPlan& plan);

// Sends the "go" byte, the root mount fd and the volumes' mount fds (ChildPlan::n_volumes of them).
Status SendGo(int sync_fd, int mount_fd, const std::vector<int>& volume_fds = {});

struct ChildOutcome {
  std::vector<ChildReport> reports;  // in arrival order; a failure is the last one
  int64_t last_report_ns = 0;        // when the last report arrived (MonoNowNs)
  int64_t eof_ns = 0;                // when exec closed the socket; 0 after a failure
  bool failed() const { return !reports.empty() && reports.back().kind == ChildReport::kFailed; }
  // The child finished its last step before exec (EOF alone could also be a crash).
  bool reached_exec() const {
    for (const ChildReport& r : reports) {
      if (r.kind == ChildReport::kDone && r.step == static_cast<uint16_t>(Step::kSeccomp)) return true;
    }
    return false;
  }
};

// Reads reports until EOF or a failure report; kDeadlineExceeded after `timeout_ns`.
Result<ChildOutcome> CollectReports(int sync_fd, int64_t timeout_ns);

}  // namespace space::runtime::ns
