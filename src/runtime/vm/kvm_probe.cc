#include "runtime/vm/kvm_probe.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::runtime::vm {

Result<gid_t> KvmGroupForVmm(const std::string& device) {
  struct stat st;
  if (::stat(device.c_str(), &st) != 0) return ErrnoStatus("stat", device, errno);
  if (!S_ISCHR(st.st_mode)) return Unavailable(device + " is not a character device");
  // Open to all (0666): nothing to join. Otherwise through the group, never root's.
  const bool open_to_all = (st.st_mode & 006) == 006;
  if (!open_to_all && st.st_gid == 0) {
    return Unavailable(device + " belongs to group root: the VMM, which runs as the sandbox's uid, may not join "
                                "it (give the device a kvm group, mode 0660)");
  }
  if (!open_to_all && (st.st_mode & 060) != 060) {
    return Unavailable(device + " is not read-write for its group, so the VMM cannot open it (mode 0660)");
  }
  UniqueFd fd(::open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", device, errno);
  int version = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  if (version != KVM_API_VERSION) return Unavailable(device + " does not speak the KVM API");
  UniqueFd vm(::ioctl(fd.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) return ErrnoStatus("ioctl", "KVM_CREATE_VM on " + device, errno);
  return open_to_all ? 0 : st.st_gid;
}

}  // namespace space::runtime::vm
