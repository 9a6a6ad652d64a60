#include "runtime/vm/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/syscall.h"

namespace space::runtime::vm {

Result<UniqueFd> OpenBeneath(int dir, const std::string& name, uint64_t flags, const std::string& what, mode_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & O_CREAT) ? mode : 0;  // openat2 rejects a mode without O_CREAT
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = RetryEintr([&] { return ::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof how); });
  if (fd < 0) {
    if (errno == ELOOP || errno == EXDEV) return InvalidArgument(what + " is or passes through a symlink; refusing it");
    return ErrnoStatus("openat2", what, errno);
  }
  return UniqueFd(static_cast<int>(fd));
}

}  // namespace space::runtime::vm
