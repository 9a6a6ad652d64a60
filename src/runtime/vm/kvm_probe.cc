#include "runtime/vm/kvm_probe.h"

#include <sys/stat.h>

#include <cerrno>

#include "common/syscall.h"

namespace space::runtime::vm {

Result<Accel> ParseAccel(std::string_view text) {
  if (text == "auto") return Accel::kAuto;
  if (text == "kvm") return Accel::kKvm;
  if (text == "tcg") return Accel::kTcg;
  return InvalidArgument("accelerator must be auto, kvm or tcg, not '" + std::string(text.substr(0, 32)) + "'");
}

const char* AccelName(Accel accel) {
  switch (accel) {
    case Accel::kAuto:
      return "auto";
    case Accel::kKvm:
      return "kvm";
    case Accel::kTcg:
      return "tcg";
  }
  return "?";
}

Result<gid_t> KvmGroupForVmm(const std::string& device) {
  struct stat st;
  if (::stat(device.c_str(), &st) != 0) return ErrnoStatus("stat", device, errno);
  if (!S_ISCHR(st.st_mode)) return Unavailable(device + " is not a character device");
  // Open to all (0666): nothing to join. Otherwise through the group, never root's.
  const bool open_to_all = (st.st_mode & 006) == 006;
  if (open_to_all) return 0;
  if (st.st_gid == 0) {
    return Unavailable(device + " belongs to group root: the VMM, which runs as the sandbox's uid, may not join "
                                "it (give the device a kvm group, mode 0660)");
  }
  if ((st.st_mode & 060) != 060) {
    return Unavailable(device + " is not read-write for its group, so the VMM cannot open it (mode 0660)");
  }
  return st.st_gid;
}

}  // namespace space::runtime::vm
