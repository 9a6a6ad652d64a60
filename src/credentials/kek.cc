#include "credentials/kek.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/random.h"
#include "common/syscall.h"

namespace space::credentials {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string holding key material; wiped when it goes out of scope.
struct ScrubbedString {
  std::string s;
  ~ScrubbedString() { OPENSSL_cleanse(s.data(), s.size()); }
};

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status FillRandom(uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("getrandom", "kek", errno);
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

// Reads the key through one O_NOFOLLOW fd and checks that same fd, so the file checked is
// the file read (no stat-then-open race, no symlink to somewhere readable).
Result<Kek> ReadKekFile(const std::string& path, UniqueFd fd) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return PermissionDenied("kek file " + path + " is not a regular file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return PermissionDenied("kek file " + path + " is owned by uid " + std::to_string(st.st_uid) +
                            "; it must be owned by root or the running user");
  }
  if ((st.st_mode & 0177) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDenied("kek file " + path + " has mode " + mode +
                            "; it unseals every stored credential, so it must be 0600 or stricter "
                            "(chmod 600 " +
                            path + ")");
  }
  ScrubbedString buf;
  buf.s.resize(130);  // 64 hex chars plus an optional newline; more means a wrong file.
  size_t got = 0;
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(fd.get(), buf.s.data() + got, buf.s.size() - got); });
    if (n < 0) return ErrnoStatus("read", path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got == buf.s.size()) break;
  }
  std::string_view content(buf.s.data(), got);
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r')) content.remove_suffix(1);
  auto kek = Kek::FromHex(content);
  if (!kek.ok()) return InvalidArgument("kek file " + path + ": " + kek.status().message());
  return kek;
}

Result<Kek> CreateKekFile(const std::string& path) {
  std::array<uint8_t, Kek::kSize> bytes;
  RETURN_IF_ERROR(FillRandom(bytes.data(), bytes.size()));
  Kek kek(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());

  static constexpr char kHex[] = "0123456789abcdef";
  ScrubbedString hex;
  for (size_t i = 0; i < Kek::kSize; ++i) {
    hex.s += kHex[kek.data()[i] >> 4];
    hex.s += kHex[kek.data()[i] & 15];
  }
  hex.s += '\n';

  std::string dir = DirName(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) RETURN_IF_ERROR(MakeDirs(dir, 0700));

  // Write under a unique name, then link() it into place: unlike rename, link refuses to
  // replace an existing file, so two nodes starting at once agree on one key.
  std::string tmp = path + ".new." + RandomHex(8);
  RETURN_IF_ERROR(WriteFileAtomic(tmp, hex.s, 0600));
  int rc = ::link(tmp.c_str(), path.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) {
      ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_NOFOLLOW));
      return ReadKekFile(path, std::move(fd));
    }
    return ErrnoStatus("link", path, err);
  }
  // Persist the new directory entry: losing the key after a crash loses every secret.
  auto dfd = OpenFd(dir, O_RDONLY | O_DIRECTORY);
  if (dfd.ok() && ::fsync(dfd->get()) != 0) return ErrnoStatus("fsync", dir, errno);
  return kek;
}

}  // namespace

Kek::Kek(Kek&& other) noexcept : bytes_(other.bytes_) { OPENSSL_cleanse(other.bytes_.data(), other.bytes_.size()); }

Kek& Kek::operator=(Kek&& other) noexcept {
  if (this != &other) {
    bytes_ = other.bytes_;
    OPENSSL_cleanse(other.bytes_.data(), other.bytes_.size());
  }
  return *this;
}

Kek::~Kek() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

Result<Kek> Kek::FromHex(std::string_view hex) {
  if (hex.size() != 2 * kSize) {
    return InvalidArgument("key must be exactly 64 hex characters (32 bytes), got " + std::to_string(hex.size()) +
                           " characters");
  }
  std::array<uint8_t, kSize> bytes;
  for (size_t i = 0; i < kSize; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return InvalidArgument("key must be 64 hex characters; found a non-hex character");
    }
    bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  Kek kek(bytes);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return kek;
}

Result<Kek> LoadOrCreateKek(const std::string& path, const char* env_value) {
  if (env_value != nullptr) {
    auto kek = Kek::FromHex(env_value);
    if (!kek.ok()) return InvalidArgument("SPACE_KEK: " + kek.status().message());
    return kek;
  }
  if (path.empty()) return InvalidArgument("kek path is empty and SPACE_KEK is not set");
  int raw = RetryEintr([&] { return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); });
  if (raw >= 0) return ReadKekFile(path, UniqueFd(raw));
  int err = errno;
  if (err == ELOOP) return PermissionDenied("kek file " + path + " is a symlink; refusing to follow it");
  if (err != ENOENT) return ErrnoStatus("open", path, err);
  return CreateKekFile(path);
}

}  // namespace space::credentials
