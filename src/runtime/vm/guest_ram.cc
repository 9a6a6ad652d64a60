#include "runtime/vm/guest_ram.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include "common/syscall.h"

namespace space::runtime::vm {
namespace {

Result<UniqueFd> OpenRegularBeneath(int dir, const char* name, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.mode = (flags & O_CREAT) ? 0644 : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = RetryEintr([&] { return ::syscall(SYS_openat2, dir, name, &how, sizeof how); });
  if (fd < 0) return ErrnoStatus("openat2", name, errno);
  return UniqueFd(static_cast<int>(fd));
}

// owner rw, `uid` rw, group and others r (the tree jail reads the file to export it, as it
// reads the disk image).
Status GrantReadWrite(int fd, uid_t uid) {
  struct {
    posix_acl_xattr_header h;
    posix_acl_xattr_entry e[5];
  } __attribute__((packed)) acl{};
  acl.h.a_version = POSIX_ACL_XATTR_VERSION;
  const posix_acl_xattr_entry entries[5] = {
      {ACL_USER_OBJ, ACL_READ | ACL_WRITE, static_cast<__le32>(ACL_UNDEFINED_ID)},
      {ACL_USER, ACL_READ | ACL_WRITE, static_cast<__le32>(uid)},
      {ACL_GROUP_OBJ, ACL_READ, static_cast<__le32>(ACL_UNDEFINED_ID)},
      {ACL_MASK, ACL_READ | ACL_WRITE, static_cast<__le32>(ACL_UNDEFINED_ID)},
      {ACL_OTHER, ACL_READ, static_cast<__le32>(ACL_UNDEFINED_ID)},
  };
  for (int i = 0; i < 5; ++i) acl.e[i] = entries[i];
  if (::fsetxattr(fd, "system.posix_acl_access", &acl, sizeof acl, 0) != 0) {
    return ErrnoStatus("fsetxattr", "system.posix_acl_access of the guest RAM file (the pool needs POSIX ACLs)", errno);
  }
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> OpenGuestRam(int state_dir, const char* name, uint64_t bytes, bool keep, uid_t vmm_uid) {
  UniqueFd fd;
  if (keep) {
    ASSIGN_OR_RETURN(fd, OpenRegularBeneath(state_dir, name, O_RDWR));
    struct stat sb;
    if (::fstat(fd.get(), &sb) != 0) return ErrnoStatus("fstat", name, errno);
    if (!S_ISREG(sb.st_mode)) return InvalidArgument(std::string(name) + " is not a regular file");
    if (static_cast<uint64_t>(sb.st_size) != bytes) {
      return InvalidArgument(std::string(name) + " holds " + std::to_string(sb.st_size) + " bytes of RAM, the VM has " +
                             std::to_string(bytes));
    }
  } else {
    if (::unlinkat(state_dir, name, 0) != 0 && errno != ENOENT) return ErrnoStatus("unlinkat", name, errno);
    ASSIGN_OR_RETURN(fd, OpenRegularBeneath(state_dir, name, O_RDWR | O_CREAT | O_EXCL));
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return ErrnoStatus("ftruncate", name, errno);
  }
  RETURN_IF_ERROR(GrantReadWrite(fd.get(), vmm_uid));
  return fd;
}

}  // namespace space::runtime::vm
