#include "common/syscall.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace space {

Status WriteAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = RetryEintr([&] { return ::write(fd, p, len); });
    if (n < 0) return ErrnoStatus("write", "fd " + std::to_string(fd), errno);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ReadExact(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = RetryEintr([&] { return ::read(fd, p, len); });
    if (n < 0) return ErrnoStatus("read", "fd " + std::to_string(fd), errno);
    if (n == 0) return Unavailable("read fd " + std::to_string(fd) + ": unexpected end of stream");
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<UniqueFd> OpenFd(const std::string& path, int flags, mode_t mode) {
  int fd = RetryEintr([&] { return ::open(path.c_str(), flags | O_CLOEXEC, mode); });
  if (fd < 0) return ErrnoStatus("open", path, errno);
  return UniqueFd(fd);
}

Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(fd.get(), buf, sizeof buf); });
    if (n < 0) return ErrnoStatus("read", path, errno);
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return PayloadTooLarge("read " + path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode));
    if (::fchmod(fd.get(), mode) != 0) return ErrnoStatus("fchmod", tmp, errno);
    RETURN_IF_ERROR(WriteAll(fd.get(), data));
    if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync", tmp, errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("rename", path, err);
  }
  return Status::Ok();
}

Status WriteSmallFile(const std::string& path, std::string_view data) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_WRONLY));
  ssize_t n = RetryEintr([&] { return ::write(fd.get(), data.data(), data.size()); });
  if (n < 0) return ErrnoStatus("write", path, errno);
  if (static_cast<size_t>(n) != data.size()) return Internal("write " + path + ": short write");
  return Status::Ok();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return InvalidArgument("mkdir: empty path");
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", cur, errno);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("mkdir " + path + ": exists and is not a directory");
  return Status::Ok();
}

Result<size_t> SendWithFd(int socket, std::string_view data, int fd_to_pass) {
  if (data.empty()) return InvalidArgument("SendWithFd: an fd must ride with at least one byte");
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
  ssize_t n = RetryEintr([&] { return ::sendmsg(socket, &msg, MSG_NOSIGNAL); });
  if (n < 0) return ErrnoStatus("sendmsg", "fd " + std::to_string(socket), errno);
  return static_cast<size_t>(n);
}

int CloseFdsExcept(int* keep, size_t n) {
  // Insertion sort: no allocation, and n is a handful.
  for (size_t i = 1; i < n; ++i) {
    for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; --j) std::swap(keep[j - 1], keep[j]);
  }
  unsigned int next = 0;  // lowest fd not yet decided
  for (size_t i = 0; i < n; ++i) {
    if (keep[i] < 0 || static_cast<unsigned int>(keep[i]) < next) continue;
    const unsigned int k = static_cast<unsigned int>(keep[i]);
    if (k > next && ::syscall(SYS_close_range, next, k - 1, 0) != 0) return errno;
    next = k + 1;
  }
  if (::syscall(SYS_close_range, next, ~0U, 0) != 0) return errno;
  return 0;
}

}  // namespace space
