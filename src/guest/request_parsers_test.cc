// spaced's two request parsers under byte-level mutation (protocol/exec_request.h for exec,
// guest/files.h for file operations).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "guest/files.h"
#include "protocol/exec_request.h"

namespace space::guest {
namespace {

// Not a fuzzer, a smoke test: byte-level mutations of valid requests must only ever
// produce a request or kInvalidArgument, never a crash or another code.
TEST(RequestParsersTest, SurvivesMutatedInput) {
  const std::string seeds[] = {
      R"({"cmd":["ls","-l"],"env":{"A":"1"},"cwd":"/tmp","user":"user","timeout_ms":5,"stdin":true})",
      R"({"op":"move","path":"/a","to":"/b","mode":420,"recursive":true,"depth":3})"};
  uint64_t rng = 0x9E3779B97F4A7C15ull;  // fixed seed: deterministic
  auto next = [&] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  const char alphabet[] = "{}[]\",:0-1.e\\u\x00\xff tnfalsr";
  for (const std::string& seed : seeds) {
    for (int i = 0; i < 5000; ++i) {
      std::string s = seed;
      for (int m = 0, n = 1 + static_cast<int>(next() % 4); m < n; ++m) {
        size_t pos = next() % s.size();
        char c = alphabet[next() % (sizeof alphabet - 1)];
        switch (next() % 3) {
          case 0: s[pos] = c; break;
          case 1: s.insert(pos, 1, c); break;
          default: s.erase(pos, 1); break;
        }
      }
      auto r = ParseExecRequest(s);
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << s;
      }
      auto op = ParseFileOp(s);
      if (!op.ok()) {
        ASSERT_EQ(op.status().code(), StatusCode::kInvalidArgument) << s;
      }
    }
  }
}

}  // namespace
}  // namespace space::guest
