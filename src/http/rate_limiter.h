// RateLimiter: one token bucket per key (an API key's digest, or a shared name such as
// "unauthenticated"), refilled continuously at `rate_per_s` up to `burst` tokens. Used by the
// API to answer 429 with Retry-After before any work is done for a request.
//
// The caller passes the time (monotonic ns), so tests drive it without sleeping. The table of
// buckets is bounded: when it is full, buckets that have refilled completely (and so carry no
// state worth keeping) are dropped, then the least recently used ones. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace space::api {

struct RateLimit {
  double rate_per_s = 1000;  // sustained requests per second; <= 0 disables the limit
  double burst = 2000;       // bucket size: requests allowed at once after an idle spell
};

class RateLimiter {
 public:
  explicit RateLimiter(RateLimit limit, size_t max_keys = 10000) : limit_(limit), max_keys_(max_keys) {}

  // Takes one token from `key`'s bucket. Returns 0 when the request may proceed, otherwise
  // the whole seconds (>= 1) after which one token will be there again.
  int64_t Take(const std::string& key, int64_t now_ns);

  const RateLimit& limit() const { return limit_; }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ns = 0;
  };
  void EvictLocked(int64_t now_ns);

  const RateLimit limit_;
  const size_t max_keys_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // GUARDED_BY(mu_)
};

// Parses "RATE[:BURST]" (requests per second, bucket size; BURST defaults to 2 x RATE).
// "0" disables limiting. Returns false on a malformed spec.
bool ParseRateLimit(const std::string& spec, RateLimit* out);

}  // namespace space::api
