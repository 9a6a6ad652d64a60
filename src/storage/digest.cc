#include "storage/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <memory>

#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// Incremental SHA-256. EVP rather than SHA256_*: the latter is deprecated in OpenSSL 3.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) ok_ = false;
  }
  void Update(const void* p, size_t n) {
    if (ok_ && EVP_DigestUpdate(ctx_.get(), p, n) != 1) ok_ = false;
  }
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  Result<std::string> FinishHex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) return Internal("sha256: OpenSSL failure");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 15];
    }
    return out;
  }

 private:
  MdCtx ctx_;
  bool ok_ = true;
};

Result<std::string> HashFileAt(int dir_fd, const std::string& name, const std::string& path) {
  int fd = RetryEintr([&] { return ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); });
  if (fd < 0) return ErrnoStatus("openat", path, errno);
  UniqueFd file(fd);
  Sha256 h;
  static thread_local char buf[1 << 17];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(file.get(), buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", path, errno);
    if (n == 0) break;
    h.Update(buf, static_cast<size_t>(n));
  }
  return h.FinishHex();
}

char TypeChar(mode_t m) {
  if (S_ISREG(m)) return 'f';
  if (S_ISDIR(m)) return 'd';
  if (S_ISLNK(m)) return 'l';
  if (S_ISCHR(m)) return 'c';
  if (S_ISBLK(m)) return 'b';
  if (S_ISFIFO(m)) return 'p';
  if (S_ISSOCK(m)) return 's';
  return '?';
}

class Walker {
 public:
  Status Entry(int parent_fd, const std::string& name, const std::string& rel) {
    struct stat st;
    const char* at_name = name.empty() ? "" : name.c_str();
    int flags = AT_SYMLINK_NOFOLLOW | (name.empty() ? AT_EMPTY_PATH : 0);
    if (::fstatat(parent_fd, at_name, &st, flags) != 0) return ErrnoStatus("fstatat", rel, errno);

    std::string target, content;
    uint64_t size = 0;
    if (S_ISREG(st.st_mode)) {
      size = static_cast<uint64_t>(st.st_size);
      ASSIGN_OR_RETURN(content, HashFileAt(parent_fd, name, rel));
    } else if (S_ISLNK(st.st_mode)) {
      size = static_cast<uint64_t>(st.st_size);
      target.resize(static_cast<size_t>(st.st_size) + 1);
      ssize_t n = ::readlinkat(parent_fd, name.c_str(), target.data(), target.size());
      if (n < 0) return ErrnoStatus("readlinkat", rel, errno);
      target.resize(static_cast<size_t>(n));
    }
    std::string rdev;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      rdev = std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    }
    char mode[16];
    snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 07777));
    std::string rec;
    rec.reserve(rel.size() + content.size() + target.size() + 64);
    for (const std::string& field :
         {rel, std::string(1, TypeChar(st.st_mode)), std::string(mode), std::to_string(st.st_uid),
          std::to_string(st.st_gid), std::to_string(size), rdev, target, content}) {
      rec += field;
      rec += '\0';
    }
    rec += '\n';
    hash_.Update(rec);
    total_ += size;

    if (!S_ISDIR(st.st_mode)) return Status::Ok();
    int fd = name.empty() ? ::fcntl(parent_fd, F_DUPFD_CLOEXEC, 0)
                          : ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("openat", rel, errno);
    UniqueFd dir(fd);
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir.get(), rel));
    for (const auto& n : names) {
      RETURN_IF_ERROR(Entry(dir.get(), n, rel == "." ? n : rel + "/" + n));
    }
    return Status::Ok();
  }

  Result<TreeDigest> Finish() {
    ASSIGN_OR_RETURN(std::string hex, hash_.FinishHex());
    return TreeDigest{"sha256:" + hex, total_};
  }

 private:
  Sha256 hash_;
  uint64_t total_ = 0;
};

}  // namespace

Result<TreeDigest> DigestTree(const std::string& root) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  return DigestTreeAt(fd.get());
}

Result<TreeDigest> DigestTreeAt(int root_fd) {
  Walker w;
  RETURN_IF_ERROR(w.Entry(root_fd, "", "."));
  return w.Finish();
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  Result<std::string> hex = h.FinishHex();
  return hex.ok() ? "sha256:" + *hex : std::string();
}

}  // namespace space::storage
