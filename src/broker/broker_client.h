// BrokerClient: the node's handle on its root broker (broker.h). Each call is one request and
// its reply; calls are serialized, one in flight. Thread-safe.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/protocol.h"
#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "network/firewall.h"

namespace space::broker {

// The node's client for its root broker: the privileged acts the node gave up
// (PrivilegedActs), and the network, cgroup and uid-slot requests only the node makes.
class BrokerClient final : public PrivilegedActs {
 public:
  // Forks and executes `space broker` from this program's binary, and waits for its hello.
  // Call while the process is still one thread, and before dropping kNodeDroppedCapabilities:
  // the broker keeps what the node gives up. It exits when the client's socket closes, and is
  // killed when the forking thread dies.
  // `cgroup_name` is the node's parent cgroup (broker.h, IsNodeCgroupName); `pool_dir` its
  // storage pool; `import_root` the admin's import roots (BrokerConfig), where import_open reads.
  static Result<std::unique_ptr<BrokerClient>> Spawn(const std::string& cgroup_name, const std::string& pool_dir,
                                                     const std::string& import_root);
  // A client over a socket whose other end some broker serves (tests).
  explicit BrokerClient(UniqueFd socket, pid_t pid = -1, UniqueFd pidfd = UniqueFd());
  ~BrokerClient() override;

  pid_t pid() const { return pid_; }
  // Whether the broker process has exited, waiting up to timeout_ms; reaps it when it has.
  bool WaitExited(int timeout_ms);

  Result<int64_t> NetAcquire();
  Status InstallFirewall(const network::GatewayPorts& ports);
  // Joins the sandbox whose init is `init_pid` (of uid slot `uid_slot`) to the gateway.
  Result<in_addr> NetAttach(int64_t uid_slot, pid_t init_pid);
  // A vm sandbox's host link: a tap whose frames `tap` carries (for the VMM); the link goes
  // when every copy of `tap` is closed. Returns the sandbox's address.
  Result<in_addr> NetTap(int64_t uid_slot, UniqueFd* tap);
  Status NetDetach(int64_t uid_slot);
  Status NetReconcile(const std::vector<int64_t>& keep_uid_slots);
  Status NetRelease();
  // A connected SOCK_SEQPACKET pair whose send buffers hold `send_buffer_bytes`.
  Status SeqpacketPair(int64_t send_buffer_bytes, UniqueFd* a, UniqueFd* b);
  // One cgroup_* request (cgroup_attach with the process's pidfd); see BrokerCgroupActs.
  Status CgroupAct(const Request& request, int pidfd = -1);
  // SIGKILL to this process's child behind `pidfd` (common/kill_child.h). kNotFound when it
  // has exited; kPermissionDenied for anything but a child; kInvalidArgument for a descriptor
  // that is not a pidfd.
  Status KillChild(int pidfd) override;
  // Writes the id maps of this process's child in a fresh user namespace (runtime/ns/userns.h).
  // kPermissionDenied for anything but such a child, or a kvm group that is not /dev/kvm's.
  Status MapUserns(const IdMapRequest& request) override;
  // A lease on a host uid slot: `preferred` when free, else the lowest free (HostSlots).
  Result<int64_t> UidAcquire(int64_t preferred);
  Status UidRelease(int64_t uid_slot);
  // A detached idmapped clone (nosuid, nodev) of the pool directory `dir_fd` for the user
  // namespace of the node's child `pidfd`, which maps root to the slot starting at `uid_base`;
  // read-only with `read_only` (a snapshot's clone must be).
  Result<UniqueFd> IdmapTree(int dir_fd, int pidfd, uint32_t uid_base, bool read_only) override;
  // The pool's btrfs acts that need CAP_SYS_ADMIN (storage/btrfs.h): by the host path of the
  // subvolume, which this process opens (never following a link) and passes.
  Status DeleteSubvolume(const std::string& path) override;
  // subvol_snapshot: `source` (a pool subvolume) at `path` (a new name in a pool directory).
  Status SnapshotSubvolume(const std::string& source, const std::string& path, bool read_only) override;
  // subvol_create: an empty subvolume, uid 0's, at `path` (a new name in a pool directory).
  Status CreateSubvolume(const std::string& path) override;
  // vm_state_dir: the sandbox root `rootfs`'s .space-vm, made if absent and given to the
  // node's uid (HostSlots::NodeUid) with the files in it that uid 0 left.
  Status MakeVmStateDir(const std::string& rootfs) override;
  // import_open: a template import's source, resolved by the broker inside its import root: a
  // tarball open for reading, or a directory as O_PATH (for a read-only IdmapTree).
  Result<UniqueFd> OpenImportSource(const std::string& source);
  Status SetExclusiveLimit(const std::string& subvol_path, uint64_t bytes) override;
  Result<bool> RescanQuotaIfInconsistent() override;
  // Nice values (0..19) this process may not set itself (common/nice.h): of its child behind
  // `pidfd`, and of its own thread `tid`.
  Status SetChildNice(int pidfd, int nice) override;
  Status SetThreadNice(pid_t tid, int nice) override;

 private:
  Result<nlohmann::json> Call(const Request& request, int fd = -1, std::vector<UniqueFd>* reply_fds = nullptr);
  Result<nlohmann::json> Call(const Request& request, const std::vector<int>& fds, std::vector<UniqueFd>* reply_fds);

  std::mutex mu_;
  UniqueFd socket_;  // GUARDED_BY(mu_)
  const pid_t pid_;
  UniqueFd pidfd_;
  std::atomic<bool> reaped_{false};
};

}  // namespace space::broker
