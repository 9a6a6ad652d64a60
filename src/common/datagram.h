// Datagrams with descriptors (SCM_RIGHTS) over SOCK_SEQPACKET socketpairs: the channels
// between SPACE's own processes (the node and its root broker, the node and its API front).
// Both ends are bounded: a datagram over `max_bytes` or with more than `max_fds`
// descriptors is refused, and the descriptors of a refused datagram are closed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space {

struct DatagramLimits {
  size_t max_bytes;
  size_t max_fds;       // at most 9
  const char* channel;  // names the channel in errors: "root broker channel"
};

struct Datagram {
  std::string bytes;
  std::vector<UniqueFd> fds;
};

Status SendDatagram(int socket, std::string_view bytes, const std::vector<int>& fds, const DatagramLimits& limits);
// Blocks until one datagram arrives. kUnavailable when the peer is gone; kInvalidArgument for
// a datagram over the limits (its descriptors closed).
Result<Datagram> ReceiveDatagram(int socket, const DatagramLimits& limits);

}  // namespace space
