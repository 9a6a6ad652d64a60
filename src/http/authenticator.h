// Authenticator: turns a request's `Authorization: Bearer <key>` into its team, with per-key
// rate limits. Shared by the node's API and the fleet servers (controlplane), which check keys
// against the same store.
//
// Fleet traffic: a server acting for a team (a drain moving a sandbox) presents the fleet
// token instead of a key and names the team in `X-Space-Team`. The token is a secret shared by
// the servers and nodes of one fleet; without one configured, the header is ignored.
//
// Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "http/http.h"
#include "http/rate_limiter.h"
#include "store/store.h"

namespace space::api {

class Authenticator {
 public:
  // `fleet_token` empty: fleet requests are refused like any unknown key.
  Authenticator(store::Store* store, RateLimit limit, std::string fleet_token = "");

  // Sets req.team and req.scopes (and req.key_id for a key made through /v1/keys). A
  // rate-limited caller gets resource_exhausted and `*retry_after_s` > 0.
  Status Authenticate(Request& req, int64_t* retry_after_s);

  // Authenticate, answering the request itself when that fails (401, or 429 with
  // Retry-After). True when the handler should go on.
  bool Admit(Request& req, Responder& res);

  // The same check for a key some other surface carries elsewhere (the E2B SDK's X-API-Key):
  // sets req.team, within the key's rate limit, which both surfaces share.
  Status AuthenticateKey(std::string_view key, Request& req, int64_t* retry_after_s);

  // Takes one request from `bucket`'s share of the rate limit (for callers that authenticate
  // otherwise, such as E2B's per-sandbox access tokens): 0, or the seconds to wait.
  int64_t Throttle(const std::string& bucket);

  const RateLimit& limit() const { return limiter_.limit(); }

 private:
  // A key made through /v1/keys ("space.<id>.<secret>"): looked up by id on every call.
  Status AuthenticateScoped(std::string_view key, Request& req, int64_t* retry_after_s);
  // AuthenticateKey for a key already hashed (KeyDigest), so no request hashes its key twice.
  Status AuthenticateDigest(const std::string& hash, Request& req, int64_t* retry_after_s);

  store::Store* const store_;
  RateLimiter limiter_;
  const std::string fleet_token_sha256_;  // "" when no fleet token is configured
  std::mutex mu_;
  // (sha256 hex of a key, its team) for keys seen valid; searched in constant time per entry.
  std::vector<std::pair<std::string, std::string>> key_cache_;  // GUARDED_BY(mu_)
};

// How a key made through /v1/keys begins: "space.<id>.<secret>".
inline constexpr char kScopedKeyPrefix[] = "space.";

// SHA-256 of `s`, lower-case hex: the only form an API key is stored or compared in.
std::string KeyDigest(std::string_view s);

}  // namespace space::api
