#include "common/datagram.h"

#include <sys/socket.h>

#include <cstring>

#include "common/syscall.h"

namespace space {
namespace {

// Room for more descriptors than any channel allows, so a sender that attaches too many is
// refused (and its descriptors closed) rather than having them silently truncated.
constexpr size_t kControlFds = 9;

}  // namespace

Status SendDatagram(int socket, std::string_view bytes, const std::vector<int>& fds, const DatagramLimits& limits) {
  if (bytes.size() > limits.max_bytes || fds.size() > limits.max_fds || fds.size() > kControlFds) {
    return InvalidArgument(std::string(limits.channel) + ": datagram too large");
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kControlFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n = RetryEintr([&] { return ::sendmsg(socket, &msg, MSG_NOSIGNAL); });
  if (n < 0) {
    if (errno == EPIPE || errno == ECONNRESET) return Unavailable(std::string(limits.channel) + ": peer closed");
    return ErrnoStatus("sendmsg", limits.channel, errno);
  }
  return Status::Ok();
}

Result<Datagram> ReceiveDatagram(int socket, const DatagramLimits& limits) {
  Datagram d;
  d.bytes.resize(limits.max_bytes + 1);
  iovec iov{d.bytes.data(), d.bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kControlFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = RetryEintr([&] { return ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_TRUNC); });
  if (n < 0) {
    if (errno == ECONNRESET) return Unavailable(std::string(limits.channel) + ": peer closed");
    return ErrnoStatus("recvmsg", limits.channel, errno);
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      d.fds.emplace_back(fd);
    }
  }
  if (n == 0) return Unavailable(std::string(limits.channel) + ": peer closed");
  if (static_cast<size_t>(n) > limits.max_bytes) {
    return InvalidArgument(std::string(limits.channel) + ": datagram exceeds " + std::to_string(limits.max_bytes) +
                           " bytes");
  }
  if ((msg.msg_flags & MSG_CTRUNC) || d.fds.size() > limits.max_fds) {
    return InvalidArgument(std::string(limits.channel) + ": too many descriptors");
  }
  d.bytes.resize(static_cast<size_t>(n));
  return d;
}

}  // namespace space
