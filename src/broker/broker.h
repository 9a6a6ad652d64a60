// The root broker: the process that keeps the privileges the node agent gives up, and uses
// them only for typed requests (protocol.h) whose every argument it validates.
//
// `space dev` / `space node` starts it first, while the node is still one thread, then drops
// the broker's capabilities from its own sets, bounding set included: the node can neither
// use them nor regain them by exec, and cannot restart a broker that dies (the node then
// stops; a restart reconciles). Today the broker holds the network family (the node's
// firewall table, sandbox veths, network namespaces) and the writes to sandbox cgroups
// (runtime/cgroup_acts.h: create with limits, attach, freeze, kill, remove; the node's parent
// cgroups) and SIGKILL for
// the node's children (kill_child), the id maps of the user namespaces the node's children
// make (userns_map), and the acts on the storage pool that need CAP_SYS_ADMIN once it is
// mounted: idmapped clones of sandbox roots and template builds (idmap_tree), subvolume
// deletes, qgroup limits and quota rescans, and the snapshots of subvolumes whose root the node
// does not own. It keeps only CAP_NET_ADMIN, CAP_SYS_ADMIN
// (setns into a sandbox's network namespace; the pool's acts), CAP_SYS_PTRACE (open that
// namespace), CAP_KILL (empty a v1 cgroup, kill the node's children), CAP_SYS_NICE (attach to
// a v1 cpuset), CAP_SETUID/CAP_SETGID (id maps), CAP_FOWNER (a snapshot of a sandbox root
// that its root chowned away from uid 0: btrfs lets only the owner snapshot a subvolume) and
// CAP_DAC_OVERRIDE (the node's parent cgroups: the v1 hierarchy roots are 0555; a template
// import's source, which import_open opens inside the admin's --import-root, and whose
// directory idmap_tree clones read-only for the build jail), and CAP_CHOWN (a vm root's
// .space-vm, given to the node). The node itself runs as a uid of its own with no capability
// once it has started (daemon/dev.cc); what it did as root is mapped in
// docs/privilege-inventory.md.
//
// What a request cannot do: name a path, link or table (the broker derives them from its own
// network slot and the uid slot; a pool act takes a directory descriptor, which the broker
// accepts only when it names one of the few directories of its pool that act may touch); touch another node's slot (the broker takes its own slot's
// host-wide lock, and acts only under that slot's prefix); attach a namespace that is not a
// sandbox's (net_attach takes a pidfd, and the broker checks that the process's user
// namespace maps root to exactly the uid range of the named uid slot, and that the pidfd still
// names a live process after the namespace is open, so a reused pid is caught).
#pragma once

#include <linux/capability.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/protocol.h"
#include "common/host_slots.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "network/sandbox_network.h"
#include "runtime/cgroup_acts.h"

namespace space::broker {

// The only capabilities the broker process keeps; the node drops them. CAP_SETUID and CAP_SETGID write the
// id maps of the user namespaces the node's children make (userns_map); the broker's seccomp
// filter refuses it every set*id call of its own. CAP_KILL: a v1 cgroup is emptied by
// SIGKILLing its sandbox-uid tasks, and the node's children under other uids are killed for it
// (kill_child). CAP_SYS_NICE: a v1 cpuset admits a task whose capabilities are not a subset of
// the writer's only with it (a VMM is attached before it changes ids), and the nice values a
// warm-pool refill lowers back to normal (child_nice, node_thread_nice) need it.
inline constexpr int kBrokerCapabilities[] = {CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_SYS_PTRACE,   CAP_KILL, CAP_SYS_NICE,
                                             CAP_SETUID,    CAP_SETGID,    CAP_FOWNER,       CAP_DAC_OVERRIDE,
                                             CAP_CHOWN};
// Capabilities the node drops because the broker now does what needed them. CAP_SYS_PTRACE
// goes too: with it the node could trace the broker and act through it. CAP_KILL: the node
// signals only its own children (common/kill_child.h routes the kills it may not send through
// kill_child). CAP_SYS_NICE: lowering a nice value goes through child_nice and node_thread_nice
// (common/nice.h routes them). CAP_DAC_OVERRIDE: the parent cgroups, whose v1 hierarchy roots are
// 0555, are made and removed through cgroup_parents. CAP_SYS_ADMIN and CAP_FOWNER go as well
// once the btrfs pool is mounted (daemon/dev.cc).
inline constexpr int kNodeDroppedCapabilities[] = {CAP_NET_ADMIN, CAP_NET_RAW,  CAP_NET_BROADCAST, CAP_SYS_PTRACE,
                                                   CAP_KILL,      CAP_SETUID,   CAP_SETGID,        CAP_SYS_NICE,
                                                   CAP_DAC_OVERRIDE};

struct BrokerConfig {
  std::string net_lock_dir;  // host-wide network slot locks: <HostRunDir()>/net-slots
  // The node's parent cgroup ("space-<16 hex>", fixed when the node starts the broker): the ns
  // runtime's sandboxes live under it, the vm runtime's under it + "-vm". Empty: no cgroup_*.
  std::string cgroup_name;
  std::string cgroup_root = "/sys/fs/cgroup";
  // Host-wide uid slot locks (<HostRunDir()>/uid-slots): the broker leases uid slots to the
  // node (uid_acquire) and maps user namespaces and attaches sandboxes only to those. Empty:
  // no leases, so no userns_map or net_attach.
  std::string uid_lock_dir;
  // The node's storage pool (<data dir>/pool, absolute): idmap_tree clones only directories
  // of its sandbox roots and template builds. Empty: no idmap_tree.
  std::string pool_dir;
  // Where template imports may read (`--import-root` or the `--trusted-template-source`s,
  // joined by ':': storage::SplitImportRoots): import_open resolves a source inside the root it
  // is below, and idmap_tree clones, read-only, a directory below one. Empty: neither.
  std::string import_root;
};

// Whether `name` is a node's parent cgroup name as the node derives it: "space-" + 16 hex.
bool IsNodeCgroupName(const std::string& name);

// Handles requests one at a time; not thread-safe (the broker process is one thread).
class Broker {
 public:
  explicit Broker(BrokerConfig config);
  ~Broker();

  // The reply datagram for one decoded request, with the descriptors to send along.
  std::string Handle(const Request& request, std::vector<UniqueFd> fds, std::vector<UniqueFd>* reply_fds);

 private:
  Result<nlohmann::json> Dispatch(const Request& request, std::vector<UniqueFd>& fds,
                                  std::vector<UniqueFd>* reply_fds);
  Status NeedSlot() const;
  Result<nlohmann::json> NetAcquire();
  Result<nlohmann::json> NetAttach(int64_t uid_slot, int pidfd);
  Result<nlohmann::json> NetTap(int64_t uid_slot, std::vector<UniqueFd>* reply_fds);
  Result<nlohmann::json> NetRelease();
  // The acts on one runtime's sandbox cgroups (the node makes the parents).
  Result<runtime::CgroupActs*> Cgroups(CgroupRuntime runtime);
  Result<nlohmann::json> CgroupAttach(const Request& request, int pidfd);
  Result<nlohmann::json> UsernsMap(const Request& request, int pidfd);
  Result<nlohmann::json> IdmapTree(const Request& request, int dir_fd, int pidfd, std::vector<UniqueFd>* reply_fds);
  Result<nlohmann::json> SubvolDelete(const Request& request, int parent_fd);
  Result<nlohmann::json> SubvolSnapshot(const Request& request, int source_fd, int parent_fd);
  Result<nlohmann::json> SubvolCreate(const Request& request, int parent_fd);
  Result<nlohmann::json> VmStateDir(int root_fd);
  Result<nlohmann::json> ImportOpen(const Request& request, std::vector<UniqueFd>* reply_fds);
  // Whether `fd` names a directory at or below the import root now (its path, for messages).
  Result<std::string> ImportPathOf(int fd);
  Result<nlohmann::json> QgroupLimit(const Request& request, int subvol_fd);
  Result<nlohmann::json> NodeThreadNice(const Request& request);
  // The pool's real path (symlinks resolved), and what `fd` names now, checked against it
  // by `allowed`; `op` names the request in errors.
  Result<std::string> PoolPathOf(int fd, std::string_view op, bool (*allowed)(const std::string& pool, const std::string& path));
  // Ok when this broker leased `uid_slot` to the node (uid_acquire).
  Status NeedUidLease(int64_t uid_slot, std::string_view op);

  const std::string pool_dir_;
  const std::string import_root_;  // each root canonical (realpath at start); empty: no imports
  const std::string cgroup_name_;
  const std::string cgroup_root_;
  std::shared_ptr<runtime::CgroupActs> cgroups_[2];  // ns, vm
  HostSlots net_slots_;
  const bool uid_leases_;
  HostSlots uid_slots_;
  int64_t net_slot_ = -1;
  std::unique_ptr<network::SandboxNetwork> net_;
};

// Whether `path` (a directory's path as /proc/self/fd shows it) is one idmap_tree may clone
// under `pool` (canonical): a sandbox root, sandboxes/<id>, a template build's scratch tree,
// templates/tmp-<16 hex>, a snapshot import's, snapshots/tmp-<id>, or a volume or a view of
// one, volumes/<name>. (Never an overlay pool's sandboxes/<id>/merged: the kernel does
// not idmap overlayfs mounts, and idmap_tree also wants a btrfs subvolume.)
// Exposed for tests.
bool IsIdmappablePoolPath(const std::string& pool, const std::string& path);
// The same for a read-only clone: those, or a snapshot, snapshots/<id>.
bool IsReadOnlyIdmappablePoolPath(const std::string& pool, const std::string& path);
bool IsSnapshotPoolPath(const std::string& pool, const std::string& path);
// The directories subvol_delete deletes in: sandboxes/, snapshots/, templates/ and volumes/ of the pool.
bool IsPoolSubvolumeDir(const std::string& pool, const std::string& path);
// What qgroup_limit limits: a sandbox root or a rollback's staging root, sandboxes/<name>, or a
// volume, volumes/<name>.
bool IsPoolSandboxRoot(const std::string& pool, const std::string& path);
bool IsPoolLimitable(const std::string& pool, const std::string& path);
// One path component a volume subvolume may be named: [A-Za-z0-9_.-], not . or ..
bool IsVolumeName(std::string_view name);

// Opens the network namespace of the process behind `pidfd`, after checking that its user
// namespace maps root to exactly the host uid range of `uid_slot` (a sandbox of that slot),
// that it is not the caller's own network namespace, and that `pidfd` is still alive once
// the namespace is open. Exposed for tests.
Result<UniqueFd> OpenSandboxNetns(int pidfd, int64_t uid_slot);

// The broker's seccomp filter (default allow): no other program, no tracing, mounts, new
// namespaces or id changes; setns only into a network namespace; pidfd signals only the null
// signal (its liveness check); other signals only to itself; no packet, AF_ALG or other rare
// socket families; none of the large kernel surfaces (bpf, perf, io_uring, keyrings, modules).
// Loaded for every thread after the capability drop; needs no_new_privs.
Status LoadBrokerSeccomp();

// Answers requests on `fd` one at a time until the peer closes it. 0 then; 1 when a reply
// cannot be sent.
int Serve(int fd, Broker* broker);

// Checks that the process behind `pidfd` is alive and a child of this process's parent (the
// node: a sandbox's init, a VMM, the gateway worker, the API front; never another host
// process, never the node), and returns its pid. `op` names the request in errors. Exposed
// for tests.
Result<pid_t> NodeChildOfPidfd(int pidfd, std::string_view op = "kill_child");
// A child of the node (NodeChildOfPidfd) in a user namespace it made itself right under the
// host's: its /proc directory and that namespace. `op` names the request in errors.
struct ChildUserns {
  UniqueFd proc;
  UniqueFd userns;
};
Result<ChildUserns> OpenChildUserns(int pidfd, std::string_view op);

// The broker process's main: checks that `node_pid` is its parent, drops every capability
// but kBrokerCapabilities, loads its seccomp filter, and serves the node on `fd` until the
// node closes it or dies (the next node reconciles what is left). `cgroup_name` is the node's
// parent cgroup (IsNodeCgroupName); `pool_dir` its storage pool and `import_root` where
// template imports read (BrokerConfig).
int RunBroker(int fd, pid_t node_pid, const std::string& cgroup_name, const std::string& pool_dir,
              const std::string& import_root);

}  // namespace space::broker
