#include "http/preview_host.h"

#include <cctype>

namespace space::api {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<PreviewHost> ParsePreviewHost(std::string_view host, std::string_view domain) {
  if (host.size() > 255 || domain.empty()) return std::nullopt;
  // The listen port, if the client sent one (never on a bracketed IPv6 literal: no label there).
  if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    std::string_view port = host.substr(colon + 1);
    if (port.empty() || port.size() > 5) return std::nullopt;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    host = host.substr(0, colon);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);  // the absolute form
  const std::string h = Lower(host), d = Lower(domain);
  if (h.size() <= d.size() + 1 || h.compare(h.size() - d.size(), d.size(), d) != 0 ||
      h[h.size() - d.size() - 1] != '.') {
    return std::nullopt;
  }
  const std::string first = h.substr(0, h.size() - d.size() - 1);  // must be one label
  const size_t dash = first.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 5 || first.find('.') != std::string::npos) return std::nullopt;
  int64_t port = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(first[i]))) return std::nullopt;
    port = port * 10 + (first[i] - '0');
  }
  if (port < 1 || port > 65535) return std::nullopt;
  PreviewHost out;
  out.port = port;
  out.label = first.substr(dash + 1);
  if (out.label.empty() || out.label.size() > 63) return std::nullopt;
  for (char c : out.label) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return std::nullopt;
  }
  return out;
}

}  // namespace space::api
