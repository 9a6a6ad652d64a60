#include "node/build_jail.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/datagram.h"
#include "common/helper_spawn.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "node/jail_spawn.h"
#include "runtime/ns/mounts.h"
#include "storage/template_builder.h"

extern char** environ;

namespace space::node {
namespace {

constexpr DatagramLimits kChannel = {64, 2, "build jail channel"};
// Bound from the host onto empty files; dev/console stays an empty file.
constexpr const char* kBoundDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};

// <run_dir>/build-<slot>: a plain directory of the node's (made here, never a link someone left).
Status EnsureMountPoint(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", path, errno);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("lstat", path, errno);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return Internal(path + " is not a directory of this node's");
  return Status::Ok();
}

// The jail's side, before the tool runs: an error message, or empty.
std::string EnterJail(int ctl_fd, const std::string& target, bool isolate_net, bool bind_devices) {
  Result<Datagram> d = ReceiveDatagram(ctl_fd, kChannel);
  if (!d.ok()) return "receiving the tree: " + d.status().ToString();
  // The tree, and the directory the step reads when it has one.
  if (d->fds.empty() || d->fds.size() > 2 || d->bytes != "tree") return "receiving the tree: unexpected message";
  // Its own mount namespace (the tree and the device binds vanish with it) and PID namespace
  // (proc mounts work, and the tool's processes end with it), and a network namespace with
  // nothing in it unless the step downloads.
  if (::unshare(CLONE_NEWNS | CLONE_NEWPID | (isolate_net ? CLONE_NEWNET : 0)) != 0) {
    return std::string("unshare: ") + std::strerror(errno);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("mount --make-rprivate /: ") + std::strerror(errno);
  }
  if (::syscall(SYS_move_mount, d->fds[0].get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    return "move_mount " + target + ": " + std::strerror(errno);
  }
  // The step starts in the source's clone, which is attached nowhere: its paths all lead below it.
  if (d->fds.size() == 2 && ::fchdir(d->fds[1].get()) != 0) return std::string("fchdir source: ") + std::strerror(errno);
  if (!bind_devices) return "";
  const std::string dev = target + "/dev";
  if (::mkdir(dev.c_str(), 0755) != 0 && errno != EEXIST) return "mkdir " + dev + ": " + std::strerror(errno);
  for (const char* name : kBoundDevices) {
    const std::string path = dev + "/" + name;
    UniqueFd f(::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!f) return "create " + path + ": " + std::strerror(errno);
    if (::mount(("/dev/" + std::string(name)).c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return "bind /dev/" + std::string(name) + ": " + std::strerror(errno);
    }
  }
  const std::string console = dev + "/console";
  UniqueFd c(::open(console.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!c) return "create " + console + ": " + std::strerror(errno);
  return "";
}

}  // namespace

Status RunInBuildJail(const BuildJailConfig& config, const std::string& tree_dir, const storage::ToolRun& run,
                      const storage::ProgressFn& on_line) {
  ASSIGN_OR_RETURN(UniqueFd tree, OpenFd(tree_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ASSIGN_OR_RETURN(int64_t slot, config.acquire_slot());
  SlotLease lease(slot, config.release_slot);
  const std::string target = config.run_dir + "/build-" + std::to_string(slot);
  RETURN_IF_ERROR(MakeDirs(config.run_dir, 0711));
  RETURN_IF_ERROR(EnsureMountPoint(target));
  const std::vector<std::string> argv = run.argv(target);
  if (argv.empty() || argv[0].empty() || (argv[0][0] != '/' && argv[0][0] != '@')) {
    return InvalidArgument("build jail: argv[0] must be an absolute path or an @step");
  }

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return ErrnoStatus("socketpair", "build jail", errno);
  UniqueFd ctl(sp[0]), ctl_child(sp[1]);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "build jail", errno);
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd exe(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  if (!exe) return ErrnoStatus("open", "/proc/self/exe", errno);

  HelperSpec spec;
  spec.args = {"space", "build-jail", "--ctl-fd", "3", "--out-fd", "4"};
  spec.fds = {{ctl_child.get(), 3}, {out_w.get(), 4}};
  if (run.stdin_fd >= 0) {
    spec.args.insert(spec.args.end(), {"--stdin-fd", "5"});
    spec.fds.push_back({run.stdin_fd, 5});
  }
  if (!run.network) spec.args.push_back("--isolate-net");
  if (run.bind_devices) spec.args.push_back("--bind-devices");
  spec.args.insert(spec.args.end(), {"--target", target, "--"});
  spec.args.insert(spec.args.end(), argv.begin(), argv.end());
  spec.exe_fd = exe.get();
  for (auto& e : ToolEnvironment({})) {
    if (e.rfind("PATH=", 0) != 0) spec.env.push_back(std::move(e));  // SpawnHelper sets PATH
  }
  // How tools learn that they run in a container that cannot mknod: debootstrap then skips
  // its mknod test of the target and keeps the device files the jail bound.
  spec.env.push_back("container=lxc");
  ASSIGN_OR_RETURN(JailChild child, SpawnJailChild(std::move(spec), lease.uid_base(), "build jail", config.privileged));
  ctl_child.reset();
  out_w.reset();
  // The idmapped tree, made as a sandbox's root is (runtime/ns/mounts.h): nosuid, nodev.
  Result<UniqueFd> mount = runtime::ns::IdmapTree(
      config.privileged, {.dir_fd = tree.get(), .pidfd = child.pidfd.get(), .pid = child.pid, .uid_base = lease.uid_base()});
  if (!mount.ok()) return child.GiveUp(mount.status());
  std::vector<int> fds = {mount->get()};
  // The source, read-only, seen through the same ids: an admin's directory with files of any
  // owner (below 65536) reads as it would for host root, and nothing of it can change.
  UniqueFd source;
  if (run.source_dir_fd >= 0) {
    Result<UniqueFd> clone = runtime::ns::IdmapTree(config.privileged, {.dir_fd = run.source_dir_fd,
                                                     .pidfd = child.pidfd.get(),
                                                     .pid = child.pid,
                                                     .uid_base = lease.uid_base(),
                                                     .read_only = true});
    if (!clone.ok()) return child.GiveUp(clone.status().Annotate("the step's source directory"));
    source = std::move(*clone);
    fds.push_back(source.get());
  }
  if (Status st = SendDatagram(ctl.get(), "tree", fds, kChannel); !st.ok()) return child.GiveUp(st);
  mount->reset();
  source.reset();
  return CollectOutput(out_r.get(), child.pid, argv[0] + " (build jail)", on_line);
}

int BuildJailMain(int argc, char** argv) {
  long ctl_fd = -1, out_fd = -1, in_fd = -1;
  bool isolate_net = false, bind_devices = false;
  std::string target;
  int i = 2;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    const std::string flag = argv[i];
    if (flag == "--isolate-net") isolate_net = true;
    else if (flag == "--bind-devices") bind_devices = true;
    else if (i + 1 >= argc) break;
    else if (flag == "--ctl-fd") ctl_fd = std::strtol(argv[++i], nullptr, 10);
    else if (flag == "--out-fd") out_fd = std::strtol(argv[++i], nullptr, 10);
    else if (flag == "--stdin-fd") in_fd = std::strtol(argv[++i], nullptr, 10);
    else if (flag == "--target") target = argv[++i];
    else break;
  }
  const bool fds_ok = ctl_fd >= 3 && out_fd >= 3 && ctl_fd != out_fd && (in_fd == -1 || (in_fd >= 3 && in_fd != ctl_fd && in_fd != out_fd));
  if (!fds_ok || target.empty() || target[0] != '/' || i >= argc || std::strcmp(argv[i], "--") != 0 || i + 1 >= argc ||
      (argv[i + 1][0] != '/' && argv[i + 1][0] != '@')) {
    std::fprintf(stderr, "space build-jail: started by the node only (--ctl-fd N --out-fd M [--stdin-fd K] [--isolate-net] "
                         "[--bind-devices] --target DIR -- PROGRAM|@STEP ...)\n");
    return 2;
  }
  char** tool = argv + i + 1;
  int in = in_fd >= 0 ? static_cast<int>(in_fd) : ::open("/dev/null", O_RDONLY);
  if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(static_cast<int>(out_fd), 1) < 0 || ::dup2(static_cast<int>(out_fd), 2) < 0) {
    return 125;
  }
  ::close(in);
  ::close(static_cast<int>(out_fd));
  std::string err = EnterJail(static_cast<int>(ctl_fd), target, isolate_net, bind_devices);
  ::close(static_cast<int>(ctl_fd));
  if (!err.empty()) {
    std::fprintf(stderr, "space build-jail: %s\n", err.c_str());
    return 125;
  }
  std::fflush(nullptr);
  pid_t pid = ::fork();  // pid 1 of the new PID namespace
  if (pid < 0) {
    std::fprintf(stderr, "space build-jail: fork: %s\n", std::strerror(errno));
    return 125;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // this process ends: the whole namespace ends
    if (tool[0][0] == '@') {
      std::vector<std::string> step(tool, argv + argc);
      Status st = storage::RunTreeStep(step, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
      if (!st.ok()) std::fprintf(stderr, "%s: %s\n", tool[0], st.ToString().c_str());
      std::fflush(nullptr);
      ::_exit(st.ok() ? 0 : 1);
    }
    ::execve(tool[0], tool, environ);
    std::fprintf(stderr, "space build-jail: exec %s: %s\n", tool[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) < 0) return 125;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace space::node
