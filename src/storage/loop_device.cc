#include "storage/loop_device.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <string>

#include "common/log.h"
#include "common/syscall.h"

namespace space::storage {
namespace {

constexpr int kLoopMajor = 7;
// Each retry follows another process grabbing the device we were offered; a handful of
// collisions in a row means something is wrong rather than busy.
constexpr int kMaxAttempts = 16;

Result<UniqueFd> OpenLoopNode(int n, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    // A static /dev (some containers) lacks nodes for devices LOOP_CTL_GET_FREE just created.
    if (::mknod(path.c_str(), S_IFBLK | 0600, makedev(kLoopMajor, n)) != 0 && errno != EEXIST) {
      return ErrnoStatus("mknod", path, errno);
    }
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return ErrnoStatus("open", path, errno);
  return UniqueFd(fd);
}

// Pre-5.8 kernels lack LOOP_CONFIGURE; the two-step form has a window in which the device is
// attached without AUTOCLEAR, closed here if the second step fails.
Status AttachLegacy(int loop_fd, int image_fd, const std::string& path, const std::string& image) {
  if (::ioctl(loop_fd, LOOP_SET_FD, image_fd) != 0) return ErrnoStatus("ioctl LOOP_SET_FD", path, errno);
  struct loop_info64 info = {};
  info.lo_flags = LO_FLAGS_AUTOCLEAR;
  strncpy(reinterpret_cast<char*>(info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
  if (::ioctl(loop_fd, LOOP_SET_STATUS64, &info) != 0) {
    int e = errno;
    ::ioctl(loop_fd, LOOP_CLR_FD, 0);
    return ErrnoStatus("ioctl LOOP_SET_STATUS64", path, e);
  }
  return Status::Ok();
}

// Best effort (see SetLoopDirectIo): EINVAL when the image's filesystem refuses O_DIRECT.
void EnableDirectIo(int loop_fd, const std::string& path) {
  if (::ioctl(loop_fd, LOOP_SET_DIRECT_IO, 1UL) != 0) {
    LogWarn("storage", "direct I/O for " + path + ": " + ErrnoStatus("ioctl LOOP_SET_DIRECT_IO", path, errno).ToString());
  }
}

}  // namespace

Status SetLoopDirectIo(const std::string& mount_path) {
  // btrfs reports an anonymous st_dev, so the device comes from /proc/self/mountinfo's
  // source field: /dev/loopN for a pool image (the last mount at `mount_path` wins).
  ASSIGN_OR_RETURN(std::string mountinfo, ReadFileToString("/proc/self/mountinfo", 4 << 20));
  std::string source;
  size_t pos = 0;
  while (pos < mountinfo.size()) {
    size_t end = mountinfo.find('\n', pos);
    if (end == std::string::npos) end = mountinfo.size();
    std::string line = mountinfo.substr(pos, end - pos);
    pos = end + 1;
    // "<id> <parent> <maj:min> <root> <mount point> ... - <fstype> <source> <options>"
    size_t f = 0;
    std::string fields[5];
    for (int i = 0; i < 5 && f != std::string::npos; ++i) {
      size_t sp = line.find(' ', f);
      fields[i] = line.substr(f, sp == std::string::npos ? std::string::npos : sp - f);
      f = sp == std::string::npos ? sp : sp + 1;
    }
    if (fields[4] != mount_path) continue;
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    size_t src_start = line.find(' ', dash + 3);
    if (src_start == std::string::npos) continue;
    size_t src_end = line.find(' ', src_start + 1);
    source = line.substr(src_start + 1, src_end == std::string::npos ? std::string::npos : src_end - src_start - 1);
  }
  if (source.rfind("/dev/loop", 0) != 0) return Status::Ok();
  const std::string sys = "/sys/block/" + source.substr(5) + "/loop/dio";
  if (auto dio = ReadFileToString(sys, 16); dio.ok() && !dio->empty() && (*dio)[0] == '1') return Status::Ok();
  int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", source, errno);
  UniqueFd dev(fd);
  if (::ioctl(dev.get(), LOOP_SET_DIRECT_IO, 1UL) != 0) return ErrnoStatus("ioctl LOOP_SET_DIRECT_IO", source, errno);
  return Status::Ok();
}

Result<LoopDevice> AttachLoopDevice(const std::string& image_path) {
  ASSIGN_OR_RETURN(UniqueFd control, OpenFd("/dev/loop-control", O_RDWR));
  ASSIGN_OR_RETURN(UniqueFd image, OpenFd(image_path, O_RDWR | O_NOFOLLOW));
  // The image lies in a data dir the node (not root) owns: whatever root attaches must be a
  // file root made, not a link to one (a device, another file) nor an image the node crafted
  // for the kernel's filesystem parser.
  struct stat sb;
  if (::fstat(image.get(), &sb) != 0) return ErrnoStatus("fstat", image_path, errno);
  if (!S_ISREG(sb.st_mode) || sb.st_uid != 0 || sb.st_nlink != 1) {
    return PermissionDenied(image_path + " is not a regular file of root's with one link; refusing to attach it");
  }
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    int n = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return ErrnoStatus("ioctl LOOP_CTL_GET_FREE", "/dev/loop-control", errno);
    std::string path = "/dev/loop" + std::to_string(n);
    ASSIGN_OR_RETURN(UniqueFd dev, OpenLoopNode(n, path));

    struct loop_config cfg = {};
    cfg.fd = static_cast<uint32_t>(image.get());
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    strncpy(reinterpret_cast<char*>(cfg.info.lo_file_name), image_path.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(dev.get(), LOOP_CONFIGURE, &cfg) == 0) {
      EnableDirectIo(dev.get(), path);
      return LoopDevice{path, std::move(dev)};
    }
    int err = errno;
    if (err == EBUSY) continue;  // Taken by someone else between GET_FREE and CONFIGURE.
    if (err != EINVAL && err != ENOTTY) return ErrnoStatus("ioctl LOOP_CONFIGURE", path, err);

    Status st = AttachLegacy(dev.get(), image.get(), path, image_path);
    if (st.ok()) {
      EnableDirectIo(dev.get(), path);
      return LoopDevice{path, std::move(dev)};
    }
    if (st.code() == StatusCode::kConflict) continue;  // EBUSY on LOOP_SET_FD: same race.
    return st;
  }
  return Unavailable("attach " + image_path + ": every free loop device was taken by others " +
                     std::to_string(kMaxAttempts) + " times in a row");
}

}  // namespace space::storage
