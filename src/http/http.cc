#include "http/http.h"

#include "common/result.h"

namespace space::api {

std::string Request::Query(const std::string& name) const {
  auto it = query.find(name);
  return it == query.end() ? std::string() : it->second;
}

std::string Request::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

Result<std::string> UrlDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return InvalidArgument("malformed percent-escape in URL");
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("malformed percent-escape in URL");
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return InvalidArgument("NUL byte in URL");
    out += c;
  }
  return out;
}

Status ParseTarget(std::string_view target, Request* req) {
  size_t q = target.find('?');
  ASSIGN_OR_RETURN(req->path, UrlDecode(target.substr(0, q), false));
  if (q == std::string_view::npos) return Status::Ok();
  std::string_view qs = target.substr(q + 1);
  while (!qs.empty()) {
    size_t amp = qs.find('&');
    std::string_view pair = qs.substr(0, amp);
    qs = amp == std::string_view::npos ? std::string_view() : qs.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string k, UrlDecode(pair.substr(0, eq), true));
    std::string v;
    if (eq != std::string_view::npos) {
      ASSIGN_OR_RETURN(v, UrlDecode(pair.substr(eq + 1), true));
    }
    if (req->query.size() >= 64) return InvalidArgument("too many query parameters");
    req->query.emplace(std::move(k), std::move(v));
  }
  return Status::Ok();
}

}  // namespace space::api
