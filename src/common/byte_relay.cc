#include "common/byte_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"

namespace space {
namespace {

// Writes all of `data` to `fd`, waiting at most `stall_ms` for each bit of progress.
bool WriteAll(int fd, std::string_view data, int stall_ms) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      int rc = ::poll(&p, 1, stall_ms);
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

RelayStats RelayBytes(int a, int b, std::string_view a_first, std::string_view b_first, int idle_ms) {
  RelayStats stats;
  if (!b_first.empty()) {
    if (!WriteAll(a, b_first, idle_ms)) return stats;
    stats.b_to_a += b_first.size();
  }
  if (!a_first.empty()) {
    if (!WriteAll(b, a_first, idle_ms)) return stats;
    stats.a_to_b += a_first.size();
  }
  bool a_open = true, b_open = true;  // still reading from each
  std::vector<char> buf(256 * 1024);
  int64_t last = MonoNowNs();
  while (a_open || b_open) {
    pollfd p[2] = {{a, static_cast<short>(a_open ? POLLIN : 0), 0}, {b, static_cast<short>(b_open ? POLLIN : 0), 0}};
    int rc = ::poll(p, 2, 1000);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    if (rc == 0) {
      if ((MonoNowNs() - last) / 1'000'000 > idle_ms) break;
      continue;
    }
    // A hang-up without POLLIN on a side we still read means it is gone for good.
    for (int i = 0; i < 2; ++i) {
      bool& open = i == 0 ? a_open : b_open;
      if (!open || p[i].revents == 0) continue;
      const int from = i == 0 ? a : b;
      const int to = i == 0 ? b : a;
      ssize_t n = ::recv(from, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        open = false;
        ::shutdown(to, SHUT_WR);
        if (n < 0) return stats;  // reset: the other side goes too
        continue;
      }
      last = MonoNowNs();
      if (!WriteAll(to, std::string_view(buf.data(), static_cast<size_t>(n)), idle_ms)) return stats;
      (i == 0 ? stats.a_to_b : stats.b_to_a) += static_cast<uint64_t>(n);
    }
  }
  return stats;
}

}  // namespace space
