#include "guest/vm_init.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/syscall.h"
#include "guest/vm_disk.h"
#include "guest/vm_net.h"
#include "protocol/protocol.h"

namespace space::guest {
namespace {

// Where the runtime's initramfs puts things (runtime/vm/initramfs.cc writes the same names).
constexpr char kModulesDir[] = "/modules";
constexpr char kNewRoot[] = "/newroot";
constexpr char kRootDevice[] = "/dev/vda";
// The virtserialport's name on the QEMU command line (runtime/vm/qemu_command.cc).
constexpr char kPortName[] = "space.0";
constexpr int64_t kDeviceWaitMs = 15000;

Status MountFs(const char* source, const char* target, const char* type, unsigned long flags, const char* data) {
  ::mkdir(target, 0755);
  if (::mount(source, target, type, flags, data) != 0) return ErrnoStatus("mount", target, errno);
  return Status::Ok();
}

// The kernel keeps `module.param=value` words of its command line for modprobe to pass on
// (it applies them itself only to built-in code): virtio_mmio.device=... is how QEMU's
// microvm describes its virtio-mmio devices when ACPI is off.
std::string ModuleParams(const std::string& module) {
  auto cmdline = ReadFileToString("/proc/cmdline", 4096);
  if (!cmdline.ok()) return "";
  std::string out;
  const std::string prefix = module + ".";
  size_t pos = 0;
  while (pos < cmdline->size()) {
    size_t end = cmdline->find_first_of(" \n", pos);
    if (end == std::string::npos) end = cmdline->size();
    std::string word = cmdline->substr(pos, end - pos);
    if (word.compare(0, prefix.size(), prefix) == 0) out += (out.empty() ? "" : " ") + word.substr(prefix.size());
    pos = end + 1;
  }
  return out;
}

// Loads every module in kModulesDir in name order (the runtime prefixes them 1-, 2-, ...:
// virtio_ring before virtio before virtio_mmio before the device drivers).
Status LoadModules() {
  DIR* d = ::opendir(kModulesDir);
  if (d == nullptr) return ErrnoStatus("opendir", kModulesDir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 3 && n.compare(n.size() - 3, 3, ".ko") == 0) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string path = std::string(kModulesDir) + "/" + n;
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
    // "3-virtio_mmio.ko" is module virtio_mmio.
    const std::string module = n.substr(n.find('-') + 1, n.size() - 3 - (n.find('-') + 1));
    const std::string params = ModuleParams(module);
    if (::syscall(SYS_finit_module, fd.get(), params.c_str(), 0) != 0 && errno != EEXIST) {
      return ErrnoStatus("finit_module", path, errno);
    }
  }
  return Status::Ok();
}

// The /dev node of the virtio-serial port named kPortName (devtmpfs makes /dev/vportNpM).
Result<std::string> FindPort() {
  DIR* d = ::opendir("/sys/class/virtio-ports");
  if (d == nullptr) return ErrnoStatus("opendir", "/sys/class/virtio-ports", errno);
  std::string found;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string dev = e->d_name;
    auto name = ReadFileToString("/sys/class/virtio-ports/" + dev + "/name");
    if (name.ok() && name->substr(0, name->find('\n')) == kPortName) found = "/dev/" + dev;
  }
  ::closedir(d);
  if (found.empty()) return NotFound("no virtio-serial port named " + std::string(kPortName));
  return found;
}

// Devices appear asynchronously after their driver loads.
template <typename F>
auto WaitFor(const char* what, F probe) -> decltype(probe()) {
  const int64_t deadline = MonoNowNs() + kDeviceWaitMs * 1000000;
  for (;;) {
    auto r = probe();
    if (r.ok() || MonoNowNs() > deadline) return r;
    ::usleep(5000);
  }
  (void)what;
}

// Moves the new root over / (the initramfs stays underneath: it cannot be unmounted, and
// holds only spaced and a few modules) and enters it.
Status SwitchRoot() {
  for (const char* m : {"/dev", "/proc", "/sys"}) {
    std::string target = std::string(kNewRoot) + m;
    ::mkdir(target.c_str(), 0755);
    if (::mount(m, target.c_str(), nullptr, MS_MOVE, nullptr) != 0) return ErrnoStatus("mount --move", m, errno);
  }
  if (::chdir(kNewRoot) != 0) return ErrnoStatus("chdir", kNewRoot, errno);
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return ErrnoStatus("mount --move", kNewRoot, errno);
  if (::chroot(".") != 0) return ErrnoStatus("chroot", kNewRoot, errno);
  if (::chdir("/") != 0) return ErrnoStatus("chdir", "/", errno);
  return Status::Ok();
}

}  // namespace

bool StartedInVm() {
  const char* v = std::getenv("SPACE_VM");
  return ::getpid() == 1 && v != nullptr && std::string(v) == "1";
}

Status BootFromInitramfs() {
  RETURN_IF_ERROR(MountFs("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"));
  RETURN_IF_ERROR(MountFs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
  RETURN_IF_ERROR(MountFs("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
  RETURN_IF_ERROR(LoadModules().Annotate("load modules"));
  RETURN_IF_ERROR(WaitFor("root disk", [] {
                    struct stat st;
                    return ::stat(kRootDevice, &st) == 0 ? Status::Ok() : ErrnoStatus("stat", kRootDevice, errno);
                  }).Annotate("wait for root disk"));
  RETURN_IF_ERROR(MountFs(kRootDevice, kNewRoot, "ext4", 0, nullptr));
  RETURN_IF_ERROR(SwitchRoot());
  // The node sized the disk for this sandbox before boot; the filesystem, made to fit its
  // template, grows to it. A guest that cannot grow still boots, with the space it has.
  if (Status st = GrowRootFs(kRootDevice, "/", 0, 0); !st.ok()) LogWarn("spaced", "root disk: " + st.ToString());
  ::mkdir("/dev/pts", 0755);
  ::mkdir("/dev/shm", 01777);
  (void)::mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  (void)::symlink("pts/ptmx", "/dev/ptmx");
  // /dev/shm and /tmp live in guest memory: what a process keeps there survives a full
  // checkpoint exactly as its heap does.
  ::mkdir("/tmp", 01777);
  (void)::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  (void)::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  if (const char* h = std::getenv("SPACE_HOSTNAME")) (void)::sethostname(h, std::string(h).size());
  // Loopback as in any Linux system; eth0 waits for the node's kNetConfig.
  RETURN_IF_ERROR(BringUpLoopback());
  ASSIGN_OR_RETURN(std::string port, WaitFor("channel port", FindPort));
  ASSIGN_OR_RETURN(UniqueFd fd, WaitFor("channel port", [&] { return OpenFd(port, O_RDWR | O_CLOEXEC); }));
  // The port reads EOF until the host end is connected (the kernel reports POLLHUP then).
  const int64_t deadline = MonoNowNs() + kDeviceWaitMs * 1000000;
  for (;;) {
    pollfd p{fd.get(), POLLOUT, 0};
    (void)::poll(&p, 1, 50);
    if (!(p.revents & POLLHUP)) break;
    if (MonoNowNs() > deadline) return Unavailable("the host never connected to " + port);
  }
  // The port may already have landed on kChannelFd (fds 0-2 are the console).
  if (fd.get() != kChannelFd && ::dup2(fd.get(), kChannelFd) != kChannelFd) return ErrnoStatus("dup2", port, errno);
  if (fd.get() == kChannelFd) (void)fd.release();
  ::unsetenv("SPACE_VM");
  ::unsetenv("SPACE_HOSTNAME");
  return Status::Ok();
}

Status MixHostEntropy(std::string_view entropy) {
  ASSIGN_OR_RETURN(UniqueFd urandom, OpenFd("/dev/urandom", O_WRONLY | O_CLOEXEC));
  // struct rand_pool_info ends in a flexible array: build it in a u32 buffer.
  std::vector<uint32_t> buf(2 + (entropy.size() + 3) / 4, 0);
  auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
  info->entropy_count = static_cast<int>(entropy.size() * 8);
  info->buf_size = static_cast<int>(entropy.size());
  std::memcpy(info->buf, entropy.data(), entropy.size());
  if (::ioctl(urandom.get(), RNDADDENTROPY, info) != 0) {
    return ErrnoStatus("ioctl RNDADDENTROPY", "/dev/urandom", errno);
  }
  // Adding entropy alone does not replace the CRNG key a restored guest already holds.
  if (::ioctl(urandom.get(), RNDRESEEDCRNG) != 0) return ErrnoStatus("ioctl RNDRESEEDCRNG", "/dev/urandom", errno);
  return Status::Ok();
}

}  // namespace space::guest
