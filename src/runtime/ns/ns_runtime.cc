// NsRuntimeImpl: the `ns` runtime (runtime.h). Launch runs the named steps of steps.h in
// order; the per-subsystem work lives in userns/mounts/net/cgroup/seccomp/launcher.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <mutex>

#include "common/clock.h"
#include "common/ids.h"
#include "common/kill_child.h"
#include "common/log.h"
#include "common/syscall.h"
#include "runtime/ns/cgroup.h"
#include "runtime/ns/child_plan.h"
#include "runtime/ns/launcher.h"
#include "runtime/ns/mounts.h"
#include "runtime/ns/seccomp.h"
#include "runtime/ns/steps.h"
#include "runtime/ns/userns.h"
#include "runtime/runtime.h"

namespace space::runtime {
namespace {

using ns::Step;

constexpr size_t kMaxHostnameLen = 64;
constexpr int kDestroyWaitMs = 5000;

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

Status ValidateLimits(const Limits& l) {
  if (!std::isfinite(l.cpus) || l.cpus <= 0 || l.cpus > 4096)
    return InvalidArgument("limits.cpus out of range");
  if (l.memory_bytes < (4u << 20)) return InvalidArgument("limits.memory_bytes below 4 MiB");
  if (l.pids_max < 1) return InvalidArgument("limits.pids_max must be >= 1");
  return Status::Ok();
}

Status ValidateSpec(const SandboxSpec& spec) {
  RETURN_IF_ERROR(ValidateSandboxId(spec.id));
  if (spec.rootfs.empty() || spec.rootfs[0] != '/' || HasNul(spec.rootfs)) {
    return InvalidArgument("rootfs must be an absolute path");
  }
  if (spec.guest_binary.empty() || spec.guest_binary[0] != '/' || HasNul(spec.guest_binary)) {
    return InvalidArgument("guest_binary must be an absolute path");
  }
  if (spec.hostname.empty() || spec.hostname.size() > kMaxHostnameLen) {
    return InvalidArgument("hostname must be 1..64 bytes");
  }
  for (char c : spec.hostname) {
    if (!(IsSandboxIdChar(c) || c == '.')) return InvalidArgument("hostname: only [A-Za-z0-9._-] allowed");
  }
  // uid_base 0 would make sandbox root host root; ranges are whole blocks.
  if (spec.uid_base == 0 || spec.uid_base % kUidRangeSize != 0 ||
      spec.uid_base > UINT32_MAX - kUidRangeSize) {
    return InvalidArgument("uid_base must be a non-zero multiple of 65536 below 2^32-65536");
  }
  RETURN_IF_ERROR(ValidateLimits(spec.limits));
  if (spec.volumes.size() > ns::kMaxVolumeMounts) return InvalidArgument("at most 8 volumes per sandbox");
  for (const VolumeMountSpec& v : spec.volumes) {
    if (v.host_dir.empty() || v.host_dir[0] != '/' || HasNul(v.host_dir)) {
      return InvalidArgument("a volume's host_dir must be an absolute path");
    }
    RETURN_IF_ERROR(ValidateVolumePath(v.path));
  }
  for (const std::string& kv : spec.guest_env) {
    if (kv.find('=') == std::string::npos || HasNul(kv))
      return InvalidArgument("guest_env entries are K=V");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateVolumePath(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.size() > ns::kMaxVolumePathLen || HasNul(path)) {
    return InvalidArgument("volume path '" + path.substr(0, 200) + "' must be absolute, not /, at most 1024 bytes");
  }
  size_t start = 1;
  bool first = true;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string c = path.substr(start, slash - start);
    if (c.empty() || c == "." || c == "..") {
      return InvalidArgument("volume path '" + path.substr(0, 200) + "' has an empty, '.' or '..' component");
    }
    if (first && (c == "proc" || c == "sys" || c == "dev")) {
      return InvalidArgument("volume path '" + path.substr(0, 200) + "' is under /" + c + ", which the runtime mounts");
    }
    first = false;
    start = slash + 1;
  }
  return Status::Ok();
}

namespace {

// rmdir that treats "already gone" as success.
Status RemoveDir(const std::string& path) {
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("rmdir", path, errno);
  return Status::Ok();
}

// Waits up to `timeout_ms` for the process behind `pidfd` to exit, then reaps it.
Status ReapChild(pid_t pid, int pidfd, int timeout_ms) {
  pollfd pfd{pidfd, POLLIN, 0};
  int rc = RetryEintr([&] { return ::poll(&pfd, 1, timeout_ms); });
  if (rc < 0) return ErrnoStatus("poll", "pidfd " + std::to_string(pid), errno);
  if (rc == 0)
    return DeadlineExceeded("pid " + std::to_string(pid) + " did not exit after SIGKILL");
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) < 0 && errno != ECHILD) {
    return ErrnoStatus("waitpid", std::to_string(pid), errno);
  }
  return Status::Ok();
}

// A failed kill shows in the reap that follows (which waits a bounded time).
void KillByPidfd(PrivilegedActs* acts, int pidfd) {
  if (Status st = KillChild(acts, pidfd); !st.ok()) LogWarn("ns", st.ToString());
}

class NsRuntimeImpl final : public NsRuntime {
 public:
  NsRuntimeImpl(RuntimeConfig config, ns::Cgroups cgroups, std::vector<sock_filter> seccomp)
      : config_(std::move(config)), cgroups_(std::move(cgroups)), seccomp_(std::move(seccomp)) {}

  Result<LaunchedSandbox> Launch(const SandboxSpec& spec) override;
  Status Destroy(const std::string& id) override;
  Status Freeze(const std::string& id) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    return cgroups_.Freeze(id);
  }
  Status Thaw(const std::string& id) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    return cgroups_.Thaw(id);
  }
  Status UpdateLimits(const std::string& id, const Limits& limits) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    RETURN_IF_ERROR(ValidateLimits(limits));
    return cgroups_.UpdateLimits(id, limits);
  }
  Result<ResourceUsage> Usage(const std::string& id) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    return cgroups_.Usage(id);
  }
  Result<std::set<std::string>> ListPresent() override;
  Status Close() override { return cgroups_.RemoveParents(); }
  std::string cgroup_version() const override { return cgroups_.v2() ? "v2" : "v1"; }

 private:
  struct Running {
    pid_t pid = -1;
    UniqueFd pidfd;
  };

  std::string SandboxDir(const std::string& id) const { return config_.run_dir + "/" + id; }
  Status ChildFailure(const SandboxSpec& spec, const ns::PlanStorage& storage,
                      const ns::ChildReport& r) const;

  const RuntimeConfig config_;
  const ns::Cgroups cgroups_;
  const std::vector<sock_filter> seccomp_;  // immutable: children point into it
  std::mutex mu_;
  std::map<std::string, Running> running_;  // GUARDED_BY(mu_): our children, until Destroy
};

// Undoes a partial launch when Launch returns early: kills the child, removes its
// cgroups and scratch dirs.
class LaunchUndo {
 public:
  LaunchUndo(const ns::Cgroups& cgroups, PrivilegedActs* acts, std::string id, std::string dir)
      : cgroups_(cgroups), acts_(acts), id_(std::move(id)), dir_(std::move(dir)) {}
  ~LaunchUndo() {
    if (committed_) return;
    if (child_pidfd_.valid()) {
      KillByPidfd(acts_, child_pidfd_.get());
      (void)ReapChild(child_pid_, child_pidfd_.get(), kDestroyWaitMs);
    }
    if (cgroup_made_) (void)cgroups_.Remove(id_);
    if (dirs_made_) {
      (void)RemoveDir(dir_ + "/root");
      (void)RemoveDir(dir_);
    }
  }
  void set_dirs_made() { dirs_made_ = true; }
  void set_cgroup_made() { cgroup_made_ = true; }
  // Keeps its own copy of the pidfd: Launch's copy may be closed before this object runs.
  void set_child(pid_t pid, int pidfd) {
    child_pid_ = pid;
    child_pidfd_.reset(::fcntl(pidfd, F_DUPFD_CLOEXEC, 0));
  }
  void Commit() { committed_ = true; }

 private:
  const ns::Cgroups& cgroups_;
  PrivilegedActs* const acts_;
  std::string id_, dir_;
  bool committed_ = false, dirs_made_ = false, cgroup_made_ = false;
  pid_t child_pid_ = -1;
  UniqueFd child_pidfd_;
};

Status NsRuntimeImpl::ChildFailure(const SandboxSpec& spec, const ns::PlanStorage& storage,
                                   const ns::ChildReport& r) const {
  const Step step = static_cast<Step>(r.step);
  std::string arg;
  if (r.op != ns::ChildReport::kNoOp && r.op < storage.ops.size()) {
    // Op targets are relative to the sandbox root.
    arg = std::string("/") + storage.ops[r.op].target;
  } else {
    switch (step) {
      case Step::kUnshareCgroupns: arg = "CLONE_NEWCGROUP"; break;
      case Step::kMakePrivate: arg = "/"; break;
      case Step::kAttachRoot: arg = SandboxDir(spec.id) + "/root"; break;
      case Step::kSetHostname: arg = spec.hostname; break;
      case Step::kLoopbackUp: arg = "lo"; break;
      case Step::kNoNewPrivs: arg = "PR_SET_NO_NEW_PRIVS"; break;
      case Step::kExec: arg = spec.guest_binary; break;
      default: break;
    }
  }
  return ErrnoStatus(ns::CallName(static_cast<ns::Call>(r.call)), arg, r.err)
      .Annotate("sandbox " + spec.id + ": step " + ns::StepName(step));
}

Result<LaunchedSandbox> NsRuntimeImpl::Launch(const SandboxSpec& spec) {
  LaunchedSandbox out;
  // Runs one parent step: times it and names it in any error.
  auto run = [&](Step step, auto&& fn) -> Status {
    const int64_t t0 = MonoNowNs();
    Status st = fn();
    if (!st.ok()) return st.Annotate("sandbox " + spec.id + ": step " + ns::StepName(step));
    out.steps_us.emplace_back(ns::StepName(step), (MonoNowNs() - t0) / 1000);
    return Status::Ok();
  };

  RETURN_IF_ERROR(run(Step::kValidateSpec, [&] { return ValidateSpec(spec); }));

  const std::string dir = SandboxDir(spec.id);
  LaunchUndo undo(cgroups_, config_.privileged, spec.id, dir);
  RETURN_IF_ERROR(run(Step::kPrepareDirs, [&]() -> Status {
    if (::mkdir(dir.c_str(), 0711) != 0) {
      if (errno == EEXIST)
        return Conflict("sandbox " + spec.id + " is already present (" + dir + ")");
      return ErrnoStatus("mkdir", dir, errno);
    }
    undo.set_dirs_made();
    if (::mkdir((dir + "/root").c_str(), 0755) != 0)
      return ErrnoStatus("mkdir", dir + "/root", errno);
    return Status::Ok();
  }));

  UniqueFd rootfs_fd;
  std::vector<const char*> child_makes;
  RETURN_IF_ERROR(run(Step::kMountPoints, [&]() -> Status {
    ASSIGN_OR_RETURN(rootfs_fd, ns::OpenRootfs(spec.rootfs));
    return ns::EnsureMountPoints(rootfs_fd.get(), &child_makes);
  }));

  // spaced is not inside the template: the child execs it through this fd.
  UniqueFd guest_fd;
  RETURN_IF_ERROR(run(Step::kOpenGuest, [&]() -> Status {
    ASSIGN_OR_RETURN(guest_fd, OpenFd(spec.guest_binary, O_RDONLY));
    return Status::Ok();
  }));

  UniqueFd channel_node, channel_child, sync_parent, sync_child;
  RETURN_IF_ERROR(run(Step::kChannel, [&]() -> Status {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return ErrnoStatus("socketpair", "guest channel", errno);
    }
    channel_node.reset(sv[0]);
    channel_child.reset(sv[1]);
    // SEQPACKET: report batches keep their boundaries; EOF when exec closes the child's end.
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return ErrnoStatus("socketpair", "sync", errno);
    }
    sync_parent.reset(sv[0]);
    sync_child.reset(sv[1]);
    return Status::Ok();
  }));

  RETURN_IF_ERROR(run(Step::kCgroupCreate, [&]() -> Status {
    RETURN_IF_ERROR(cgroups_.Create(spec.id, spec.limits));
    undo.set_cgroup_made();
    return Status::Ok();
  }));

  ns::PlanStorage storage;
  ns::ChildPlan plan;
  RETURN_IF_ERROR(run(Step::kBuildPlan, [&]() -> Status {
    ns::AppendMountOps({.dev_shm_size = std::to_string(spec.limits.memory_bytes)}, child_makes, &storage);
    // Volumes last: one may be mounted under /tmp, which the ops above mount first.
    for (size_t i = 0; i < spec.volumes.size(); ++i) {
      storage.ops.push_back({.step = Step::kMountVolumes,
                             .kind = ns::ChildOp::kAttachVolume,
                             .target = storage.Intern(spec.volumes[i].path.substr(1)),
                             .fd_index = static_cast<int>(i)});
    }
    plan.n_volumes = spec.volumes.size();
    plan.sync_fd = sync_child.get();
    plan.channel_fd = channel_child.get();
    plan.guest_fd = guest_fd.get();
    plan.root_dir = storage.Intern(dir + "/root");
    plan.hostname = storage.Intern(spec.hostname);
    plan.hostname_len = spec.hostname.size();
    plan.ops = storage.ops.data();
    plan.n_ops = storage.ops.size();
    plan.seccomp.len = static_cast<unsigned short>(seccomp_.size());
    plan.seccomp.filter = const_cast<sock_filter*>(seccomp_.data());
    storage.argv.push_back(const_cast<char*>(storage.Intern("spaced")));
    storage.argv.push_back(nullptr);
    for (const std::string& kv : spec.guest_env)
      storage.envp.push_back(const_cast<char*>(storage.Intern(kv)));
    storage.envp.push_back(nullptr);
    plan.argv = storage.argv.data();
    plan.envp = storage.envp.data();
    return Status::Ok();
  }));

  ns::Spawned child;
  RETURN_IF_ERROR(run(Step::kClone, [&]() -> Status {
    ASSIGN_OR_RETURN(child, ns::CloneChild(plan));
    undo.set_child(child.pid, child.pidfd.get());
    // The child has its copies; ours would keep the sockets open past its exec.
    channel_child.reset();
    sync_child.reset();
    return Status::Ok();
  }));

  RETURN_IF_ERROR(run(Step::kIdMaps, [&] {
    return ns::MapIds(config_.privileged, {.pidfd = child.pidfd.get(), .pid = child.pid, .uid_base = spec.uid_base,
                       .shape = ns::IdMapShape::kSandbox});
  }));
  RETURN_IF_ERROR(run(Step::kCgroupAttach, [&] { return cgroups_.Attach(spec.id, child.pid, child.pidfd.get()); }));

  UniqueFd root_mount;
  RETURN_IF_ERROR(run(Step::kIdmapRoot, [&]() -> Status {
    ASSIGN_OR_RETURN(root_mount, ns::IdmapTree(config_.privileged, {.dir_fd = rootfs_fd.get(), .pidfd = child.pidfd.get(),
                                                .pid = child.pid, .uid_base = spec.uid_base}));
    return Status::Ok();
  }));

  // Each volume as its own idmapped clone, read-only ones with MOUNT_ATTR_RDONLY (their trees
  // are read-only subvolumes as well: node/volumes.h).
  std::vector<UniqueFd> volume_mounts;
  RETURN_IF_ERROR(run(Step::kIdmapVolumes, [&]() -> Status {
    for (const VolumeMountSpec& v : spec.volumes) {
      ASSIGN_OR_RETURN(UniqueFd dir, OpenFd(v.host_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW));
      ASSIGN_OR_RETURN(UniqueFd mount, ns::IdmapTree(config_.privileged, {.dir_fd = dir.get(),
                                                                          .pidfd = child.pidfd.get(),
                                                                          .pid = child.pid,
                                                                          .uid_base = spec.uid_base,
                                                                          .read_only = v.read_only}));
      volume_mounts.push_back(std::move(mount));
    }
    return Status::Ok();
  }));

  RETURN_IF_ERROR(run(Step::kSendGo, [&]() -> Status {
    std::vector<int> fds;
    for (const UniqueFd& m : volume_mounts) fds.push_back(m.get());
    RETURN_IF_ERROR(ns::SendGo(sync_parent.get(), root_mount.get(), fds));
    root_mount.reset();
    volume_mounts.clear();
    return Status::Ok();
  }));

  // Not run(): a child failure already names its own step.
  ns::ChildOutcome outcome;
  {
    const int64_t t0 = MonoNowNs();
    Result<ns::ChildOutcome> got =
        ns::CollectReports(sync_parent.get(), config_.child_setup_timeout_ms * 1'000'000);
    if (!got.ok()) return got.status().Annotate("sandbox " + spec.id + ": step child_setup");
    outcome = std::move(got).value();
    for (const ns::ChildReport& r : outcome.reports) {
      if (r.kind == ns::ChildReport::kNote) {
        LogWarn("runtime", ChildFailure(spec, storage, r).message() + "; using the fallback");
      }
    }
    if (outcome.failed()) return ChildFailure(spec, storage, outcome.reports.back());
    if (!outcome.reached_exec()) {
      // EOF without a report: the child died (a signal, a crash) before exec.
      return Internal("sandbox " + spec.id + ": step child_setup: child exited before exec");
    }
    out.steps_us.emplace_back(ns::StepName(Step::kChildSetup), (MonoNowNs() - t0) / 1000);
  }
  // Per-step times from the child (after "go"), then exec as seen from here.
  for (const ns::ChildReport& r : outcome.reports) {
    if (r.kind == ns::ChildReport::kDone) {
      out.steps_us.emplace_back(ns::StepName(static_cast<Step>(r.step)), r.duration_ns / 1000);
    }
  }
  out.steps_us.emplace_back(ns::StepName(Step::kExec),
                            (outcome.eof_ns - outcome.last_report_ns) / 1000);

  out.pid = child.pid;
  int dup = ::fcntl(child.pidfd.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoStatus("fcntl", "F_DUPFD_CLOEXEC pidfd", errno);
  out.pidfd = UniqueFd(dup);
  out.channel = std::move(channel_node);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[spec.id] = Running{child.pid, std::move(child.pidfd)};
  }
  undo.Commit();
  return out;
}

Status NsRuntimeImpl::Destroy(const std::string& id) {
  RETURN_IF_ERROR(ValidateSandboxId(id));
  Running running;
  bool ours = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(id);
    if (it != running_.end()) {
      running = std::move(it->second);
      running_.erase(it);
      ours = true;
    }
  }
  // Killing init tears down its whole pid namespace, and every sandbox process is in
  // it; reaping init first leaves the cgroup sweep below with nothing to do. The sweep is
  // all there is for a sandbox started by an earlier node process.
  if (ours) {
    KillByPidfd(config_.privileged, running.pidfd.get());
    // A frozen (v1) task acts on SIGKILL only once thawed; the kill is already pending,
    // so the sandbox runs no further code. Not found / not frozen: nothing to do.
    (void)cgroups_.Thaw(id);
    Status st = ReapChild(running.pid, running.pidfd.get(), kDestroyWaitMs);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      running_[id] = std::move(running);  // keep it so a retry can reap it
      return st.Annotate("destroy " + id);
    }
  }
  Status first = cgroups_.KillAll(id);
  for (Status st :
       {cgroups_.Remove(id), RemoveDir(SandboxDir(id) + "/root"), RemoveDir(SandboxDir(id))}) {
    if (first.ok() && !st.ok()) first = st;
  }
  return first.Annotate("destroy " + id);
}

Result<std::set<std::string>> NsRuntimeImpl::ListPresent() {
  ASSIGN_OR_RETURN(std::set<std::string> ids, cgroups_.List());
  DIR* d = ::opendir(config_.run_dir.c_str());
  if (d == nullptr) return ErrnoStatus("opendir", config_.run_dir, errno);
  while (dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') ids.insert(e->d_name);
  }
  ::closedir(d);
  return ids;
}

}  // namespace

Result<std::unique_ptr<NsRuntime>> NsRuntime::Create(const RuntimeConfig& config) {
  if (config.run_dir.empty() || config.run_dir[0] != '/')
    return InvalidArgument("run_dir must be absolute");
  RETURN_IF_ERROR(ValidateSandboxId(config.cgroup_name).Annotate("cgroup_name"));
  RETURN_IF_ERROR(MakeDirs(config.run_dir, 0711));
  ASSIGN_OR_RETURN(ns::Cgroups cgroups, ns::Cgroups::Probe(config.cgroup_root, config.cgroup_name, config.cgroup_acts));
  ASSIGN_OR_RETURN(std::vector<sock_filter> seccomp, ns::BuildSeccompFilter());
  return std::unique_ptr<NsRuntime>(
      new NsRuntimeImpl(config, std::move(cgroups), std::move(seccomp)));
}

}  // namespace space::runtime
