#include "common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace space {
namespace {
void Fill(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      std::abort();  // No entropy source: an invariant of every supported kernel.
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}
}  // namespace

std::string NewId(std::string_view prefix) {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  unsigned char bytes[22];
  Fill(bytes, sizeof bytes);
  std::string id(prefix);
  id += '_';
  for (unsigned char b : bytes) id += kAlphabet[b % 62];  // 248/256 unbiased; bias is negligible here.
  return id;
}

std::string RandomHex(size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string raw(n, '\0');
  Fill(raw.data(), n);
  std::string out;
  out.reserve(n * 2);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string RandomGuestMac() {
  const std::string h = RandomHex(3);
  return "52:54:00:" + h.substr(0, 2) + ":" + h.substr(2, 2) + ":" + h.substr(4, 2);
}

}  // namespace space
