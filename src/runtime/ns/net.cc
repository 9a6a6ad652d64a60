#include "runtime/ns/net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace space::runtime::ns {

int ChildLoopbackUp(Call* call) {
  *call = Call::kSocket;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  ifreq ifr{};
  ifr.ifr_name[0] = 'l';
  ifr.ifr_name[1] = 'o';
  int err = 0;
  *call = Call::kIoctl;
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    err = errno;
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) err = errno;
  }
  ::close(fd);
  if (err == 0) *call = Call::kNone;
  return err;
}

}  // namespace space::runtime::ns
