#include "runtime/vm/vm_runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "common/clock.h"
#include "common/ids.h"
#include "common/kill_child.h"
#include "common/log.h"
#include "common/random.h"
#include "common/syscall.h"
#include "protocol/protocol.h"
#include "runtime/ns/cgroup.h"
#include "runtime/ns/userns.h"
#include "runtime/vm/guest_assets.h"
#include "runtime/vm/guest_ram.h"
#include "runtime/vm/kvm_probe.h"
#include "runtime/vm/open_beneath.h"
#include "runtime/vm/qemu_command.h"
#include "runtime/vm/qmp_client.h"
#include "runtime/vm/vmm_reaper.h"

namespace space::runtime {

using vm::OpenBeneath;

Result<UniqueFd> OpenVmStateDir(const std::string& rootfs, bool create, PrivilegedActs* acts) {
  // The root itself is the pool's path, trusted; what is inside it is not.
  ASSIGN_OR_RETURN(UniqueFd root, OpenFd(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const std::string what = rootfs + "/" + kVmStateDir;
  if (create && acts != nullptr) {
    RETURN_IF_ERROR(acts->MakeVmStateDir(rootfs));
    create = false;
  }
  // mkdirat never follows a final symlink: an existing one gives EEXIST, then openat2 refuses it.
  if (create && ::mkdirat(root.get(), kVmStateDir, 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdirat", what, errno);
  }
  return OpenBeneath(root.get(), kVmStateDir, O_RDONLY | O_DIRECTORY, what);
}

Result<UniqueFd> OpenVmStateFile(int state_dir, const std::string& name, int flags) {
  // O_PATH first: opening a device node or FIFO for real can block or act; only a regular
  // file is reopened with `flags`, through its own fd (no path to swap in between).
  ASSIGN_OR_RETURN(UniqueFd path_fd, OpenBeneath(state_dir, name, O_PATH, std::string(kVmStateDir) + "/" + name));
  struct stat sb;
  if (::fstat(path_fd.get(), &sb) != 0) return ErrnoStatus("fstat", name, errno);
  if (!S_ISREG(sb.st_mode)) return InvalidArgument(std::string(kVmStateDir) + "/" + name + " is not a regular file");
  const std::string self = "/proc/self/fd/" + std::to_string(path_fd.get());
  return OpenFd(self, flags | O_CLOEXEC);
}

Result<uint64_t> FileBytes(int fd, const std::string& what) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return ErrnoStatus("fstat", what, errno);
  return static_cast<uint64_t>(sb.st_size);
}

// Extends a disk image that is not yet `bytes` long (sparse: nothing is written). Never
// shrinks one: the filesystem in it could not follow.
Status GrowDiskFile(int disk_fd, uint64_t bytes) {
  ASSIGN_OR_RETURN(uint64_t now, FileBytes(disk_fd, kVmDiskName));
  if (bytes <= now) return Status::Ok();
  if (::ftruncate(disk_fd, static_cast<off_t>(bytes)) != 0) return ErrnoStatus("ftruncate", kVmDiskName, errno);
  return Status::Ok();
}

Result<bool> HasVmStateFile(const std::string& rootfs, const std::string& name) {
  auto dir = OpenVmStateDir(rootfs, false);
  if (!dir.ok()) {
    struct stat sb;
    // No state dir at all is the common case (a fresh root).
    if (::fstatat(AT_FDCWD, (rootfs + "/" + kVmStateDir).c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
      return false;
    }
    return dir.status();
  }
  struct stat sb;
  if (::fstatat(dir->get(), name.c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;
    return ErrnoStatus("fstatat", rootfs + "/" + kVmStateDir + "/" + name, errno);
  }
  if (!S_ISREG(sb.st_mode)) return InvalidArgument(rootfs + "/" + kVmStateDir + "/" + name + " is not a regular file");
  return true;
}

namespace {

// What QEMU itself needs beyond the guest's RAM (TCG's 64 MiB translation cache, device
// emulation, migration buffers): the cgroup limit is guest RAM plus this.
constexpr uint64_t kVmmOverheadBytes = 384ull << 20;
// QEMU's threads (vCPUs, I/O, RCU, migration) count against pids.max.
constexpr uint64_t kVmmPidsMax = 128;
// Free space in a new template disk image for the sandbox's own writes.
constexpr uint64_t kDiskSlackBytes = 256ull << 20;
constexpr int kQmpTimeoutMs = 20000;
constexpr int64_t kRestoreTimeoutMs = 180000;
constexpr int64_t kCheckpointTimeoutMs = 600000;
constexpr int kDestroyWaitMs = 5000;
constexpr int kTemplateBootTimeoutMs = 120000;
// How long the guest may take to say hello under KVM before the node decides KVM does not run
// it (a guest on KVM boots in about a second; one stuck in KVM's instruction emulator on a PVM
// host has not reached /init after 30 s).
constexpr int kKvmProofTimeoutMs = 20000;
// Where the launcher parks fds before dup2 onto the fixed numbers of qemu_command.h.
constexpr int kParkedFdBase = 100;

// `fd` moved to the lowest free number at or above kParkedFdBase (close-on-exec): out of the
// way of every dup2 the launcher makes (0-2, kChannelFd..kDiskReadOnlyFd, kReaperAliveFd).
Result<UniqueFd> ParkHigh(UniqueFd fd) {
  UniqueFd moved(::fcntl(fd.get(), F_DUPFD_CLOEXEC, kParkedFdBase));
  if (!moved) return ErrnoStatus("fcntl", "F_DUPFD_CLOEXEC", errno);
  return moved;
}

// What RandomGuestMac makes.
bool IsGuestMac(const std::string& mac) {
  if (mac.size() != 17 || mac.compare(0, 9, "52:54:00:") != 0) return false;
  for (size_t i = 9; i < mac.size(); ++i) {
    const char c = mac[i];
    if ((i - 9) % 3 == 2 ? c != ':' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status ValidateSpec(const SandboxSpec& spec) {
  RETURN_IF_ERROR(ValidateSandboxId(spec.id));
  if (spec.rootfs.empty() || spec.rootfs[0] != '/') return InvalidArgument("rootfs must be an absolute path");
  if (spec.guest_binary.empty() || spec.guest_binary[0] != '/') {
    return InvalidArgument("guest_binary must be an absolute path");
  }
  if (spec.hostname.empty() || spec.hostname.size() > 64) return InvalidArgument("hostname must be 1..64 bytes");
  for (char c : spec.hostname) {
    if (!(IsSandboxIdChar(c) || c == '.')) return InvalidArgument("hostname: only [A-Za-z0-9._-] allowed");
  }
  // The VMM must never run as host root.
  if (spec.uid_base == 0 || spec.uid_base % kUidRangeSize != 0) {
    return InvalidArgument("uid_base must be a non-zero multiple of 65536");
  }
  if (spec.limits.memory_bytes < (64u << 20) || spec.limits.memory_bytes > (64ull << 30)) {
    return InvalidArgument("a vm sandbox needs 64 MiB .. 64 GiB of memory");
  }
  if (!spec.guest_mac.empty() && !IsGuestMac(spec.guest_mac)) {
    return InvalidArgument("guest_mac must be 52:54:00:xx:xx:xx (lower-case hex)");
  }
  return Status::Ok();
}

bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

// The host's TSC rate in kHz, from /proc/cpuinfo's "cpu MHz" (the TSC rate on hosts with a
// constant TSC, which TCG hands to its guests as is); 0 when unknown.
int64_t HostTscKhz() {
  auto info = ReadFileToString("/proc/cpuinfo", 4 << 20);
  if (!info.ok()) return 0;
  size_t pos = info->find("cpu MHz");
  if (pos == std::string::npos) return 0;
  size_t colon = info->find(':', pos);
  if (colon == std::string::npos) return 0;
  double mhz = std::strtod(info->c_str() + colon + 1, nullptr);
  return mhz > 0 && mhz < 100000 ? static_cast<int64_t>(mhz * 1000) : 0;
}

// The last `n` bytes of a file, for errors that should say what QEMU printed.
std::string Tail(const std::string& path, size_t n) {
  auto s = ReadFileToString(path, 4 << 20);
  if (!s.ok()) return "";
  std::string t = s->size() > n ? s->substr(s->size() - n) : *s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

// What one running VMM is to the runtime.
struct Vm {
  pid_t pid = -1;
  UniqueFd pidfd;
  std::unique_ptr<vm::QmpClient> qmp;
  UniqueFd channel;  // node end of the guest channel, until Launch hands it over
  std::string rootfs;  // the sandbox's root: its .space-vm holds disk and checkpoints
};

// Everything the launcher child needs, prepared before fork: after fork it only makes
// async-signal-safe calls (the node is multithreaded).
struct ChildPlan {
  std::vector<std::string> argv_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  uid_t uid = 0;
  gid_t gid = 0;
  bool kvm_group = false;
  gid_t kvm_gid = 0;
  int go_fd = -1;      // read end: the parent has put us in our cgroup
  int null_fd = -1;      // /dev/null, the VMM's stdin
  // Host directories (existing, not symlinks) hidden under an empty tmpfs in the VMM's mount
  // namespace: other sandboxes' and users' scratch files and sockets.
  std::vector<const char*> masked_dirs;
  int report_fd = -1;  // write end: errno of a failed step, then _exit
  int fds[vm::kInheritedFds];  // parked; dup2'ed onto kChannelFd + i (-1: none)
  int exe_fd = -1;     // this program (O_PATH): pid 1 becomes `space vmm-reaper`
  int alive_fd = -1;   // read end of the node's alive pipe (vmm_reaper.h)
};

[[noreturn]] void ChildFail(const ChildPlan& p, int step) {
  int report[2] = {step, errno};
  (void)!::write(p.report_fd, report, sizeof report);
  ::_exit(127);
}

[[noreturn]] void RunChild(const ChildPlan& p) {
  // Our copy of the node's fd table holds the API listener and the parent ends of other
  // children's go pipes (and they ours): kept while waiting, a node killed now would leave
  // them and us waiting on each other for ever. The parent's write end goes with the rest.
  int keep[5 + vm::kInheritedFds] = {p.go_fd, p.report_fd, p.null_fd, p.exe_fd, p.alive_fd};
  for (int i = 0; i < vm::kInheritedFds; ++i) keep[5 + i] = p.fds[i];
  if (CloseFdsExcept(keep, sizeof keep / sizeof keep[0]) != 0) ChildFail(p, 12);
  char go = 0;
  if (::read(p.go_fd, &go, 1) != 1) ::_exit(126);
  if (::unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS) != 0) ChildFail(p, 1);
  // Mounts made by anyone later stay out of the VMM's view, and its own never propagate.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(p, 2);
  // A proc of our own PID namespace: the host's shows every host process (cmdlines, environ
  // of the VMM's own uid range) to a VMM that an escaped guest could control.
  constexpr unsigned long kNoDevExec = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("proc", "/proc", "proc", kNoDevExec, nullptr) != 0) ChildFail(p, 10);
  for (const char* dir : p.masked_dirs) {
    if (::mount("tmpfs", dir, "tmpfs", kNoDevExec, "size=64k,mode=0755") != 0) ChildFail(p, 11);
  }
  gid_t groups[1] = {p.kvm_gid};
  // The ids are the user namespace's, mapped to the same host ids (ns::IdMapShape::kOneId): the
  // capabilities that allow these calls are held in that namespace only. Raw syscalls: after
  // a raw clone glibc still believes the node's threads are ours, and its wrappers would try
  // to broadcast the credential change to them.
  if (::syscall(SYS_setgroups, p.kvm_group ? 1 : 0, groups) != 0) ChildFail(p, 3);
  if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) ChildFail(p, 4);
  if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) ChildFail(p, 5);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(p, 7);
  // QEMU runs as pid 2; this process, pid 1 of the VMM's PID namespace, becomes its reaper
  // (vmm_reaper.h), which ends it when the node dies. A raw fork: glibc's would run the
  // node's atfork handlers, whose threads do not exist here.
  const long qemu = ::syscall(SYS_clone, SIGCHLD, 0, nullptr, nullptr, 0);
  if (qemu < 0) ChildFail(p, 13);
  if (qemu > 0) {
    // Every fd of the plan sits at or above kParkedFdBase, so these dup2s clobber none.
    if (::dup2(p.null_fd, 0) < 0 || ::dup2(p.null_fd, 1) < 0 || ::dup2(p.null_fd, 2) < 0 ||
        ::dup2(p.alive_fd, vm::kReaperAliveFd) < 0) {
      ChildFail(p, 8);
    }
    // No allocation here (another node thread may have held the malloc lock at the clone).
    char pid_arg[24];
    char* d = pid_arg + sizeof pid_arg;
    *--d = '\0';
    for (long v = qemu; v > 0; v /= 10) *--d = static_cast<char>('0' + v % 10);
    static_assert(vm::kReaperAliveFd == 3);
    const char* argv[] = {"space", "vmm-reaper", "--alive-fd", "3", "--qemu-pid", d, nullptr};
    ::syscall(SYS_execveat, p.exe_fd, "", argv, p.envp.data(), AT_EMPTY_PATH);
    ChildFail(p, 14);
  }
  for (int i = 0; i < vm::kInheritedFds; ++i) {
    if (p.fds[i] >= 0 && ::dup2(p.fds[i], vm::kChannelFd + i) < 0) ChildFail(p, 8);
  }
  // QEMU's own messages (bad arguments, failed restores) go to the console log.
  if (::dup2(p.null_fd, 0) < 0 || ::dup2(vm::kConsoleFd, 1) < 0 || ::dup2(vm::kConsoleFd, 2) < 0) ChildFail(p, 8);
  // Nothing but 0..kTapFd survives exec, whatever another node thread opened
  // without O_CLOEXEC. Marked rather than closed: the report pipe must live until execve.
  if (::close_range(vm::kChannelFd + vm::kInheritedFds, ~0U, CLOSE_RANGE_CLOEXEC) != 0) ChildFail(p, 12);
  ::execve(p.argv[0], p.argv.data(), p.envp.data());
  ChildFail(p, 9);
}

const char* ChildStepName(int step) {
  switch (step) {
    case 1: return "unshare namespaces";
    case 2: return "make mounts private";
    case 3: return "setgroups";
    case 4: return "setresgid";
    case 5: return "setresuid";
    case 7: return "PR_SET_NO_NEW_PRIVS";
    case 8: return "dup2";
    case 9: return "execve";
    case 10: return "mount proc";
    case 11: return "mount tmpfs over a host directory";
    case 12: return "close_range";
    case 13: return "fork QEMU";
    case 14: return "execute the VMM reaper";
    default: return "?";
  }
}

Status ReapChild(pid_t pid, int pidfd, int timeout_ms) {
  pollfd pfd{pidfd, POLLIN, 0};
  int rc = RetryEintr([&] { return ::poll(&pfd, 1, timeout_ms); });
  if (rc < 0) return ErrnoStatus("poll", "pidfd " + std::to_string(pid), errno);
  if (rc == 0) return DeadlineExceeded("VMM pid " + std::to_string(pid) + " did not exit after SIGKILL");
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) < 0 && errno != ECHILD) {
    return ErrnoStatus("waitpid", std::to_string(pid), errno);
  }
  return Status::Ok();
}

class VmRuntimeImpl final : public Runtime {
 public:
  // `kvm_candidate`: KVM is to be tried (proven by the first launch); `kvm_gid`: the group the
  // VMM joins to open /dev/kvm (0: none).
  VmRuntimeImpl(RuntimeConfig config, std::string image_dir, ns::Cgroups cgroups, bool kvm_candidate, gid_t kvm_gid,
                int64_t host_tsc_khz, UniqueFd exe_fd, UniqueFd alive_r, UniqueFd alive_w)
      : exe_fd_(std::move(exe_fd)),
        alive_r_(std::move(alive_r)),
        alive_w_(std::move(alive_w)),
        config_(std::move(config)),
        image_dir_(std::move(image_dir)),
        cgroups_(std::move(cgroups)),
        kvm_gid_(kvm_gid),
        accel_(kvm_candidate ? AccelState::kKvmUnproven : AccelState::kTcg),
        host_tsc_khz_(host_tsc_khz) {}

  Result<LaunchedSandbox> Launch(const SandboxSpec& spec) override;
  Status Destroy(const std::string& id) override;
  Status Freeze(const std::string& id) override { return Qmp(id, "stop"); }
  Status Thaw(const std::string& id) override { return Qmp(id, "cont"); }
  Status UpdateLimits(const std::string& id, const Limits& limits) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    Limits l = limits;
    l.memory_bytes += kVmmOverheadBytes;  // guest RAM itself was fixed at boot
    l.pids_max = kVmmPidsMax;
    return cgroups_.UpdateLimits(id, l);
  }
  Result<ResourceUsage> Usage(const std::string& id) override {
    RETURN_IF_ERROR(ValidateSandboxId(id));
    return cgroups_.Usage(id);
  }
  Result<std::set<std::string>> ListPresent() override;
  Status Close() override { return cgroups_.RemoveParents(); }
  std::string cgroup_version() const override { return cgroups_.v2() ? "v2" : "v1"; }
  bool full_checkpoints() const override { return true; }
  std::string accelerator() override {
    std::lock_guard<std::mutex> lock(accel_mu_);
    return accel_ == AccelState::kKvm ? "kvm" : accel_ == AccelState::kTcg ? "tcg" : "kvm-unproven";
  }
  Status Checkpoint(const std::string& id, const std::string& state_path) override;

 private:
  std::string SandboxDir(const std::string& id) const { return config_.run_dir + "/" + id; }
  std::shared_ptr<Vm> Find(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(id);
    return it == vms_.end() ? nullptr : it->second;
  }
  Status Qmp(const std::string& id, const std::string& command) {
    auto vm = Find(id);
    if (!vm) return NotFound("vm sandbox " + id + " is not running here");
    return vm->qmp->Execute(command).status().Annotate("sandbox " + id);
  }
  // Kernel, initramfs and the template's disk image, prepared once (serialized).
  Status PrepareDisk(const SandboxSpec& spec, int state_dir, std::string* kernel, std::string* initrd);
  // Stops the VM and writes its memory and device state to kVmMemoryName in `state_dir`
  // (through kVmMemoryTmpName, renamed once QEMU reports the migration completed).
  Status SaveState(Vm& vm, const std::string& id, int state_dir);
  // Stops the VM and migrates its state into `out` (handed to QEMU, then closed here).
  Status MigrateTo(Vm& vm, const std::string& id, UniqueFd& out);
  // The template checkpoint for `spec`'s template and `plan`'s machine shape: a VM booted from
  // the template's image until spaced said hello, then saved (disk + memory). New sandboxes
  // restore a reflink of it instead of booting. Made on first use, in `spec`'s cgroup.
  Result<std::string> EnsureTemplateCheckpoint(const SandboxSpec& spec, const vm::QemuPlan& plan);
  // `state_dir` holds kVmDiskName and, for a restore, kVmMemoryName.
  // Removes a template checkpoint that failed to restore (renamed away first: concurrent
  // launches may be cloning it, and keep their open copies).
  void DropTemplateCheckpoint(const std::string& dir) {
    std::lock_guard<std::mutex> lock(template_mu_);
    const std::string stale = dir + ".stale-" + std::to_string(::getpid()) + "-" + std::to_string(MonoNowNs());
    if (::rename(dir.c_str(), stale.c_str()) != 0) return;  // already dropped by another launch
    ::unlink((stale + "/" + kVmDiskName).c_str());
    ::unlink((stale + "/" + kVmMemoryName).c_str());
    ::unlink((stale + "/" + kVmRamName).c_str());
    ::rmdir(stale.c_str());
  }
  Result<std::shared_ptr<Vm>> StartVmm(const SandboxSpec& spec, const vm::QemuPlan& plan, int state_dir);
  // Leaves the shared RAM (the RAM file) out of this VMM's migration streams from now on.
  static Status SetIgnoreShared(Vm& vm) {
    nlohmann::json cap = {{"capability", "x-ignore-shared"}, {"state", true}};
    nlohmann::json args = {{"capabilities", nlohmann::json::array({cap})}};
    return vm.qmp->Execute("migrate-set-capabilities", args).status().Annotate("x-ignore-shared");
  }
  // Has QEMU grow a restored guest's disk to `bytes` (block_resize: the file grows and the
  // guest is told its new capacity); a disk of that size or more is left alone.
  static Status GrowRestoredDisk(Vm& vm, int state_dir, uint64_t bytes) {
    ASSIGN_OR_RETURN(UniqueFd disk, OpenVmStateFile(state_dir, kVmDiskName, O_RDONLY));
    ASSIGN_OR_RETURN(uint64_t now, FileBytes(disk.get(), kVmDiskName));
    if (bytes <= now) return Status::Ok();
    nlohmann::json args = {{"device", "root"}, {"size", bytes}};
    return vm.qmp->Execute("block_resize", args).status().Annotate("block_resize to " + std::to_string(bytes));
  }
  // Waits up to `timeout_ms` for spaced's hello on a freshly booted VM's channel.
  static Status WaitHello(Vm& vm, int timeout_ms);
  void KillVmm(Vm& vm) {
    if (Status k = KillChild(config_.privileged, vm.pidfd.get()); !k.ok()) LogWarn("vm", k.ToString());
    (void)ReapChild(vm.pid, vm.pidfd.get(), kDestroyWaitMs);
  }
  // Whether this launch runs under KVM. The first launch while KVM is unproven boots a copy of
  // its disk (`state_dir`'s, or the template's image for a fresh root) under KVM, in its own
  // cgroup, and waits kKvmProofTimeoutMs for the guest: if QEMU refuses KVM or the guest does
  // not come up, the node uses TCG from then on and the log says why. Never an error.
  bool UseKvm(const SandboxSpec& spec, const vm::QemuPlan& plan, int state_dir, bool have_disk);
  Status ProveKvm(const SandboxSpec& spec, const vm::QemuPlan& plan, int state_dir, bool have_disk);

  // This program, for the VMM reaper, and the alive pipe (vmm_reaper.h): the write end lives
  // only here (close-on-exec), so it closes when the node dies and every reaper sees EOF.
  const UniqueFd exe_fd_, alive_r_, alive_w_;
  const RuntimeConfig config_;
  const std::string image_dir_;  // template images and checkpoints, on the pool's filesystem
  const ns::Cgroups cgroups_;
  const gid_t kvm_gid_;
  enum class AccelState { kKvmUnproven, kKvm, kTcg };
  std::mutex accel_mu_;         // held through the proof boot: launches wait for its verdict
  AccelState accel_;            // GUARDED_BY(accel_mu_)
  const int64_t host_tsc_khz_;  // 0 when unknown
  // New sandboxes restore a saved, booted VM of their template instead of booting one;
  // SPACE_VM_TEMPLATE_CHECKPOINTS=0 turns that off (cold boots, e.g. to measure them).
  const bool template_checkpoints_ = [] {
    const char* v = std::getenv("SPACE_VM_TEMPLATE_CHECKPOINTS");
    return v == nullptr || std::string(v) != "0";
  }();
  const bool console_log_ = [] {
    const char* v = std::getenv("SPACE_VM_CONSOLE_LOG");
    return v != nullptr && std::string(v) == "1";
  }();
  std::mutex assets_mu_;
  std::optional<vm::GuestKernel> kernel_;  // GUARDED_BY(assets_mu_)
  std::string initrd_;                     // GUARDED_BY(assets_mu_)
  std::string initrd_for_;                 // GUARDED_BY(assets_mu_): spaced's path:size:mtime
  std::mutex template_mu_;  // serializes template checkpoint creation
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Vm>> vms_;  // GUARDED_BY(mu_)
};

Status VmRuntimeImpl::PrepareDisk(const SandboxSpec& spec, int state_dir, std::string* kernel, std::string* initrd) {
  std::lock_guard<std::mutex> lock(assets_mu_);
  if (!kernel_) {
    ASSIGN_OR_RETURN(vm::GuestKernel k, vm::EnsureGuestKernel(config_.vm_cache_dir));
    kernel_ = std::move(k);
  }
  // Rebuilt when spaced changes (the key hashes its bytes); re-hashed only when its path,
  // size or mtime changed, since reading it costs ~0.3 s of every launch otherwise.
  struct stat sb;
  if (::stat(spec.guest_binary.c_str(), &sb) != 0) return ErrnoStatus("stat", spec.guest_binary, errno);
  const std::string initrd_for = spec.guest_binary + ":" + std::to_string(sb.st_size) + ":" +
                                 std::to_string(sb.st_mtim.tv_sec) + "." + std::to_string(sb.st_mtim.tv_nsec);
  if (initrd_.empty() || initrd_for != initrd_for_ || !Exists(initrd_)) {
    ASSIGN_OR_RETURN(initrd_, vm::EnsureInitramfs(config_.vm_cache_dir, *kernel_, spec.guest_binary));
    initrd_for_ = initrd_for;
  }
  *kernel = kernel_->vmlinuz;
  *initrd = initrd_;
  ASSIGN_OR_RETURN(bool have_disk, HasVmStateFile(spec.rootfs, kVmDiskName));
  if (have_disk) return Status::Ok();  // restored from a snapshot, or booted before
  if (template_checkpoints_) return Status::Ok();  // Launch clones the checkpoint
  // A fresh root is a clone of its template: the image is built from it once per digest,
  // before the state dir exists in it.
  ASSIGN_OR_RETURN(std::string image,
                   vm::EnsureTemplateDisk(image_dir_, spec.template_digest, spec.rootfs, kDiskSlackBytes,
                                          config_.tree_runner));
  return vm::CloneFileAt(image, state_dir, kVmDiskName);
}

Result<LaunchedSandbox> VmRuntimeImpl::Launch(const SandboxSpec& spec) {
  LaunchedSandbox out;
  int64_t t0 = MonoNowNs();
  auto mark = [&](const char* name) {
    int64_t now = MonoNowNs();
    out.steps_us.emplace_back(name, (now - t0) / 1000);
    t0 = now;
  };
  RETURN_IF_ERROR(ValidateSpec(spec));
  vm::QemuPlan plan;
  plan.hostname = spec.hostname;
  plan.memory_mb = static_cast<int>(spec.limits.memory_bytes >> 20);
  plan.cpus = std::max(1, static_cast<int>(spec.limits.cpus + 0.5));
  plan.restore = !spec.restore_state.empty();
  plan.tsc_khz = host_tsc_khz_;
  plan.console_log = console_log_;
  plan.tap = spec.net_tap_fd >= 0;
  plan.mac = spec.guest_mac.empty() ? RandomGuestMac() : spec.guest_mac;
  const std::string state_dir = spec.rootfs + "/" + kVmStateDir;
  // The only state a vm sandbox restores is the one its root carries: StartVmm opens it
  // beneath the root, never by a path from elsewhere.
  if (!spec.restore_state.empty() && spec.restore_state != state_dir + "/" + kVmMemoryName) {
    return InvalidArgument("sandbox " + spec.id + ": restore state must be " + state_dir + "/" + kVmMemoryName);
  }
  ASSIGN_OR_RETURN(UniqueFd sd, OpenVmStateDir(spec.rootfs, true, config_.privileged));
  // A checkpoint the node died in the middle of writing.
  (void)::unlinkat(sd.get(), kVmMemoryTmpName, 0);
  ASSIGN_OR_RETURN(bool have_disk, HasVmStateFile(spec.rootfs, kVmDiskName));
  const bool fresh = spec.restore_state.empty() && !have_disk;
  if (plan.restore) {
    // Saved with its RAM in memory.ram (device state only in memory.state), or by a node that
    // kept RAM in the stream.
    ASSIGN_OR_RETURN(plan.restore_ram_file, HasVmStateFile(spec.rootfs, kVmRamName));
  }
  RETURN_IF_ERROR(
      PrepareDisk(spec, sd.get(), &plan.kernel, &plan.initrd).Annotate("sandbox " + spec.id + ": guest assets"));
  mark("vm_assets");
  std::string restore_state = spec.restore_state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (vms_.count(spec.id)) return Conflict("sandbox " + spec.id + " is already running");
  }
  Limits limits = spec.limits;
  limits.memory_bytes += kVmmOverheadBytes;
  limits.pids_max = kVmmPidsMax;
  RETURN_IF_ERROR(cgroups_.Create(spec.id, limits).Annotate("sandbox " + spec.id));
  const std::string dir = SandboxDir(spec.id);
  auto undo = [&] {
    (void)cgroups_.KillAll(spec.id);
    (void)cgroups_.Remove(spec.id);
    ::unlink((dir + "/console.log").c_str());
    ::rmdir(dir.c_str());
  };
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    Status st = ErrnoStatus("mkdir", dir, errno);
    undo();
    return st;
  }
  mark("vm_cgroup");
  plan.kvm = UseKvm(spec, plan, sd.get(), have_disk);
  mark(plan.kvm ? "vm_accel_kvm" : "vm_accel_tcg");
  std::string template_ckpt;  // set when this launch restores the template checkpoint
  auto cold_disk = [&]() -> Status {
    std::string image;
    {
      std::lock_guard<std::mutex> assets(assets_mu_);
      ASSIGN_OR_RETURN(image, vm::EnsureTemplateDisk(image_dir_, spec.template_digest, spec.rootfs,
                                                     kDiskSlackBytes, config_.tree_runner));
    }
    return vm::CloneFileAt(image, sd.get(), kVmDiskName);
  };
  if (fresh && template_checkpoints_) {
    // A new sandbox restores its template's checkpoint (a reflink of disk and memory)
    // instead of booting a kernel.
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(std::string ckpt, EnsureTemplateCheckpoint(spec, plan));
      template_ckpt = ckpt;
      mark("vm_template_checkpoint");
      RETURN_IF_ERROR(vm::CloneFileAt(ckpt + "/" + kVmDiskName, sd.get(), kVmDiskName));
      restore_state = state_dir + "/" + kVmMemoryName;
      RETURN_IF_ERROR(vm::CloneFileAt(ckpt + "/" + kVmMemoryName, sd.get(), kVmMemoryName));
      // The RAM: a reflink, whatever the guest's size; pages are read as the guest touches them.
      RETURN_IF_ERROR(vm::CloneFileAt(ckpt + "/" + kVmRamName, sd.get(), kVmRamName));
      plan.restore = true;
      plan.restore_ram_file = true;
      mark("vm_clone_checkpoint");
      return Status::Ok();
    }();
    if (!st.ok()) {
      // The fast path failed (the template VM would not boot or save): boot this one cold.
      LogWarn("vm", "sandbox " + spec.id + ": template checkpoint unavailable, booting: " + st.ToString());
      ::unlinkat(sd.get(), kVmDiskName, 0);
      if (restore_state != spec.restore_state) ::unlinkat(sd.get(), kVmMemoryName, 0);
      restore_state = spec.restore_state;
      plan.restore = false;
      plan.restore_ram_file = false;
      template_ckpt.clear();
      Status cold = cold_disk();
      if (!cold.ok()) {
        undo();
        return cold.Annotate("sandbox " + spec.id + ": disk");
      }
    }
  }
  SandboxSpec launch_spec = spec;
  launch_spec.restore_state = restore_state;
  auto vm = StartVmm(launch_spec, plan, sd.get());
  // A state QEMU cannot load may end it before its QMP answers (StartVmm fails) or leave it
  // in a failed state: both are a failed restore.
  Status st = vm.status();
  if (vm.ok()) mark(plan.restore ? "vmm_start" : "vmm_boot_start");
  if (vm.ok() && plan.restore) {
    // The state loads while QEMU runs its main loop; the guest stays stopped after it (it
    // was stopped when saved) until `cont`.
    const int64_t deadline = MonoNowNs() + kRestoreTimeoutMs * 1000000;
    for (;;) {
      auto status = (*vm)->qmp->Execute("query-status");
      if (!status.ok()) {
        st = status.status();
        break;
      }
      std::string s = status->is_object() && status->contains("status") && (*status)["status"].is_string()
                          ? (*status)["status"].get<std::string>()
                          : "";
      if (s != "inmigrate") {
        if (s != "paused" && s != "running") st = Internal("restore ended in state " + s);
        break;
      }
      if (MonoNowNs() > deadline) {
        st = DeadlineExceeded("restore did not finish in time");
        break;
      }
      ::usleep(10000);
    }
    // RAM loaded from the stream is in the RAM file now: later checkpoints leave it out.
    if (st.ok() && !plan.restore_ram_file) st = SetIgnoreShared(**vm);
    // A guest restored from a snapshot taken with a smaller disk than this create asks for:
    // QEMU grows the file and tells the guest (a virtio config interrupt, seen once it runs);
    // the node then has spaced grow the filesystem (GuestClient::Resume). A template
    // checkpoint was made at the asked size already (its key has it).
    if (st.ok()) st = GrowRestoredDisk(**vm, sd.get(), spec.disk_bytes);
    if (st.ok()) st = (*vm)->qmp->Execute("cont").status();
    if (!st.ok()) {
      std::string log = Tail(dir + "/console.log", 400);
      if (Status k = KillChild(config_.privileged, (*vm)->pidfd.get()); !k.ok()) LogWarn("vm", k.ToString());
      (void)ReapChild((*vm)->pid, (*vm)->pidfd.get(), kDestroyWaitMs);
      st = st.Annotate("restore" + (log.empty() ? "" : " (VMM said: " + log + ")"));
    }
  }
  if (!st.ok() && !template_ckpt.empty()) {
    // The template checkpoint no longer loads (QEMU or the host changed under it): drop it,
    // so the next create makes a new one, and boot this sandbox cold.
    LogWarn("vm", "template checkpoint " + template_ckpt + " does not restore, removing it: " + st.ToString());
    DropTemplateCheckpoint(template_ckpt);
    ::unlinkat(sd.get(), kVmDiskName, 0);
    ::unlinkat(sd.get(), kVmMemoryName, 0);
    plan.restore = false;
    plan.restore_ram_file = false;
    launch_spec.restore_state = spec.restore_state;
    st = cold_disk();
    if (st.ok()) {
      vm = StartVmm(launch_spec, plan, sd.get());
      st = vm.status();
    }
    if (st.ok()) mark("vmm_boot_start");
  }
  if (!st.ok()) {
    undo();
    return st.Annotate("sandbox " + spec.id);
  }
  if (plan.restore) {
    mark("vm_restore");
    out.restored = true;
    // Loaded: a template checkpoint's copy goes (a snapshot's is the caller's to remove).
    if (restore_state != spec.restore_state) ::unlinkat(sd.get(), kVmMemoryName, 0);
  }
  (*vm)->rootfs = spec.rootfs;
  // What the guest's filesystem is grown to; unknown (0: no grow) only if the file went away.
  if (auto disk = OpenVmStateFile(sd.get(), kVmDiskName, O_RDONLY); disk.ok()) {
    if (auto bytes = FileBytes(disk->get(), kVmDiskName); bytes.ok()) out.disk_bytes = *bytes;
  }
  out.pid = (*vm)->pid;
  out.channel = std::move((*vm)->channel);
  out.pidfd.reset(::fcntl((*vm)->pidfd.get(), F_DUPFD_CLOEXEC, 0));
  {
    std::lock_guard<std::mutex> lock(mu_);
    vms_[spec.id] = *vm;
  }
  return out;
}

Result<std::shared_ptr<Vm>> VmRuntimeImpl::StartVmm(const SandboxSpec& spec, const vm::QemuPlan& plan,
                                                    int state_dir) {
  const std::string dir = SandboxDir(spec.id);
  int channel[2], qmp[2], go[2], report[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0) return ErrnoStatus("socketpair", "channel", errno);
  UniqueFd channel_node(channel[0]), channel_vmm(channel[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) != 0) return ErrnoStatus("socketpair", "qmp", errno);
  UniqueFd qmp_node(qmp[0]), qmp_vmm(qmp[1]);
  if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "go", errno);
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "report", errno);
  UniqueFd report_r(report[0]), report_w(report[1]);
  ASSIGN_OR_RETURN(UniqueFd disk_fd, OpenVmStateFile(state_dir, kVmDiskName, O_RDWR));
  // A booting guest sees its disk's full size from the start and grows its filesystem to it.
  if (!plan.restore) RETURN_IF_ERROR(GrowDiskFile(disk_fd.get(), spec.disk_bytes));
  ASSIGN_OR_RETURN(UniqueFd console_fd, OpenFd(dir + "/console.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ASSIGN_OR_RETURN(UniqueFd disk_ro_fd, OpenVmStateFile(state_dir, kVmDiskName, O_RDONLY));
  UniqueFd incoming_fd;
  if (plan.restore) {
    ASSIGN_OR_RETURN(incoming_fd, OpenVmStateFile(state_dir, kVmMemoryName, O_RDONLY));
  }
  // The saved RAM a restore maps, or a new empty file (a boot; a restore whose stream carries RAM).
  ASSIGN_OR_RETURN(UniqueFd ram_fd, vm::OpenGuestRam(state_dir, kVmRamName, static_cast<uint64_t>(plan.memory_mb) << 20,
                                                     plan.restore && plan.restore_ram_file, spec.uid_base));
  // Parked above every fixed number, so the child's dup2s never clobber one another.
  UniqueFd parked[vm::kInheritedFds];
  const int sources[vm::kInheritedFds] = {channel_vmm.get(),
                                          qmp_vmm.get(),
                                          disk_fd.get(),
                                          console_fd.get(),
                                          incoming_fd.valid() ? incoming_fd.get() : -1,
                                          disk_ro_fd.get(),
                                          plan.tap ? spec.net_tap_fd : -1,
                                          ram_fd.get()};
  static_assert(vm::kRamFd == vm::kChannelFd + vm::kInheritedFds - 1);
  ChildPlan p;
  for (int i = 0; i < vm::kInheritedFds; ++i) {
    p.fds[i] = -1;
    if (sources[i] < 0) continue;
    parked[i].reset(::fcntl(sources[i], F_DUPFD_CLOEXEC, kParkedFdBase));
    if (!parked[i]) return ErrnoStatus("fcntl", "F_DUPFD_CLOEXEC", errno);
    p.fds[i] = parked[i].get();
  }
  p.argv_storage = vm::QemuArgs(plan);
  for (auto& a : p.argv_storage) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  static char kPath[] = "PATH=/usr/bin:/bin";
  static char kHome[] = "HOME=/";
  p.envp = {kPath, kHome, nullptr};
  p.uid = spec.uid_base;
  p.gid = spec.uid_base;
  p.kvm_group = plan.kvm && kvm_gid_ != 0;  // 0: /dev/kvm is open to all
  p.kvm_gid = kvm_gid_;
  p.exe_fd = exe_fd_.get();
  p.alive_fd = alive_r_.get();
  // The launcher's own fds must survive its dup2s: parked high too.
  ASSIGN_OR_RETURN(go_r, ParkHigh(std::move(go_r)));
  ASSIGN_OR_RETURN(report_w, ParkHigh(std::move(report_w)));
  ASSIGN_OR_RETURN(UniqueFd null_low, OpenFd("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSIGN_OR_RETURN(UniqueFd null_fd, ParkHigh(std::move(null_low)));
  p.go_fd = go_r.get();
  p.report_fd = report_w.get();
  p.null_fd = null_fd.get();
  static constexpr const char* kMaskedDirs[] = {"/run",     "/tmp", "/var/tmp", "/var/run", "/home",
                                                "/dev/shm", "/mnt", "/media",   "/srv"};
  for (const char* d : kMaskedDirs) {
    struct stat sb;
    // QEMU opens the kernel and initramfs by path (SPACE_VM_CACHE_DIR may put them in /tmp).
    const std::string prefix = std::string(d) + "/";
    if (plan.kernel.rfind(prefix, 0) == 0 || plan.initrd.rfind(prefix, 0) == 0) continue;
    if (::lstat(d, &sb) == 0 && S_ISDIR(sb.st_mode)) p.masked_dirs.push_back(d);
  }
  // The VMM lives in a PID namespace of its own (its reaper pid 1, QEMU pid 2): it sees no
  // other process on the host. And in a user namespace that maps only its own host ids (and
  // /dev/kvm's group): the child becomes them by the capabilities it holds there, so the node
  // needs no CAP_SETUID for it.
  clone_args ca{};
  ca.flags = CLONE_NEWPID | CLONE_NEWUSER;
  ca.exit_signal = SIGCHLD;
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone3, &ca, sizeof ca));
  if (pid < 0) return ErrnoStatus("clone3", "CLONE_NEWPID qemu", errno);
  if (pid == 0) RunChild(p);
  auto vm = std::make_shared<Vm>();
  vm->pid = pid;
  vm->pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  report_w.reset();
  go_r.reset();
  // The VMM's ends live on only in the VMM: a QEMU that dies must read as EOF here at once.
  for (auto& fd : parked) fd.reset();
  channel_vmm.reset();
  qmp_vmm.reset();
  disk_fd.reset();
  disk_ro_fd.reset();
  console_fd.reset();
  incoming_fd.reset();
  ram_fd.reset();
  auto kill_child = [&] {
    // Waited for only once killed: a VMM out of reach (no broker) dies with the node.
    if (Status st = KillChildPid(config_.privileged, pid); !st.ok()) {
      LogWarn("vm", st.ToString());
      return;
    }
    int status;
    (void)RetryEintr([&] { return ::waitpid(pid, &status, 0); });
  };
  if (!vm->pidfd) {
    Status st = ErrnoStatus("pidfd_open", std::to_string(pid), errno);
    kill_child();
    return st;
  }
  // Its ids before it needs them: the child waits for go before it makes any namespace or mount.
  if (Status st = ns::MapIds(config_.privileged, {.pidfd = vm->pidfd.get(), .pid = pid, .uid_base = spec.uid_base,
                              .shape = ns::IdMapShape::kOneId, .kvm_gid = p.kvm_group ? p.kvm_gid : 0});
      !st.ok()) {
    kill_child();
    return st;
  }
  // Into the sandbox's cgroup before it runs anything.
  if (Status st = cgroups_.Attach(spec.id, pid, vm->pidfd.get()); !st.ok()) {
    kill_child();
    return st;
  }
  if (Status st = WriteAll(go_w.get(), "g", 1); !st.ok()) {
    kill_child();
    return st;
  }
  go_w.reset();
  int rep[2] = {0, 0};
  ssize_t n = RetryEintr([&] { return ::read(report_r.get(), rep, sizeof rep); });
  if (n == static_cast<ssize_t>(sizeof rep)) {
    kill_child();
    return ErrnoStatus(ChildStepName(rep[0]), "qemu launcher", rep[1]);
  }
  vm->qmp = std::make_unique<vm::QmpClient>(std::move(qmp_node));
  if (Status st = vm->qmp->Handshake(kQmpTimeoutMs); !st.ok()) {
    kill_child();
    std::string log = Tail(dir + "/console.log", 400);
    return st.Annotate("qemu did not start" + (log.empty() ? "" : " (it said: " + log + ")"));
  }
  // Snapshots write at disk speed, not at QEMU's default migration rate limit.
  (void)vm->qmp->Execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}});
  // A stream is loaded with the capabilities it was saved with: one that carries RAM (saved
  // without x-ignore-shared) gets it once loaded (Launch).
  Status st = !plan.restore || plan.restore_ram_file ? SetIgnoreShared(*vm) : Status::Ok();
  if (st.ok() && plan.restore) {
    st = vm->qmp->Execute("migrate-incoming", {{"uri", "fd:" + std::to_string(vm::kIncomingFd)}}).status();
  }
  if (!st.ok()) {
    kill_child();
    return st.Annotate("qemu " + spec.id);
  }
  vm->channel = std::move(channel_node);
  return vm;
}

Result<std::string> VmRuntimeImpl::EnsureTemplateCheckpoint(const SandboxSpec& spec, const vm::QemuPlan& plan) {
  std::lock_guard<std::mutex> lock(template_mu_);
  std::string key;
  for (char c : spec.template_digest) key += IsSandboxIdChar(c) ? c : '-';
  const std::string initrd_name = plan.initrd.substr(plan.initrd.rfind('/') + 1);
  // "-n1": the device set with the NIC (a checkpoint restores only into the same devices).
  key += "-" + std::to_string(plan.memory_mb) + "m-" + std::to_string(plan.cpus) + "c-" +
         initrd_name.substr(0, initrd_name.find('.')) + "-n1";
  // "-r1": RAM in its own file (kVmRamName), the state device state only.
  key += "-r1";
  // The disk's size: the template VM boots with its disk grown to the size the create asked
  // for, so a restore needs no resize (growing ext4 from a template's few hundred MiB to 2 GiB
  // in the restored guest took 160 ms under TCG, as long as the rest of the restore).
  key += "-d" + std::to_string(spec.disk_bytes >> 20) + "m";
  // A KVM guest's CPU (-cpu host) is not TCG's (-cpu max): a checkpoint restores under the
  // accelerator it was made with.
  key += plan.kvm ? "-kvm" : "-tcg";
  // A QEMU upgrade can change the migration stream: a checkpoint belongs to one binary.
  struct stat qemu;
  if (::stat(plan.qemu_binary.c_str(), &qemu) != 0) return ErrnoStatus("stat", plan.qemu_binary, errno);
  key += "-q" + std::to_string(qemu.st_size) + "-" + std::to_string(qemu.st_mtim.tv_sec);
  const std::string dir = image_dir_ + "/checkpoints/" + key;
  if (Exists(dir + "/" + kVmMemoryName) && Exists(dir + "/" + kVmRamName)) return dir;
  std::string image;
  {
    std::lock_guard<std::mutex> assets(assets_mu_);
    ASSIGN_OR_RETURN(image, vm::EnsureTemplateDisk(image_dir_, spec.template_digest, spec.rootfs,
                                                   kDiskSlackBytes, config_.tree_runner));
  }
  RETURN_IF_ERROR(MakeDirs(image_dir_ + "/checkpoints", 0700));
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid()) + "-" + spec.id;
  RETURN_IF_ERROR(MakeDirs(tmp, 0700));
  auto cleanup = [&] {
    ::unlink((tmp + "/" + kVmDiskName).c_str());
    ::unlink((tmp + "/" + kVmMemoryName).c_str());
    ::unlink((tmp + "/" + kVmMemoryTmpName).c_str());
    ::unlink((tmp + "/" + kVmRamName).c_str());
    ::rmdir(tmp.c_str());
  };
  Status st = [&]() -> Status {
    RETURN_IF_ERROR(vm::CloneFile(image, tmp + "/" + kVmDiskName));
    vm::QemuPlan boot = plan;
    boot.restore = false;
    boot.tap = false;            // the template VM has no network; the NIC device is the same
    boot.hostname = "space-vm";  // every sandbox restored from it starts with this name
    SandboxSpec boot_spec = spec;
    boot_spec.restore_state.clear();
    ASSIGN_OR_RETURN(UniqueFd tmp_fd, OpenFd(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSIGN_OR_RETURN(std::shared_ptr<Vm> vm, StartVmm(boot_spec, boot, tmp_fd.get()));
    Status saved = [&]() -> Status {
      // Booted once spaced says hello; its channel has nothing else pending then.
      RETURN_IF_ERROR(WaitHello(*vm, kTemplateBootTimeoutMs).Annotate("template VM"));
      return SaveState(*vm, spec.id, tmp_fd.get());
    }();
    KillVmm(*vm);
    RETURN_IF_ERROR(saved);
    if (::rename(tmp.c_str(), dir.c_str()) != 0) return ErrnoStatus("rename", dir, errno);
    return Status::Ok();
  }();
  if (!st.ok()) {
    cleanup();
    std::string log = Tail(SandboxDir(spec.id) + "/console.log", 400);
    return st.Annotate(log.empty() ? "" : "(VMM said: " + log + ")");
  }
  LogInfo("vm", "template checkpoint " + key + " saved");
  return dir;
}

Status VmRuntimeImpl::WaitHello(Vm& vm, int timeout_ms) {
  pollfd p{vm.channel.get(), POLLIN, 0};
  int rc = RetryEintr([&] { return ::poll(&p, 1, timeout_ms); });
  if (rc < 0) return ErrnoStatus("poll", "guest channel", errno);
  if (rc == 0) return DeadlineExceeded("the guest did not say hello in " + std::to_string(timeout_ms / 1000) + " s");
  ASSIGN_OR_RETURN(guest::Frame hello, guest::ReadFrame(vm.channel.get()));
  if (hello.type != guest::FrameType::kHello) return Unavailable("the guest spoke before saying hello");
  return Status::Ok();
}

bool VmRuntimeImpl::UseKvm(const SandboxSpec& spec, const vm::QemuPlan& plan, int state_dir, bool have_disk) {
  std::lock_guard<std::mutex> lock(accel_mu_);
  if (accel_ != AccelState::kKvmUnproven) return accel_ == AccelState::kKvm;
  const int64_t t0 = MonoNowNs();
  Status proof = ProveKvm(spec, plan, state_dir, have_disk);
  const std::string ms = std::to_string((MonoNowNs() - t0) / 1000000);
  if (proof.ok()) {
    accel_ = AccelState::kKvm;
    LogInfo("vm", "accelerator: KVM (a guest booted under it in " + ms + " ms)");
  } else {
    accel_ = AccelState::kTcg;
    LogWarn("vm",
            "accelerator: TCG (emulation) from now on: KVM did not run the guest (" + ms + " ms): " + proof.ToString());
  }
  return accel_ == AccelState::kKvm;
}

Status VmRuntimeImpl::ProveKvm(const SandboxSpec& spec, const vm::QemuPlan& plan, int state_dir, bool have_disk) {
  // A copy of a disk this launch may use: its own (a restore, a reboot), never written by the
  // proof, or the template's image (a fresh root; built from that root only then).
  UniqueFd disk;
  std::string what;
  if (have_disk) {
    ASSIGN_OR_RETURN(disk, OpenVmStateFile(state_dir, kVmDiskName, O_RDONLY));
    what = std::string(kVmStateDir) + "/" + kVmDiskName;
  } else {
    std::lock_guard<std::mutex> assets(assets_mu_);
    ASSIGN_OR_RETURN(what, vm::EnsureTemplateDisk(image_dir_, spec.template_digest, spec.rootfs, kDiskSlackBytes,
                                                  config_.tree_runner));
    ASSIGN_OR_RETURN(disk, OpenFd(what, O_RDONLY | O_CLOEXEC));
  }
  const std::string tmp = image_dir_ + "/kvm-proof-" + std::to_string(::getpid()) + "-" + spec.id;
  RETURN_IF_ERROR(MakeDirs(tmp, 0700));
  ASSIGN_OR_RETURN(UniqueFd tmp_fd, OpenFd(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Status st = [&]() -> Status {
    RETURN_IF_ERROR(vm::CloneFdAt(disk.get(), what, tmp_fd.get(), kVmDiskName));
    vm::QemuPlan boot = plan;
    boot.kvm = true;
    boot.restore = false;
    boot.tap = false;
    SandboxSpec boot_spec = spec;
    boot_spec.restore_state.clear();
    ASSIGN_OR_RETURN(std::shared_ptr<Vm> vm, StartVmm(boot_spec, boot, tmp_fd.get()));
    Status hello = WaitHello(*vm, kKvmProofTimeoutMs);
    KillVmm(*vm);
    return hello;
  }();
  ::unlinkat(tmp_fd.get(), kVmDiskName, 0);
  ::unlinkat(tmp_fd.get(), kVmRamName, 0);
  ::rmdir(tmp.c_str());
  return st;
}

Status VmRuntimeImpl::Destroy(const std::string& id) {
  RETURN_IF_ERROR(ValidateSandboxId(id));
  std::shared_ptr<Vm> vm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(id);
    if (it != vms_.end()) {
      vm = it->second;
      vms_.erase(it);
    }
  }
  if (vm) {
    if (Status k = KillChild(config_.privileged, vm->pidfd.get()); !k.ok()) LogWarn("vm", k.ToString());
    if (Status st = ReapChild(vm->pid, vm->pidfd.get(), kDestroyWaitMs); !st.ok()) LogWarn("vm", st.ToString());
  }
  // A VMM of an earlier node run is not our child: its cgroup finds it.
  RETURN_IF_ERROR(cgroups_.KillAll(id));
  RETURN_IF_ERROR(cgroups_.Remove(id));
  const std::string dir = SandboxDir(id);
  ::unlink((dir + "/console.log").c_str());
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("rmdir", dir, errno);
  return Status::Ok();
}

Result<std::set<std::string>> VmRuntimeImpl::ListPresent() {
  ASSIGN_OR_RETURN(std::set<std::string> ids, cgroups_.List());
  if (DIR* d = ::opendir(config_.run_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.' && ValidateSandboxId(e->d_name).ok()) ids.insert(e->d_name);
    }
    ::closedir(d);
  }
  return ids;
}

Status VmRuntimeImpl::Checkpoint(const std::string& id, const std::string& state_path) {
  auto vm = Find(id);
  if (!vm) return NotFound("vm sandbox " + id + " is not running here");
  if (state_path != vm->rootfs + "/" + kVmStateDir + "/" + kVmMemoryName) {
    return InvalidArgument("checkpoint " + id + ": state must go to its root's " + kVmStateDir + "/" + kVmMemoryName);
  }
  ASSIGN_OR_RETURN(UniqueFd sd, OpenVmStateDir(vm->rootfs, false));
  return SaveState(*vm, id, sd.get());
}

Status VmRuntimeImpl::SaveState(Vm& vm_ref, const std::string& id, int state_dir) {
  // Written beside the final name and renamed once QEMU says "completed": a checkpoint cut
  // short (node crash, failed migration) never leaves a truncated memory.state that a later
  // boot would try to restore.
  (void)::unlinkat(state_dir, kVmMemoryTmpName, 0);
  // 0644 like the disk (guest_assets.h CloneFileAt): the tree jail reads it to export it.
  UniqueFd out(::openat(state_dir, kVmMemoryTmpName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out) return ErrnoStatus("openat", std::string(kVmStateDir) + "/" + kVmMemoryTmpName, errno);
  Status st = MigrateTo(vm_ref, id, out);
  if (st.ok() && ::renameat(state_dir, kVmMemoryTmpName, state_dir, kVmMemoryName) != 0) {
    st = ErrnoStatus("renameat", std::string(kVmStateDir) + "/" + kVmMemoryName, errno);
  }
  if (!st.ok()) (void)::unlinkat(state_dir, kVmMemoryTmpName, 0);
  return st;
}

Status VmRuntimeImpl::MigrateTo(Vm& vm_ref, const std::string& id, UniqueFd& out) {
  Vm* vm = &vm_ref;
  // Stopped first: one pass over memory, and the disk is quiet from here on.
  RETURN_IF_ERROR(vm->qmp->Execute("stop").status().Annotate("checkpoint " + id));
  RETURN_IF_ERROR(vm->qmp->SendFd("checkpoint", out.get()).Annotate("checkpoint " + id));
  out.reset();  // QEMU holds its own copy now
  // QEMU 7.2 has no file: migration URI; fd: takes any fd, a regular file included.
  RETURN_IF_ERROR(vm->qmp->Execute("migrate", {{"uri", "fd:checkpoint"}}).status().Annotate("checkpoint " + id));
  const int64_t deadline = MonoNowNs() + kCheckpointTimeoutMs * 1000000;
  for (;;) {
    ASSIGN_OR_RETURN(nlohmann::json m, vm->qmp->Execute("query-migrate"));
    std::string s = m.is_object() && m.contains("status") && m["status"].is_string() ? m["status"].get<std::string>() : "";
    if (s == "completed") return Status::Ok();
    if (s == "failed" || s == "cancelled") {
      std::string why = m.contains("error-desc") && m["error-desc"].is_string() ? m["error-desc"].get<std::string>() : s;
      return Internal("checkpoint " + id + ": migration " + why);
    }
    if (MonoNowNs() > deadline) {
      (void)vm->qmp->Execute("migrate_cancel");
      return DeadlineExceeded("checkpoint " + id + ": migration did not finish in time");
    }
    ::usleep(10000);
  }
}

}  // namespace

Result<std::unique_ptr<Runtime>> CreateVmRuntime(const RuntimeConfig& config, const std::string& image_dir) {
  if (config.run_dir.empty() || config.vm_cache_dir.empty() || image_dir.empty()) {
    return InvalidArgument("vm runtime: run_dir, vm_cache_dir and image_dir are required");
  }
  RETURN_IF_ERROR(MakeDirs(config.run_dir, 0711));
  RETURN_IF_ERROR(MakeDirs(image_dir, 0700));
  ASSIGN_OR_RETURN(ns::Cgroups cgroups, ns::Cgroups::Probe(config.cgroup_root, config.cgroup_name, config.cgroup_acts));
  ASSIGN_OR_RETURN(vm::Accel accel, vm::ParseAccel(config.vm_accel));
  // KVM is tried when the VMM could open the device (it joins /dev/kvm's group to), or when
  // the operator says so; the first launch proves it (UseKvm). TCG otherwise.
  Result<gid_t> kvm = accel == vm::Accel::kTcg ? Unavailable("--accel tcg") : vm::KvmGroupForVmm();
  bool kvm_candidate = kvm.ok();
  if (kvm.ok()) {
    LogInfo("vm", "accelerator: KVM, to be proven by the first vm launch");
  } else if (accel == vm::Accel::kKvm) {
    kvm_candidate = true;
    LogWarn("vm", "--accel kvm: trying KVM though " + kvm.status().message() + "; the first vm launch proves it");
  } else if (kvm.status().code() != StatusCode::kNotFound || accel == vm::Accel::kTcg) {
    LogInfo("vm", "accelerator: TCG (emulation): " + kvm.status().message());
  }
  ASSIGN_OR_RETURN(UniqueFd exe_low, OpenFd("/proc/self/exe", O_PATH | O_CLOEXEC));
  ASSIGN_OR_RETURN(UniqueFd exe, ParkHigh(std::move(exe_low)));
  int alive[2];
  if (::pipe2(alive, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "VMM alive pipe", errno);
  UniqueFd alive_r_low(alive[0]), alive_w_low(alive[1]);
  ASSIGN_OR_RETURN(UniqueFd alive_r, ParkHigh(std::move(alive_r_low)));
  ASSIGN_OR_RETURN(UniqueFd alive_w, ParkHigh(std::move(alive_w_low)));
  return std::unique_ptr<Runtime>(new VmRuntimeImpl(config, image_dir, std::move(cgroups), kvm_candidate,
                                                    kvm.ok() ? *kvm : 0, HostTscKhz(), std::move(exe),
                                                    std::move(alive_r), std::move(alive_w)));
}

}  // namespace space::runtime
