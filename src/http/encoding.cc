#include "http/encoding.h"

namespace space::api {
namespace {
// Number of bytes of the UTF-8 sequence starting with `c`, or 0 if `c` cannot start one.
int SeqLen(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return 2;
  if (c >= 0xe0 && c <= 0xef) return 3;
  if (c >= 0xf0 && c <= 0xf4) return 4;
  return 0;
}
}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = SeqLen(c);
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    auto c1 = static_cast<unsigned char>(n > 1 ? s[i + 1] : 0);
    if (c == 0xe0 && c1 < 0xa0) return false;  // overlong
    if (c == 0xed && c1 > 0x9f) return false;  // surrogates
    if (c == 0xf0 && c1 < 0x90) return false;  // overlong
    if (c == 0xf4 && c1 > 0x8f) return false;  // > U+10FFFF
    i += static_cast<size_t>(n);
  }
  return true;
}

size_t Utf8CompletePrefix(std::string_view s) {
  // Look back at most 3 bytes for the start of a sequence that runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte: keep looking for the lead
    int n = SeqLen(c);
    if (n > static_cast<int>(back)) return s.size() - back;
    return s.size();
  }
  return s.size();
}

}  // namespace space::api
