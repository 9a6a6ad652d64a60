#include "gateway/http_head.h"

#include <algorithm>
#include <cctype>

namespace space::gateway {
namespace {

bool IsTokenChar(char c) {
  static constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~";
  return std::isalnum(static_cast<unsigned char>(c)) || kExtra.find(c) != std::string_view::npos;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string RequestHead::Get(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

size_t RequestHead::Count(std::string_view name) const {
  size_t n = 0;
  for (const auto& [k, v] : headers) n += EqualsIgnoreCase(k, name);
  return n;
}

void RequestHead::Remove(std::string_view name) {
  std::erase_if(headers, [&](const auto& h) { return EqualsIgnoreCase(h.first, name); });
}

void RequestHead::Set(const std::string& name, const std::string& value) {
  Remove(name);
  headers.emplace_back(name, value);
}

std::string RequestHead::Serialize() const {
  std::string out = method + " " + target + " " + version + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  out += "\r\n";
  return out;
}

Result<RequestHead> ParseRequestHead(std::string_view data) {
  size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (data.size() >= kMaxRequestHead) return InvalidArgument("request head larger than 64 KiB");
    return NotFound("request head incomplete");
  }
  if (end + 4 > kMaxRequestHead) return InvalidArgument("request head larger than 64 KiB");
  std::string_view head = data.substr(0, end + 2);  // every line ends in CRLF
  for (char c : head) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u == 0 || u == 0x7f || (u < 0x20 && c != '\r' && c != '\n' && c != '\t')) {
      return InvalidArgument("control character in request head");
    }
  }
  RequestHead r;
  r.head_size = end + 4;
  size_t pos = 0;
  auto next_line = [&](std::string_view* line) -> Status {
    size_t crlf = head.find("\r\n", pos);
    *line = head.substr(pos, crlf - pos);
    pos = crlf + 2;
    if (line->find('\r') != std::string_view::npos || line->find('\n') != std::string_view::npos) {
      return InvalidArgument("bare CR or LF in request head");
    }
    return Status::Ok();
  };
  std::string_view line;
  RETURN_IF_ERROR(next_line(&line));
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2) return InvalidArgument("malformed request line");
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  r.version = std::string(line.substr(sp2 + 1));
  if (r.method.empty() || !std::all_of(r.method.begin(), r.method.end(), IsTokenChar)) {
    return InvalidArgument("malformed method");
  }
  if (r.target.empty() || r.target.find(' ') != std::string::npos) return InvalidArgument("malformed request target");
  if (r.version != "HTTP/1.1" && r.version != "HTTP/1.0") return InvalidArgument("only HTTP/1.0 and 1.1 are proxied");
  while (pos < head.size()) {
    RETURN_IF_ERROR(next_line(&line));
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t') return InvalidArgument("obsolete header folding");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return InvalidArgument("malformed header line");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), IsTokenChar)) return InvalidArgument("malformed header name");
    if (r.headers.size() >= kMaxHeaders) return InvalidArgument("too many headers");
    r.headers.emplace_back(std::string(name), std::string(Trim(line.substr(colon + 1))));
  }
  return r;
}

Result<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view a, uint16_t default_port) {
  std::string_view host = a;
  std::string_view port;
  bool has_port = false;
  if (!a.empty() && a[0] == '[') {
    size_t close = a.find(']');
    if (close == std::string_view::npos) return InvalidArgument("malformed IPv6 authority");
    host = a.substr(0, close + 1);
    std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return InvalidArgument("malformed authority");
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = a.rfind(':');
    if (colon != std::string_view::npos) {
      host = a.substr(0, colon);
      port = a.substr(colon + 1);
      has_port = true;
    }
  }
  if (host.empty() || host.size() > 255) return InvalidArgument("empty or oversized host");
  uint16_t p = default_port;
  if (has_port) {
    if (port.empty() || port.size() > 5) return InvalidArgument("bad port");
    unsigned v = 0;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return InvalidArgument("bad port");
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return InvalidArgument("bad port");
    p = static_cast<uint16_t>(v);
  }
  std::string h;
  for (char c : host) h.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (!h.empty() && h.back() == '.') h.pop_back();
  return std::make_pair(h, p);
}

}  // namespace space::gateway
