// RelayBytes: copies bytes both ways between two connected stream sockets until both
// directions have ended, propagating each end of data as a half-close (shutdown SHUT_WR)
// to the other side. One thread, poll(2); bounded buffers (one read at a time per
// direction); a relay with no traffic either way for `idle_ms`, or a write that makes no
// progress for that long, ends. Used by the API front for preview connections.
#pragma once

#include <cstdint>
#include <string_view>

namespace space {

struct RelayStats {
  uint64_t a_to_b = 0;
  uint64_t b_to_a = 0;
};

// `a_first` / `b_first`: bytes already read from `a` (from `b`) that go to the other side
// before anything else.
RelayStats RelayBytes(int a, int b, std::string_view a_first, std::string_view b_first, int idle_ms);

}  // namespace space
