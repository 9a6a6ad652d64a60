#include "http/authenticator.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "common/clock.h"
#include "common/ids.h"
#include "http/scopes.h"
#include "http/validate.h"

namespace space::api {

std::string KeyDigest(std::string_view s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

Authenticator::Authenticator(store::Store* store, RateLimit limit, std::string fleet_token)
    : store_(store), limiter_(limit), fleet_token_sha256_(fleet_token.empty() ? "" : KeyDigest(fleet_token)) {}

bool Authenticator::Admit(Request& req, Responder& res) {
  int64_t retry_after_s = 0;
  Status st = Authenticate(req, &retry_after_s);
  if (st.ok()) return true;
  if (retry_after_s > 0) res.AddHeader("Retry-After", std::to_string(retry_after_s));
  res.SendError(st);
  return false;
}

Status Authenticator::Authenticate(Request& req, int64_t* retry_after_s) {
  std::string auth = req.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() <= kBearer.size() || auth.compare(0, kBearer.size(), kBearer) != 0) {
    return Unauthenticated("missing 'Authorization: Bearer <key>' header");
  }
  const std::string_view key = std::string_view(auth).substr(kBearer.size());
  if (key.rfind(kScopedKeyPrefix, 0) == 0) return AuthenticateScoped(key, req, retry_after_s);
  const std::string hash = KeyDigest(key);
  if (!fleet_token_sha256_.empty() &&
      CRYPTO_memcmp(fleet_token_sha256_.data(), hash.data(), hash.size()) == 0) {
    std::string team = req.Header("x-space-team");
    if (team.empty() || team.size() > 64 || !IsMetadataKey(team)) return InvalidArgument("a fleet request must name its team in X-Space-Team");
    req.team = team;
    req.scopes = DefaultScopes();
    return Status::Ok();
  }
  return AuthenticateDigest(hash, req, retry_after_s);
}

Status Authenticator::AuthenticateScoped(std::string_view key, Request& req, int64_t* retry_after_s) {
  // "space.<id>.<secret>". The id finds the row; the secret is checked against its salted
  // digest in constant time. Revocation and expiry are read from the store on every call, so
  // a revoke is in force on the next request at every server and node of a fleet.
  auto invalid = [] { return Unauthenticated("invalid API key"); };
  std::string_view rest = key.substr(std::string_view(kScopedKeyPrefix).size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return invalid();
  const std::string id(rest.substr(0, dot));
  const std::string_view secret = rest.substr(dot + 1);
  if (!IsPublicId(id, "key") || secret.empty() || secret.size() > 128) return invalid();
  const int64_t now = MonoNowNs();
  Result<store::ApiKeyRecord> rec = store_->GetKey(id);
  if (!rec.ok()) {
    if (rec.status().code() != StatusCode::kNotFound)
      return Unavailable("cannot check the API key: " + rec.status().message());
    if ((*retry_after_s = limiter_.Take("lookup", now)) > 0) {
      return ResourceExhausted("too many requests with unknown API keys; retry after " +
                               std::to_string(*retry_after_s) + " s");
    }
    return invalid();
  }
  const std::string digest = KeyDigest(rec->salt + std::string(secret));
  if (rec->secret_sha256.size() != digest.size() ||
      CRYPTO_memcmp(rec->secret_sha256.data(), digest.data(), digest.size()) != 0) {
    if ((*retry_after_s = limiter_.Take("lookup", now)) > 0) {
      return ResourceExhausted("too many requests with unknown API keys; retry after " +
                               std::to_string(*retry_after_s) + " s");
    }
    return invalid();
  }
  if (rec->revoked_at_ms != 0) {
    return Unauthenticated("API key " + id + " was revoked at " + FormatRfc3339(rec->revoked_at_ms));
  }
  if (rec->expires_at_ms != 0 && WallNowMs() >= rec->expires_at_ms) {
    return Unauthenticated("API key " + id + " expired at " + FormatRfc3339(rec->expires_at_ms));
  }
  if ((*retry_after_s = limiter_.Take("key:" + id, now)) > 0) {
    return ResourceExhausted("rate limit of " + std::to_string(static_cast<int64_t>(limiter_.limit().rate_per_s)) +
                             " requests/s for this API key exceeded; retry after " + std::to_string(*retry_after_s) +
                             " s");
  }
  req.team = rec->team;
  req.scopes = rec->scopes;
  req.key_id = id;
  return Status::Ok();
}

int64_t Authenticator::Throttle(const std::string& bucket) { return limiter_.Take(bucket, MonoNowNs()); }

Status Authenticator::AuthenticateKey(std::string_view key, Request& req, int64_t* retry_after_s) {
  if (key.rfind(kScopedKeyPrefix, 0) == 0) return AuthenticateScoped(key, req, retry_after_s);
  return AuthenticateDigest(KeyDigest(key), req, retry_after_s);
}

Status Authenticator::AuthenticateDigest(const std::string& hash, Request& req, int64_t* retry_after_s) {
  // Keys are compared as SHA-256 digests, and the cache is searched without an early exit
  // (CRYPTO_memcmp over every entry), so response time says nothing about how much of a
  // guessed key matched. The store looks digests up by index: timing there can reveal at most
  // a digest prefix, which does not help find a key (that would need a preimage).
  const int64_t now = MonoNowNs();
  std::string team;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [digest, t] : key_cache_) {
      if (CRYPTO_memcmp(digest.data(), hash.data(), hash.size()) == 0) team = t;
    }
  }
  if (team.empty()) {
    if ((*retry_after_s = limiter_.Take("lookup", now)) > 0) {
      return ResourceExhausted("too many requests with unknown API keys; retry after " +
                               std::to_string(*retry_after_s) + " s");
    }
    auto found = store_->TeamForApiKey(hash);
    if (!found.ok()) return Unauthenticated("invalid API key");
    team = *found;
    std::lock_guard<std::mutex> lock(mu_);
    bool cached = false;
    for (const auto& [digest, t] : key_cache_) cached |= digest == hash;
    if (!cached) key_cache_.emplace_back(hash, team);
  }
  if ((*retry_after_s = limiter_.Take("key:" + hash, now)) > 0) {
    return ResourceExhausted("rate limit of " + std::to_string(static_cast<int64_t>(limiter_.limit().rate_per_s)) +
                             " requests/s for this API key exceeded; retry after " + std::to_string(*retry_after_s) +
                             " s");
  }
  req.team = team;
  // Keys stored by digest are the admin key (the admin team's) and keys written to the store
  // before /v1/keys existed: all of their team's areas.
  req.scopes = team == kAdminTeam ? std::vector<std::string>{kAdminScope} : DefaultScopes();
  return Status::Ok();
}

}  // namespace space::api
