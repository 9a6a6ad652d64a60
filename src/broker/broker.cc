#include "broker/broker.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string_view>

#include "common/capabilities.h"
#include "common/dir.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/seccomp_denylist.h"
#include "common/syscall.h"
#include "network/firewall.h"
#include "network/netlink.h"
#include "runtime/ns/cgroup.h"
#include "storage/btrfs.h"
#include "storage/template_builder.h"

namespace space::broker {
namespace {

// A pidfd turns readable when its process exits (a zombie counts as gone). Polled, not
// signalled with 0: the broker's seccomp pins pidfd_send_signal to SIGKILL.
bool PidfdAlive(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return RetryEintr([&] { return ::poll(&p, 1, 0); }) == 0;
}

// Whether `fd` is a pidfd at all: anything else (a pipe, a socket) may poll as "alive".
bool IsPidfd(int fd) {
  char target[64];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof target - 1);
  return n > 0 && std::string_view(target, static_cast<size_t>(n)) == "anon_inode:[pidfd]";
}

Result<pid_t> PidOfPidfd(int pidfd) {
  ASSIGN_OR_RETURN(std::string info, ReadFileToString("/proc/self/fdinfo/" + std::to_string(pidfd), 4096));
  size_t at = info.find("\nPid:");
  if (at == std::string::npos) return InvalidArgument("the descriptor is not a pidfd");
  long pid = std::strtol(info.c_str() + at + 5, nullptr, 10);
  if (pid <= 0) return NotFound("the process has exited");
  return static_cast<pid_t>(pid);
}

// Whether the uid_map text is exactly "0 <base> 65536": root inside, one sandbox uid range.
bool MapsRootToSlot(const std::string& uid_map, int64_t uid_slot) {
  std::istringstream in(uid_map);
  int64_t inside = -1, outside = -1, count = -1;
  if (!(in >> inside >> outside >> count)) return false;
  std::string rest;
  if (in >> rest) return false;  // a second line
  return inside == 0 && outside == static_cast<int64_t>(HostSlots::UidBase(uid_slot)) && count == 65536;
}

bool SameFile(int a, int b) {
  struct stat sa, sb;
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Result<UniqueFd> OpenAt(int dir, const char* name, int flags) {
  UniqueFd fd(::openat(dir, name, flags | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", name, errno);
  return fd;
}

constexpr uint64_t kIdmapCloneFlags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH;

bool AllOf(std::string_view s, size_t min, size_t max, bool (*ok)(char)) {
  if (s.size() < min || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), ok);
}
bool IsHexChar(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// One write(): the kernel takes an id map only whole, and only once.
Status WriteMap(int proc_dir, const char* name, const std::string& map) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenAt(proc_dir, name, O_WRONLY | O_NOFOLLOW));
  ssize_t n = ::write(fd.get(), map.data(), map.size());
  if (n < 0) return ErrnoStatus("write", name, errno);
  if (static_cast<size_t>(n) != map.size()) return Internal(std::string("userns_map: short write of ") + name);
  return Status::Ok();
}

// A group a VMM may join: /dev/kvm's, when that group may read and write it and is not root's.
Status CheckKvmGroup(int64_t kvm_gid) {
  struct stat st;
  // A host without /dev/kvm has no such group: refused like any other gid.
  if (::stat("/dev/kvm", &st) != 0) {
    return PermissionDenied("userns_map: gid " + std::to_string(kvm_gid) + ": no /dev/kvm on this host (" +
                            ErrnoStatus("stat", "/dev/kvm", errno).message() + ")");
  }
  if (!S_ISCHR(st.st_mode) || st.st_gid == 0 || static_cast<int64_t>(st.st_gid) != kvm_gid ||
      (st.st_mode & 060) != 060) {
    return PermissionDenied("userns_map: gid " + std::to_string(kvm_gid) + " is not a group that uses /dev/kvm");
  }
  return Status::Ok();
}

// What the broker never does, beyond the kernel surfaces nothing of SPACE uses
// (KernelSurfaceSyscalls); each is a way out of it. setns and pidfd_send_signal are allowed
// with one argument pinned (LoadBrokerSeccomp).
constexpr const char* kRefusedSyscalls[] = {
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare",
    "fsopen", "fsmount", "fsconfig", "fspick", "move_mount",
    "pidfd_open", "pidfd_getfd", "tkill", "mknod", "mknodat",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "capset",
};

// It speaks netlink (links, addresses, nftables) and unix sockets; never these.
constexpr int kRefusedFamilies[] = {AF_PACKET, AF_KEY, AF_ALG, AF_VSOCK, AF_XDP, AF_TIPC,
                                    AF_RDS,    AF_LLC, AF_BLUETOOTH, AF_CAN, AF_NFC};

}  // namespace

Status LoadBrokerSeccomp() {
  DenyList list;
  list.syscalls = KernelSurfaceSyscalls();
  list.syscalls.insert(list.syscalls.end(), std::begin(kRefusedSyscalls), std::end(kRefusedSyscalls));
  list.socket_families.assign(std::begin(kRefusedFamilies), std::end(kRefusedFamilies));
  // SIGKILL to any pid (a v1 cgroup's tasks, which only CAP_KILL reaches) and to the node's
  // children by pidfd (kill_child); every other signal only to itself.
  list.signals_only_to_self = false;
  const auto self = static_cast<uint64_t>(::getpid());
  // open_tree only clones (idmap_tree): a detached copy it hands over, never attaches
  // (move_mount stays refused), so mount_setattr can only ever change such a copy.
  list.arg_must_equal = {{"open_tree", 2, kIdmapCloneFlags},   {"setns", 1, CLONE_NEWNET},
                         {"pidfd_send_signal", 1, SIGKILL},
                         {"kill", 1, SIGKILL},                {"tgkill", 0, self},
                         {"rt_sigqueueinfo", 0, self},        {"rt_tgsigqueueinfo", 0, self}};
  return LoadDenyList(list);
}

bool IsReadOnlyIdmappablePoolPath(const std::string& pool, const std::string& path) {
  return IsIdmappablePoolPath(pool, path) || IsSnapshotPoolPath(pool, path);
}

bool IsIdmappablePoolPath(const std::string& pool, const std::string& path) {
  if (pool.size() < 2 || pool[0] != '/' || path.size() <= pool.size() + 1 || path.compare(0, pool.size(), pool) != 0 ||
      path[pool.size()] != '/') {
    return false;
  }
  std::string_view rest = std::string_view(path).substr(pool.size() + 1);
  if (rest.rfind("sandboxes/", 0) == 0) {
    rest.remove_prefix(10);
    size_t slash = rest.find('/');
    std::string_view id = rest.substr(0, slash);
    return slash == std::string_view::npos && ValidateSandboxId(id).ok();
  }
  if (rest.rfind("templates/tmp-", 0) == 0) return AllOf(rest.substr(14), 16, 16, IsHexChar);
  // A snapshot being imported from the store (the tree jail's restore fills it).
  if (rest.rfind("snapshots/tmp-", 0) == 0) return ValidateSandboxId(rest.substr(14)).ok();
  // A volume, or a read-only view or sync point of one (node/volumes.h): mounted into the
  // sandboxes that name it, read by the tree jail for a sync.
  if (rest.rfind("volumes/", 0) == 0) return IsVolumeName(rest.substr(8));
  return false;
}

bool IsSnapshotPoolPath(const std::string& pool, const std::string& path) {
  const std::string dir = pool + "/snapshots/";
  if (pool.size() < 2 || pool[0] != '/' || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0) {
    return false;
  }
  return ValidateSandboxId(std::string_view(path).substr(dir.size())).ok();
}

bool IsPoolSubvolumeDir(const std::string& pool, const std::string& path) {
  return !pool.empty() && (path == pool + "/sandboxes" || path == pool + "/snapshots" || path == pool + "/templates" ||
                           path == pool + "/volumes");
}

bool IsVolumeName(std::string_view name) {
  return name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         AllOf(name, 1, kMaxSubvolNameLen, [](char c) { return IsSandboxIdChar(c) || c == '.'; });
}

bool IsPoolVolume(const std::string& pool, const std::string& path) {
  const std::string dir = pool + "/volumes/";
  if (pool.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return IsVolumeName(std::string_view(path).substr(dir.size()));
}

bool IsPoolLimitable(const std::string& pool, const std::string& path) {
  return IsPoolSandboxRoot(pool, path) || IsPoolVolume(pool, path);
}

// A subvolume directly in the pool's sandboxes/, snapshots/ or templates/ (a sandbox root, a
// snapshot, a template or a build's scratch tree), by its name's shape.
bool IsPoolSubvolumePath(const std::string& pool, const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || !IsPoolSubvolumeDir(pool, path.substr(0, slash))) return false;
  std::string_view name = std::string_view(path).substr(slash + 1);
  return name != "." && name != ".." &&
         AllOf(name, 1, kMaxSubvolNameLen, [](char c) { return IsSandboxIdChar(c) || c == '.'; });
}

bool IsPoolSandboxRoot(const std::string& pool, const std::string& path) {
  const std::string dir = pool + "/sandboxes/";
  if (pool.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  std::string_view name = std::string_view(path).substr(dir.size());
  return name != "." && name != ".." && AllOf(name, 1, kMaxSubvolNameLen, [](char c) { return IsSandboxIdChar(c) || c == '.'; });
}

bool IsNodeCgroupName(const std::string& name) {
  if (name.size() != 6 + 16 || name.rfind("space-", 0) != 0) return false;
  for (size_t i = 6; i < name.size(); ++i) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<pid_t> NodeChildOfPidfd(int pidfd, std::string_view op) {
  const std::string what(op);
  if (!IsPidfd(pidfd)) return InvalidArgument(what + ": the descriptor is not a pidfd");
  if (!PidfdAlive(pidfd)) return NotFound(what + ": the process has exited");
  ASSIGN_OR_RETURN(pid_t pid, PidOfPidfd(pidfd));
  ASSIGN_OR_RETURN(std::string status, ReadFileToString("/proc/" + std::to_string(pid) + "/status", 16384));
  size_t at = status.find("\nPPid:");
  long ppid = at == std::string::npos ? -1 : std::strtol(status.c_str() + at + 6, nullptr, 10);
  // Checked after the read: a live pidfd means the pid was not reused in between.
  if (!PidfdAlive(pidfd)) return NotFound(what + ": the process exited");
  if (ppid != ::getppid() || pid == ::getppid()) {
    return PermissionDenied(what + ": process " + std::to_string(pid) + " is not a child of the node");
  }
  return pid;
}

Result<ChildUserns> OpenChildUserns(int pidfd, std::string_view op) {
  const std::string what(op);
  ASSIGN_OR_RETURN(pid_t pid, NodeChildOfPidfd(pidfd, op));
  ChildUserns child;
  ASSIGN_OR_RETURN(child.proc, OpenFd("/proc/" + std::to_string(pid), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // Alive after the open: the directory is that process's, whatever later reuses the pid.
  if (!PidfdAlive(pidfd)) return NotFound(what + ": the process exited");
  // A magic link of procfs, followed on purpose: to the namespace of the process checked above.
  ASSIGN_OR_RETURN(child.userns, OpenAt(child.proc.get(), "ns/user", O_RDONLY));
  ASSIGN_OR_RETURN(UniqueFd own, OpenFd("/proc/self/ns/user", O_RDONLY | O_CLOEXEC));
  if (SameFile(child.userns.get(), own.get())) {
    return PermissionDenied(what + ": the process is in the host's user namespace");
  }
  // A namespace the child made itself, right under the host's: never one nested deeper, whose
  // ids would be another namespace's.
  UniqueFd parent(::ioctl(child.userns.get(), NS_GET_PARENT));
  if (!parent.valid()) return ErrnoStatus("ioctl", "NS_GET_PARENT", errno);
  if (!SameFile(parent.get(), own.get())) {
    return PermissionDenied(what + ": the process's user namespace is not a child of the host's");
  }
  return child;
}

Result<UniqueFd> OpenSandboxNetns(int pidfd, int64_t uid_slot) {
  if (!IsPidfd(pidfd)) return InvalidArgument("net_attach: the descriptor is not a pidfd");
  if (!PidfdAlive(pidfd)) return NotFound("net_attach: the process has exited");
  ASSIGN_OR_RETURN(pid_t pid, PidOfPidfd(pidfd));
  const std::string proc = "/proc/" + std::to_string(pid);
  ASSIGN_OR_RETURN(UniqueFd netns, OpenFd(proc + "/ns/net", O_RDONLY | O_CLOEXEC));
  ASSIGN_OR_RETURN(std::string uid_map, ReadFileToString(proc + "/uid_map", 4096));
  // Checked after both opens: if the pidfd's process is still alive, the pid was not reused
  // in between, so the namespace and the map are that process's.
  if (!PidfdAlive(pidfd)) return NotFound("net_attach: the sandbox's init exited");
  if (!MapsRootToSlot(uid_map, uid_slot)) {
    return PermissionDenied("net_attach: the process is not a sandbox of uid slot " + std::to_string(uid_slot));
  }
  ASSIGN_OR_RETURN(UniqueFd own, OpenFd("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (SameFile(netns.get(), own.get())) return PermissionDenied("net_attach: the process shares the host's network");
  return netns;
}

namespace {
std::string Canonical(const std::string& path) {
  if (path.empty()) return "";
  char real[PATH_MAX];
  return ::realpath(path.c_str(), real) != nullptr ? std::string(real) : std::string();
}

// Each import root canonical; one that does not resolve is dropped (it admits nothing).
std::string CanonicalRoots(const std::string& roots) {
  std::string out;
  for (const auto& root : storage::SplitImportRoots(roots)) {
    std::string real = Canonical(root);
    if (real.empty() || real.find(':') != std::string::npos) continue;
    out += (out.empty() ? "" : ":") + real;
  }
  return out;
}
}  // namespace

Broker::Broker(BrokerConfig config)
    : pool_dir_(std::move(config.pool_dir)),
      import_root_(CanonicalRoots(config.import_root)),
      cgroup_name_(std::move(config.cgroup_name)),
      cgroup_root_(std::move(config.cgroup_root)),
      net_slots_(std::move(config.net_lock_dir)),
      uid_leases_(!config.uid_lock_dir.empty()),
      uid_slots_(std::move(config.uid_lock_dir)) {}

Broker::~Broker() {
  if (net_slot_ >= 0) net_slots_.Release(net_slot_);
}

std::string Broker::Handle(const Request& request, std::vector<UniqueFd> fds, std::vector<UniqueFd>* reply_fds) {
  Result<nlohmann::json> r = Internal("broker: request failed");
  try {
    r = Dispatch(request, fds, reply_fds);
  } catch (const std::exception& e) {  // nlohmann or allocation: refuse, never die
    r = Internal(std::string("broker: ") + e.what());
  }
  if (!r.ok()) {
    reply_fds->clear();
    return EncodeError(r.status());
  }
  return EncodeOk(std::move(*r));
}

Status Broker::NeedUidLease(int64_t uid_slot, std::string_view op) {
  if (!uid_leases_ || !uid_slots_.Held(uid_slot)) {
    return PermissionDenied(std::string(op) + ": uid slot " + std::to_string(uid_slot) + " is not leased to this node");
  }
  return Status::Ok();
}

Status Broker::NeedSlot() const {
  if (!net_) return Conflict("broker: no network slot taken (net_acquire first)");
  return Status::Ok();
}

Result<nlohmann::json> Broker::Dispatch(const Request& request, std::vector<UniqueFd>& fds,
                                        std::vector<UniqueFd>* reply_fds) {
  switch (request.op) {
    case Op::kHello:
      return nlohmann::json{{"pid", ::getpid()}};
    case Op::kNetAcquire:
      return NetAcquire();
    case Op::kFirewallInstall:
      RETURN_IF_ERROR(NeedSlot());
      RETURN_IF_ERROR(network::InstallFirewall(static_cast<int>(net_slot_), request.ports));
      return nlohmann::json::object();
    case Op::kNetAttach:
      return NetAttach(request.uid_slot, fds.at(0).get());
    case Op::kNetTap:
      return NetTap(request.uid_slot, reply_fds);
    case Op::kNetDetach:
      RETURN_IF_ERROR(NeedSlot());
      RETURN_IF_ERROR(net_->Detach(request.uid_slot));
      return nlohmann::json::object();
    case Op::kNetReconcile: {
      RETURN_IF_ERROR(NeedSlot());
      std::set<std::string> keep;
      for (int64_t s : request.keep) keep.insert(net_->AddressFor(s).host_link);
      RETURN_IF_ERROR(net_->Reconcile(keep));
      return nlohmann::json::object();
    }
    case Op::kNetRelease:
      return NetRelease();
    case Op::kSeqpacketPair: {
      // Send buffers above wmem_max need CAP_NET_ADMIN (SO_SNDBUFFORCE), which the node gave up.
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        return ErrnoStatus("socketpair", "seqpacket_pair", errno);
      }
      UniqueFd a(sv[0]), b(sv[1]);
      int size = static_cast<int>(request.send_buffer_bytes);
      for (int fd : {a.get(), b.get()}) {
        if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0) {
          return ErrnoStatus("setsockopt", "SO_SNDBUFFORCE", errno);
        }
      }
      reply_fds->push_back(std::move(a));
      reply_fds->push_back(std::move(b));
      return nlohmann::json::object();
    }
    case Op::kCgroupCreate:
    case Op::kCgroupUpdate:
    case Op::kCgroupFreeze:
    case Op::kCgroupKill:
    case Op::kCgroupRemove: {
      ASSIGN_OR_RETURN(runtime::CgroupActs * acts, Cgroups(request.runtime));
      Status st = Status::Ok();
      if (request.op == Op::kCgroupCreate) st = acts->Create(request.id, request.limits);
      if (request.op == Op::kCgroupUpdate) st = acts->UpdateLimits(request.id, request.limits);
      if (request.op == Op::kCgroupFreeze) st = acts->SetFrozen(request.id, request.frozen);
      if (request.op == Op::kCgroupKill) st = acts->Kill(request.id);
      if (request.op == Op::kCgroupRemove) st = acts->Remove(request.id);
      RETURN_IF_ERROR(st);
      return nlohmann::json::object();
    }
    case Op::kCgroupAttach:
      return CgroupAttach(request, fds.at(0).get());
    case Op::kCgroupParents: {
      // Only this node's own parents: the broker's cgroup name, plus "-vm" for the vm runtime.
      ASSIGN_OR_RETURN(runtime::CgroupActs * acts, Cgroups(request.runtime));
      RETURN_IF_ERROR(request.present ? acts->MakeParents() : acts->RemoveParents());
      return nlohmann::json::object();
    }
    case Op::kUsernsMap:
      RETURN_IF_ERROR(NeedUidLease(request.uid_slot, "userns_map"));
      return UsernsMap(request, fds.at(0).get());
    case Op::kUidAcquire: {
      if (!uid_leases_) return Conflict("broker: started without uid slot leases");
      ASSIGN_OR_RETURN(int64_t slot, uid_slots_.Acquire(request.preferred));
      return nlohmann::json{{"uid_slot", slot}};
    }
    case Op::kUidRelease:
      if (!uid_leases_ || !uid_slots_.Held(request.uid_slot)) {
        return NotFound("uid_release: uid slot " + std::to_string(request.uid_slot) + " is not leased to this node");
      }
      uid_slots_.Release(request.uid_slot);
      return nlohmann::json::object();
    case Op::kIdmapTree:
      RETURN_IF_ERROR(NeedUidLease(request.uid_slot, "idmap_tree"));
      return IdmapTree(request, fds.at(0).get(), fds.at(1).get(), reply_fds);
    case Op::kSubvolDelete:
      return SubvolDelete(request, fds.at(0).get());
    case Op::kSubvolSnapshot:
      return SubvolSnapshot(request, fds.at(0).get(), fds.at(1).get());
    case Op::kSubvolCreate:
      return SubvolCreate(request, fds.at(0).get());
    case Op::kVmStateDir:
      return VmStateDir(fds.at(0).get());
    case Op::kQgroupLimit:
      return QgroupLimit(request, fds.at(0).get());
    case Op::kChildNice: {
      ASSIGN_OR_RETURN(pid_t pid, NodeChildOfPidfd(fds.at(0).get(), "child_nice"));
      if (::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), static_cast<int>(request.nice)) != 0) {
        return ErrnoStatus("setpriority", "child " + std::to_string(pid), errno);
      }
      // The pid set is the checked process's only while that process lives.
      if (!PidfdAlive(fds.at(0).get())) return NotFound("child_nice: the process exited");
      return nlohmann::json::object();
    }
    case Op::kNodeThreadNice:
      return NodeThreadNice(request);
    case Op::kImportOpen:
      return ImportOpen(request, reply_fds);
    case Op::kQuotaRescan: {
      if (pool_dir_.empty()) return Conflict("broker: started without a storage pool");
      ASSIGN_OR_RETURN(bool started, storage::RescanIfInconsistent(nullptr, pool_dir_));
      return nlohmann::json{{"started", started}};
    }
    case Op::kKillChild: {
      // The node's own children only: what it could kill itself if it had kept CAP_KILL for
      // them and nothing else. The signal goes by the pidfd, so never to a reused pid.
      const int pidfd = fds.at(0).get();
      ASSIGN_OR_RETURN(pid_t pid, NodeChildOfPidfd(pidfd, "kill_child"));
      if (::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) != 0) {
        if (errno == ESRCH) return NotFound("kill_child: the process exited");
        return ErrnoStatus("pidfd_send_signal", "SIGKILL to " + std::to_string(pid), errno);
      }
      return nlohmann::json::object();
    }
  }
  return InvalidArgument("broker: unknown op");
}

Result<runtime::CgroupActs*> Broker::Cgroups(CgroupRuntime runtime) {
  if (cgroup_name_.empty()) return Conflict("broker: started without a cgroup name");
  auto& acts = cgroups_[runtime == CgroupRuntime::kVm ? 1 : 0];
  if (!acts) {
    const std::string name = cgroup_name_ + (runtime == CgroupRuntime::kVm ? "-vm" : "");
    ASSIGN_OR_RETURN(acts, runtime::ns::Cgroups::ActsOn(cgroup_root_, name));
  }
  return acts.get();
}

Result<nlohmann::json> Broker::CgroupAttach(const Request& request, int pidfd) {
  ASSIGN_OR_RETURN(runtime::CgroupActs * acts, Cgroups(request.runtime));
  ASSIGN_OR_RETURN(pid_t pid, NodeChildOfPidfd(pidfd, "cgroup_attach"));
  RETURN_IF_ERROR(acts->Attach(request.id, pid, pidfd));
  // The pid written is the checked process's only while that process lives.
  if (!PidfdAlive(pidfd)) return NotFound("cgroup_attach: the process exited");
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::UsernsMap(const Request& request, int pidfd) {
  ASSIGN_OR_RETURN(ChildUserns child, OpenChildUserns(pidfd, "userns_map"));
  if (request.kvm_gid != 0) RETURN_IF_ERROR(CheckKvmGroup(request.kvm_gid));
  const uint32_t base = HostSlots::UidBase(request.uid_slot);
  // The kernel refuses a second write of either map, so a mapped namespace cannot be remapped.
  RETURN_IF_ERROR(WriteMap(child.proc.get(), "uid_map", runtime::ns::UidMapText(request.shape, base)));
  RETURN_IF_ERROR(WriteMap(child.proc.get(), "gid_map",
                           runtime::ns::GidMapText(request.shape, base, static_cast<gid_t>(request.kvm_gid))));
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::IdmapTree(const Request& request, int dir_fd, int pidfd,
                                         std::vector<UniqueFd>* reply_fds) {
  // Never another host directory: an idmapped clone of one would hand the ownership of its
  // files to whoever is root of the namespace.
  // Or a snapshot, read-only: the tree jail reads snapshots, nothing may change one.
  // Or, read-only, an import's source directory: what an admin let imports read (import_open),
  // read in the build jail instead of with a host privilege in the node.
  std::string path;
  Result<std::string> in_pool =
      PoolPathOf(dir_fd, "idmap_tree", request.read_only ? IsReadOnlyIdmappablePoolPath : IsIdmappablePoolPath);
  if (in_pool.ok()) {
    path = *in_pool;
    // And a subvolume's own root: the kernel refuses hard links across subvolumes (EXDEV), so no
    // host file can have been linked into the tree first, whatever filesystem holds the pool.
    if (!storage::IsSubvolumeFd(dir_fd)) {
      return PermissionDenied("idmap_tree: " + path + " is not a btrfs subvolume");
    }
  } else if (request.read_only) {
    Result<std::string> import = ImportPathOf(dir_fd);
    if (!import.ok()) return in_pool.status();
    path = *import;
  } else {
    return in_pool.status();
  }
  // For whom: a child of the node whose own user namespace, right under the host's, maps root
  // to exactly this leased slot (so never the VMM's, the front's or the worker's one-id maps).
  ASSIGN_OR_RETURN(ChildUserns child, OpenChildUserns(pidfd, "idmap_tree"));
  ASSIGN_OR_RETURN(UniqueFd map_fd, OpenAt(child.proc.get(), "uid_map", O_RDONLY | O_NOFOLLOW));
  char map[256];
  ssize_t m = ::read(map_fd.get(), map, sizeof map - 1);
  if (m < 0) return ErrnoStatus("read", "uid_map", errno);
  if (!PidfdAlive(pidfd)) return NotFound("idmap_tree: the process exited");
  if (!MapsRootToSlot(std::string(map, static_cast<size_t>(m)), request.uid_slot)) {
    return PermissionDenied("idmap_tree: the process is not root of a namespace of uid slot " +
                            std::to_string(request.uid_slot));
  }
  long tree = ::syscall(SYS_open_tree, dir_fd, "", kIdmapCloneFlags);
  if (tree < 0) return ErrnoStatus("open_tree", path, errno);
  UniqueFd clone(static_cast<int>(tree));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | (request.read_only ? MOUNT_ATTR_RDONLY : 0);
  attr.userns_fd = static_cast<uint64_t>(child.userns.get());
  if (::syscall(SYS_mount_setattr, clone.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    return ErrnoStatus("mount_setattr", "MOUNT_ATTR_IDMAP " + path, errno);
  }
  reply_fds->push_back(std::move(clone));
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::ImportOpen(const Request& request, std::vector<UniqueFd>* reply_fds) {
  if (import_root_.empty()) return Conflict("import_open: the broker has no import root");
  // Resolved inside the root as if it were "/" (neither ".." nor a link leads out), as root: the
  // source may be an admin's root-only tarball, or below a 0700 directory.
  ASSIGN_OR_RETURN(UniqueFd fd, storage::OpenImportSource(import_root_, request.source));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", request.source, errno);
  if (S_ISREG(st.st_mode)) {
    // The tarball itself, open for reading: all the node needs of it.
    reply_fds->push_back(std::move(fd));
    return nlohmann::json::object();
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(request.source + " is neither a directory nor a tarball");
  // A directory only as a name (O_PATH): the node lists nothing of it; the build jail reads it
  // through a read-only idmapped clone (idmap_tree).
  UniqueFd path(::openat(fd.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!path.valid()) return ErrnoStatus("open", request.source, errno);
  reply_fds->push_back(std::move(path));
  return nlohmann::json::object();
}

Result<std::string> Broker::ImportPathOf(int fd) {
  if (import_root_.empty()) return PermissionDenied("idmap_tree: no import root");
  char named[PATH_MAX];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), named, sizeof named - 1);
  if (n <= 0) return ErrnoStatus("readlink", "idmap_tree directory", errno);
  const std::string path(named, static_cast<size_t>(n));
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", path, errno);
  const bool below = !storage::ImportRootOf(import_root_, path).empty();
  // A deleted directory reads "... (deleted)": not a path below anything.
  if (!S_ISDIR(st.st_mode) || !below || path.find(" (deleted)") != std::string::npos) {
    return PermissionDenied("idmap_tree: " + path + " is not below the import root");
  }
  // And that path, looked up here inside the import root, names this very directory: a
  // descriptor from a mount namespace of the node's making (a bind of /etc where the import
  // root would be) reads like a path below the root, and is not what the broker finds there.
  Result<UniqueFd> here = storage::OpenImportSource(import_root_, path);
  struct stat found;
  if (!here.ok() || ::fstat(here->get(), &found) != 0 || found.st_dev != st.st_dev || found.st_ino != st.st_ino) {
    return PermissionDenied("idmap_tree: " + path + " is not what lies at that path below the import root");
  }
  return path;
}

Result<nlohmann::json> Broker::NodeThreadNice(const Request& request) {
  // A thread of the node now: its directory under the node's /proc entry, opened first so that
  // the check after the act tells whether that thread lived through it.
  const std::string task = "/proc/" + std::to_string(::getppid()) + "/task/" + std::to_string(request.tid);
  Result<UniqueFd> dir = OpenFd(task, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!dir.ok()) {
    return PermissionDenied("node_thread_nice: " + std::to_string(request.tid) + " is not a thread of the node");
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(request.tid), static_cast<int>(request.nice)) != 0) {
    return ErrnoStatus("setpriority", "thread " + std::to_string(request.tid), errno);
  }
  // Its files answer only while it lives (ESRCH after): then the tid set may have been reused.
  if (!OpenAt(dir->get(), "stat", O_RDONLY).ok()) return NotFound("node_thread_nice: the thread exited");
  return nlohmann::json::object();
}

Result<std::string> Broker::PoolPathOf(int fd, std::string_view op,
                                       bool (*allowed)(const std::string& pool, const std::string& path)) {
  const std::string what(op);
  if (pool_dir_.empty()) return Conflict("broker: started without a storage pool");
  // By what the descriptor names now (the inode is what the act will touch), against the
  // pool's real path.
  char real[PATH_MAX];
  if (::realpath(pool_dir_.c_str(), real) == nullptr) return ErrnoStatus("realpath", pool_dir_, errno);
  char named[PATH_MAX];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), named, sizeof named - 1);
  if (n <= 0) return ErrnoStatus("readlink", what + " directory", errno);
  const std::string path(named, static_cast<size_t>(n));
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", what + " directory", errno);
  if (!S_ISDIR(st.st_mode) || !allowed(real, path)) {
    return PermissionDenied(what + ": " + path + " is not a directory it acts on in this node's pool");
  }
  return path;
}

Result<nlohmann::json> Broker::SubvolDelete(const Request& request, int parent_fd) {
  ASSIGN_OR_RETURN(std::string dir, PoolPathOf(parent_fd, "subvol_delete", IsPoolSubvolumeDir));
  RETURN_IF_ERROR(storage::DeleteSubvolumeAt(parent_fd, request.name).Annotate(dir));
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::SubvolSnapshot(const Request& request, int source_fd, int parent_fd) {
  ASSIGN_OR_RETURN(std::string source, PoolPathOf(source_fd, "subvol_snapshot", IsPoolSubvolumePath));
  // A subvolume's own root: a snapshot of anything else would fail in the kernel anyway, but
  // say so before the act.
  if (!storage::IsSubvolumeFd(source_fd)) return PermissionDenied("subvol_snapshot: " + source + " is not a btrfs subvolume");
  ASSIGN_OR_RETURN(std::string dir, PoolPathOf(parent_fd, "subvol_snapshot", IsPoolSubvolumeDir));
  // The node may send it by name only (O_PATH): the ioctl wants it open.
  UniqueFd source_dir(::openat(source_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!source_dir.valid()) return ErrnoStatus("open", source, errno);
  RETURN_IF_ERROR(storage::CreateSnapshotAt(source_dir.get(), parent_fd, request.name, request.read_only)
                      .Annotate(source + " -> " + dir + "/" + request.name));
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::SubvolCreate(const Request& request, int parent_fd) {
  ASSIGN_OR_RETURN(std::string dir, PoolPathOf(parent_fd, "subvol_create", IsPoolSubvolumeDir));
  // Made as uid 0 (mode 0755): the build jail and the tree jail write it as root of their own
  // namespace through an idmapped clone, which needs its top directory owned by a mapped id.
  RETURN_IF_ERROR(storage::CreateSubvolumeAt(parent_fd, request.name).Annotate(dir));
  // A volume's top is every sandbox user's to write (its sandboxes run commands as a user,
  // not only as root); the pool's 0700 directories keep the host's users out.
  if (dir.size() > 8 && dir.compare(dir.size() - 8, 8, "/volumes") == 0) {
    UniqueFd made(::openat(parent_fd, request.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!made.valid()) return ErrnoStatus("open", dir + "/" + request.name, errno);
    if (::fchmod(made.get(), 0777) != 0) return ErrnoStatus("fchmod", dir + "/" + request.name, errno);
  }
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::VmStateDir(int root_fd) {
  ASSIGN_OR_RETURN(std::string root, PoolPathOf(root_fd, "vm_state_dir", IsPoolSandboxRoot));
  if (!storage::IsSubvolumeFd(root_fd)) return PermissionDenied("vm_state_dir: " + root + " is not a btrfs subvolume");
  const char* name = runtime::kVmStateDir;
  const std::string what = root + "/" + name;
  // mkdirat never follows a final symlink (EEXIST), and the open below refuses one.
  if (::mkdirat(root_fd, name, 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdirat", what, errno);
  Result<UniqueFd> dir = OpenAt(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (!dir.ok()) return PermissionDenied("vm_state_dir: " + what + " is not a directory");
  const uid_t node = HostSlots::NodeUid();
  // The node's, and readable by all (the tree jail exports it as its slot's root, to which the
  // node's uid is unmapped; the pool's 0700 directories keep the host's users out).
  if (::fchown(dir->get(), node, node) != 0) return ErrnoStatus("fchown", what, errno);
  if (::fchmod(dir->get(), 0755) != 0) return ErrnoStatus("fchmod", what, errno);
  // So are the files in it, whoever owns them now (a node that ran as root left uid 0; a
  // snapshot restored by the tree jail, which saw the node's uid unmapped, the overflow uid),
  // one link each (a second one would be a file of the tree beside). Each is acted on through
  // its own O_PATH descriptor: the node owns the directory and could swap a name for a link
  // meanwhile.
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir->get(), what));
  for (const std::string& entry : names) {
    UniqueFd f(::openat(dir->get(), entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat sb;
    if (!f.valid() || ::fstat(f.get(), &sb) != 0) continue;
    if (!S_ISREG(sb.st_mode) || sb.st_nlink != 1) continue;
    if (::fchownat(f.get(), "", node, node, AT_EMPTY_PATH) != 0) return ErrnoStatus("fchownat", what + "/" + entry, errno);
    if (::chmod(("/proc/self/fd/" + std::to_string(f.get())).c_str(), 0644) != 0) {
      return ErrnoStatus("chmod", what + "/" + entry, errno);
    }
  }
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::QgroupLimit(const Request& request, int subvol_fd) {
  ASSIGN_OR_RETURN(std::string root, PoolPathOf(subvol_fd, "qgroup_limit", IsPoolLimitable));
  // The node may send it by name only (O_PATH): the ioctl wants it open.
  UniqueFd subvol(::openat(subvol_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!subvol.valid()) return ErrnoStatus("open", root, errno);
  RETURN_IF_ERROR(storage::SetExclusiveLimitFd(subvol.get(), static_cast<uint64_t>(request.bytes)).Annotate(root));
  return nlohmann::json::object();
}

Result<nlohmann::json> Broker::NetAcquire() {
  if (!net_) {
    // The lowest free slot: a restarted node usually gets its old one back, and takes over
    // whatever that slot's table and links were left with.
    ASSIGN_OR_RETURN(int64_t slot, net_slots_.Acquire(-1));
    if (slot >= kMaxNetSlots) {
      net_slots_.Release(slot);
      return ResourceExhausted("more than 100 SPACE nodes with egress on this host");
    }
    net_slot_ = slot;
    net_ = std::make_unique<network::SandboxNetwork>(static_cast<int>(slot));
  }
  return nlohmann::json{{"net_slot", net_slot_}};
}

Result<nlohmann::json> Broker::NetAttach(int64_t uid_slot, int pidfd) {
  RETURN_IF_ERROR(NeedSlot());
  RETURN_IF_ERROR(NeedUidLease(uid_slot, "net_attach"));
  ASSIGN_OR_RETURN(UniqueFd netns, OpenSandboxNetns(pidfd, uid_slot));
  ASSIGN_OR_RETURN(network::SandboxAddress sa, net_->Attach(uid_slot, netns.get()));
  return nlohmann::json{{"address", network::FormatIpv4(sa.address)}, {"host_link", sa.host_link}};
}

Result<nlohmann::json> Broker::NetTap(int64_t uid_slot, std::vector<UniqueFd>* reply_fds) {
  RETURN_IF_ERROR(NeedSlot());
  // Only for a uid slot the node leases: its link name and address are that slot's.
  RETURN_IF_ERROR(NeedUidLease(uid_slot, "net_tap"));
  UniqueFd tap;
  ASSIGN_OR_RETURN(network::SandboxAddress sa, net_->AttachTap(uid_slot, &tap));
  reply_fds->push_back(std::move(tap));
  return nlohmann::json{{"address", network::FormatIpv4(sa.address)}, {"host_link", sa.host_link}};
}

Result<nlohmann::json> Broker::NetRelease() {
  if (!net_) return nlohmann::json::object();
  Status links = net_->Reconcile({});
  Status table = network::RemoveFirewall(static_cast<int>(net_slot_));
  net_.reset();
  net_slots_.Release(net_slot_);
  net_slot_ = -1;
  RETURN_IF_ERROR(links);
  RETURN_IF_ERROR(table);
  return nlohmann::json::object();
}

int RunBroker(int fd, pid_t node_pid, const std::string& cgroup_name, const std::string& pool_dir,
              const std::string& import_root) {
  UniqueFd sock(fd);
  if (::getppid() != node_pid) {
    LogError("broker", "started by something other than its node; exiting");
    return 1;
  }
  if (!IsNodeCgroupName(cgroup_name)) {
    LogError("broker", "cgroup name " + cgroup_name + " is not a node's; exiting");
    return 1;
  }
  // Not dumpable: its /proc files belong to root, and no process without CAP_SYS_PTRACE
  // (which the node drops) may trace it or read its memory.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  std::vector<int> drop;
  for (int cap = 0; cap <= LastCapability(); ++cap) {
    if (std::find(std::begin(kBrokerCapabilities), std::end(kBrokerCapabilities), cap) ==
        std::end(kBrokerCapabilities)) {
      drop.push_back(cap);
    }
  }
  if (Status st = DropCapabilities(drop); !st.ok()) {
    LogError("broker", st.ToString());
    return 1;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    LogError("broker", ErrnoStatus("prctl", "PR_SET_NO_NEW_PRIVS", errno).ToString());
    return 1;
  }
  if (Status st = LoadBrokerSeccomp(); !st.ok()) {
    LogError("broker", st.ToString());
    return 1;
  }
  Broker broker(BrokerConfig{.net_lock_dir = HostRunDir() + "/net-slots",
                             .cgroup_name = cgroup_name,
                             .uid_lock_dir = HostRunDir() + "/uid-slots",
                             .pool_dir = pool_dir,
                             .import_root = import_root});
  return Serve(sock.get(), &broker);
}

int Serve(int fd, Broker* broker) {
  for (;;) {
    auto d = ReceiveDatagram(fd);
    if (!d.ok() && d.status().code() == StatusCode::kUnavailable) return 0;  // the node is gone
    std::string reply;
    std::vector<UniqueFd> reply_fds;
    if (!d.ok()) {
      reply = EncodeError(d.status());
    } else if (auto req = DecodeRequest(d->bytes, d->fds.size()); !req.ok()) {
      reply = EncodeError(req.status());
    } else {
      reply = broker->Handle(*req, std::move(d->fds), &reply_fds);
    }
    std::vector<int> raw;
    for (const auto& f : reply_fds) raw.push_back(f.get());
    if (Status st = SendDatagram(fd, reply, raw); !st.ok()) {
      if (st.code() == StatusCode::kUnavailable) return 0;
      LogError("broker", st.ToString());
      return 1;
    }
  }
}

}  // namespace space::broker
