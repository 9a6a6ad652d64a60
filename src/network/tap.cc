#include "network/tap.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#include <cstring>

#include "common/syscall.h"

namespace space::network {

Result<UniqueFd> CreateTap(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return InvalidArgument("tap name " + name + " must be 1..15 bytes");
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd("/dev/net/tun", O_RDWR | O_CLOEXEC));
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), name.size());
  // IFF_NO_PI: plain frames, as QEMU's tap backend expects them. IFF_TUN_EXCL: an existing
  // link of that name is an error, never silently shared.
  ifr.ifr_flags = static_cast<short>(IFF_TAP | IFF_NO_PI | IFF_TUN_EXCL);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) return ErrnoStatus("ioctl TUNSETIFF", name, errno);
  return fd;
}

}  // namespace space::network
