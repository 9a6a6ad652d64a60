#include "guest/vm_disk.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/syscall.h"

namespace space::guest {
namespace {

// From the kernel's fs/ext4/ext4.h: not in the uapi headers Debian ships.
constexpr unsigned long kExt4ResizeFs = _IOW('f', 16, uint64_t);
constexpr long kExt4Magic = 0xEF53;

Result<uint64_t> DeviceBytes(int fd, const std::string& device) {
  uint64_t bytes = 0;
  if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) return ErrnoStatus("ioctl BLKGETSIZE64", device, errno);
  return bytes;
}

}  // namespace

Status GrowRootFs(const std::string& device, const std::string& mount, uint64_t min_device_bytes, int wait_ms) {
  ASSIGN_OR_RETURN(UniqueFd dev, OpenFd(device, O_RDONLY | O_CLOEXEC));
  ASSIGN_OR_RETURN(uint64_t bytes, DeviceBytes(dev.get(), device));
  const int64_t deadline = MonoNowNs() + int64_t{wait_ms} * 1000000;
  while (bytes < min_device_bytes) {
    if (MonoNowNs() > deadline) {
      return DeadlineExceeded(device + " is " + std::to_string(bytes) + " bytes, not the " +
                              std::to_string(min_device_bytes) + " the host resized it to");
    }
    ::usleep(5000);
    ASSIGN_OR_RETURN(bytes, DeviceBytes(dev.get(), device));
  }
  ASSIGN_OR_RETURN(UniqueFd root, OpenFd(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct statfs sf;
  if (::fstatfs(root.get(), &sf) != 0) return ErrnoStatus("fstatfs", mount, errno);
  if (sf.f_type != kExt4Magic) return InvalidArgument(mount + " is not ext4");
  if (sf.f_bsize <= 0) return Internal(mount + ": block size " + std::to_string(sf.f_bsize));
  // f_blocks leaves out the filesystem's own overhead, so it is always below the block count
  // the resize compares with: the kernel's resize is a no-op when the count is unchanged.
  uint64_t blocks = bytes / static_cast<uint64_t>(sf.f_bsize);
  if (::ioctl(root.get(), kExt4ResizeFs, &blocks) != 0) return ErrnoStatus("ioctl EXT4_IOC_RESIZE_FS", mount, errno);
  return Status::Ok();
}

}  // namespace space::guest
