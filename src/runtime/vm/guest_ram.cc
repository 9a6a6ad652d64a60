#include "runtime/vm/guest_ram.h"

#include <fcntl.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include "runtime/vm/open_beneath.h"

namespace space::runtime::vm {
namespace {

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
    ASSIGN_OR_RETURN(fd, OpenBeneath(state_dir, name, O_RDWR, name, 0644));
    struct stat sb;
    if (::fstat(fd.get(), &sb) != 0) return ErrnoStatus("fstat", name, errno);
    if (!S_ISREG(sb.st_mode)) return InvalidArgument(std::string(name) + " is not a regular file");
    if (static_cast<uint64_t>(sb.st_size) != bytes) {
      return InvalidArgument(std::string(name) + " holds " + std::to_string(sb.st_size) + " bytes of RAM, the VM has " +
                             std::to_string(bytes));
    }
  } else {
    if (::unlinkat(state_dir, name, 0) != 0 && errno != ENOENT) return ErrnoStatus("unlinkat", name, errno);
    ASSIGN_OR_RETURN(fd, OpenBeneath(state_dir, name, O_RDWR | O_CREAT | O_EXCL, name, 0644));
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return ErrnoStatus("ftruncate", name, errno);
  }
  RETURN_IF_ERROR(GrantReadWrite(fd.get(), vmm_uid));
  return fd;
}

}  // namespace space::runtime::vm
