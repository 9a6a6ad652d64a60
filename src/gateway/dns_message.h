// DNS messages (RFC 1035), only as far as the gateway needs: read the question of a query a
// sandbox sent, answer NXDOMAIN, build an A query, and read the A records of an answer. Every
// input is hostile: lengths are checked, compression pointers may only point backwards and
// are followed a bounded number of times. Pure functions.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::gateway {

inline constexpr size_t kMaxDnsMessage = 4096;

struct DnsQuestion {
  uint16_t id = 0;
  std::string name;  // lowercase, no trailing dot
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  size_t question_end = 0;  // offset just past the question
};

// A standard query with exactly one question; kInvalidArgument otherwise.
Result<DnsQuestion> ParseDnsQuery(std::string_view msg);
// The answer to `query` with RCODE `rcode` (3 = NXDOMAIN, 5 = REFUSED) and no records.
std::string DnsErrorResponse(std::string_view query, const DnsQuestion& q, int rcode);
// A recursive query for `name`'s A records.
std::string BuildDnsQuery(uint16_t id, const std::string& name, uint16_t qtype = 1);
// The A records of a response to query `id` (CNAME chains inside the answer are followed
// implicitly: every A record in the answer section counts). kNotFound for NXDOMAIN.
Result<std::vector<in_addr>> ParseDnsAnswerA(std::string_view msg, uint16_t id);

}  // namespace space::gateway
