#include "e2b/multipart.h"

#include <algorithm>
#include <cctype>

namespace space::e2b {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of `key` in a header's parameters (`; key="v"` or `; key=v`), "" if absent.
std::string Param(std::string_view header, std::string_view key) {
  std::string lower = Lower(header);
  size_t pos = 0;
  while ((pos = lower.find(key, pos)) != std::string::npos) {
    bool at_start = pos > 0 && (lower[pos - 1] == ';' || lower[pos - 1] == ' ');
    size_t eq = pos + key.size();
    if (!at_start || eq >= header.size() || header[eq] != '=') {
      pos = eq;
      continue;
    }
    size_t v = eq + 1;
    if (v < header.size() && header[v] == '"') {
      std::string out;
      for (size_t i = v + 1; i < header.size(); ++i) {
        if (header[i] == '\\' && i + 1 < header.size()) {
          out += header[++i];
        } else if (header[i] == '"') {
          return out;
        } else {
          out += header[i];
        }
      }
      return out;  // unterminated quote: what is there
    }
    size_t end = header.find(';', v);
    std::string_view out = header.substr(v, end == std::string_view::npos ? std::string_view::npos : end - v);
    while (!out.empty() && out.back() == ' ') out.remove_suffix(1);
    return std::string(out);
  }
  return "";
}

}  // namespace

Result<std::string> MultipartBoundary(std::string_view content_type) {
  if (Lower(content_type.substr(0, 19)) != "multipart/form-data") {
    return InvalidArgument("expected Content-Type multipart/form-data");
  }
  std::string b = Param(content_type, "boundary");
  // RFC 2046: 1..70 characters.
  if (b.empty() || b.size() > 70) return InvalidArgument("multipart boundary missing or longer than 70 characters");
  return b;
}

Result<std::vector<Part>> ParseMultipart(std::string_view body, std::string_view boundary) {
  std::string delim = "--" + std::string(boundary);
  std::vector<Part> parts;
  size_t pos = body.find(delim);
  if (pos == std::string_view::npos) return InvalidArgument("multipart body has no boundary");
  pos += delim.size();
  const std::string next_delim = "\r\n" + delim;
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // closing delimiter
    if (body.substr(pos, 2) != "\r\n") return InvalidArgument("malformed multipart delimiter line");
    pos += 2;
    if (parts.size() >= kMaxParts) return InvalidArgument("too many multipart parts");
    size_t hdr_end = body.find("\r\n\r\n", pos);
    if (hdr_end == std::string_view::npos || hdr_end - pos > kMaxPartHeaderBytes) {
      return InvalidArgument("multipart part headers missing or too large");
    }
    Part part;
    std::string_view headers = body.substr(pos, hdr_end - pos);
    for (size_t i = 0; i <= headers.size();) {
      size_t eol = headers.find("\r\n", i);
      if (eol == std::string_view::npos) eol = headers.size();
      std::string_view line = headers.substr(i, eol - i);
      i = eol + 2;
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      if (Lower(line.substr(0, colon)) == "content-disposition") {
        std::string_view value = line.substr(colon + 1);
        part.name = Param(value, "name");
        part.filename = Param(value, "filename");
      }
    }
    size_t data_start = hdr_end + 4;
    size_t data_end = body.find(next_delim, data_start);
    if (data_end == std::string_view::npos) return InvalidArgument("multipart part is not terminated");
    part.data = body.substr(data_start, data_end - data_start);
    parts.push_back(std::move(part));
    pos = data_end + next_delim.size();
  }
}

}  // namespace space::e2b
