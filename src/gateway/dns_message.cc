#include "gateway/dns_message.h"

#include <cctype>
#include <cstring>

namespace space::gateway {
namespace {

uint16_t U16(std::string_view m, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(m[off]) << 8 | static_cast<uint8_t>(m[off + 1]));
}

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

// Reads a (possibly compressed) name at *off; advances *off past it in the message.
Result<std::string> ReadName(std::string_view m, size_t* off) {
  std::string name;
  size_t pos = *off;
  bool jumped = false;
  for (int hops = 0; hops < 32; ++hops) {
    if (pos >= m.size()) return InvalidArgument("dns: name runs past the message");
    uint8_t len = static_cast<uint8_t>(m[pos]);
    if ((len & 0xc0) == 0xc0) {
      if (pos + 1 >= m.size()) return InvalidArgument("dns: truncated pointer");
      size_t target = (len & 0x3f) << 8 | static_cast<uint8_t>(m[pos + 1]);
      if (target >= pos) return InvalidArgument("dns: forward compression pointer");
      if (!jumped) *off = pos + 2;
      jumped = true;
      pos = target;
      continue;
    }
    if (len & 0xc0) return InvalidArgument("dns: bad label type");
    if (len == 0) {
      if (!jumped) *off = pos + 1;
      if (!name.empty()) name.pop_back();
      return name;
    }
    if (pos + 1 + len > m.size()) return InvalidArgument("dns: label runs past the message");
    for (size_t i = 0; i < len; ++i) {
      name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(m[pos + 1 + i]))));
    }
    name.push_back('.');
    if (name.size() > 254) return InvalidArgument("dns: name too long");
    pos += 1 + len;
  }
  return InvalidArgument("dns: too many compression pointers");
}

}  // namespace

Result<DnsQuestion> ParseDnsQuery(std::string_view m) {
  if (m.size() < 12 || m.size() > kMaxDnsMessage) return InvalidArgument("dns: bad message size");
  uint16_t flags = U16(m, 2);
  if (flags & 0x8000) return InvalidArgument("dns: not a query");
  if (((flags >> 11) & 0xf) != 0) return InvalidArgument("dns: not a standard query");
  if (U16(m, 4) != 1) return InvalidArgument("dns: exactly one question expected");
  DnsQuestion q;
  q.id = U16(m, 0);
  size_t off = 12;
  ASSIGN_OR_RETURN(q.name, ReadName(m, &off));
  if (off + 4 > m.size()) return InvalidArgument("dns: truncated question");
  q.qtype = U16(m, off);
  q.qclass = U16(m, off + 2);
  q.question_end = off + 4;
  return q;
}

std::string DnsErrorResponse(std::string_view query, const DnsQuestion& q, int rcode) {
  std::string out(query.substr(0, q.question_end));
  // QR=1, opcode 0, RD copied, RA=1, RCODE; one question, no records.
  uint16_t flags = static_cast<uint16_t>(0x8000 | (U16(query, 2) & 0x0100) | 0x0080 | (rcode & 0xf));
  out[2] = static_cast<char>(flags >> 8);
  out[3] = static_cast<char>(flags & 0xff);
  std::memset(&out[6], 0, 6);  // ANCOUNT, NSCOUNT, ARCOUNT
  return out;
}

std::string BuildDnsQuery(uint16_t id, const std::string& name, uint16_t qtype) {
  std::string out;
  PutU16(&out, id);
  PutU16(&out, 0x0100);  // RD
  PutU16(&out, 1);
  PutU16(&out, 0);
  PutU16(&out, 0);
  PutU16(&out, 0);
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    out.push_back(static_cast<char>(dot - start));
    out.append(name, start, dot - start);
    start = dot + 1;
  }
  out.push_back('\0');
  PutU16(&out, qtype);
  PutU16(&out, 1);
  return out;
}

Result<std::vector<in_addr>> ParseDnsAnswerA(std::string_view m, uint16_t id) {
  if (m.size() < 12 || m.size() > 65535) return InvalidArgument("dns: bad answer size");
  if (U16(m, 0) != id) return InvalidArgument("dns: answer id mismatch");
  uint16_t flags = U16(m, 2);
  if (!(flags & 0x8000)) return InvalidArgument("dns: not a response");
  int rcode = flags & 0xf;
  if (rcode == 3) return NotFound("dns: no such name");
  if (rcode != 0) return Unavailable("dns: server answered rcode " + std::to_string(rcode));
  size_t off = 12;
  for (uint16_t i = 0, n = U16(m, 4); i < n; ++i) {
    ASSIGN_OR_RETURN(std::string ignored, ReadName(m, &off));
    if (off + 4 > m.size()) return InvalidArgument("dns: truncated question");
    off += 4;
  }
  std::vector<in_addr> out;
  for (uint16_t i = 0, n = U16(m, 6); i < n; ++i) {
    ASSIGN_OR_RETURN(std::string ignored, ReadName(m, &off));
    if (off + 10 > m.size()) return InvalidArgument("dns: truncated record");
    uint16_t type = U16(m, off), cls = U16(m, off + 2), rdlen = U16(m, off + 8);
    off += 10;
    if (off + rdlen > m.size()) return InvalidArgument("dns: record data runs past the message");
    if (type == 1 && cls == 1 && rdlen == 4) {
      in_addr a;
      std::memcpy(&a, m.data() + off, 4);
      out.push_back(a);
    }
    off += rdlen;
  }
  return out;
}

}  // namespace space::gateway
