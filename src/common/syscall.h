// Thin, EINTR-safe wrappers over the syscalls every component uses.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space {

// Retries `f` while it fails with EINTR. For read, write, waitpid, accept and the like;
// never for close.
template <typename F>
auto RetryEintr(F f) -> decltype(f()) {
  decltype(f()) r;
  do {
    r = f();
  } while (r == -1 && errno == EINTR);
  return r;
}

// Writes all of `data` or fails.
Status WriteAll(int fd, const void* data, size_t len);
inline Status WriteAll(int fd, std::string_view s) { return WriteAll(fd, s.data(), s.size()); }
// Reads exactly `len` bytes; kUnavailable on EOF before that.
Status ReadExact(int fd, void* data, size_t len);

// Reads a whole (small) file, failing when it exceeds `max_bytes`.
Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 1 << 20);
// Writes a whole file atomically (temp file + fsync + rename) with `mode`.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode);
// Writes `data` to an existing file (sysfs, procfs, cgroupfs), no truncation games.
Status WriteSmallFile(const std::string& path, std::string_view data);

// mkdir -p with `mode` for created components.
Status MakeDirs(const std::string& path, mode_t mode);

Result<UniqueFd> OpenFd(const std::string& path, int flags, mode_t mode = 0);

// Sends `data` (not empty) on a unix socket with `fd_to_pass` attached to its first byte
// (SCM_RIGHTS, MSG_NOSIGNAL). Returns how many bytes went out: a stream socket may take
// fewer than all, and the caller writes the rest without the fd.
Result<size_t> SendWithFd(int socket, std::string_view data, int fd_to_pass);

// Closes every fd except those in keep[0..n) (negative entries are ignored; the array is
// sorted in place). Returns 0 or an errno. Async-signal-safe: for a child between clone or
// fork and exec, which otherwise holds copies of every fd the parent's other threads had
// open at that instant, among them other children's sync sockets and the API listener.
int CloseFdsExcept(int* keep, size_t n);

}  // namespace space
