// Credentials: validated specs for secrets the gateway injects into a sandbox's outbound
// requests, and the small pure helpers the API and gateway share (scope and host matching,
// placeholders, rate limiting). The secret itself never appears in a CredentialSpec or in any
// JSON produced here; callers seal it with secret_box.h under CredentialAad(team, name).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"  // ParseRfc3339Utc, for expires_at
#include "common/result.h"
#include "credentials/host_pattern.h"

namespace space::credentials {

inline constexpr int kMaxRateLimitPerMin = 100000;

// A validated credential, without its secret. Plain value type.
struct CredentialSpec {
  std::string name;                        // [a-z0-9][a-z0-9._-]{0,62}
  std::vector<std::string> hosts;          // 1..64 canonical host patterns (host_pattern.h)
  std::string header = "Authorization";    // HTTP token ≤ 64, never a framing header
  std::string format = "Bearer {secret}";  // header value; "{secret}" exactly once
  std::string env;                         // env var holding the placeholder, or empty
  std::string scope = "team";              // "team" | "sandbox:<id>" | "metadata:<k>=<v>"
  int64_t expires_at_ms = 0;               // 0 = never
  int rate_limit_per_min = 0;              // 0 = unlimited
};

// Checks a credential name against [a-z0-9][a-z0-9._-]{0,62}.
Status ValidateCredentialName(std::string_view name);

// Parses the body of PUT /v1/credentials/{name}. Strict: unknown fields, wrong JSON types and
// out-of-range values are kInvalidArgument naming the field; JSON null on an optional field
// means "default". "expires_at" is RFC 3339 UTC ("2026-12-01T00:00:00Z", optional fraction)
// and must be later than `now_ms`. On success the secret is moved into `*secret_out` (it must
// be non-null); on failure `*secret_out` is left empty. Error messages never quote the secret.
Result<CredentialSpec> ParseCredentialRequest(const std::string& name, const nlohmann::json& body,
                                              std::string* secret_out, int64_t now_ms);

// The public view: every field of the spec plus "created_at" (and "expires_at", null when
// never). Never the secret.
nlohmann::json CredentialJson(const CredentialSpec& spec, int64_t created_at_ms);

// Whether a sandbox with this id and metadata may use the credential. Unknown scope forms
// match nothing (fail closed).
bool ScopeMatches(const CredentialSpec& spec, const std::string& sandbox_id,
                  const std::map<std::string, std::string>& metadata);

// "space-cred-" + 32 random lowercase hex chars (128 bits from getrandom): unguessable, so a
// sandbox cannot name another credential, and recognisable by the gateway.
std::string NewPlaceholder();
inline constexpr std::string_view kPlaceholderPrefix = "space-cred-";

// The associated data a credential's sealed secret is bound to. Length-prefixed so no two
// (team, name) pairs encode alike.
std::string CredentialAad(std::string_view team_id, std::string_view name);

// Per-key rate limiting: a token bucket of `limit_per_min` tokens refilled continuously over
// 60 s, so bursts up to the limit pass and the long-run rate never exceeds it. The clock is a
// parameter so tests inject time. Idle keys are forgotten (an idle bucket is full, the same
// as a new one). Thread-safe: one mutex guards the map.
class RateLimiter {
 public:
  // True (and one token spent) when `key` may make a request at `now_ms`. A limit of 0 or
  // less means unlimited. A changed limit takes effect at once, capping saved tokens.
  bool Allow(const std::string& key, int64_t now_ms, int limit_per_min);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ms = 0;
  };
  static constexpr size_t kPruneFloor = 4096;
  void PruneIdleLocked(int64_t now_ms);

  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // GUARDED_BY(mu_)
  // Pruning is O(n); doubling the threshold keeps its amortised cost constant per call.
  size_t prune_at_ = kPruneFloor;  // GUARDED_BY(mu_)
};

}  // namespace space::credentials
