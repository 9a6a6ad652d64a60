#include "credentials/host_pattern.h"

#include <algorithm>
#include <cctype>

namespace space::credentials {
namespace {

constexpr size_t kMaxHostLen = 253;

// Lowercases and drops one trailing dot: the forms a Host header or SNI value may arrive in.
std::string Canonical(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsHostChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'; }

}  // namespace

Status ValidateHostPattern(std::string_view pattern, std::string_view field) {
  std::string where = std::string(field) + " \"" + std::string(pattern.substr(0, 80)) + "\": ";
  if (pattern.empty()) return InvalidArgument(std::string(field) + ": empty host");
  if (pattern.size() > kMaxHostLen) return InvalidArgument(where + "longer than 253 characters");
  std::string_view name = pattern;
  bool wildcard = name.substr(0, 2) == "*.";
  if (wildcard) name.remove_prefix(2);
  int labels = 0;
  bool last_numeric = false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    std::string_view label = name.substr(start, dot - start);
    if (label.empty()) return InvalidArgument(where + "empty label (leading, trailing or double dot)");
    if (label.size() > 63) return InvalidArgument(where + "a label is longer than 63 characters");
    last_numeric = true;
    for (char c : label) {
      if (c >= 'A' && c <= 'Z') return InvalidArgument(where + "must be lowercase");
      if (c == '*') return InvalidArgument(where + "a wildcard is allowed only as a leading \"*.\"");
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return InvalidArgument(where + "only a-z, 0-9, '-' and '.' are allowed in a host name");
      }
      if (!(c >= '0' && c <= '9')) last_numeric = false;
    }
    if (label.front() == '-' || label.back() == '-') {
      return InvalidArgument(where + "a label may not start or end with '-'");
    }
    ++labels;
    start = dot + 1;
  }
  if (last_numeric) return InvalidArgument(where + "is an IP address or has a numeric top-level label; use a DNS name");
  if (wildcard && labels < 2) {
    return InvalidArgument(where +
                           "a wildcard must sit under at least two labels (\"*.example.org\"), "
                           "not a whole top-level domain");
  }
  if (name == "localhost" || (name.size() > 10 && name.substr(name.size() - 10) == ".localhost")) {
    return InvalidArgument(where + "localhost names resolve to the gateway itself");
  }
  if (name == "metadata.google.internal") return InvalidArgument(where + "is the cloud metadata service");
  return Status::Ok();
}

bool HostMatches(const std::string& pattern, const std::string& host) {
  std::string p = Canonical(pattern);
  std::string h = Canonical(host);
  if (h.empty() || p.empty()) return false;
  if (!std::all_of(h.begin(), h.end(), IsHostChar)) return false;
  if (h.front() == '.' || h.find("..") != std::string::npos) return false;  // empty labels
  if (p.size() > 2 && p[0] == '*' && p[1] == '.') {
    std::string_view suffix = std::string_view(p).substr(1);  // ".example.org"
    return h.size() > suffix.size() && std::string_view(h).substr(h.size() - suffix.size()) == suffix;
  }
  return p == h;
}

}  // namespace space::credentials
