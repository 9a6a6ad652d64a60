#include "credentials/credential.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/clock.h"
#include "common/ids.h"
#include "common/random.h"

namespace space::credentials {
namespace {

using nlohmann::json;

constexpr size_t kMaxSecret = 16384;
constexpr size_t kMaxHosts = 64;
constexpr size_t kMaxHeader = 64;
constexpr size_t kMaxFormat = 1024;
constexpr size_t kMaxEnv = 128;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || IsDigit(c); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RFC 9110 field values: no control characters other than tab. The gateway writes the
// formatted secret into a request header, so CR or LF would let a value inject headers.
bool IsHeaderValueSafe(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  });
}

bool IsTokenChar(char c) {
  return IsAlpha(c) || IsDigit(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status FieldError(std::string_view field, std::string_view why) {
  return InvalidArgument(std::string(field) + ": " + std::string(why));
}

Result<std::string> GetString(const json& v, std::string_view field) {
  if (!v.is_string()) return FieldError(field, "must be a string");
  return v.get_ref<const std::string&>();
}

Status ValidateHeaderName(const std::string& h) {
  if (h.empty() || h.size() > kMaxHeader) return FieldError("header", "must be 1..64 characters");
  if (!std::all_of(h.begin(), h.end(), IsTokenChar)) {
    return FieldError("header", "must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)");
  }
  // These headers frame or route the request; a secret in them would break the gateway's
  // proxying or let the credential redirect traffic, so they cannot carry one.
  static constexpr std::string_view kFraming[] = {
      "host",    "content-length", "transfer-encoding", "connection",      "te",
      "upgrade", "trailer",        "keep-alive",        "proxy-connection"};
  std::string lower = Lower(h);
  if (std::find(std::begin(kFraming), std::end(kFraming), lower) != std::end(kFraming)) {
    return FieldError("header", "\"" + h + "\" frames or routes the request and cannot carry a credential");
  }
  return Status::Ok();
}

Status ValidateFormat(const std::string& f) {
  if (f.size() > kMaxFormat) return FieldError("format", "longer than 1024 characters");
  size_t first = f.find("{secret}");
  if (first == std::string::npos || f.find("{secret}", first + 1) != std::string::npos) {
    return FieldError("format", "must contain \"{secret}\" exactly once");
  }
  if (!IsHeaderValueSafe(f)) return FieldError("format", "contains control characters");
  return Status::Ok();
}

Status ValidateEnv(const std::string& e) {
  if (e.empty()) return Status::Ok();
  if (e.size() > kMaxEnv) return FieldError("env", "longer than 128 characters");
  if (!(IsAlpha(e[0]) || e[0] == '_') ||
      !std::all_of(e.begin(), e.end(), [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; })) {
    return FieldError("env", "must match [A-Za-z_][A-Za-z0-9_]*");
  }
  return Status::Ok();
}

Status ValidateScope(const std::string& s) {
  if (s == "team") return Status::Ok();
  if (s.rfind("sandbox:", 0) == 0) {
    std::string_view id = std::string_view(s).substr(8);
    if (!ValidateSandboxId(id).ok()) {
      return FieldError("scope", "sandbox id must be 1..64 characters of [A-Za-z0-9_-]");
    }
    return Status::Ok();
  }
  if (s.rfind("metadata:", 0) == 0) {
    std::string_view kv = std::string_view(s).substr(9);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) return FieldError("scope", "must be \"metadata:<key>=<value>\"");
    if (eq > 128 || kv.size() - eq - 1 > 256) return FieldError("scope", "metadata key ≤ 128, value ≤ 256 characters");
    if (!std::all_of(kv.begin(), kv.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) {
      return FieldError("scope", "metadata key and value must be printable ASCII");
    }
    return Status::Ok();
  }
  return FieldError("scope", "must be \"team\", \"sandbox:<id>\" or \"metadata:<key>=<value>\"");
}

}  // namespace

Status ValidateCredentialName(std::string_view name) {
  if (name.empty() || name.size() > 63 || !IsLowerAlnum(name[0]) || !std::all_of(name.begin(), name.end(), [](char c) {
        return IsLowerAlnum(c) || c == '.' || c == '_' || c == '-';
      })) {
    return FieldError("name", "must match [a-z0-9][a-z0-9._-]{0,62}");
  }
  return Status::Ok();
}

Result<CredentialSpec> ParseCredentialRequest(const std::string& name, const json& body, std::string* secret_out,
                                              int64_t now_ms) {
  secret_out->clear();
  CredentialSpec spec;
  RETURN_IF_ERROR(ValidateCredentialName(name));
  spec.name = name;
  if (!body.is_object()) return InvalidArgument("request body must be a JSON object");
  std::string secret;
  bool have_secret = false;
  try {  // The accessors below are type-checked first; this only guards the boundary.
    for (const auto& [key, v] : body.items()) {
      if (v.is_null() && key != "secret" && key != "hosts") continue;  // null = default
      if (key == "secret") {
        if (!v.is_string()) return FieldError("secret", "must be a string");
        const auto& s = v.get_ref<const std::string&>();
        if (s.empty() || s.size() > kMaxSecret) return FieldError("secret", "must be 1..16384 bytes");
        if (s.find('\0') != std::string::npos) return FieldError("secret", "must not contain NUL");
        if (!IsHeaderValueSafe(s)) {
          return FieldError("secret", "must not contain control characters (it is sent in an HTTP header)");
        }
        secret = s;
        have_secret = true;
      } else if (key == "hosts") {
        if (!v.is_array() || v.empty() || v.size() > kMaxHosts) {
          return FieldError("hosts", "must be an array of 1..64 host names");
        }
        std::set<std::string> seen;
        for (const auto& h : v) {
          ASSIGN_OR_RETURN(std::string host, GetString(h, "hosts"));
          RETURN_IF_ERROR(ValidateHostPattern(host, "hosts"));
          if (!seen.insert(host).second) return FieldError("hosts", "duplicate host \"" + host + "\"");
          spec.hosts.push_back(std::move(host));
        }
      } else if (key == "header") {
        ASSIGN_OR_RETURN(spec.header, GetString(v, "header"));
        RETURN_IF_ERROR(ValidateHeaderName(spec.header));
      } else if (key == "format") {
        ASSIGN_OR_RETURN(spec.format, GetString(v, "format"));
        RETURN_IF_ERROR(ValidateFormat(spec.format));
      } else if (key == "env") {
        ASSIGN_OR_RETURN(spec.env, GetString(v, "env"));
        RETURN_IF_ERROR(ValidateEnv(spec.env));
      } else if (key == "scope") {
        ASSIGN_OR_RETURN(spec.scope, GetString(v, "scope"));
        RETURN_IF_ERROR(ValidateScope(spec.scope));
      } else if (key == "expires_at") {
        ASSIGN_OR_RETURN(std::string text, GetString(v, "expires_at"));
        auto ms = ParseRfc3339Utc(text);
        if (!ms.ok()) return FieldError("expires_at", ms.status().message());
        if (*ms <= now_ms) return FieldError("expires_at", "must be in the future");
        spec.expires_at_ms = *ms;
      } else if (key == "rate_limit_per_min") {
        bool in_range = (v.is_number_unsigned() && v.get<uint64_t>() <= kMaxRateLimitPerMin) ||
                        (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= 0 &&
                         v.get<int64_t>() <= kMaxRateLimitPerMin);
        if (!in_range) return FieldError("rate_limit_per_min", "must be an integer 0..100000 (0 = unlimited)");
        spec.rate_limit_per_min = static_cast<int>(v.get<int64_t>());
      } else {
        return InvalidArgument("unknown field \"" + key.substr(0, 64) + "\"");
      }
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed credential request: ") + e.what());
  }
  if (!have_secret) return FieldError("secret", "is required");
  if (spec.hosts.empty()) return FieldError("hosts", "is required (the hosts the secret may be sent to)");
  *secret_out = std::move(secret);
  return spec;
}

json CredentialJson(const CredentialSpec& spec, int64_t created_at_ms) {
  return json{{"name", spec.name},
              {"hosts", spec.hosts},
              {"header", spec.header},
              {"format", spec.format},
              {"env", spec.env.empty() ? json(nullptr) : json(spec.env)},
              {"scope", spec.scope},
              {"expires_at", spec.expires_at_ms == 0 ? json(nullptr) : json(FormatRfc3339(spec.expires_at_ms))},
              {"rate_limit_per_min", spec.rate_limit_per_min},
              {"created_at", FormatRfc3339(created_at_ms)}};
}

bool ScopeMatches(const CredentialSpec& spec, const std::string& sandbox_id,
                  const std::map<std::string, std::string>& metadata) {
  const std::string& s = spec.scope;
  if (s == "team") return true;
  if (s.rfind("sandbox:", 0) == 0) return !sandbox_id.empty() && s.compare(8, std::string::npos, sandbox_id) == 0;
  if (s.rfind("metadata:", 0) == 0) {
    size_t eq = s.find('=', 9);
    if (eq == std::string::npos || eq == 9) return false;
    auto it = metadata.find(s.substr(9, eq - 9));
    return it != metadata.end() && it->second == s.substr(eq + 1);
  }
  return false;
}

std::string NewPlaceholder() { return std::string(kPlaceholderPrefix) + RandomHex(16); }

std::string CredentialAad(std::string_view team_id, std::string_view name) {
  return "space.credential.v1|" + std::to_string(team_id.size()) + ":" + std::string(team_id) + "|" +
         std::to_string(name.size()) + ":" + std::string(name);
}

bool RateLimiter::Allow(const std::string& key, int64_t now_ms, int limit_per_min) {
  if (limit_per_min <= 0) return true;
  const double limit = limit_per_min;
  std::lock_guard<std::mutex> lock(mu_);
  if (buckets_.size() > prune_at_) PruneIdleLocked(now_ms);
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{limit, now_ms});
  Bucket& b = it->second;
  // An injected clock may step backwards; that earns no tokens and never moves time back.
  int64_t elapsed = std::max<int64_t>(0, now_ms - b.updated_ms);
  b.tokens = std::min(limit, b.tokens + static_cast<double>(elapsed) * limit / 60000.0);
  b.updated_ms = std::max(b.updated_ms, now_ms);
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

void RateLimiter::PruneIdleLocked(int64_t now_ms) {
  // After 60 s idle any bucket has refilled completely: dropping it changes nothing.
  std::erase_if(buckets_, [&](const auto& kv) { return now_ms - kv.second.updated_ms >= 60000; });
  prune_at_ = std::max<size_t>(kPruneFloor, 2 * buckets_.size());
}

}  // namespace space::credentials
