#include "http/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace space::api {

int64_t RateLimiter::Take(const std::string& key, int64_t now_ns) {
  if (limit_.rate_per_s <= 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) EvictLocked(now_ns);
    it = buckets_.emplace(key, Bucket{limit_.burst, now_ns}).first;
  }
  Bucket& b = it->second;
  double elapsed_s = static_cast<double>(std::max<int64_t>(0, now_ns - b.updated_ns)) / 1e9;
  b.tokens = std::min(limit_.burst, b.tokens + elapsed_s * limit_.rate_per_s);
  b.updated_ns = now_ns;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  double wait_s = (1 - b.tokens) / limit_.rate_per_s;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s)));
}

void RateLimiter::EvictLocked(int64_t now_ns) {
  // A bucket that would be full again by now is indistinguishable from a new one.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    double elapsed_s = static_cast<double>(std::max<int64_t>(0, now_ns - it->second.updated_ns)) / 1e9;
    if (it->second.tokens + elapsed_s * limit_.rate_per_s >= limit_.burst) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
  if (buckets_.size() < max_keys_) return;
  // Still full of busy keys: forget the least recently used half.
  std::vector<int64_t> times;
  times.reserve(buckets_.size());
  for (const auto& [k, b] : buckets_) times.push_back(b.updated_ns);
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  int64_t cutoff = times[times.size() / 2];
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    it = it->second.updated_ns < cutoff ? buckets_.erase(it) : std::next(it);
  }
  // All equally recent (one instant): drop arbitrary ones, the table must stay bounded.
  while (buckets_.size() >= max_keys_) buckets_.erase(buckets_.begin());
}

bool ParseRateLimit(const std::string& spec, RateLimit* out) {
  if (spec.empty()) return false;
  size_t colon = spec.find(':');
  auto parse = [](const std::string& s, double* v) {
    if (s.empty()) return false;
    char* end = nullptr;
    *v = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size() && std::isfinite(*v) && *v >= 0 && *v <= 1e9;
  };
  RateLimit r;
  if (!parse(spec.substr(0, colon), &r.rate_per_s)) return false;
  r.burst = 2 * r.rate_per_s;
  if (colon != std::string::npos && !parse(spec.substr(colon + 1), &r.burst)) return false;
  if (r.rate_per_s > 0 && r.burst < 1) return false;
  *out = r;
  return true;
}

}  // namespace space::api
