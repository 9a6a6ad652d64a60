#include "ingress/upstream_request.h"

#include <algorithm>
#include <cctype>

namespace space::ingress {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// Not forwarded: connection-level headers, the client's framing, and what only SPACE reads.
bool Dropped(const std::string& lower) {
  static const char* const kNames[] = {"connection",
                                       "keep-alive",
                                       "proxy-connection",
                                       "proxy-authorization",
                                       "te",
                                       "trailer",
                                       "transfer-encoding",
                                       "upgrade",
                                       "content-length",
                                       "expect",
                                       "host",
                                       kTokenHeader,
                                       "cookie",
                                       "x-forwarded-for",
                                       "x-forwarded-host",
                                       "x-forwarded-proto",
                                       "forwarded"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return lower == n; });
}

// One header value must not end a line: the front's parser refused raw CR/LF already, and
// this keeps it so whatever the request came through.
bool SafeValue(const std::string& v) { return v.find_first_of("\r\n") == std::string::npos; }

}  // namespace

std::string PresentedToken(const api::Request& req) {
  std::string t = req.Header(kTokenHeader);
  if (!t.empty()) return t;
  const std::string cookie = req.Header("cookie");
  size_t i = 0;
  while (i < cookie.size()) {
    size_t semi = cookie.find(';', i);
    if (semi == std::string::npos) semi = cookie.size();
    std::string pair = Trim(std::string_view(cookie).substr(i, semi - i));
    i = semi + 1;
    size_t eq = pair.find('=');
    if (eq != std::string::npos && pair.substr(0, eq) == kTokenCookie) return pair.substr(eq + 1);
  }
  return "";
}

std::string CookieWithoutToken(const std::string& cookie) {
  std::string out;
  size_t i = 0;
  while (i < cookie.size()) {
    size_t semi = cookie.find(';', i);
    if (semi == std::string::npos) semi = cookie.size();
    std::string pair = Trim(std::string_view(cookie).substr(i, semi - i));
    i = semi + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == kTokenCookie) continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

std::string TargetWithoutToken(const std::string& target) {
  size_t q = target.find('?');
  if (q == std::string::npos) return target;
  std::string out = target.substr(0, q);
  std::string kept;
  size_t i = q + 1;
  while (i <= target.size()) {
    size_t amp = target.find('&', i);
    if (amp == std::string::npos) amp = target.size();
    std::string pair = target.substr(i, amp - i);
    i = amp + 1;
    if (pair.empty()) continue;
    std::string name = pair.substr(0, pair.find('='));
    if (name == kTokenQuery) continue;
    if (!kept.empty()) kept += '&';
    kept += pair;
  }
  if (!kept.empty()) out += "?" + kept;
  return out;
}

bool IsUpgrade(const api::Request& req) { return !req.Header("upgrade").empty(); }

std::string UpstreamRequest(const api::Request& req, const std::string& host) {
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  out += "Host: " + host + "\r\n";
  for (const auto& [name, value] : req.headers) {
    if (Dropped(name) || !SafeValue(value)) continue;
    out += name + ": " + value + "\r\n";
  }
  const std::string cookie = CookieWithoutToken(req.Header("cookie"));
  if (!cookie.empty() && SafeValue(cookie)) out += "cookie: " + cookie + "\r\n";
  out += "X-Forwarded-Host: " + host + "\r\nX-Forwarded-Proto: http\r\n";
  if (IsUpgrade(req)) {
    const std::string up = req.Header("upgrade");
    if (SafeValue(up)) out += "Connection: Upgrade\r\nUpgrade: " + up + "\r\n";
  } else {
    out += "Connection: close\r\n";
  }
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += req.body;
  return out;
}

}  // namespace space::ingress
