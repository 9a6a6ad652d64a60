// The node's part of the vm runtime's full checkpoints: where the memory state goes and how
// it joins the pool's snapshot of the disk image.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "node/live.h"
#include "node/node.h"
#include "runtime/vm/vm_runtime.h"

namespace space::node {

Status Node::SnapshotVm(const store::SandboxRecord& rec, const std::string& snap_id) {
  runtime::Runtime* rt = RuntimeOf(rec.id);
  if (!rt->full_checkpoints()) return Internal("sandbox " + rec.id + " is not on a runtime with full checkpoints");
  // The state goes beside the disk image in the sandbox's root, so the pool's O(1) snapshot
  // (a btrfs subvolume snapshot: shared blocks) takes both at one instant.
  const std::string state = pool_->RootPath(rec.id) + "/" + runtime::kVmStateDir + "/" + runtime::kVmMemoryName;
  const int64_t t0 = MonoNowNs();
  Status st = rt->Checkpoint(rec.id, state);
  const int64_t t1 = MonoNowNs();
  Result<std::string> path = st.ok() ? pool_->SnapshotRoot(rec.id, snap_id) : Result<std::string>(st);
  struct stat sb {};
  bool have_state = false;
  // Through the state dir's fd (no symlinks beneath the root): the node is root and the
  // root's contents are not trusted.
  if (auto sd = runtime::OpenVmStateDir(pool_->RootPath(rec.id), false); sd.ok()) {
    have_state = ::fstatat(sd->get(), runtime::kVmMemoryName, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    ::unlinkat(sd->get(), runtime::kVmMemoryName, 0);
  }
  // The VMM is stopped since the checkpoint; a running sandbox goes on, a paused one stays.
  if (rec.state == "running") {
    if (Status c = rt->Thaw(rec.id); !c.ok()) LogError("vm", "continue after checkpoint of " + rec.id + ": " + c.ToString());
  }
  RETURN_IF_ERROR(path.status());
  LogInfo("vm", "checkpoint " + snap_id + " of " + rec.id + ": memory state " +
                    std::to_string(have_state ? sb.st_size : 0) + " bytes in " + std::to_string((t1 - t0) / 1000000) +
                    " ms, disk snapshot in " + std::to_string((MonoNowNs() - t1) / 1000000) + " ms");
  return Status::Ok();
}

}  // namespace space::node
