#include "snapshot/s3_location.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::snapshot {
namespace {

constexpr size_t kMaxCredentialsFile = 64 * 1024;

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) return false;
  }
  return b.front() != '.' && b.front() != '-' && b.back() != '.' && b.back() != '-';
}

bool ValidPrefixSegment(std::string_view s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

// Decodes %XX escapes; refuses malformed ones.
Result<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return InvalidArgument("object store URL: a malformed %-escape");
    }
    out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

Status ValidateEndpoint(const std::string& e) {
  const size_t scheme_end = e.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("object store endpoint '" + e + "' has no scheme");
  const std::string scheme = e.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("object store endpoint: scheme must be http or https, not '" + scheme + "'");
  }
  const std::string authority = e.substr(scheme_end + 3);
  if (authority.empty()) return InvalidArgument("object store endpoint has no host");
  for (char c : authority) {
    // Host and port only: a path, a query or user info (a secret) has no place here.
    if (c == '/' || c == '?' || c == '#' || c == '@' || c == ' ' || static_cast<unsigned char>(c) < 0x21) {
      return InvalidArgument("object store endpoint must be scheme://host[:port] only");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string S3Location::ToString() const {
  return "s3://" + bucket + "/" + prefix + "?endpoint=" + endpoint + "&region=" + region;
}

Result<S3Location> ParseS3Location(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.substr(0, kScheme.size()) != kScheme) return InvalidArgument("object store URL must start with s3://");
  if (url.size() > 2048) return InvalidArgument("object store URL is longer than 2048 characters");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  S3Location loc;
  const size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  if (bucket.find('@') != std::string_view::npos) {
    return InvalidArgument("object store URL must not hold credentials (use the environment or a file)");
  }
  if (!ValidBucket(bucket))
    return InvalidArgument("object store bucket '" + std::string(bucket) + "' is not a valid name");
  loc.bucket = std::string(bucket);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    while (!path.empty()) {
      const size_t s = path.find('/');
      std::string_view seg = path.substr(0, s);
      if (!ValidPrefixSegment(seg)) {
        return InvalidArgument("object store prefix segment '" + std::string(seg) +
                               "' must be 1-128 of [A-Za-z0-9._-]");
      }
      loc.prefix += std::string(seg) + "/";
      if (s == std::string_view::npos) break;
      path = path.substr(s + 1);
    }
  }
  bool have_endpoint = false;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    ASSIGN_OR_RETURN(std::string value,
                     PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)));
    if (name == "endpoint") {
      while (!value.empty() && value.back() == '/') value.pop_back();
      RETURN_IF_ERROR(ValidateEndpoint(value));
      loc.endpoint = value;
      have_endpoint = true;
    } else if (name == "region") {
      if (value.empty() || value.size() > 64 ||
          value.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
        return InvalidArgument("object store region '" + value + "' must be 1-64 of [a-z0-9-]");
      }
      loc.region = value;
    } else {
      return InvalidArgument("object store URL: unknown parameter '" + std::string(name) +
                             "' (known: endpoint, region; credentials come from the environment or a file)");
    }
  }
  if (!have_endpoint) return InvalidArgument("object store URL needs ?endpoint=http(s)://host:port");
  return loc;
}

Result<S3Credentials> LoadS3Credentials(const std::string& file) {
  S3Credentials c;
  if (file.empty()) {
    const char* id = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    if (id == nullptr || secret == nullptr || *id == '\0' || *secret == '\0') {
      return InvalidArgument(
          "object store credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or pass "
          "--object-store-credentials FILE");
    }
    c.access_key_id = id;
    c.secret_access_key = secret;
  } else {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", file, errno);
    if (!S_ISREG(st.st_mode)) return InvalidArgument("object store credentials " + file + ": not a regular file");
    if ((st.st_mode & 077) != 0) {
      return PermissionDenied("object store credentials " + file + " is readable by others (chmod 600 it)");
    }
    if (static_cast<size_t>(st.st_size) > kMaxCredentialsFile) {
      return InvalidArgument("object store credentials " + file + " is larger than 64 KiB");
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    RETURN_IF_ERROR(ReadExact(fd.get(), text.data(), text.size()).Annotate("read " + file));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("access_key_id") || !j["access_key_id"].is_string() ||
        !j.contains("secret_access_key") || !j["secret_access_key"].is_string()) {
      return InvalidArgument("object store credentials " + file +
                             ": expected JSON {\"access_key_id\": \"...\", \"secret_access_key\": \"...\"}");
    }
    c.access_key_id = j["access_key_id"].get<std::string>();
    c.secret_access_key = j["secret_access_key"].get<std::string>();
  }
  // The id goes into an Authorization header and curl's user:password: no separators.
  for (const std::string* s : {&c.access_key_id, &c.secret_access_key}) {
    if (s->empty() || s->size() > 256 || s->find_first_of(": \r\n\t") != std::string::npos) {
      return InvalidArgument("object store credentials: a key is empty, too long or holds ':' or whitespace");
    }
  }
  return c;
}

}  // namespace space::snapshot
